package engine

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentrunner/agentrunner"
	"github.com/agentrunner/agentrunner/config"
	"github.com/agentrunner/agentrunner/execsvc"
	"github.com/agentrunner/agentrunner/mailbox"
	"github.com/agentrunner/agentrunner/runtime/mock"
	"github.com/google/go-cmp/cmp"
)

var fourCrashes = []mock.Fault{mock.Crash, mock.Crash, mock.Crash, mock.Crash}

// TestHaltThenResume: with the halt policy a step that fails for good
// stops the loop in Halted; an operator's resume gives the step a new
// attempt and a new round of retries, and the cycle goes on.
func TestHaltThenResume(t *testing.T) {
	f := newFixture(t, execsvc.MockOptions{}, func(c *config.Config) {
		c.Escalation.Webhook = config.Webhook{URL: "http://127.0.0.1:1/hook", SecretEnv: "HOOK_SECRET", Timeout: config.Duration(time.Second)}
	})
	f.fail("research", fourCrashes...)
	c := f.runOnce(f.engine())
	if c.Status != agentrunner.CycleHalted || c.Step != "research" {
		t.Fatalf("cycle %s at %q, want halted at research", c.Status, c.Step)
	}
	st, _ := ReadStatus(context.Background(), f.store, f.ws.Config, f.clock.Now())
	if st.CurrentState != agentrunner.StateHalted {
		t.Errorf("status %s, want Halted", st.CurrentState)
	}
	esc := f.eventsOf(EventEscalation)
	if len(esc) != 1 || esc[0].Details["policy"] != "halt" || esc[0].Details["attempts"] != 4 {
		t.Fatalf("escalation events: %+v", esc)
	}
	hook, err := f.store.OutboxMessage(context.Background(), "escalation/"+c.ID+"/research/4")
	if err != nil || !strings.Contains(string(hook.Payload), `"policy":"halt"`) || !strings.Contains(string(hook.Payload), "plan.md") {
		t.Fatalf("webhook in the outbox: %+v, %v", hook, err)
	}

	// Nothing happens without an operator.
	if again := f.runOnce(f.engine()); again.Status != agentrunner.CycleHalted {
		t.Fatalf("a halted cycle went on by itself: %s", again.Status)
	}
	cmd := &agentrunner.Command{Kind: agentrunner.CommandResume, Operator: "alice", CreatedAt: f.clock.Now()}
	if err := f.store.AddCommand(context.Background(), cmd); err != nil {
		t.Fatal(err)
	}
	f.fail("research", append(fourCrashes, mock.Crash, mock.Crash)...) // attempts 5 and 6 crash too, 7 succeeds
	c = f.runOnce(f.engine())
	if c.Status != agentrunner.CycleCompleted {
		t.Fatalf("after resume: cycle %s: %s", c.Status, c.Error)
	}
	var research []string
	for _, a := range f.attempts(c.ID) {
		if strings.HasPrefix(a, "research#") {
			research = append(research, a)
		}
	}
	want := []string{"research#1:failed:crash", "research#2:failed:crash", "research#3:failed:crash", "research#4:failed:crash",
		"research#5:failed:crash", "research#6:failed:crash", "research#7:succeeded"}
	if diff := cmp.Diff(want, research); diff != "" {
		t.Errorf("research attempts (-want +got): the resume must give a new round of retries\n%s", diff)
	}
	if pending, _ := f.store.PendingCommands(context.Background()); len(pending) != 0 {
		t.Errorf("the resume command was not consumed: %+v", pending)
	}
	if ev := f.eventsOf(EventResumed); len(ev) != 1 || ev[0].Details["operator"] != "alice" {
		t.Errorf("resume events: %+v", ev)
	}
}

// TestSkipUsesTheLastGoodArtifact: with the skip policy the step's most
// recent valid artifact from an earlier cycle stands in, recorded as such.
func TestSkipUsesTheLastGoodArtifact(t *testing.T) {
	f := newFixture(t, execsvc.MockOptions{}, func(c *config.Config) { c.Escalation.Policy = config.PolicySkip })
	first := f.runOnce(f.engine())
	e := f.engine()
	f.toNextCycle()
	f.fail("research", fourCrashes...)
	c := f.runOnce(e)
	if c.Status != agentrunner.CycleCompleted {
		t.Fatalf("cycle %s: %s", c.Status, c.Error)
	}
	got, _ := os.ReadFile(filepath.Join(c.Dir, "research.md"))
	want, _ := os.ReadFile(filepath.Join(first.Dir, "research.md"))
	if string(got) != string(want) {
		t.Error("the cycle's research.md is not the last good one")
	}
	skipped := f.eventsOf(EventSkipped)
	if len(skipped) != 1 || skipped[0].Details["fallback_run"] != first.ID {
		t.Fatalf("skip events: %+v", skipped)
	}
	boxes, _ := mailbox.New(f.ws.Layout.Mailboxes(), 5)
	msgs, _ := boxes.Read("analysis", 0)
	var forward *mailbox.Message
	for i := range msgs {
		if msgs[i].ID == c.ID+"/research/forward/analysis" {
			forward = &msgs[i]
		}
	}
	if forward == nil || !strings.Contains(forward.Body, "stands in for it") {
		t.Errorf("the analysis agent is not told the research is a fallback: %+v", forward)
	}
}

// TestSkipWithoutFallbackHalts: with nothing to stand in, skip is halt.
func TestSkipWithoutFallbackHalts(t *testing.T) {
	f := newFixture(t, execsvc.MockOptions{}, func(c *config.Config) { c.Pipeline.Steps["research"].OnFailure = config.PolicySkip })
	f.fail("research", fourCrashes...)
	c := f.runOnce(f.engine())
	if c.Status != agentrunner.CycleHalted {
		t.Fatalf("cycle %s, want halted", c.Status)
	}
	esc := f.eventsOf(EventEscalation)
	if len(esc) != 1 || esc[0].Details["policy"] != "halt" || !strings.Contains(esc[0].Details["fallback"].(string), "none") {
		t.Errorf("escalation: %+v", esc)
	}
}

// TestHaltIgnoresAFallback: halt halts even when a fallback exists.
func TestHaltIgnoresAFallback(t *testing.T) {
	f := newFixture(t, execsvc.MockOptions{}, nil)
	f.runOnce(f.engine())
	e := f.engine()
	f.toNextCycle()
	f.fail("research", fourCrashes...)
	if c := f.runOnce(e); c.Status != agentrunner.CycleHalted {
		t.Fatalf("cycle %s, want halted", c.Status)
	}
	if len(f.eventsOf(EventSkipped)) != 0 {
		t.Error("halt used the fallback")
	}
}

// TestMaxCycleForcesTheFinalStep: a cycle that outlives max_cycle jumps to
// the final step with what it has (FR-007); without a final step it fails.
func TestMaxCycleForcesTheFinalStep(t *testing.T) {
	f := newFixture(t, execsvc.MockOptions{}, func(c *config.Config) {
		c.Pipeline.Final = "evaluate"
		c.Schedule.MaxCycle = config.Duration(time.Hour)
	})
	f.onRun = func(inv *agentrunner.Invocation) {
		if inv.Step == "research" {
			f.clock.Advance(2 * time.Hour) // research takes longer than the whole cycle may
		}
	}
	f.fail("research", mock.Crash)
	c := f.runOnce(f.engine())
	if c.Status != agentrunner.CycleCompleted {
		t.Fatalf("cycle %s: %s", c.Status, c.Error)
	}
	if diff := cmp.Diff([]string{"plan#1:succeeded", "research#1:failed:crash", "evaluate#1:succeeded"}, f.attempts(c.ID)); diff != "" {
		t.Errorf("attempts (-want +got):\n%s", diff)
	}
	if ev := f.eventsOf(EventForced); len(ev) != 1 || ev[0].Details["to"] != "evaluate" {
		t.Errorf("forced events: %+v", ev)
	}
	if prompt := f.stored(c.ID, "evaluate", 1, agentrunner.FilePrompt); !strings.Contains(prompt, "missing: the cycle ran out of time") {
		t.Error("the evaluation is not told which inputs are missing")
	}

	g := newFixture(t, execsvc.MockOptions{}, func(c *config.Config) {
		c.Schedule.MaxCycle = config.Duration(time.Hour)
		c.Pipeline.Final = ""
	})
	g.onRun = func(inv *agentrunner.Invocation) {
		if inv.Step == "research" {
			g.clock.Advance(2 * time.Hour)
		}
	}
	g.fail("research", mock.Crash)
	if c := g.runOnce(g.engine()); c.Status != agentrunner.CycleFailed || !strings.Contains(c.Error, "ran longer than its max duration (1h0m0s)") {
		t.Errorf("without a final step: cycle %s: %q, want failed on max_cycle", c.Status, c.Error)
	}
}
