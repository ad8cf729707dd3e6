package statemachine

import (
	"errors"
	"strings"
	"testing"

	"github.com/agentrunner/agentrunner"
	"github.com/google/go-cmp/cmp"
)

// learningLoop is the graph of the shipped example (spec 1, FR-004).
var learningLoop = map[string]string{
	"plan":       "research",
	"research":   "analyze",
	"analyze":    "synthesize",
	"synthesize": "execute",
	"execute":    "evaluate",
	"evaluate":   End,
}

func mustNew(t *testing.T) *Machine {
	t.Helper()
	m, err := New("plan", learningLoop)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// TestCheckEveryPair checks every ordered pair of states: exactly the legal
// transitions are accepted, and every other pair is a *TransitionError.
func TestCheckEveryPair(t *testing.T) {
	m := mustNew(t)
	legal := map[[2]agentrunner.State]bool{
		{"Idle", "plan"}:                      true,
		{"WaitingForNextCycle", "plan"}:       true,
		{"plan", "research"}:                  true,
		{"research", "analyze"}:               true,
		{"analyze", "synthesize"}:             true,
		{"synthesize", "execute"}:             true,
		{"execute", "evaluate"}:               true,
		{"plan", "WaitingForNextCycle"}:       true,
		{"plan", "Halted"}:                    true,
		{"research", "Halted"}:                true,
		{"analyze", "Halted"}:                 true,
		{"synthesize", "Halted"}:              true,
		{"execute", "Halted"}:                 true,
		{"evaluate", "Halted"}:                true,
		{"Halted", "plan"}:                    true,
		{"Halted", "research"}:                true,
		{"Halted", "analyze"}:                 true,
		{"Halted", "synthesize"}:              true,
		{"Halted", "execute"}:                 true,
		{"Halted", "evaluate"}:                true,
		{"Halted", "WaitingForNextCycle"}:     true,
		{"research", "WaitingForNextCycle"}:   true,
		{"analyze", "WaitingForNextCycle"}:    true,
		{"synthesize", "WaitingForNextCycle"}: true,
		{"execute", "WaitingForNextCycle"}:    true,
		{"evaluate", "WaitingForNextCycle"}:   true,
	}
	states := []agentrunner.State{"Idle", "WaitingForNextCycle", "Halted", "plan", "research", "analyze", "synthesize", "execute", "evaluate", "unknown", ""}
	accepted := 0
	for _, from := range states {
		for _, to := range states {
			err := m.Check(from, to)
			if legal[[2]agentrunner.State{from, to}] {
				accepted++
				if err != nil {
					t.Errorf("%s → %s: %v, want legal", from, to, err)
				}
				continue
			}
			var te *TransitionError
			if !errors.As(err, &te) {
				t.Errorf("%s → %s: err = %v, want *TransitionError", from, to, err)
				continue
			}
			if te.From != from || te.To != to || !strings.Contains(te.Error(), "illegal transition") {
				t.Errorf("%s → %s: error %+v does not name the transition", from, to, te)
			}
		}
	}
	if accepted != len(legal) {
		t.Errorf("accepted %d legal transitions, want %d", accepted, len(legal))
	}
}

func TestAfterSuccessFollowsTheGraph(t *testing.T) {
	m := mustNew(t)
	var got []agentrunner.State
	for s := m.Start(); s != agentrunner.StateWaiting; {
		got = append(got, s)
		next, err := m.AfterSuccess(s)
		if err != nil {
			t.Fatal(err)
		}
		if err := m.Check(s, next); err != nil {
			t.Fatalf("AfterSuccess gave an illegal transition: %v", err)
		}
		s = next
	}
	want := []agentrunner.State{"plan", "research", "analyze", "synthesize", "execute", "evaluate"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("cycle order (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"plan", "research", "analyze", "synthesize", "execute", "evaluate"}, m.Steps()); diff != "" {
		t.Errorf("Steps (-want +got):\n%s", diff)
	}
	if _, err := m.AfterSuccess("Idle"); err == nil {
		t.Error("AfterSuccess(Idle): want error, Idle is not a step")
	}
	if !m.IsStep("plan") || m.IsStep("Idle") || m.IsStep("nope") {
		t.Error("IsStep disagrees with the graph")
	}
}

func TestNewRejectsBadGraphs(t *testing.T) {
	tests := []struct {
		name  string
		start string
		next  map[string]string
		want  string
	}{
		{"no steps", "a", map[string]string{}, "no steps"},
		{"unknown start", "x", map[string]string{"a": End}, `start step "x" is not a step`},
		{"unknown successor", "a", map[string]string{"a": "b"}, `successor "b" is not a step`},
		{"reserved name", "Idle", map[string]string{"Idle": End}, "reserved"},
		{"reserved waiting", "a", map[string]string{"a": "WaitingForNextCycle", "WaitingForNextCycle": End}, "reserved"},
		{"reserved halted", "Halted", map[string]string{"Halted": End}, "reserved"},
		{"loop", "a", map[string]string{"a": "b", "b": "a"}, "reached twice"},
		{"unreachable", "a", map[string]string{"a": End, "c": End, "b": "c"}, "not reachable from start \"a\": [b c]"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := New(tt.start, tt.next)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("err = %v, want it to contain %q", err, tt.want)
			}
		})
	}
}

func TestOtherShapesAreJustOtherGraphs(t *testing.T) {
	m, err := New("review", map[string]string{"review": "fix", "fix": End})
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Check("review", "fix"); err != nil {
		t.Error(err)
	}
	if err := m.Check("fix", "review"); err == nil {
		t.Error("fix → review must be illegal in this graph")
	}
}

// TestFinalStep: a cycle that ran out of time may be forced from any other
// step to the final one, and only with a final step configured.
func TestFinalStep(t *testing.T) {
	m := mustNew(t)
	if err := m.Check("research", "evaluate"); err == nil {
		t.Error("research → evaluate accepted without a final step")
	}
	if m.Final() != "" {
		t.Errorf("Final() = %q without a final step", m.Final())
	}
	f, err := m.WithFinal("evaluate")
	if err != nil {
		t.Fatal(err)
	}
	for _, from := range []agentrunner.State{"plan", "research", "analyze", "synthesize", "execute"} {
		if err := f.Check(from, "evaluate"); err != nil {
			t.Errorf("%s → evaluate with a final step: %v", from, err)
		}
	}
	if err := f.Check("evaluate", "evaluate"); err == nil {
		t.Error("evaluate → evaluate accepted")
	}
	if err := f.Check("Idle", "evaluate"); err == nil {
		t.Error("Idle → evaluate accepted")
	}
	if f.Final() != "evaluate" || m.Final() != "" {
		t.Error("WithFinal changed the original machine or did not set the final step")
	}
	if _, err := m.WithFinal("report"); err == nil {
		t.Error("a final step that is not a step was accepted")
	}
}

// TestNewRefusesWithTheSameFaultEveryTime: with several faults, the one
// named does not depend on map order.
func TestNewRefusesWithTheSameFaultEveryTime(t *testing.T) {
	next := map[string]string{"a": "b", "c": "x", "d": "y", "e": "z", "f": End}
	for range 50 {
		if _, err := New("a", next); err == nil || err.Error() != `step "a": successor "b" is not a step` {
			t.Fatalf("New: %v, want the fault of step a, first by name", err)
		}
	}
}
