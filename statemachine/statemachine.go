// Package statemachine checks the transitions of a pipeline's loop against
// its graph (FR-001, FR-004). It knows nothing about any particular
// pipeline: the learning loop is one graph, other pipelines are others.
//
// The states are Idle (before the first cycle), WaitingForNextCycle
// (between cycles), Halted (a step failed for good and an operator must
// resume) and one state per step. The legal transitions are:
//
//	Idle, WaitingForNextCycle → the start step     (a cycle begins)
//	step → its successor                           (the step succeeded, or
//	                                                was skipped)
//	step → WaitingForNextCycle                     (the cycle ended: the last
//	                                                step succeeded, or a step
//	                                                failed for good, or an
//	                                                operator aborted it)
//	step → Halted                                  (a step failed for good)
//	Halted → a step                                (an operator resumed)
//	Halted → WaitingForNextCycle                   (an operator aborted)
//	step → the final step                          (the cycle ran out of
//	                                                time: forced to its end)
//
// A retry is not a transition: the state stays at the step.
package statemachine

import (
	"fmt"
	"maps"
	"slices"
	"sort"

	"github.com/agentrunner/agentrunner"
)

// End is the successor of a pipeline's last step.
const End = ""

// Machine is the transition table of one pipeline graph.
type Machine struct {
	start string
	next  map[string]string
	order []string
	final string
}

// TransitionError is an illegal transition. Nothing was changed.
type TransitionError struct {
	From, To agentrunner.State
}

func (e *TransitionError) Error() string {
	return fmt.Sprintf("illegal transition %s → %s", e.From, e.To)
}

// New builds the machine of a graph: start is the first step, next maps each
// step to its successor (End after the last). It refuses a graph whose start
// or successors are not steps, whose steps are not all reachable from start,
// that loops within a cycle, or that uses a reserved state name as a step.
func New(start string, next map[string]string) (*Machine, error) {
	if len(next) == 0 {
		return nil, fmt.Errorf("pipeline has no steps")
	}
	// In name order, so that a graph with several faults is refused with
	// the same one every time.
	for _, step := range slices.Sorted(maps.Keys(next)) {
		succ := next[step]
		if step == End || (step != "" && !agentrunner.State(step).IsStep()) {
			return nil, fmt.Errorf("%q cannot be a step name: it is reserved", step)
		}
		if succ != End {
			if _, ok := next[succ]; !ok {
				return nil, fmt.Errorf("step %q: successor %q is not a step", step, succ)
			}
		}
	}
	if _, ok := next[start]; !ok {
		return nil, fmt.Errorf("start step %q is not a step", start)
	}
	var order []string
	seen := map[string]bool{}
	for s := start; s != End; s = next[s] {
		if seen[s] {
			return nil, fmt.Errorf("step %q is reached twice in one cycle: a loop within a cycle needs a cap, which this pipeline kind does not have", s)
		}
		seen[s] = true
		order = append(order, s)
	}
	if len(order) != len(next) {
		var unreachable []string
		for s := range next {
			if !seen[s] {
				unreachable = append(unreachable, s)
			}
		}
		sort.Strings(unreachable)
		return nil, fmt.Errorf("steps not reachable from start %q: %v", start, unreachable)
	}
	return &Machine{start: start, next: next, order: order}, nil
}

// WithFinal returns the machine with a final step: the step a cycle that
// ran out of time is forced to (the learning loop's evaluation), so what it
// has is still judged.
func (m *Machine) WithFinal(step string) (*Machine, error) {
	if _, ok := m.next[step]; !ok {
		return nil, fmt.Errorf("final step %q is not a step", step)
	}
	f := *m
	f.final = step
	return &f, nil
}

// Final returns the final step, "" if there is none.
func (m *Machine) Final() string { return m.final }

// Start returns the state a cycle begins in.
func (m *Machine) Start() agentrunner.State { return agentrunner.State(m.start) }

// Steps returns the steps in the order a cycle runs them.
func (m *Machine) Steps() []string { return slices.Clone(m.order) }

// IsStep reports whether s is the state of a step of this pipeline.
func (m *Machine) IsStep(s agentrunner.State) bool {
	_, ok := m.next[string(s)]
	return ok
}

// AfterSuccess returns the state that follows a successful step: its
// successor, or WaitingForNextCycle after the last step.
func (m *Machine) AfterSuccess(step agentrunner.State) (agentrunner.State, error) {
	succ, ok := m.next[string(step)]
	if !ok {
		return "", fmt.Errorf("%q is not a step of this pipeline", step)
	}
	if succ == End {
		return agentrunner.StateWaiting, nil
	}
	return agentrunner.State(succ), nil
}

// Check returns a *TransitionError unless from → to is legal.
func (m *Machine) Check(from, to agentrunner.State) error {
	switch {
	case from == agentrunner.StateIdle || from == agentrunner.StateWaiting:
		if to == m.Start() {
			return nil
		}
	case from == agentrunner.StateHalted:
		if to == agentrunner.StateWaiting || m.IsStep(to) {
			return nil
		}
	case m.IsStep(from):
		if to == agentrunner.StateWaiting || to == agentrunner.StateHalted {
			return nil
		}
		if succ := m.next[string(from)]; succ != End && to == agentrunner.State(succ) {
			return nil
		}
		if m.final != "" && to == agentrunner.State(m.final) && from != to {
			return nil
		}
	}
	return &TransitionError{From: from, To: to}
}
