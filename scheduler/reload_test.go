package scheduler_test

import (
	"sync"
	"testing"
	"time"

	"github.com/agentrunner/agentrunner"
	"github.com/agentrunner/agentrunner/scheduler"
)

// TestReloadSwapsPipelinesOrSaysWhyNot: an operator's reload takes new
// pipelines and kinds for the attempts that start from then on; one that
// would lose a step of a run in flight is refused, saying why, and a
// scheduler without a loader refuses every reload.
func TestReloadSwapsPipelinesOrSaysWhyNot(t *testing.T) {
	k, release := holdStep("a")
	var mu sync.Mutex
	timeouts := map[string]time.Duration{}
	k.seen = func(a *agentrunner.StepAttempt) {
		mu.Lock()
		timeouts[a.Step.ID] = a.Timeout
		mu.Unlock()
	}
	var next *agentrunner.Pipeline
	h := newHarness(t, k, pair("two"))
	h.options = func(o *scheduler.Options) {
		o.Reload = func() (*scheduler.Reloaded, error) {
			return &scheduler.Reloaded{Pipelines: map[string]*agentrunner.Pipeline{"two": next}, Kinds: o.Kinds, Path: "/w/agentrunner.yaml"}, nil
		}
	}
	h.run()
	id := h.startRun("two", nil)
	waitCalls(t, k, 1)

	next = &agentrunner.Pipeline{Name: "two", Start: "a", Steps: steps(&agentrunner.Step{ID: "a", Next: agentrunner.EndStep})}
	if got, want := h.override(agentrunner.CommandReload, nil), "ignored: step b of pipeline two is gone: that needs a restart"; got != want {
		t.Fatalf("reload losing a step: %q, want %q", got, want)
	}
	next = pair("two")
	next.Steps["b"].Timeout = 7 * time.Second
	if got, want := h.override(agentrunner.CommandReload, nil), "reloaded /w/agentrunner.yaml"; got != want {
		t.Fatalf("reload: %q, want %q", got, want)
	}
	close(release)
	if r, srs := h.waitDone(id); r.Status != agentrunner.RunCompleted {
		t.Fatalf("run %s: %s", r.Status, describe(srs))
	}
	mu.Lock()
	defer mu.Unlock()
	if timeouts["b"] != 7*time.Second {
		t.Errorf("b ran with timeout %s, want the reloaded 7s", timeouts["b"])
	}
	if n := len(eventsOfType(t, h, scheduler.EventReloaded)); n != 1 {
		t.Errorf("%d config.reloaded events, want 1", n)
	}

	bare := newHarness(t, &scriptKind{}, pair("two"))
	bare.run()
	if got, want := bare.override(agentrunner.CommandReload, nil), "ignored: this runner cannot reload its configuration"; got != want {
		t.Errorf("reload without a loader: %q, want %q", got, want)
	}
}
