package scheduler_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/agentrunner/agentrunner"
)

// TestAnAttemptWaitingForASlotIsNotInterruptedByRestarts: with one slot,
// run a holds it and run b's attempt waits. b's attempt is recorded
// pending, not running, so the restarts that interrupt a's attempt until
// a fails do not count against b, whose attempt 1 runs once the slot is
// free.
func TestAnAttemptWaitingForASlotIsNotInterruptedByRestarts(t *testing.T) {
	k := &scriptKind{block: map[string]bool{"work": true}}
	p := &agentrunner.Pipeline{Name: "slots", Start: "work", Steps: steps(&agentrunner.Step{ID: "work", Next: agentrunner.EndStep})}
	h := newHarness(t, k, p)
	h.maxAtt = 1
	h.run()
	a := h.startRun("slots", nil)
	b := h.startRun("slots", nil)
	waitCalls(t, k, 1)
	if got := attemptStatuses(t, h, b); !cmp.Equal(got, []string{"1:pending"}) {
		t.Fatalf("run %s, waiting for the slot, has attempts %v, want [1:pending]", b, got)
	}
	// a's attempt is interrupted at each restart: the 11th fails it.
	for i := range 11 {
		h.run()
		waitCalls(t, k, i+2)
	}
	if r, _ := h.waitDone(a); r.Status != agentrunner.RunFailed {
		t.Fatalf("run %s is %s, want failed after 11 interruptions", a, r.Status)
	}
	h.waitFor(b, "its attempt to run", func(*agentrunner.Run, []*agentrunner.StepRun) bool {
		return len(attemptStatuses(t, h, b)) == 1 && attemptStatuses(t, h, b)[0] == "1:running"
	})
	var bCalls []call
	for _, c := range k.Calls() {
		if c.Run == b {
			bCalls = append(bCalls, c)
		}
	}
	if want := []call{{b, "work", 1, 1}}; !cmp.Equal(bCalls, want) {
		t.Errorf("run %s's attempts that ran: %v, want %v", b, bCalls, want)
	}
}

// waitCalls waits until the kind has run n attempts.
func waitCalls(t *testing.T, k *scriptKind, n int) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for len(k.Calls()) < n {
		if time.Now().After(deadline) {
			t.Fatalf("%d attempts ran, want %d: %v", len(k.Calls()), n, k.Calls())
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// attemptStatuses lists a run's attempts as "number:status".
func attemptStatuses(t *testing.T, h *harness, run string) []string {
	t.Helper()
	atts, err := h.store.Attempts(context.Background(), run)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, a := range atts {
		out = append(out, fmt.Sprintf("%d:%s", a.Number, a.Status))
	}
	return out
}

// TestEachVisitOfALoopedStepHasItsOwnRetries: review fails the first
// attempt of each of its visits and has one retry. Attempt numbers count
// across visits, yet the second visit's retry is its first, so the run
// completes.
func TestEachVisitOfALoopedStepHasItsOwnRetries(t *testing.T) {
	k := &scriptKind{outputs: map[string][]string{"review": {"Verdict: REVISE", "Verdict: APPROVE"}}}
	failed := map[int]bool{}
	k.fail = func(a *agentrunner.StepAttempt) error {
		if a.Step.ID != "review" || failed[a.StepRun.Visit] {
			return nil
		}
		failed[a.StepRun.Visit] = true
		return agentrunner.Fail(agentrunner.ClassCrash, "review crashed on visit %d", a.StepRun.Visit)
	}
	p := reviewLoop()
	p.Steps["review"].Retry = agentrunner.RetryPolicy{Max: 1}
	h := newHarness(t, k, p)
	h.run()
	id := h.startRun("review", nil)
	r, srs := h.waitDone(id)
	want := "write#1:succeeded review#1:succeeded[REVISE] fix#1:succeeded review#2:succeeded[APPROVE]"
	if r.Status != agentrunner.RunCompleted || describe(sortByOpened(srs)) != want {
		t.Fatalf("run %s (%s): %s\nwant %s", r.Status, r.Error, describe(sortByOpened(srs)), want)
	}
}
