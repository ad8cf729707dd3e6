package scheduler_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentrunner/agentrunner"
	"github.com/agentrunner/agentrunner/scheduler"
)

// quietStore counts the scheduler's store calls in flight (every call
// the scheduler times for Stalled), so a test
// moves its fake clock only while the loop waits: a call in flight across
// the jump would take that long.
type quietStore struct {
	scheduler.Store
	calls    atomic.Int64 // in flight
	finished atomic.Int64 // done so far
}

func (q *quietStore) ApplyAll(ctx context.Context, chs ...*agentrunner.Change) error {
	q.calls.Add(1)
	defer q.done()
	return q.Store.ApplyAll(ctx, chs...)
}

func (q *quietStore) ApplyGroup(ctx context.Context, chs ...*agentrunner.Change) ([]error, error) {
	q.calls.Add(1)
	defer q.done()
	return q.Store.ApplyGroup(ctx, chs...)
}

func (q *quietStore) PendingCommands(ctx context.Context) ([]*agentrunner.Command, error) {
	q.calls.Add(1)
	defer q.done()
	return q.Store.PendingCommands(ctx)
}

func (q *quietStore) Run(ctx context.Context, id string) (*agentrunner.Run, error) {
	q.calls.Add(1)
	defer q.done()
	return q.Store.Run(ctx, id)
}

func (q *quietStore) Runs(ctx context.Context, f agentrunner.RunFilter) ([]*agentrunner.Run, error) {
	q.calls.Add(1)
	defer q.done()
	return q.Store.Runs(ctx, f)
}

func (q *quietStore) StepRuns(ctx context.Context, f agentrunner.StepRunFilter) ([]*agentrunner.StepRun, error) {
	q.calls.Add(1)
	defer q.done()
	return q.Store.StepRuns(ctx, f)
}

func (q *quietStore) Attempts(ctx context.Context, runID string) ([]*agentrunner.Attempt, error) {
	q.calls.Add(1)
	defer q.done()
	return q.Store.Attempts(ctx, runID)
}

func (q *quietStore) Control(ctx context.Context) (*agentrunner.Control, error) {
	q.calls.Add(1)
	defer q.done()
	return q.Store.Control(ctx)
}

func (q *quietStore) done() {
	q.finished.Add(1)
	q.calls.Add(-1)
}

// quiet installs a quietStore in the harness.
func quiet(h *harness) *quietStore {
	q := &quietStore{}
	h.options = func(o *scheduler.Options) {
		q.Store = o.Store
		o.Store = q
	}
	return q
}

// wait waits until no store call was made or in flight for 50ms.
func (q *quietStore) wait(t *testing.T) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for last := int64(-1); ; {
		n := q.finished.Load()
		if n == last && q.calls.Load() == 0 {
			return
		}
		last = n
		if time.Now().After(deadline) {
			t.Fatal("the scheduler's loop never waited")
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestAnAttemptThatOutlivesItsTimeoutStallsTheScheduler: the step's kind
// ignores its context. A minute after that context ended (its timeout,
// and a minute to record its outcome) the scheduler counts as stalled by
// how much later it is, and the watchdog says so once that is more than
// its grace.
func TestAnAttemptThatOutlivesItsTimeoutStallsTheScheduler(t *testing.T) {
	k, release := holdStep("hang")
	p := &agentrunner.Pipeline{Name: "hung", Start: "hang", Steps: steps(&agentrunner.Step{ID: "hang", Next: agentrunner.EndStep, Timeout: time.Second})}
	h := newHarness(t, k, p)
	clock := &manualClock{now: noon}
	h.clock = clock
	q := quiet(h)
	h.run()
	var once sync.Once
	free := func() { once.Do(func() { close(release) }) }
	t.Cleanup(free) // before the scheduler stops, which waits for its workers
	id := h.startRun("hung", nil)
	waitCalls(t, k, 1)
	q.wait(t)
	clock.Advance(time.Second + 2*time.Minute)
	if late := h.sched.Stalled(); late != 0 {
		t.Fatalf("Stalled a minute after the attempt's context ended: %s, want 0", late)
	}
	q.wait(t)
	clock.Advance(20 * time.Second)
	if late := h.sched.Stalled(); late != 20*time.Second {
		t.Fatalf("Stalled 20s later: %s, want 20s", late)
	}

	stalled := make(chan time.Duration, 1)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go scheduler.Watchdog(ctx, clock, h.sched, 30*time.Second, 5*time.Second, func(late time.Duration) { stalled <- late })
	var late time.Duration
	for deadline := time.Now().Add(30 * time.Second); late == 0; {
		clock.Advance(time.Second) // fires the watchdog's checks once they wait
		select {
		case late = <-stalled:
		case <-time.After(5 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatal("the watchdog did not report the stall")
		}
	}
	if late <= 30*time.Second || late > 40*time.Second {
		t.Errorf("the watchdog reported %s late, want just over its grace of 30s", late)
	}
	free()
	h.waitDone(id)
	if late := h.sched.Stalled(); late != 0 {
		t.Errorf("Stalled once the attempt returned: %s", late)
	}
}

// TestWaitingForAPersonOrForWorkIsNoStall: a gate that waits for hours,
// and a scheduler with nothing to do, are not stalled.
func TestWaitingForAPersonOrForWorkIsNoStall(t *testing.T) {
	h := newHarness(t, &scriptKind{}, approval(nil))
	clock := &manualClock{now: noon}
	h.clock = clock
	q := quiet(h)
	h.run()
	q.wait(t)
	clock.Advance(3 * time.Hour)
	if late := h.sched.Stalled(); late != 0 {
		t.Fatalf("an idle scheduler is stalled by %s", late)
	}
	id := h.startRun("approval", nil)
	h.waitGate(id, "signoff")
	q.wait(t)
	clock.Advance(3 * time.Hour)
	if late := h.sched.Stalled(); late != 0 {
		t.Errorf("a scheduler whose run waits at a gate is stalled by %s", late)
	}
}

// hungStore is a store whose commits hang while it is armed.
type hungStore struct {
	scheduler.Store
	mu      sync.Mutex
	hang    chan struct{}
	entered chan struct{}
}

func (s *hungStore) ApplyAll(ctx context.Context, chs ...*agentrunner.Change) error {
	s.mu.Lock()
	hang := s.hang
	s.mu.Unlock()
	if hang != nil {
		s.entered <- struct{}{}
		<-hang
	}
	return s.Store.ApplyAll(ctx, chs...)
}

func (s *hungStore) ApplyGroup(ctx context.Context, chs ...*agentrunner.Change) ([]error, error) {
	s.mu.Lock()
	hang := s.hang
	s.mu.Unlock()
	if hang != nil {
		s.entered <- struct{}{}
		<-hang
	}
	return s.Store.ApplyGroup(ctx, chs...)
}

// TestAStoreCallThatHangsStallsTheScheduler: a commit that does not
// return for more than a minute stalls the scheduler; once it returns,
// the scheduler is fine again.
func TestAStoreCallThatHangsStallsTheScheduler(t *testing.T) {
	h := newHarness(t, &scriptKind{}, pair("two"))
	clock := &manualClock{now: noon}
	h.clock = clock
	hung := &hungStore{hang: make(chan struct{}), entered: make(chan struct{}, 1)}
	h.options = func(o *scheduler.Options) {
		hung.Store = o.Store
		o.Store = hung
	}
	h.run()
	cmd, err := h.command(agentrunner.CommandStartRun, "", map[string]any{"pipeline": "two"})
	if err != nil {
		t.Fatal(err)
	}
	<-hung.entered
	clock.Advance(time.Minute + 15*time.Second)
	if late := h.sched.Stalled(); late != 15*time.Second {
		t.Errorf("Stalled in a commit that hangs for 1m15s: %s, want 15s", late)
	}
	hung.mu.Lock()
	close(hung.hang)
	hung.hang = nil
	hung.mu.Unlock()
	id := h.await(cmd)
	h.waitDone(id)
	if late := h.sched.Stalled(); late != 0 {
		t.Errorf("Stalled after the commit returned: %s", late)
	}
}
