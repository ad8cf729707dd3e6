package scheduler_test

import (
	"context"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/agentrunner/agentrunner"
	"github.com/agentrunner/agentrunner/scheduler"
)

// bounded is a pipeline whose runs may last an hour: work, then the
// final step judge, which weighs what the run has.
func bounded(final string, ss ...*agentrunner.Step) *agentrunner.Pipeline {
	if ss == nil {
		ss = []*agentrunner.Step{
			{ID: "work", Next: "judge", Retry: agentrunner.RetryPolicy{Max: 2}},
			{ID: "judge", Next: agentrunner.EndStep, Timeout: 3 * time.Hour, Retry: agentrunner.RetryPolicy{Max: 2}},
		}
	}
	return &agentrunner.Pipeline{Name: "bounded", Start: ss[0].ID, MaxDuration: time.Hour, Final: final, Steps: steps(ss...)}
}

// probe is a pipeline whose runs show that the scheduler passed its
// loop since a change.
func probe() *agentrunner.Pipeline {
	return &agentrunner.Pipeline{Name: "probe", Start: "two", Steps: steps(&agentrunner.Step{ID: "two", Next: agentrunner.EndStep})}
}

// attemptLog records what each attempt was given.
type attemptLog struct {
	mu   sync.Mutex
	seen []seenAttempt
}

type seenAttempt struct {
	Step    string
	Number  int
	Timeout time.Duration
	Late    bool
}

func (l *attemptLog) add(a *agentrunner.StepAttempt) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.seen = append(l.seen, seenAttempt{a.Step.ID, a.Attempt.Number, a.Timeout, a.Late})
}

func (l *attemptLog) all() []seenAttempt {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]seenAttempt(nil), l.seen...)
}

// attemptsOf lists a run's attempts as "step#number:status[class]".
func attemptsOf(t *testing.T, h *harness, id string) (map[string]string, []*agentrunner.Attempt) {
	t.Helper()
	atts, err := h.store.Attempts(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, a := range atts {
		out[agentrunner.StepRunKey(a.Step, a.Number)] = string(a.Status) + "[" + string(a.ErrorClass) + "]"
	}
	return out, atts
}

func forcedEvents(t *testing.T, h *harness, id, typ string) []map[string]any {
	t.Helper()
	evs, err := h.store.Events(context.Background(), agentrunner.EventFilter{CycleID: id, Type: typ})
	if err != nil {
		t.Fatal(err)
	}
	var out []map[string]any
	for _, ev := range evs {
		d := map[string]any{}
		for _, k := range []string{"from", "to", "why"} {
			d[k] = ev.Details[k]
		}
		out = append(out, d)
	}
	return out
}

func checkInvariants(t *testing.T, h *harness) {
	t.Helper()
	if err := scheduler.Check(context.Background(), h.store, h.pipelines); err != nil {
		t.Error(err)
	}
}

func TestAnAttemptTimeoutIsCutToWhatIsLeftOfTheRunButTheFinalStepsIsNot(t *testing.T) {
	clock := &manualClock{now: time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)}
	log := &attemptLog{}
	k := &scriptKind{seen: func(a *agentrunner.StepAttempt) {
		log.add(a)
		clock.Advance(20 * time.Minute) // each step takes 20 minutes of the run's hour
	}}
	p := bounded("judge",
		&agentrunner.Step{ID: "plan", Next: "work"}, // no timeout of its own: the run's hour
		&agentrunner.Step{ID: "work", Next: "judge", Timeout: 2 * time.Hour},
		&agentrunner.Step{ID: "judge", Next: agentrunner.EndStep, Timeout: 3 * time.Hour},
	)
	h := newHarness(t, k, p)
	h.clock = clock
	h.run()
	id := h.startRun("bounded", nil)
	r, srs := h.waitDone(id)
	if r.Status != agentrunner.RunCompleted {
		t.Fatalf("run is %s (%q): %s", r.Status, r.Error, describe(srs))
	}
	want := []seenAttempt{
		{"plan", 1, time.Hour, false},
		{"work", 1, 40 * time.Minute, false},
		{"judge", 1, 3 * time.Hour, false},
	}
	if diff := cmp.Diff(want, log.all()); diff != "" {
		t.Errorf("attempts given (-want +got):\n%s", diff)
	}
}

func TestAnOverdueRunIsForcedToItsFinalStep(t *testing.T) {
	for _, tt := range []struct{ noun, event string }{{"", scheduler.EventRunForced}, {"cycle", "cycle.forced"}} {
		t.Run(tt.event, func(t *testing.T) {
			clock := &manualClock{now: time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)}
			log := &attemptLog{}
			k := &scriptKind{block: map[string]bool{"work": true}, seen: log.add}
			p := bounded("judge")
			p.Noun = tt.noun
			h := newHarness(t, k, p, probe())
			h.clock = clock
			h.poll = 24 * time.Hour // only the run's deadline wakes the scheduler
			h.run()
			id := h.startRun("bounded", nil)
			waitCalls(t, k, 1)
			clock.Advance(59 * time.Minute)
			h.startRun("probe", nil) // a pass of the loop after the advance: not yet due
			if _, srs := h.waitFor(id, "work still running", func(*agentrunner.Run, []*agentrunner.StepRun) bool { return true }); describe(srs) != "work#1:open" {
				t.Fatalf("after 59 minutes: %s, want work#1:open", describe(srs))
			}
			clock.Advance(2 * time.Minute)
			r, srs := h.waitDone(id)
			if r.Status != agentrunner.RunCompleted || describe(sortByOpened(srs)) != "work#1:canceled judge#1:succeeded" {
				t.Fatalf("run is %s (%q): %s; want completed with work canceled, judge succeeded", r.Status, r.Error, describe(sortByOpened(srs)))
			}
			why := "the " + map[string]string{"": "run", "cycle": "cycle"}[tt.noun] + " ran longer than its max duration (1h0m0s)"
			atts, raw := attemptsOf(t, h, id)
			if diff := cmp.Diff(map[string]string{"work#1": "failed[timeout]", "judge#1": "succeeded[]"}, atts); diff != "" {
				t.Errorf("attempts (-want +got):\n%s", diff)
			}
			for _, a := range raw {
				if a.Step == "work" && a.Error != why {
					t.Errorf("work's attempt failed with %q, want %q", a.Error, why)
				}
			}
			if diff := cmp.Diff([]map[string]any{{"from": "work", "to": "judge", "why": why}}, forcedEvents(t, h, id, tt.event)); diff != "" {
				t.Errorf("%s events (-want +got):\n%s", tt.event, diff)
			}
			judge := log.all()[len(log.all())-1]
			if diff := cmp.Diff(seenAttempt{"judge", 1, 3 * time.Hour, true}, judge); diff != "" {
				t.Errorf("the final step's attempt (-want +got):\n%s", diff)
			}
			if n := len(k.Calls()); n != 3 { // work, the probe's work, judge
				t.Errorf("%d attempts ran, want 3: the cut step is not retried: %v", n, k.Calls())
			}
			checkInvariants(t, h)
		})
	}
}

// startBounded starts a run of bounded(final) on kind k, with a manual
// clock, and waits for its first attempt.
func startBounded(t *testing.T, k *scriptKind, final string) (*harness, *manualClock, string) {
	t.Helper()
	clock := &manualClock{now: time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)}
	h := newHarness(t, k, bounded(final))
	h.clock = clock
	h.run()
	id := h.startRun("bounded", nil)
	waitCalls(t, k, 1)
	return h, clock, id
}

func TestAnOverdueRunWithoutAFinalStepFails(t *testing.T) {
	k := &scriptKind{block: map[string]bool{"work": true}}
	h, clock, id := startBounded(t, k, "")
	clock.Advance(time.Hour)
	r, srs := h.waitDone(id)
	if r.Status != agentrunner.RunFailed || r.Error != "the run ran longer than its max duration (1h0m0s)" {
		t.Fatalf("run is %s (%q): %s; want failed, out of time", r.Status, r.Error, describe(srs))
	}
	if atts, _ := attemptsOf(t, h, id); atts["work#1"] != "failed[timeout]" || len(atts) != 1 {
		t.Errorf("attempts %v, want work#1 failed as a timeout and no other", atts)
	}
	checkInvariants(t, h)
}

func TestAFinalStepThatFailsAfterTheDeadlineFailsTheRun(t *testing.T) {
	k := &scriptKind{block: map[string]bool{"work": true}, fail: func(a *agentrunner.StepAttempt) error {
		if a.Step.ID == "judge" {
			return agentrunner.Fail(agentrunner.ClassTimeout, "judge ran out of time too")
		}
		return nil
	}}
	h, clock, id := startBounded(t, k, "judge") // judge has retries left: not after the deadline
	clock.Advance(2 * time.Hour)
	r, srs := h.waitDone(id)
	want := "the run ran longer than its max duration (1h0m0s): its final step judge (visit 1) failed after it: judge ran out of time too"
	if r.Status != agentrunner.RunFailed || r.Error != want {
		t.Fatalf("run is %s (%q): %s; want failed: %s", r.Status, r.Error, describe(srs), want)
	}
	if atts, _ := attemptsOf(t, h, id); len(atts) != 2 || atts["judge#1"] != "failed[timeout]" {
		t.Errorf("attempts %v, want work#1 and judge#1, failed, and no retry", atts)
	}
	checkInvariants(t, h)
}

func TestARunOverdueOnRestartIsForcedAtOnce(t *testing.T) {
	k := &scriptKind{block: map[string]bool{"work": true}}
	h, clock, id := startBounded(t, k, "judge")
	h.stop() // the runner stops with work running
	clock.Advance(3 * time.Hour)
	h.run()
	r, srs := h.waitDone(id)
	if r.Status != agentrunner.RunCompleted || describe(sortByOpened(srs)) != "work#1:canceled judge#1:succeeded" {
		t.Fatalf("run is %s (%q): %s; want completed with work canceled, judge succeeded", r.Status, r.Error, describe(sortByOpened(srs)))
	}
	var steps []string
	for _, c := range k.Calls() {
		steps = append(steps, c.Step)
	}
	if strings.Join(steps, " ") != "work judge" {
		t.Errorf("ran %v, want work once (before the restart), then judge", steps)
	}
	if atts, _ := attemptsOf(t, h, id); atts["work#1"] != "failed[timeout]" {
		t.Errorf("work's attempt is %s, want failed as a timeout (not interrupted)", atts["work#1"])
	}
	if evs := forcedEvents(t, h, id, "run.forced"); len(evs) != 1 {
		t.Errorf("run.forced events %v, want one", evs)
	}
	checkInvariants(t, h)
}

func TestAScheduledPipelineDoesNotQueueASecondRunBehindAQueuedOne(t *testing.T) {
	clock := &manualClock{now: time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)}
	p := &agentrunner.Pipeline{Name: "hourly", Start: "one", Every: time.Hour, MaxConcurrentRuns: 1, Steps: steps(
		&agentrunner.Step{ID: "one", Next: agentrunner.EndStep},
	)}
	h := newHarness(t, &scriptKind{block: map[string]bool{"one": true}}, p, probe())
	h.clock = clock
	h.run()
	statuses := func() []string {
		rs, err := h.store.Runs(context.Background(), agentrunner.RunFilter{Pipeline: "hourly"})
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, r := range rs {
			out = append(out, string(r.Status))
		}
		return out
	}
	for hour := 1; hour <= 3; hour++ {
		clock.Advance(61 * time.Minute)
		h.startRun("probe", nil) // the scheduler looked at the time after the advance
	}
	if diff := cmp.Diff([]string{"queued", "running"}, statuses()); diff != "" {
		t.Errorf("runs of hourly, newest first (-want +got):\n%s", diff)
	}
}

// TestAPausedWorkspaceForcesNoOverdueRunUntilTheResume: a pause changes
// nothing, not even for a run that outlives its bound meanwhile: it is
// forced at the resume.
func TestAPausedWorkspaceForcesNoOverdueRunUntilTheResume(t *testing.T) {
	k := &scriptKind{block: map[string]bool{"work": true}}
	h, clock, id := startBounded(t, k, "judge")
	if got := h.override(agentrunner.CommandPause, nil); got != "paused" {
		t.Fatalf("pause: %q", got)
	}
	clock.Advance(2 * time.Hour)
	// A pass of the loop after the advance.
	if got := h.override(agentrunner.CommandPause, nil); !strings.HasPrefix(got, "ignored: ") {
		t.Fatalf("second pause: %q", got)
	}
	if _, srs := h.waitFor(id, "work still running", func(*agentrunner.Run, []*agentrunner.StepRun) bool { return true }); describe(srs) != "work#1:open" {
		t.Fatalf("while paused: %s, want work#1:open", describe(srs))
	}
	if got := h.override(agentrunner.CommandResume, nil); got != "lifted the pause" {
		t.Fatalf("resume: %q", got)
	}
	r, srs := h.waitDone(id)
	if r.Status != agentrunner.RunCompleted || describe(sortByOpened(srs)) != "work#1:canceled judge#1:succeeded" {
		t.Fatalf("run is %s (%q): %s; want forced to judge at the resume", r.Status, r.Error, describe(sortByOpened(srs)))
	}
}

// TestAQueuedRunsBoundCountsFromWhenItBegins: a run that waited behind
// max_concurrent_runs starts when it leaves the queue, and its time bound
// counts from there: it is not forced the moment it begins.
func TestAQueuedRunsBoundCountsFromWhenItBegins(t *testing.T) {
	clock := &manualClock{now: time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)}
	k := &scriptKind{block: map[string]bool{"work": true}}
	p := bounded("judge")
	p.MaxConcurrentRuns = 1
	h := newHarness(t, k, p)
	h.clock = clock
	h.run()
	first := h.startRun("bounded", nil)
	waitCalls(t, k, 1)
	second := h.startRun("bounded", nil) // queued behind the first
	clock.Advance(2 * time.Hour)         // the first is forced, and completes
	if r, _ := h.waitDone(first); r.Status != agentrunner.RunCompleted {
		t.Fatalf("first run %s: %s", r.Status, r.Error)
	}
	r, srs := h.waitFor(second, "the second run's work to start", func(_ *agentrunner.Run, srs []*agentrunner.StepRun) bool {
		return describe(srs) == "work#1:open"
	})
	if want := clock.Now(); !r.StartedAt.Equal(want) || r.Status != agentrunner.RunRunning {
		t.Errorf("second run %s, started at %v, want running since %v: %s", r.Status, r.StartedAt, want, describe(srs))
	}
}

// TestARunForcedBeforeARestartIsNotForcedAgain: a forced run whose final
// step routed on, still out of time after a restart, fails instead of
// running its final step a second time.
func TestARunForcedBeforeARestartIsNotForcedAgain(t *testing.T) {
	clock := &manualClock{now: time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)}
	k := &scriptKind{block: map[string]bool{"work": true, "after": true}}
	p := bounded("judge",
		&agentrunner.Step{ID: "work", Next: "judge"},
		&agentrunner.Step{ID: "judge", Next: "after"},
		&agentrunner.Step{ID: "after", Next: agentrunner.EndStep})
	h := newHarness(t, k, p)
	h.clock = clock
	h.run()
	id := h.startRun("bounded", nil)
	waitCalls(t, k, 1)
	clock.Advance(2 * time.Hour) // forced to judge, which goes on to after
	h.waitFor(id, "after to run", func(_ *agentrunner.Run, srs []*agentrunner.StepRun) bool {
		return slices.ContainsFunc(srs, func(sr *agentrunner.StepRun) bool { return sr.Step == "after" })
	})
	h.run() // a restart
	r, srs := h.waitDone(id)
	if r.Status != agentrunner.RunFailed || describe(sortByOpened(srs)) != "work#1:canceled judge#1:succeeded after#1:canceled" {
		t.Fatalf("run is %s (%q): %s; want failed, judge run once", r.Status, r.Error, describe(sortByOpened(srs)))
	}
}
