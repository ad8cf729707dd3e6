package scheduler_test

import (
	"context"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/agentrunner/agentrunner"
	"github.com/agentrunner/agentrunner/internal/childrun"
	"github.com/agentrunner/agentrunner/scheduler"
)

// parentKind starts children child runs of pipeline (1 when 0) and waits
// for their ends at once, as a tasks step and a lead's sub-agents do; an
// attempt run again finds the children it started (childrun.Find).
type parentKind struct {
	pipeline string
	store    childrun.Store
	children int
	mu       sync.Mutex
	sched    *scheduler.Scheduler
}

func (k *parentKind) bind(s *scheduler.Scheduler) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.sched = s
}

func (k *parentKind) Run(ctx context.Context, a *agentrunner.StepAttempt) (*agentrunner.StepResult, error) {
	k.mu.Lock()
	s := k.sched
	k.mu.Unlock()
	errs := make(chan error, max(k.children, 1))
	for i := range max(k.children, 1) {
		key := strconv.Itoa(i)
		id, err := childrun.Find(ctx, k.store, a.Run.ID, "key", key)
		if err == nil && id == "" {
			id, err = s.StartChild(ctx, k.pipeline, map[string]any{"key": key}, a.Run.ID)
		}
		if err != nil {
			return nil, agentrunner.Fail(agentrunner.ClassInternal, "start the child: %v", err)
		}
		go func() {
			_, err := childrun.Wait(ctx, k.store, id, 5*time.Millisecond)
			errs <- err
		}()
	}
	for range max(k.children, 1) {
		if err := <-errs; err != nil {
			return nil, agentrunner.Fail(agentrunner.ClassInterrupted, "wait for a child: %v", err)
		}
	}
	return &agentrunner.StepResult{Output: []byte("done")}, nil
}

// TestParentsWaitingOnChildrenGiveTheirSlotsBack: with 2 slots and 4
// runs whose step starts a child run and waits for it, the parents that
// hold the slots give them back while they wait, so their children run
// and every run completes. Before, two parents held both slots and their
// children waited for one forever.
func TestParentsWaitingOnChildrenGiveTheirSlotsBack(t *testing.T) {
	k := &scriptKind{delay: 20 * time.Millisecond}
	parent := &agentrunner.Pipeline{Name: "parent", Start: "spawn", Steps: steps(&agentrunner.Step{ID: "spawn", Kind: "parent", Next: "after"},
		&agentrunner.Step{ID: "after", Next: agentrunner.EndStep})}
	child := &agentrunner.Pipeline{Name: "child", Start: "work", Steps: steps(&agentrunner.Step{ID: "work", Next: agentrunner.EndStep})}
	h := newHarness(t, k, parent, child)
	pk := &parentKind{pipeline: "child", store: h.store}
	h.kinds = map[string]agentrunner.StepKind{"parent": pk}
	h.maxAtt = 2
	h.run()
	pk.bind(h.sched)
	var ids []string
	for range 4 {
		ids = append(ids, h.startRun("parent", nil))
	}
	for _, id := range ids {
		if r, _ := h.waitDone(id); r.Status != agentrunner.RunCompleted {
			t.Errorf("run %s is %s (%s), want completed", id, r.Status, r.Error)
		}
	}
	k.mu.Lock()
	peak := k.peak
	k.mu.Unlock()
	if peak > 2 {
		t.Errorf("%d attempts of the script kind ran at once, more than the 2 slots", peak)
	}
}

// TestParallelWaitsGiveOneSlotBack: a parent that waits on two children
// at once (parallel sub-agents) gives its one slot back once and takes
// one again after both ended; the children never run more than the slots
// allow.
func TestParallelWaitsGiveOneSlotBack(t *testing.T) {
	k := &scriptKind{delay: 20 * time.Millisecond}
	parent := &agentrunner.Pipeline{Name: "parent", Start: "spawn", Steps: steps(&agentrunner.Step{ID: "spawn", Kind: "parent", Next: agentrunner.EndStep})}
	child := &agentrunner.Pipeline{Name: "child", Start: "work", Steps: steps(&agentrunner.Step{ID: "work", Next: agentrunner.EndStep})}
	h := newHarness(t, k, parent, child)
	pk := &parentKind{pipeline: "child", store: h.store, children: 2}
	h.kinds = map[string]agentrunner.StepKind{"parent": pk}
	h.maxAtt = 2
	h.run()
	pk.bind(h.sched)
	a, b := h.startRun("parent", nil), h.startRun("parent", nil)
	for _, id := range []string{a, b} {
		if r, _ := h.waitDone(id); r.Status != agentrunner.RunCompleted {
			t.Errorf("run %s is %s (%s), want completed", id, r.Status, r.Error)
		}
	}
	if n := len(k.Calls()); n != 4 {
		t.Errorf("%d children ran, want 4", n)
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.peak > 2 {
		t.Errorf("%d children ran at once, more than the 2 slots", k.peak)
	}
}

// TestAShutdownWhileAParentWaits: a runner shut down while a parent
// waits with its slot given back stops cleanly; started again, the
// parent's attempt runs again, finds its child ended, and completes.
func TestAShutdownWhileAParentWaits(t *testing.T) {
	k := &scriptKind{block: map[string]bool{"work": true}}
	parent := &agentrunner.Pipeline{Name: "parent", Start: "spawn", Steps: steps(&agentrunner.Step{ID: "spawn", Kind: "parent", Next: agentrunner.EndStep})}
	child := &agentrunner.Pipeline{Name: "child", Start: "work", Steps: steps(&agentrunner.Step{ID: "work", Next: agentrunner.EndStep})}
	h := newHarness(t, k, parent, child)
	pk := &parentKind{pipeline: "child", store: h.store}
	h.kinds = map[string]agentrunner.StepKind{"parent": pk}
	h.maxAtt = 1
	h.run()
	pk.bind(h.sched)
	id := h.startRun("parent", nil)
	waitCalls(t, k, 1) // the child runs in the slot its parent gave back
	h.shutdown()
	k.mu.Lock()
	k.block = nil
	k.mu.Unlock()
	h.run()
	pk.bind(h.sched)
	if r, _ := h.waitDone(id); r.Status != agentrunner.RunCompleted {
		t.Errorf("run %s is %s (%s), want completed", id, r.Status, r.Error)
	}
}
