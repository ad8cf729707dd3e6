package graph

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/agentrunner/agentrunner"
)

// Fault is one thing wrong with a pipeline's graph, located at its step.
type Fault struct {
	// Where is the step's place in the configuration ("file:line"), or the
	// pipeline's for a fault of the whole pipeline.
	Where string
	// Step is the step at fault; empty for the pipeline.
	Step string
	// Key is the step's (or pipeline's) key the fault is about ("routes",
	// "on_cap" …); empty for the step as a whole.
	Key     string
	Message string
}

// String is "where: step ID: message".
func (f Fault) String() string {
	var b strings.Builder
	if f.Where != "" {
		b.WriteString(f.Where + ": ")
	}
	if f.Step != "" {
		b.WriteString("step " + f.Step + ": ")
	}
	b.WriteString(f.Message)
	return b.String()
}

// Faults are every fault of one graph, so that the configuration is fixed
// in one go.
type Faults []Fault

// Error lists the faults, one a line.
func (fs Faults) Error() string {
	lines := make([]string, len(fs))
	for i, f := range fs {
		lines[i] = f.String()
	}
	return strings.Join(lines, "\n")
}

// Check refuses a graph that a run could not finish or that says something
// it does not mean: a start that is not a step, a step named end, an edge
// to a step that does not exist, an unreachable step, a loop with a step
// that has no max_visits, a join with fewer than two incoming steps, a
// then with fewer than two branches, routes without a label source, and a
// gate with no way out for approve or reject. The error is an
// *agentrunner.Error (EINVALID) whose cause is the Faults, in a fixed
// order: the pipeline's, then each step's in name order.
func Check(p *agentrunner.Pipeline) error {
	c := &checker{p: p}
	c.start()
	live, cyclic := reachable(p), Cyclic(p)
	for _, id := range slices.Sorted(maps.Keys(p.Steps)) {
		s := p.Steps[id]
		if id == agentrunner.EndStep {
			continue // refused by start; no edge can lead to it
		}
		c.step(s)
		if p.Steps[p.Start] != nil && !live[id] {
			c.add(s, "", "unreachable: no edge leads to it from the start step %q", p.Start)
		}
		if cyclic[id] && s.MaxVisits == 0 {
			c.add(s, "max_visits", "an uncapped loop: it is on %s and has no max_visits; every step on a loop needs one", c.loop(id))
		}
	}
	if len(c.faults) == 0 {
		return nil
	}
	return &agentrunner.Error{Code: agentrunner.EINVALID, Message: fmt.Sprintf("pipeline %s is not a valid graph", p.Name), Err: c.faults}
}

type checker struct {
	p      *agentrunner.Pipeline
	faults Faults
}

func (c *checker) add(s *agentrunner.Step, key, format string, args ...any) {
	f := Fault{Where: c.p.Where, Key: key, Message: fmt.Sprintf(format, args...)}
	if s != nil {
		f.Where, f.Step = s.Where, s.ID
	}
	c.faults = append(c.faults, f)
}

// start checks the start step and the step names.
func (c *checker) start() {
	switch {
	case c.p.Start == "":
		c.add(nil, "start", "start is required: the first step of a run")
	case c.p.Steps[c.p.Start] == nil:
		c.add(nil, "start", "start %q is not a step of the pipeline", c.p.Start)
	}
	if s := c.p.Steps[agentrunner.EndStep]; s != nil {
		c.add(s, "", "%q is reserved: as an edge's target it ends the branch; give the step another name", agentrunner.EndStep)
	}
}

// step checks one step's edges and settings.
func (c *checker) step(s *agentrunner.Step) {
	c.wayOut(s)
	c.targets(s)
	c.routes(s)
	if s.Kind == agentrunner.KindGate {
		c.gate(s)
	}
	if len(s.Then) == 1 {
		c.add(s, "then", "then starts parallel branches and needs at least two; use next for one successor")
	}
	for i, to := range s.Then {
		if slices.Index(s.Then, to) < i {
			c.add(s, "then", "then names %q twice", to)
		}
	}
	c.join(s)
	c.cap(s)
}

// wayOut checks that the step leads on in exactly one way.
func (c *checker) wayOut(s *agentrunner.Step) {
	n := 0
	for _, set := range []bool{s.Next != "", len(s.Routes) > 0, len(s.Then) > 0} {
		if set {
			n++
		}
	}
	switch {
	case n == 0 && s.Kind == agentrunner.KindGate:
		c.add(s, "", "a gate with no way out: give it next (approve goes there, a reject ends the run as failed) or routes for approve and reject")
	case n == 0:
		c.add(s, "next", "nothing follows it: give it next, routes or then (next: end ends the branch)")
	case n > 1:
		c.add(s, "", "it sets more than one of next, routes and then; a step leads on in one of these ways")
	}
}

// targets checks that every edge leads to a step or to end.
func (c *checker) targets(s *agentrunner.Step) {
	for _, e := range s.Edges() {
		if e.To == agentrunner.EndStep || c.p.Steps[e.To] != nil {
			continue
		}
		what, key := edgeName(e)
		if e.To == "" {
			c.add(s, key, "%s leads nowhere: name a step or end", what)
			continue
		}
		c.add(s, key, "a route to nowhere: %s leads to %q, which is not a step of the pipeline", what, e.To)
	}
}

// edgeName says which of a step's edges e is, and its key.
func edgeName(e agentrunner.Edge) (string, string) {
	switch e.Kind {
	case agentrunner.EdgeRoute:
		return fmt.Sprintf("the route for %q", e.Label), "routes"
	case agentrunner.EdgeOtherwise:
		return "the otherwise route", "routes"
	case agentrunner.EdgeThen:
		return "a then branch", "then"
	case agentrunner.EdgeCap:
		return "on_cap", "on_cap"
	}
	return "next", "next"
}

// routes checks a step's routes and its label source.
func (c *checker) routes(s *agentrunner.Step) {
	if len(s.Routes) == 0 {
		return
	}
	if s.Label == nil && s.Kind != agentrunner.KindGate {
		c.add(s, "label", "routes without a label source: say where the routing label is read (label: {pointer, section, field, regex or parser})")
	}
	seen, otherwise := map[string]bool{}, 0
	for _, r := range s.Routes {
		switch {
		case r.Otherwise:
			otherwise++
		case seen[r.When]:
			c.add(s, "routes", "two routes take the label %q; a label leads one way", r.When)
		}
		seen[r.When] = true
	}
	if otherwise > 1 {
		c.add(s, "routes", "it has %d otherwise routes; one is the default", otherwise)
	}
}

// gate checks that a gate has a way out for each decision, and no label
// source: its label is the decision.
func (c *checker) gate(s *agentrunner.Step) {
	if s.Label != nil {
		c.add(s, "label", "a gate's label is the operator's decision; it takes no label source")
	}
	if len(s.Then) > 0 {
		c.add(s, "then", "a gate's decision leads one way: give it routes for approve and reject, or next")
	}
	if len(s.Routes) == 0 {
		return
	}
	otherwise := false
	for _, r := range s.Routes {
		otherwise = otherwise || r.Otherwise
		if !r.Otherwise && r.When != approve && r.When != reject {
			c.add(s, "routes", "a gate's label is its decision, approve or reject; no decision is %q", r.When)
		}
	}
	for _, d := range []string{approve, reject} {
		if !otherwise && !slices.ContainsFunc(s.Routes, func(r agentrunner.Route) bool { return r.When == d }) {
			c.add(s, "routes", "a gate with no way out on %s: add a route {when: %s, to: STEP} or an otherwise route", d, d)
		}
	}
}

// join checks that a join has branches to join.
func (c *checker) join(s *agentrunner.Step) {
	switch s.Join {
	case "":
		return
	case agentrunner.JoinAll, agentrunner.JoinAny:
	default:
		c.add(s, "join", "unknown join %q (all or any)", s.Join)
		return
	}
	if in := Incoming(c.p, s.ID); len(in) < 2 {
		c.add(s, "join", "a join without its branches: %s; a join waits for two or more", leadsTo(in))
	}
}

// leadsTo says which steps lead to a step.
func leadsTo(from []string) string {
	switch len(from) {
	case 0:
		return "no step leads to it"
	case 1:
		return fmt.Sprintf("only step %q leads to it", from[0])
	}
	return fmt.Sprintf("steps %s lead to it", strings.Join(from, ", "))
}

// cap checks max_visits and on_cap.
func (c *checker) cap(s *agentrunner.Step) {
	if s.MaxVisits < 0 {
		c.add(s, "max_visits", "max_visits must not be negative, got %d", s.MaxVisits)
	}
	if s.OnCap.Halt && s.OnCap.To != "" {
		c.add(s, "on_cap", "on_cap is halt or a step to go to, not both")
	}
	if s.MaxVisits == 0 && (s.OnCap.Halt || s.OnCap.To != "") {
		c.add(s, "on_cap", "on_cap applies when the step reaches its max_visits, and it has none")
	}
}

// loop describes the loop a step is on: the steps of its component.
func (c *checker) loop(id string) string {
	for _, comp := range components(c.p) {
		if slices.Contains(comp, id) {
			if len(comp) == 1 {
				return "a loop to itself"
			}
			return "a loop with " + strings.Join(slices.DeleteFunc(slices.Clone(comp), func(s string) bool { return s == id }), ", ")
		}
	}
	return id
}
