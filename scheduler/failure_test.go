package scheduler_test

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/agentrunner/agentrunner"
	"github.com/agentrunner/agentrunner/scheduler"
	"github.com/agentrunner/agentrunner/webhook"
)

// failing fails the attempts of one step whose numbers it is told, and
// lets the others succeed.
type failing struct {
	mu    sync.Mutex
	step  string
	fails map[int]bool
}

func (f *failing) fail(a *agentrunner.StepAttempt) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if a.Step.ID == f.step && f.fails[a.Attempt.Number] {
		return agentrunner.Fail(agentrunner.ClassCrash, "%s crashed on attempt %d", a.Step.ID, a.Attempt.Number)
	}
	return nil
}

// fallbackKind is a script kind that stands in for a failed step with the
// output it is given (nil: it has none), with an event of what it did.
type fallbackKind struct {
	*scriptKind
	fb *agentrunner.StepResult
}

func (k *fallbackKind) Fallback(_ context.Context, a *agentrunner.StepAttempt) (*agentrunner.StepResult, error) {
	if k.fb == nil {
		return nil, nil
	}
	fb := *k.fb
	fb.Events = []*agentrunner.Event{{Type: "fallback.delivered", CycleID: a.Run.ID, Level: agentrunner.LevelInfo, Timestamp: time.Now(), Details: map[string]any{}}}
	return &fb, nil
}

var _ agentrunner.Fallbacker = (*fallbackKind)(nil)

// outboxAlert is what the runner wires as the scheduler's Alert: the
// notification in the outbox of the same change.
func outboxAlert(t *testing.T) func(*agentrunner.Change, webhook.Event) {
	return func(ch *agentrunner.Change, ev webhook.Event) {
		body, err := ev.Body()
		if err != nil {
			t.Errorf("alert %s: %v", ev.ID, err)
			return
		}
		ch.Outbox = append(ch.Outbox, &agentrunner.OutboxMessage{Key: ev.ID, Kind: agentrunner.OutboxWebhook, CycleID: ev.CycleID, Payload: body, CreatedAt: ev.Time})
	}
}

// chain is write -> check -> end, with check's failure policy.
func chain(policy agentrunner.FailurePolicy) *agentrunner.Pipeline {
	return &agentrunner.Pipeline{Name: "chain", Start: "write", Steps: steps(
		&agentrunner.Step{ID: "write", Next: "check"},
		&agentrunner.Step{ID: "check", Next: agentrunner.EndStep, OnFailure: policy, Retry: agentrunner.RetryPolicy{Max: 1}},
	)}
}

// check fails when the store breaks the scheduler's invariants.
func (h *harness) check() {
	h.t.Helper()
	if err := scheduler.Check(context.Background(), h.store, h.pipelines); err != nil {
		h.t.Error(err)
	}
}

// events returns the details of the run's events of type typ.
func (h *harness) events(run, typ string) []map[string]any {
	h.t.Helper()
	evs, err := h.store.Events(context.Background(), agentrunner.EventFilter{CycleID: run, Type: typ})
	if err != nil {
		h.t.Fatal(err)
	}
	var out []map[string]any
	for _, ev := range evs {
		out = append(out, ev.Details)
	}
	return out
}

// result writes a command and waits for what the scheduler made of it.
func (h *harness) result(kind string, args map[string]any) string {
	h.t.Helper()
	id, err := h.command(kind, "", args)
	if err != nil {
		h.t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := h.sched.Await(ctx, id)
	if err != nil {
		h.t.Fatalf("command %s: %v", kind, err)
	}
	return res
}

// attempts lists the run's attempts of step as "number:status/retry_base".
func (h *harness) attempts(run, step string) []string {
	h.t.Helper()
	atts, err := h.store.Attempts(context.Background(), run)
	if err != nil {
		h.t.Fatal(err)
	}
	var out []string
	for _, a := range atts {
		if a.Step == step {
			out = append(out, fmt.Sprintf("%d:%s:%d", a.Number, a.Status, a.RetryBase))
		}
	}
	return out
}

func TestAHaltedRunResumesWithAFreshRoundOfRetries(t *testing.T) {
	f := &failing{step: "check", fails: map[int]bool{1: true, 2: true, 3: true}}
	k := &scriptKind{fail: f.fail}
	p := chain(agentrunner.HaltRun)
	p.Noun = "cycle"
	h := newHarness(t, k, p)
	h.alert = outboxAlert(t)
	h.run()
	id := h.startRun("chain", nil)
	r, srs := h.waitDone(id)
	want := "step check (visit 1) failed after 2 attempt(s): crash: check crashed on attempt 2; waiting for an operator to resume"
	if r.Status != agentrunner.RunHalted || r.Error != want || describe(srs) != "write#1:succeeded check#1:failed" {
		t.Fatalf("run %s (%q): %s; want halted (%q) with check#1 failed", r.Status, r.Error, describe(srs), want)
	}
	esc := h.events(id, "escalation")
	wantEsc := []map[string]any{{
		"pipeline": "chain", "step": "check", "visit": 1.0, "attempts": 2.0, "error_class": "crash",
		"error": "check crashed on attempt 2", "policy": "halt",
	}}
	if d := cmp.Diff(wantEsc, esc); d != "" {
		t.Errorf("escalation events (-want +got):\n%s", d)
	}
	if n := len(h.events(id, "cycle.halted")); n != 1 {
		t.Errorf("%d cycle.halted events, want 1 (the pipeline's noun)", n)
	}
	if res := h.result(agentrunner.CommandResumeRun, map[string]any{"run": id}); res != "resumed cycle "+id+" at check#1" {
		t.Fatalf("resume: %q", res)
	}
	r, srs = h.waitDone(id)
	if r.Status != agentrunner.RunCompleted || describe(srs) != "write#1:succeeded check#1:succeeded" {
		t.Fatalf("after resume: run %s (%q): %s; want completed", r.Status, r.Error, describe(srs))
	}
	h.check()
	// Attempt 3 fails and is retried: the resume gave a new round of retries.
	wantAtts := []string{"1:failed:0", "2:failed:0", "3:failed:2", "4:succeeded:2"}
	if d := cmp.Diff(wantAtts, h.attempts(id, "check")); d != "" {
		t.Errorf("attempts of check (-want +got):\n%s", d)
	}
	if n := len(h.events(id, "cycle.resumed")); n != 1 {
		t.Errorf("%d cycle.resumed events, want 1", n)
	}
	for _, key := range []string{"escalation/" + id + "/check/2", "resumed/" + id + "/check/3"} {
		m, err := h.store.OutboxMessage(context.Background(), key)
		if err != nil || m.Kind != agentrunner.OutboxWebhook {
			t.Errorf("outbox message %s: %+v, %v", key, m, err)
		}
	}
}

func TestWithoutAlertNoNotificationIsQueued(t *testing.T) {
	k := &scriptKind{fail: (&failing{step: "check", fails: map[int]bool{1: true, 2: true}}).fail}
	h := newHarness(t, k, chain(agentrunner.HaltRun))
	h.run()
	id := h.startRun("chain", nil)
	h.waitDone(id)
	msgs, err := h.store.Outbox(context.Background(), agentrunner.OutboxFilter{})
	if err != nil || len(msgs) != 0 {
		t.Fatalf("outbox: %d messages, %v; want none without Alert", len(msgs), err)
	}
}

func TestAFailedStepFailsItsRunByDefault(t *testing.T) {
	k := &scriptKind{fail: (&failing{step: "check", fails: map[int]bool{1: true, 2: true}}).fail}
	h := newHarness(t, k, chain(""))
	h.run()
	id := h.startRun("chain", nil)
	r, _ := h.waitDone(id)
	if r.Status != agentrunner.RunFailed {
		t.Fatalf("run %s (%q), want failed", r.Status, r.Error)
	}
	esc := h.events(id, "escalation")
	if len(esc) != 1 || esc[0]["policy"] != "fail" {
		t.Errorf("escalation events %v; want one with policy fail", esc)
	}
	if res := h.result(agentrunner.CommandResumeRun, map[string]any{"run": id}); !strings.HasPrefix(res, "ignored: run "+id+" is not halted") {
		t.Errorf("resume of a failed run: %q", res)
	}
}

func TestResumingARunThatIsNotHaltedIsIgnored(t *testing.T) {
	k := &scriptKind{block: map[string]bool{"write": true}}
	h := newHarness(t, k, chain(agentrunner.HaltRun))
	h.run()
	id := h.startRun("chain", nil)
	h.waitFor(id, "write running", func(r *agentrunner.Run, _ []*agentrunner.StepRun) bool { return len(k.Calls()) > 0 })
	for _, c := range []struct{ run, want string }{
		{id, "ignored: run " + id + " is running, not halted"},
		{"nope", "ignored: run nope is not halted (unknown, finished or not a run of this runner)"},
	} {
		if res := h.result(agentrunner.CommandResumeRun, map[string]any{"run": c.run}); res != c.want {
			t.Errorf("resume %s: %q, want %q", c.run, res, c.want)
		}
	}
	if n := len(k.Calls()); n != 1 {
		t.Errorf("write ran %d times, want once", n)
	}
}

func TestAHaltedRunStaysHaltedAcrossARestartAndResumes(t *testing.T) {
	f := &failing{step: "check", fails: map[int]bool{1: true, 2: true}}
	k := &scriptKind{fail: f.fail}
	h := newHarness(t, k, chain(agentrunner.HaltRun))
	h.run()
	id := h.startRun("chain", nil)
	if r, _ := h.waitDone(id); r.Status != agentrunner.RunHalted {
		t.Fatalf("run %s, want halted", r.Status)
	}
	h.run() // a restart: a new scheduler on the same store
	// A command after the recovery shows that the recovery did not start it.
	if res := h.result(agentrunner.CommandResumeRun, map[string]any{"run": "nope"}); !strings.HasPrefix(res, "ignored") {
		t.Fatalf("resume nope: %q", res)
	}
	if r, _ := h.store.Run(context.Background(), id); r.Status != agentrunner.RunHalted || len(k.Calls()) != 3 {
		t.Fatalf("after a restart: run %s after %d attempts; want still halted after 3", r.Status, len(k.Calls()))
	}
	if res := h.result(agentrunner.CommandResumeRun, map[string]any{"run": id}); res != "resumed run "+id+" at check#1" {
		t.Fatalf("resume: %q", res)
	}
	if r, _ := h.waitDone(id); r.Status != agentrunner.RunCompleted {
		t.Fatalf("after resume: run %s (%q)", r.Status, r.Error)
	}
	if d := cmp.Diff([]string{"1:failed:0", "2:failed:0", "3:succeeded:2"}, h.attempts(id, "check")); d != "" {
		t.Errorf("attempts of check (-want +got):\n%s", d)
	}
}

func TestAHaltedRunCanBeAborted(t *testing.T) {
	k := &scriptKind{fail: (&failing{step: "check", fails: map[int]bool{1: true, 2: true}}).fail}
	h := newHarness(t, k, chain(agentrunner.HaltRun))
	h.run()
	id := h.startRun("chain", nil)
	h.waitDone(id)
	if res := h.result(agentrunner.CommandAbortRun, map[string]any{"run": id}); res != "aborted run "+id {
		t.Fatalf("abort: %q", res)
	}
	r, srs := h.waitFor(id, "aborted", func(r *agentrunner.Run, _ []*agentrunner.StepRun) bool { return r.Status.Finished() })
	if r.Status != agentrunner.RunAborted || describe(srs) != "write#1:succeeded check#1:failed" {
		t.Fatalf("run %s: %s; want aborted with check#1's failure kept", r.Status, describe(srs))
	}
	if res := h.result(agentrunner.CommandResumeRun, map[string]any{"run": id}); !strings.HasPrefix(res, "ignored") {
		t.Errorf("resume of an aborted run: %q", res)
	}
}

func TestAHaltStopsParallelBranchesAndAResumeReopensThem(t *testing.T) {
	f := &failing{step: "a", fails: map[int]bool{1: true}}
	k := &scriptKind{fail: f.fail, block: map[string]bool{"b": true}}
	p := &agentrunner.Pipeline{Name: "fan", Start: "plan", Steps: steps(
		&agentrunner.Step{ID: "plan", Then: []string{"a", "b"}},
		&agentrunner.Step{ID: "a", Next: "merge", OnFailure: agentrunner.HaltRun},
		&agentrunner.Step{ID: "b", Next: "merge"},
		&agentrunner.Step{ID: "merge", Join: agentrunner.JoinAll, Next: agentrunner.EndStep},
	)}
	h := newHarness(t, k, p)
	h.run()
	id := h.startRun("fan", nil)
	r, srs := h.waitDone(id)
	if r.Status != agentrunner.RunHalted || describe(sortByOpened(srs)) != "plan#1:succeeded a#1:failed b#1:canceled" {
		t.Fatalf("run %s: %s; want halted, a failed, b canceled", r.Status, describe(sortByOpened(srs)))
	}
	h.check()
	k.mu.Lock()
	k.block = nil
	k.mu.Unlock()
	if res := h.result(agentrunner.CommandResumeRun, map[string]any{"run": id}); res != "resumed run "+id+" at a#1, b#1" {
		t.Fatalf("resume: %q", res)
	}
	r, srs = h.waitDone(id)
	if r.Status != agentrunner.RunCompleted || describe(sortByOpened(srs)) != "plan#1:succeeded a#1:succeeded b#1:succeeded merge#1:succeeded" {
		t.Fatalf("after resume: run %s (%q): %s", r.Status, r.Error, describe(sortByOpened(srs)))
	}
	h.check()
	if d := cmp.Diff([]string{"1:failed:0", "2:succeeded:1"}, h.attempts(id, "b")); d != "" {
		t.Errorf("attempts of b (-want +got):\n%s", d)
	}
}

// verdict is write -> check, where check's verdict routes to ok or redo.
func verdict() *agentrunner.Pipeline {
	return &agentrunner.Pipeline{Name: "verdict", Start: "write", Steps: steps(
		&agentrunner.Step{ID: "write", Next: "check"},
		&agentrunner.Step{ID: "check", Kind: "fallback", OnFailure: agentrunner.SkipStep, Label: &agentrunner.LabelSource{Field: "Verdict"},
			Routes: []agentrunner.Route{{When: "OK", To: "ok"}, {Otherwise: true, To: "redo"}}},
		&agentrunner.Step{ID: "ok", Next: agentrunner.EndStep},
		&agentrunner.Step{ID: "redo", Next: agentrunner.EndStep},
	)}
}

func TestASkippedStepGoesOnWithItsFallback(t *testing.T) {
	k := &scriptKind{fail: (&failing{step: "check", fails: map[int]bool{1: true}}).fail}
	h := newHarness(t, k, verdict())
	earlier := filepath.Join(h.dir, "runs", "verdict", "20261123-001", "check.md")
	fk := &fallbackKind{scriptKind: k, fb: &agentrunner.StepResult{Path: earlier, Output: []byte("Verdict: OK\n")}}
	h.kinds = map[string]agentrunner.StepKind{"fallback": fk}
	h.alert = outboxAlert(t)
	h.run()
	id := h.startRun("verdict", nil)
	r, srs := h.waitDone(id)
	if r.Status != agentrunner.RunCompleted || describe(sortByOpened(srs)) != "write#1:succeeded check#1:succeeded[OK] ok#1:succeeded" {
		t.Fatalf("run %s (%q): %s; want completed through ok", r.Status, r.Error, describe(sortByOpened(srs)))
	}
	h.check()
	if sr := sortByOpened(srs)[1]; sr.Error != "skipped after 1 attempt(s): crash: check crashed on attempt 1" {
		t.Errorf("the skipped step run's error %q", sr.Error)
	}
	esc := h.events(id, "escalation")
	wantEsc := []map[string]any{{
		"pipeline": "verdict", "step": "check", "visit": 1.0, "attempts": 1.0, "error_class": "crash",
		"error": "check crashed on attempt 1", "policy": "skip", "fallback": earlier, "fallback_run": "20261123-001",
	}}
	if d := cmp.Diff(wantEsc, esc); d != "" {
		t.Errorf("escalation events (-want +got):\n%s", d)
	}
	skipped := h.events(id, "step.skipped")
	if len(skipped) != 1 || skipped[0]["fallback"] != earlier || skipped[0]["label"] != "OK" {
		t.Errorf("step.skipped events %v; want one with the fallback's path", skipped)
	}
	if n := len(h.events(id, "fallback.delivered")); n != 1 {
		t.Errorf("%d of the fallback's events committed, want 1", n)
	}
	if _, err := h.store.OutboxMessage(context.Background(), "escalation/"+id+"/check/1"); err != nil {
		t.Errorf("escalation notification: %v", err)
	}
}

func TestASkippedStepWithoutAFallbackHalts(t *testing.T) {
	for _, kind := range []string{"fallback", "script"} {
		t.Run(kind, func(t *testing.T) {
			k := &scriptKind{outputs: map[string][]string{"check": {"Verdict: OK"}}, fail: (&failing{step: "check", fails: map[int]bool{1: true}}).fail}
			p := verdict()
			p.Steps["check"].Kind = kind
			h := newHarness(t, k, p)
			h.kinds = map[string]agentrunner.StepKind{"fallback": &fallbackKind{scriptKind: k}}
			h.run()
			id := h.startRun("verdict", nil)
			r, srs := h.waitDone(id)
			if r.Status != agentrunner.RunHalted || describe(srs) != "write#1:succeeded check#1:failed" {
				t.Fatalf("run %s (%q): %s; want halted at check", r.Status, r.Error, describe(srs))
			}
			esc := h.events(id, "escalation")
			if len(esc) != 1 || esc[0]["policy"] != "halt" || !strings.HasPrefix(esc[0]["fallback"].(string), "none: ") {
				t.Fatalf("escalation events %v; want one with policy halt and no fallback", esc)
			}
			if res := h.result(agentrunner.CommandResumeRun, map[string]any{"run": id}); res != "resumed run "+id+" at check#1" {
				t.Fatalf("resume: %q", res)
			}
			if r, _ := h.waitDone(id); r.Status != agentrunner.RunCompleted {
				t.Fatalf("after resume: run %s (%q)", r.Status, r.Error)
			}
		})
	}
}

func TestResumingARunWhoseStepIsNoLongerConfiguredFailsIt(t *testing.T) {
	k := &scriptKind{fail: (&failing{step: "check", fails: map[int]bool{1: true, 2: true}}).fail}
	h := newHarness(t, k, chain(agentrunner.HaltRun))
	h.run()
	id := h.startRun("chain", nil)
	h.waitDone(id)
	h.pipelines["chain"] = &agentrunner.Pipeline{Name: "chain", Start: "write", Steps: steps(&agentrunner.Step{ID: "write", Next: agentrunner.EndStep})}
	h.run()
	if res := h.result(agentrunner.CommandResumeRun, map[string]any{"run": id}); res != "resumed run "+id+" at check#1" {
		t.Fatalf("resume: %q", res)
	}
	r, srs := h.waitFor(id, "its end", func(r *agentrunner.Run, _ []*agentrunner.StepRun) bool { return r.Status.Finished() })
	if r.Status != agentrunner.RunFailed || r.Error != "step check is no longer in pipeline chain" {
		t.Fatalf("run %s (%q): %s; want failed for the lost step", r.Status, r.Error, describe(srs))
	}
	h.check()
}

// TestAResumeWaitsForAPlaceUnderMaxConcurrentRuns: a halted run gives its
// place up and a queued run takes it; resuming the halted run then is
// refused, saying why, instead of running one more than
// max_concurrent_runs; once the other run ends, the resume goes through.
func TestAResumeWaitsForAPlaceUnderMaxConcurrentRuns(t *testing.T) {
	const a, b = "chain-000001", "chain-000002"
	release := make(chan struct{})
	var once sync.Once
	k := &scriptKind{fail: func(at *agentrunner.StepAttempt) error {
		switch {
		case at.Run.ID == a && at.Step.ID == "check" && at.Attempt.Number <= 2:
			return agentrunner.Fail(agentrunner.ClassCrash, "check crashed on attempt %d", at.Attempt.Number)
		case at.Run.ID == b && at.Step.ID == "write":
			<-release // b holds the pipeline's one place
		}
		return nil
	}}
	p := chain(agentrunner.HaltRun)
	p.MaxConcurrentRuns = 1
	h := newHarness(t, k, p)
	h.run()
	// After the scheduler's: cleanups run last first, and its stop waits
	// for b's write.
	t.Cleanup(func() { once.Do(func() { close(release) }) })
	if id := h.startRun("chain", nil); id != a {
		t.Fatalf("first run %s, want %s", id, a)
	}
	if r, _ := h.waitDone(a); r.Status != agentrunner.RunHalted {
		t.Fatalf("run %s %s, want halted", a, r.Status)
	}
	h.startRun("chain", nil)
	h.waitFor(b, "its write running", func(r *agentrunner.Run, srs []*agentrunner.StepRun) bool {
		return r.Status == agentrunner.RunRunning && len(srs) == 1
	})
	res := h.result(agentrunner.CommandResumeRun, map[string]any{"run": a})
	if want := "ignored: pipeline chain is running its max_concurrent_runs (1): resume run " + a + " once one of them ends"; res != want {
		t.Fatalf("resume while %s runs: %q, want %q", b, res, want)
	}
	if r, _ := h.store.Run(context.Background(), a); r.Status != agentrunner.RunHalted {
		t.Fatalf("run %s %s after the refused resume, want halted", a, r.Status)
	}
	once.Do(func() { close(release) })
	if r, _ := h.waitDone(b); r.Status != agentrunner.RunCompleted {
		t.Fatalf("run %s %s, want completed", b, r.Status)
	}
	if res := h.result(agentrunner.CommandResumeRun, map[string]any{"run": a}); res != "resumed run "+a+" at check#1" {
		t.Fatalf("resume once %s ended: %q", b, res)
	}
	if r, _ := h.waitDone(a); r.Status != agentrunner.RunCompleted {
		t.Fatalf("run %s %s after the resume, want completed", a, r.Status)
	}
	if k.peak > 1 {
		t.Errorf("%d attempts ran at once, want at most 1 (one run at a time)", k.peak)
	}
}
