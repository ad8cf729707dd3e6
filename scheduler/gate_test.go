package scheduler_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentrunner/agentrunner"
)

// manualClock is a clock that moves only when a test advances it; its
// waits fire then.
type manualClock struct {
	mu     sync.Mutex
	now    time.Time
	timers []manualTimer
}

type manualTimer struct {
	at time.Time
	ch chan time.Time
}

func (c *manualClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *manualClock) After(d time.Duration) <-chan time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	ch := make(chan time.Time, 1)
	if d <= 0 {
		ch <- c.now // due already, as a real timer would be
		return ch
	}
	c.timers = append(c.timers, manualTimer{c.now.Add(d), ch})
	return ch
}

func (c *manualClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
	kept := c.timers[:0]
	for _, t := range c.timers {
		if t.at.After(c.now) {
			kept = append(kept, t)
		} else {
			t.ch <- c.now
		}
	}
	c.timers = kept
}

// approval is a pipeline whose gate sits between a draft and its
// publication.
func approval(gate *agentrunner.GateSpec) *agentrunner.Pipeline {
	return &agentrunner.Pipeline{Name: "approval", Start: "draft", Steps: steps(
		&agentrunner.Step{ID: "draft", Next: "signoff"},
		&agentrunner.Step{ID: "signoff", Kind: agentrunner.KindGate, Next: "publish", Gate: gate},
		&agentrunner.Step{ID: "publish", Next: agentrunner.EndStep},
	)}
}

func TestAGateRejectedWithoutARouteFailsTheRun(t *testing.T) {
	k := &scriptKind{}
	h := newHarness(t, k, approval(nil))
	h.run()
	id := h.startRun("approval", nil)
	h.waitGate(id, "signoff")
	if err := h.decide(id, "signoff", 1, agentrunner.DecisionReject, ""); err != nil {
		t.Fatal(err)
	}
	r, srs := h.waitDone(id)
	if r.Status != agentrunner.RunFailed || !strings.Contains(r.Error, "rejected by tester") {
		t.Fatalf("run is %s (%q); want failed, rejected by tester; %s", r.Status, r.Error, describe(srs))
	}
	for _, c := range k.Calls() {
		if c.Step == "publish" {
			t.Errorf("a rejected draft was published")
		}
	}
}

func TestAGateRoutedToAStepGoesThere(t *testing.T) {
	k := &scriptKind{}
	h := newHarness(t, k, approval(nil))
	h.run()
	id := h.startRun("approval", nil)
	h.waitGate(id, "signoff")
	if err := h.decide(id, "signoff", 1, agentrunner.DecisionRoute, "draft"); err != nil {
		t.Fatal(err)
	}
	h.waitGateVisit(id, "signoff", 2)
	if err := h.decide(id, "signoff", 2, agentrunner.DecisionApprove, ""); err != nil {
		t.Fatal(err)
	}
	r, srs := h.waitDone(id)
	want := "draft#1:succeeded signoff#1:succeeded[route] draft#2:succeeded signoff#2:succeeded[approve] publish#1:succeeded"
	if r.Status != agentrunner.RunCompleted || describe(sortByOpened(srs)) != want {
		t.Fatalf("run %s: %s\nwant %s", r.Status, describe(sortByOpened(srs)), want)
	}
}

func TestAGateTimesOutWithItsDefaultDecision(t *testing.T) {
	clock := &manualClock{now: time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)}
	k := &scriptKind{}
	h := newHarness(t, k, approval(&agentrunner.GateSpec{Timeout: time.Hour, Default: agentrunner.DecisionApprove}))
	h.clock = clock
	h.run()
	id := h.startRun("approval", nil)
	h.waitGate(id, "signoff")
	clock.Advance(59 * time.Minute)
	h.sched.Wake()
	h.waitGate(id, "signoff") // not yet
	clock.Advance(2 * time.Minute)
	r, srs := h.waitDone(id)
	if r.Status != agentrunner.RunCompleted {
		t.Fatalf("run is %s: %s", r.Status, describe(srs))
	}
	for _, sr := range srs {
		if sr.Step == "signoff" && (sr.Decision == nil || sr.Decision.Operator != "timeout" || sr.Decision.Action != agentrunner.DecisionApprove) {
			t.Errorf("the gate's decision is %+v, want the default approve by timeout", sr.Decision)
		}
	}
}

func TestAScheduledPipelineStartsARunEveryInterval(t *testing.T) {
	clock := &manualClock{now: time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)}
	p := &agentrunner.Pipeline{Name: "hourly", Start: "one", Every: time.Hour, EveryInputs: map[string]any{"goal": "the nightly check"}, Steps: steps(
		&agentrunner.Step{ID: "one", Next: agentrunner.EndStep},
	)}
	// probe's runs show that the scheduler passed its loop since a change.
	probe := &agentrunner.Pipeline{Name: "probe", Start: "one", Steps: steps(&agentrunner.Step{ID: "one", Next: agentrunner.EndStep})}
	h := newHarness(t, &scriptKind{}, p, probe)
	h.clock = clock
	h.run()
	runs := func() []*agentrunner.Run {
		rs, err := h.store.Runs(context.Background(), agentrunner.RunFilter{Pipeline: "hourly"})
		if err != nil {
			t.Fatal(err)
		}
		return rs
	}
	waitRuns := func(n int) {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for len(runs()) != n || !runs()[0].Status.Finished() {
			if time.Now().After(deadline) {
				for _, r := range runs() {
					t.Logf("%s %s %s", r.ID, r.Status, r.StartedAt)
				}
				t.Fatalf("%d runs, want %d (clock %s)", len(runs()), n, clock.Now())
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	waitRuns(1) // the first at once
	if in := runs()[0].Inputs; in["goal"] != "the nightly check" {
		t.Errorf("the scheduled run's inputs are %v, want the schedule's", in)
	}
	clock.Advance(59 * time.Minute)
	h.startRun("probe", nil) // the scheduler looked at the time after the advance
	if n := len(runs()); n != 1 {
		t.Fatalf("%d runs after 59 minutes, want 1", n)
	}
	clock.Advance(2 * time.Minute)
	waitRuns(2)
	h.run() // a restart counts from the newest run's start, not from now
	h.startRun("probe", nil)
	if n := len(runs()); n != 2 {
		t.Fatalf("%d runs after a restart, want 2", n)
	}
}

func TestAStepRunInterruptedTooOftenFails(t *testing.T) {
	k := &scriptKind{block: map[string]bool{"one": true}}
	p := &agentrunner.Pipeline{Name: "stuck", Start: "one", Steps: steps(
		&agentrunner.Step{ID: "one", Next: agentrunner.EndStep, Retry: agentrunner.RetryPolicy{Max: 0}},
	)}
	h := newHarness(t, k, p)
	h.maxInt = 2
	h.run()
	id := h.startRun("stuck", nil)
	for restarts := 1; restarts <= 3; restarts++ {
		deadline := time.Now().Add(30 * time.Second)
		for len(k.Calls()) < restarts { // the attempt runs: a restart now interrupts it
			if time.Now().After(deadline) {
				t.Fatalf("attempt %d never started", restarts)
			}
			time.Sleep(5 * time.Millisecond)
		}
		h.run()
	}
	r, srs := h.waitDone(id)
	if r.Status != agentrunner.RunFailed || !strings.Contains(r.Error, "the runner stopped during 3 attempts") {
		t.Fatalf("run is %s (%q); want failed after 3 interruptions; %s", r.Status, r.Error, describe(srs))
	}
	if n := len(k.Calls()); n != 3 {
		t.Errorf("the step ran %d times, want 3: interruptions cost no retry, and the third is the last", n)
	}
}
