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

// parents runs a scheduler with slots slots over pipeline parent, whose
// step spawn (then after, if after) starts children runs of pipeline
// child (one script step, work) and waits for them.
func parents(t *testing.T, k *scriptKind, slots, children int, after bool) (*harness, *parentKind) {
	t.Helper()
	spawn := &agentrunner.Step{ID: "spawn", Kind: "parent", Next: agentrunner.EndStep}
	ss := []*agentrunner.Step{spawn}
	if after {
		spawn.Next = "after"
		ss = append(ss, &agentrunner.Step{ID: "after", Next: agentrunner.EndStep})
	}
	parent := &agentrunner.Pipeline{Name: "parent", Start: "spawn", Steps: steps(ss...)}
	child := &agentrunner.Pipeline{Name: "child", Start: "work", Steps: steps(&agentrunner.Step{ID: "work", Next: agentrunner.EndStep})}
	h := newHarness(t, k, parent, child)
	pk := &parentKind{pipeline: "child", store: h.store, children: children}
	h.kinds = map[string]agentrunner.StepKind{"parent": pk}
	h.maxAtt = slots
	h.run()
	pk.bind(h.sched)
	return h, pk
}

// completed checks that every run of ids completes.
func completed(t *testing.T, h *harness, ids ...string) {
	t.Helper()
	for _, id := range ids {
		if r, _ := h.waitDone(id); r.Status != agentrunner.RunCompleted {
			t.Errorf("run %s is %s (%s), want completed", id, r.Status, r.Error)
		}
	}
}

// peak is the most attempts of k that ran at once.
func peak(k *scriptKind) int {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.peak
}

// TestParentsWaitingOnChildrenGiveTheirSlotsBack: with 2 slots and 4
// runs whose step starts a child run and waits for it, the parents that
// hold the slots give them back while they wait, so their children run
// and every run completes. Before, two parents held both slots and their
// children waited for one forever.
func TestParentsWaitingOnChildrenGiveTheirSlotsBack(t *testing.T) {
	k := &scriptKind{delay: 20 * time.Millisecond}
	h, _ := parents(t, k, 2, 1, true)
	var ids []string
	for range 4 {
		ids = append(ids, h.startRun("parent", nil))
	}
	completed(t, h, ids...)
	if n := peak(k); n > 2 {
		t.Errorf("%d attempts of the script kind ran at once, more than the 2 slots", n)
	}
}

// TestParallelWaitsGiveOneSlotBack: a parent that waits on two children
// at once (parallel sub-agents) gives its one slot back once and takes
// one again after both ended; the children never run more than the slots
// allow.
func TestParallelWaitsGiveOneSlotBack(t *testing.T) {
	k := &scriptKind{delay: 20 * time.Millisecond}
	h, _ := parents(t, k, 2, 2, false)
	completed(t, h, h.startRun("parent", nil), h.startRun("parent", nil))
	if n := len(k.Calls()); n != 4 {
		t.Errorf("%d children ran, want 4", n)
	}
	if n := peak(k); n > 2 {
		t.Errorf("%d children ran at once, more than the 2 slots", n)
	}
}

// TestAShutdownWhileAParentWaits: a runner shut down while a parent
// waits with its slot given back stops cleanly; started again, the
// parent's attempt runs again, finds the child it started, which runs
// again too, and completes.
func TestAShutdownWhileAParentWaits(t *testing.T) {
	k := &scriptKind{block: map[string]bool{"work": true}}
	h, pk := parents(t, k, 1, 1, false)
	id := h.startRun("parent", nil)
	waitCalls(t, k, 1) // the child runs in the slot its parent gave back
	h.shutdown()
	k.mu.Lock()
	k.block = nil
	k.mu.Unlock()
	h.run()
	pk.bind(h.sched)
	completed(t, h, id)
}
