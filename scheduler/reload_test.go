package scheduler_test

import (
	"context"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentrunner/agentrunner"
	"github.com/agentrunner/agentrunner/scheduler"
	"github.com/google/go-cmp/cmp"
)

// reloadTo makes the harness's reload give next, with the harness's kinds,
// and same as Reloaded.Same.
func (h *harness) reloadTo(next func() (map[string]*agentrunner.Pipeline, map[string]bool)) {
	h.options = func(o *scheduler.Options) {
		o.Reload = func() (*scheduler.Reloaded, error) {
			ps, same := next()
			return &scheduler.Reloaded{Pipelines: ps, Kinds: o.Kinds, Same: same, Path: "/w/agentrunner.yaml"}, nil
		}
	}
}

// freeOnFailure closes release when the test ends, so that a test that
// fails while an attempt is held lets the scheduler stop.
func freeOnFailure(t *testing.T, release chan struct{}) {
	t.Cleanup(func() {
		select {
		case <-release:
		default:
			close(release)
		}
	})
}

// reload asks for a reload and fails unless it is applied.
func (h *harness) reload() {
	h.t.Helper()
	if got, want := h.override(agentrunner.CommandReload, nil), "reloaded /w/agentrunner.yaml"; got != want {
		h.t.Fatalf("reload: %q, want %q", got, want)
	}
}

// visited lists the steps of a run's step runs in the order they opened.
func (h *harness) visited(id string) []string {
	h.t.Helper()
	srs, err := h.store.StepRuns(context.Background(), agentrunner.StepRunFilter{RunID: id})
	if err != nil {
		h.t.Fatal(err)
	}
	var out []string
	for _, sr := range sortByOpened(srs) {
		out = append(out, sr.Step)
	}
	return out
}

// completed waits for the run's end and fails unless it completed.
func (h *harness) completed(id string) {
	h.t.Helper()
	if r, srs := h.waitDone(id); r.Status != agentrunner.RunCompleted {
		h.t.Fatalf("run %s %s (%q): %s", id, r.Status, r.Error, describe(srs))
	}
}

// TestAReloadOfTheSameGraphMovesRunsInFlight: a reload that changes only
// a step's timeout (Reloaded.Same) applies to the run in flight from its
// next attempt; a scheduler without a loader refuses every reload.
func TestAReloadOfTheSameGraphMovesRunsInFlight(t *testing.T) {
	k, release := holdStep("a")
	var mu sync.Mutex
	timeouts := map[string]time.Duration{}
	k.seen = func(a *agentrunner.StepAttempt) {
		mu.Lock()
		timeouts[a.Step.ID] = a.Timeout
		mu.Unlock()
	}
	h := newHarness(t, k, pair("two"))
	h.reloadTo(func() (map[string]*agentrunner.Pipeline, map[string]bool) {
		next := pair("two")
		next.Steps["b"].Timeout = 7 * time.Second
		return map[string]*agentrunner.Pipeline{"two": next}, map[string]bool{"two": true}
	})
	id := h.reloadWhileRunning(t, k, release, "two")
	close(release)
	h.completed(id)
	mu.Lock()
	defer mu.Unlock()
	if timeouts["b"] != 7*time.Second {
		t.Errorf("b ran with timeout %s, want the reloaded 7s", timeouts["b"])
	}
	evs := eventsOfType(t, h, scheduler.EventReloaded)
	if len(evs) != 1 || evs[0].Details["path"] != "/w/agentrunner.yaml" || evs[0].Details["kept"] != nil || evs[0].Details["changed"] != nil {
		t.Errorf("config.reloaded events %v, want one with the path, no pipeline changed and no run kept", evs)
	}

	bare := newHarness(t, &scriptKind{}, pair("two"))
	bare.run()
	if got, want := bare.override(agentrunner.CommandReload, nil), "ignored: this runner cannot reload its configuration"; got != want {
		t.Errorf("reload without a loader: %q, want %q", got, want)
	}
}

// TestAReloadThatAddsAStepAppliesToTheNextRun: a reload adds step c
// after b while a run is at a; that run ends on its graph, never visiting
// c, and the next run visits it. The reload's event names the pipeline
// changed and the run that kept its graph.
func TestAReloadThatAddsAStepAppliesToTheNextRun(t *testing.T) {
	k, release := holdStep("a")
	h := newHarness(t, k, pair("two"))
	h.reloadTo(func() (map[string]*agentrunner.Pipeline, map[string]bool) {
		return map[string]*agentrunner.Pipeline{"two": pairThenC("two")}, nil
	})
	first := h.reloadWhileRunning(t, k, release, "two")
	close(release)
	h.completed(first)
	if got := h.visited(first); !slices.Equal(got, []string{"a", "b"}) {
		t.Errorf("the run in flight visited %v, want its graph's a, b", got)
	}
	second := h.startRun("two", nil)
	h.completed(second)
	if got := h.visited(second); !slices.Equal(got, []string{"a", "b", "c"}) {
		t.Errorf("the run after the reload visited %v, want a, b, c", got)
	}
	evs := eventsOfType(t, h, scheduler.EventReloaded)
	if len(evs) != 1 {
		t.Fatalf("%d config.reloaded events, want 1", len(evs))
	}
	want := map[string]any{"changed": []any{"two"}, "kept": []any{first}}
	if got := map[string]any{"changed": evs[0].Details["changed"], "kept": evs[0].Details["kept"]}; !cmp.Equal(got, want) {
		t.Errorf("config.reloaded details %v, want %v", evs[0].Details, want)
	}
	h.check()
}

// TestAReloadThatRemovesAStepLetsRunsInFlightFinish: a reload removes
// the gate signoff while one run waits at it and another is at draft,
// about to go to it. Both finish on their graph: the gate's decision
// reaches the first, and the second goes to the gate and waits there.
// A run started after the reload goes from draft to publish.
func TestAReloadThatRemovesAStepLetsRunsInFlightFinish(t *testing.T) {
	release := make(chan struct{})
	var drafts atomic.Int32
	k := &scriptKind{fail: func(a *agentrunner.StepAttempt) error {
		if a.Step.ID == "draft" && drafts.Add(1) == 2 {
			<-release // the second run's draft
		}
		return nil
	}}
	h := newHarness(t, k, approval(nil))
	h.reloadTo(func() (map[string]*agentrunner.Pipeline, map[string]bool) {
		next := approval(nil)
		delete(next.Steps, "signoff")
		next.Steps["draft"].Next = "publish"
		return map[string]*agentrunner.Pipeline{"approval": next}, nil
	})
	h.run()
	freeOnFailure(t, release)
	waiting := h.startRun("approval", nil)
	h.waitGate(waiting, "signoff")
	drafting := h.startRun("approval", nil)
	waitCalls(t, k, 2)
	h.reload()
	close(release)
	h.waitGate(drafting, "signoff")
	for _, id := range []string{waiting, drafting} {
		if err := h.decide(id, "signoff", 1, agentrunner.DecisionApprove, ""); err != nil {
			t.Fatal(err)
		}
		h.completed(id)
		if got := h.visited(id); !slices.Equal(got, []string{"draft", "signoff", "publish"}) {
			t.Errorf("run %s in flight at the reload visited %v, want its graph's draft, signoff, publish", id, got)
		}
	}
	next := h.startRun("approval", nil)
	h.completed(next)
	if got := h.visited(next); !slices.Equal(got, []string{"draft", "publish"}) {
		t.Errorf("the run after the reload visited %v, want draft, publish", got)
	}
}

// TestAReloadAddsAndRemovesPipelines: a reload adds pipeline fresh and
// removes two while a run of two is in flight. fresh starts by command
// and by Start; two refuses new runs both ways, with the reason, while
// its run in flight finishes on its graph.
func TestAReloadAddsAndRemovesPipelines(t *testing.T) {
	k, release := holdStep("a")
	h := newHarness(t, k, pair("two"), job())
	h.reloadTo(func() (map[string]*agentrunner.Pipeline, map[string]bool) {
		fresh := job()
		fresh.Name = "fresh"
		return map[string]*agentrunner.Pipeline{"job": job(), "fresh": fresh}, map[string]bool{"job": true}
	})
	inFlight := h.reloadWhileRunning(t, k, release, "two")
	if got, want := h.override(agentrunner.CommandStartRun, map[string]any{"pipeline": "two"}), `refused: pipeline "two" is not configured`; got != want {
		t.Errorf("a run of the removed pipeline by command: %q, want %q", got, want)
	}
	if _, err := h.sched.Start(context.Background(), "two", nil); agentrunner.ErrorCode(err) != agentrunner.ENOTFOUND {
		t.Errorf("a run of the removed pipeline by Start: %v, want ENOTFOUND", err)
	}
	h.completed(h.startRun("fresh", nil))
	id, err := h.sched.Start(context.Background(), "fresh", nil)
	if err != nil {
		t.Fatalf("Start of the added pipeline: %v", err)
	}
	h.completed(id)
	close(release)
	h.completed(inFlight)
	if got := h.visited(inFlight); !slices.Equal(got, []string{"a", "b"}) {
		t.Errorf("the run of the removed pipeline visited %v, want a, b", got)
	}
	evs := eventsOfType(t, h, scheduler.EventReloaded)
	want := map[string]any{"added": []any{"fresh"}, "removed": []any{"two"}, "kept": []any{inFlight}}
	if len(evs) != 1 || !cmp.Equal(map[string]any{"added": evs[0].Details["added"], "removed": evs[0].Details["removed"], "kept": evs[0].Details["kept"]}, want) {
		t.Errorf("config.reloaded events %v, want one with %v", evs, want)
	}
}

// TestARunOnAGraphAReloadReplacedAnswersWithItsGraph: RunPipeline gives
// the API the graph a run in flight keeps, and Pipelines the current
// ones; once the run ends, its graph is forgotten.
func TestARunOnAGraphAReloadReplacedAnswersWithItsGraph(t *testing.T) {
	k, release := holdStep("a")
	old, next := pair("two"), pairThenC("two")
	h := newHarness(t, k, old)
	h.reloadTo(func() (map[string]*agentrunner.Pipeline, map[string]bool) {
		return map[string]*agentrunner.Pipeline{"two": next}, nil
	})
	id := h.reloadWhileRunning(t, k, release, "two")
	run := &agentrunner.Run{ID: id, Pipeline: "two"}
	if h.sched.RunPipeline(run) != old || h.sched.Pipelines()["two"] != next {
		t.Error("the run in flight does not answer with its graph, or the pipelines are not the reloaded ones")
	}
	close(release)
	h.completed(id)
	if got := h.sched.RunPipeline(run); got != next {
		t.Errorf("an ended run answers with %v, want the current graph", got)
	}
}

// TestAReloadThatChangesADocumentIsRefused: the follower of a pipeline's
// document keeps its runs in flight, so a reload that changes it is
// refused and nothing changes.
func TestAReloadThatChangesADocumentIsRefused(t *testing.T) {
	p := pair("two")
	p.Document = &agentrunner.DocumentSpec{File: "/w/doc.md", Archive: "/w/archive"}
	h := newHarness(t, &scriptKind{}, p)
	h.reloadTo(func() (map[string]*agentrunner.Pipeline, map[string]bool) {
		next := pair("two")
		next.Document = &agentrunner.DocumentSpec{File: "/w/other.md", Archive: "/w/archive"}
		return map[string]*agentrunner.Pipeline{"two": next}, nil
	})
	h.run()
	if got, want := h.override(agentrunner.CommandReload, nil), "ignored: the document of pipeline two changed: that needs a restart"; got != want {
		t.Errorf("reload: %q, want %q", got, want)
	}
	if h.sched.Pipelines()["two"] != p {
		t.Error("a refused reload replaced the pipelines")
	}
}

// TestAReloadMovesSchedulesToThePipelinesItKeeps: job fires every hour
// until a reload removes it and adds tick, every hour: job fires no more,
// and tick fires at once and then every hour.
func TestAReloadMovesSchedulesToThePipelinesItKeeps(t *testing.T) {
	p := job()
	p.Every = time.Hour
	f := newScheduled(t, &scriptKind{}, p, "2026-03-14T13:00:00Z")
	f.reloadTo(func() (map[string]*agentrunner.Pipeline, map[string]bool) {
		tick := job()
		tick.Name, tick.Every = "tick", time.Hour
		return map[string]*agentrunner.Pipeline{"probe": f.pipelines["probe"], "tick": tick}, map[string]bool{"probe": true}
	})
	f.run()
	f.waitStatuses("job-000001 completed")
	f.reload()
	f.at("2026-03-14T14:00:00Z")
	f.at("2026-03-14T15:00:00Z")
	f.waitStatuses("job-000001 completed")
	var ticks []string
	for _, r := range f.runsOf("tick") {
		ticks = append(ticks, r.StartedAt.UTC().Format("15:04"))
	}
	if want := []string{"13:00", "14:00", "15:00"}; !slices.Equal(ticks, want) {
		t.Errorf("tick started at %v, want %v", ticks, want)
	}
}

// runsOf lists a pipeline's runs, oldest first.
func (h *harness) runsOf(pipeline string) []*agentrunner.Run {
	h.t.Helper()
	rs, err := h.store.Runs(context.Background(), agentrunner.RunFilter{Pipeline: pipeline})
	if err != nil {
		h.t.Fatal(err)
	}
	slices.Reverse(rs)
	return rs
}

// TestARunInFlightKeepsTheStepKindsOfItsGraph: step b runs on kind
// other, which a reload drops with b; the run in flight at a still runs
// b on it, and the next run goes from a to the end.
func TestARunInFlightKeepsTheStepKindsOfItsGraph(t *testing.T) {
	k, release := holdStep("a")
	other := &scriptKind{}
	p := pair("two")
	p.Steps["b"].Kind = "other"
	h := newHarness(t, k, p)
	h.kinds = map[string]agentrunner.StepKind{"other": other}
	h.options = func(o *scheduler.Options) {
		o.Reload = func() (*scheduler.Reloaded, error) {
			next := pair("two")
			delete(next.Steps, "b")
			next.Steps["a"].Next = agentrunner.EndStep
			kinds := maps.Clone(o.Kinds)
			delete(kinds, "other")
			return &scheduler.Reloaded{Pipelines: map[string]*agentrunner.Pipeline{"two": next}, Kinds: kinds, Path: "/w/agentrunner.yaml"}, nil
		}
	}
	first := h.reloadWhileRunning(t, k, release, "two")
	close(release)
	h.completed(first)
	if got := other.Calls(); len(got) != 1 || got[0].Run != first || got[0].Step != "b" {
		t.Errorf("kind other ran %v, want b of run %s", got, first)
	}
	second := h.startRun("two", nil)
	h.completed(second)
	if got := h.visited(second); !slices.Equal(got, []string{"a"}) {
		t.Errorf("the run after the reload visited %v, want a", got)
	}
}

// TestARestartGoesOnWithTheGraphOnDisk: runs in flight keep their graph
// across a reload only while the process runs. Restarted on a graph
// without signoff, a run waiting at that gate fails, saying why, and a
// run that passed it (now at publish) goes on and completes.
func TestARestartGoesOnWithTheGraphOnDisk(t *testing.T) {
	k := &scriptKind{block: map[string]bool{"publish": true}} // until the stop
	h := newHarness(t, k, approval(nil))
	h.run()
	waiting := h.startRun("approval", nil)
	h.waitGate(waiting, "signoff")
	passed := h.startRun("approval", nil)
	h.waitGate(passed, "signoff")
	if err := h.decide(passed, "signoff", 1, agentrunner.DecisionApprove, ""); err != nil {
		t.Fatal(err)
	}
	waitCalls(t, k, 3) // draft, draft, publish
	h.stop()
	k.mu.Lock()
	k.block = nil
	k.mu.Unlock()
	next := approval(nil)
	delete(next.Steps, "signoff")
	next.Steps["draft"].Next = "publish"
	h.pipelines["approval"] = next
	h.run()
	r, srs := h.waitDone(waiting)
	if r.Status != agentrunner.RunFailed || r.Error != "step signoff is no longer in pipeline approval" {
		t.Errorf("the run at the lost gate: %s (%q), %s; want failed for the lost step", r.Status, r.Error, describe(srs))
	}
	h.completed(passed)
	h.check()
}

// pairThenC is pair with a step c after b.
func pairThenC(name string) *agentrunner.Pipeline {
	p := pair(name)
	p.Steps["b"].Next = "c"
	p.Steps["c"] = &agentrunner.Step{ID: "c", Kind: "script", Next: agentrunner.EndStep}
	return p
}

// reloadWhileRunning starts the harness and a run of pipeline, and
// reloads while the run's first attempt is held by k until release is
// closed; it returns the run's id.
func (h *harness) reloadWhileRunning(t *testing.T, k *scriptKind, release chan struct{}, pipeline string) string {
	t.Helper()
	h.run()
	freeOnFailure(t, release)
	id := h.startRun(pipeline, nil)
	waitCalls(t, k, 1)
	h.reload()
	return id
}
