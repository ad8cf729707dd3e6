// Package graph answers questions about a pipeline's graph of steps: is it
// well formed (Check), where does a step run lead (Successors), which steps
// lead to a step (Incoming), which steps are on a loop (Cyclic). Its
// functions are pure: they read the *agentrunner.Pipeline and do no I/O,
// so the configuration's validation and the scheduler agree on one graph.
package graph

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/agentrunner/agentrunner"
)

// Gate decisions that are labels: a gate's label is its decision.
const (
	approve = string(agentrunner.DecisionApprove)
	reject  = string(agentrunner.DecisionReject)
)

// Successors returns the steps a succeeded step run of s opens, given its
// routing label: its then branches, else the route whose when is the
// label (else its otherwise route), else its next. agentrunner.EndStep in
// the result ends the branch. A gate's label is its decision; a gate with
// next goes there on approve, and on reject nothing follows: the scheduler
// ends the run as failed, rejected. (A gate
// decided "route" goes to the decision's step, which the scheduler
// follows itself.)
//
// A label that no route takes is the step's output's fault, not a passing
// failure: the error is of class invalid_output (not retried) and names the
// label and the labels the step allows.
func Successors(s *agentrunner.Step, label string) ([]string, error) {
	switch {
	case len(s.Then) > 0:
		return slices.Clone(s.Then), nil
	case len(s.Routes) > 0:
		return route(s, label)
	case s.Kind == agentrunner.KindGate && s.Next != "":
		return gateNext(s, label)
	case s.Next != "":
		return []string{s.Next}, nil
	}
	return nil, agentrunner.Fail(agentrunner.ClassConfig, "step %s has no next, routes or then: nothing follows it", s.ID)
}

// route picks the route of label, else the otherwise route.
func route(s *agentrunner.Step, label string) ([]string, error) {
	otherwise := ""
	for _, r := range s.Routes {
		switch {
		case r.Otherwise:
			otherwise = r.To
		case r.When == label:
			return []string{r.To}, nil
		}
	}
	if otherwise != "" {
		return []string{otherwise}, nil
	}
	return nil, noRoute(s, label, Labels(s))
}

// gateNext is where a gate with next goes on its decision.
func gateNext(s *agentrunner.Step, label string) ([]string, error) {
	switch label {
	case approve:
		return []string{s.Next}, nil
	case reject:
		return nil, nil
	}
	return nil, noRoute(s, label, []string{approve, reject})
}

// noRoute is the error of a label that no edge of s takes.
func noRoute(s *agentrunner.Step, label string, allowed []string) error {
	quoted := make([]string, len(allowed))
	for i, l := range allowed {
		quoted[i] = fmt.Sprintf("%q", l)
	}
	if label == "" {
		return agentrunner.Fail(agentrunner.ClassInvalidOutput, "step %s: the output gives no routing label; the routes take %s", s.ID, strings.Join(quoted, ", "))
	}
	return agentrunner.Fail(agentrunner.ClassInvalidOutput, "step %s: label %q matches no route; the routes take %s", s.ID, label, strings.Join(quoted, ", "))
}

// Labels lists the labels s's routes take, in configuration order; a gate
// with next takes approve and reject.
func Labels(s *agentrunner.Step) []string {
	if len(s.Routes) == 0 && s.Kind == agentrunner.KindGate && s.Next != "" {
		return []string{approve, reject}
	}
	var ls []string
	for _, r := range s.Routes {
		if !r.Otherwise {
			ls = append(ls, r.When)
		}
	}
	return ls
}

// Incoming lists the distinct steps with an edge to step (on_cap edges
// included), sorted.
func Incoming(p *agentrunner.Pipeline, step string) []string {
	var from []string
	for id, s := range p.Steps {
		for _, e := range s.Edges() {
			if e.To == step && !slices.Contains(from, id) {
				from = append(from, id)
			}
		}
	}
	slices.Sort(from)
	return from
}

// Cyclic reports the steps that are on a cycle of the graph: those a run
// may visit more than once along its edges (on_cap edges included), each
// of which needs a max_visits.
func Cyclic(p *agentrunner.Pipeline) map[string]bool {
	on := map[string]bool{}
	for _, comp := range components(p) {
		if len(comp) > 1 || selfLoop(p.Steps[comp[0]]) {
			for _, id := range comp {
				on[id] = true
			}
		}
	}
	return on
}

// selfLoop reports whether s has an edge to itself.
func selfLoop(s *agentrunner.Step) bool {
	for _, e := range s.Edges() {
		if e.To == s.ID {
			return true
		}
	}
	return false
}

// targets lists the steps s has edges to, in edge order, without EndStep
// (even when a step is wrongly named so) and steps the pipeline does not
// have.
func targets(p *agentrunner.Pipeline, s *agentrunner.Step) []string {
	var to []string
	for _, e := range s.Edges() {
		if e.To != agentrunner.EndStep && p.Steps[e.To] != nil && !slices.Contains(to, e.To) {
			to = append(to, e.To)
		}
	}
	return to
}

// components returns the strongly connected components of the graph
// (Tarjan's algorithm), each sorted, in the order of their smallest step;
// the walk visits steps in name order, so the result never depends on
// map order.
func components(p *agentrunner.Pipeline) [][]string {
	t := &tarjan{p: p, index: map[string]int{}, low: map[string]int{}, onStack: map[string]bool{}}
	for _, id := range slices.Sorted(maps.Keys(p.Steps)) {
		if _, seen := t.index[id]; !seen {
			t.visit(id)
		}
	}
	for _, c := range t.comps {
		slices.Sort(c)
	}
	slices.SortFunc(t.comps, func(a, b []string) int { return strings.Compare(a[0], b[0]) })
	return t.comps
}

// tarjan is the state of one run of Tarjan's algorithm.
type tarjan struct {
	p          *agentrunner.Pipeline
	next       int
	index, low map[string]int
	onStack    map[string]bool
	stack      []string
	comps      [][]string
}

func (t *tarjan) visit(id string) {
	t.index[id], t.low[id] = t.next, t.next
	t.next++
	t.stack = append(t.stack, id)
	t.onStack[id] = true
	for _, to := range targets(t.p, t.p.Steps[id]) {
		if _, seen := t.index[to]; !seen {
			t.visit(to)
			t.low[id] = min(t.low[id], t.low[to])
		} else if t.onStack[to] {
			t.low[id] = min(t.low[id], t.index[to])
		}
	}
	if t.low[id] != t.index[id] {
		return
	}
	var comp []string
	for {
		top := t.stack[len(t.stack)-1]
		t.stack = t.stack[:len(t.stack)-1]
		t.onStack[top] = false
		comp = append(comp, top)
		if top == id {
			break
		}
	}
	t.comps = append(t.comps, comp)
}

// reachable returns the steps a run can reach from the start, or from the
// final step an overdue run is forced to.
func reachable(p *agentrunner.Pipeline) map[string]bool {
	seen := map[string]bool{}
	if p.Steps[p.Start] == nil {
		return seen
	}
	queue := []string{p.Start}
	seen[p.Start] = true
	if p.Steps[p.Final] != nil && !seen[p.Final] {
		queue = append(queue, p.Final)
		seen[p.Final] = true
	}
	for len(queue) > 0 {
		id := queue[0]
		queue = queue[1:]
		for _, to := range targets(p, p.Steps[id]) {
			if !seen[to] {
				seen[to] = true
				queue = append(queue, to)
			}
		}
	}
	return seen
}
