package agent

import (
	"context"
	"os"
	"strings"
	"testing"

	"github.com/agentrunner/agentrunner"
	"github.com/google/go-cmp/cmp"
)

// signed is the mock's valid research output with a SIGNAL BLOCK appended.
func signed(e *env, status string) agentrunner.Runtime {
	return agentFunc(func(ctx context.Context, inv *agentrunner.Invocation) (*agentrunner.RunResult, error) {
		res, err := e.mock.Run(ctx, inv)
		if err != nil {
			return res, err
		}
		res.Output = append(res.Output, "\nSIGNAL BLOCK\n"+status+"\n"...)
		return res, nil
	})
}

// TestASignalRoutedStepChecksItsBlock: a step that routes on its SIGNAL
// BLOCK has the whole block checked as part of its output's contract; a
// valid one is recorded in a signal.received event committed with the
// step, a wrong one fails the attempt as invalid output, naming the field.
func TestASignalRoutedStepChecksItsBlock(t *testing.T) {
	const cycle = "20261122_140000" // the env's run
	tests := []struct {
		name, status, inError string
		want                  map[string]any
	}{
		{name: "valid", status: "Agent=research | Cycle=" + cycle + " | Step=RESEARCH | Confidence=4 | Risk=Medium | Next=analysis",
			want: map[string]any{"agent": "research", "cycle": cycle, "step": "RESEARCH", "confidence": 4, "risk": "medium", "next": "analysis", "visit": 1}},
		{name: "stop", status: "Agent=research | Cycle=" + cycle + " | Step=RESEARCH | Confidence=5 | Risk=low | Next=STOP",
			want: map[string]any{"agent": "research", "cycle": cycle, "step": "RESEARCH", "confidence": 5, "risk": "low", "next": "STOP", "visit": 1}},
		{name: "another cycle's", status: "Agent=research | Cycle=2025-11-08-001 | Step=RESEARCH | Confidence=4 | Risk=low | Next=analysis", inError: "Cycle is"},
		{name: "signed by another agent", status: "Agent=plan | Cycle=" + cycle + " | Step=RESEARCH | Confidence=4 | Risk=low | Next=analysis", inError: "Agent is"},
		{name: "a role it cannot go to", status: "Agent=research | Cycle=" + cycle + " | Step=RESEARCH | Confidence=4 | Risk=low | Next=plan", inError: "Next is"},
		{name: "no confidence", status: "Agent=research | Cycle=" + cycle + " | Step=RESEARCH | Risk=low | Next=analysis", inError: "Confidence is missing"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t)
			a := e.attempt(t)
			os.Remove(a.Dir)
			a.Step.Label = &agentrunner.LabelSource{Parser: "signal"}
			a.Step.Routes = []agentrunner.Route{{When: "analysis", To: "analyze"}, {When: "STOP", To: agentrunner.EndStep}}
			res, err := e.kind(t, signed(e, tt.status), nil).Run(context.Background(), a)
			var got map[string]any
			rejected := false
			for _, ev := range res.Events {
				switch ev.Type {
				case agentrunner.EventSignal:
					got = ev.Details
				case agentrunner.EventArtifactRejected:
					rejected = true
				}
			}
			if tt.inError == "" {
				if err != nil {
					t.Fatal(err)
				}
				if diff := cmp.Diff(tt.want, got); diff != "" {
					t.Errorf("signal.received (-want +got):\n%s", diff)
				}
				return
			}
			if agentrunner.ClassOf(err) != agentrunner.ClassInvalidOutput || !strings.Contains(err.Error(), tt.inError) || !strings.Contains(err.Error(), tt.status) {
				t.Fatalf("error %v, want invalid output saying %q and quoting the status line", err, tt.inError)
			}
			if !rejected || got != nil || storedFile(res, agentrunner.FileArtifact) != nil {
				t.Errorf("rejected %v, signal %v, artifact stored %v: want the output rejected, no signal recorded, nothing stored", rejected, got, storedFile(res, agentrunner.FileArtifact) != nil)
			}
		})
	}
}
