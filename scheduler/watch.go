package scheduler

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/agentrunner/agentrunner"
)

// Slack before the scheduler counts as stalled: a store call that takes
// longer than storeTimeout, an attempt whose worker has not returned
// attemptSlack after its context ended (a step kind that ignores it).
const (
	storeTimeout = time.Minute
	attemptSlack = time.Minute
)

// watch keeps what Stalled looks at; it is read from other goroutines.
type watch struct {
	// call is when the loop's current store call began (unix
	// nanoseconds), 0 between calls.
	call atomic.Int64
	mu   sync.Mutex
	// due are the deadlines of the running attempts that have a timeout,
	// by attempt.
	due map[*agentrunner.StepAttempt]time.Time
}

// track records that a worker runs a with a timeout, until the returned
// func is called. An attempt without a timeout has no deadline to miss.
func (s *Scheduler) track(a *agentrunner.StepAttempt, timeout time.Duration) func() {
	if timeout <= 0 {
		return func() {}
	}
	w := &s.watch
	w.mu.Lock()
	w.due[a] = s.clock.Now().Add(timeout)
	w.mu.Unlock()
	return func() {
		w.mu.Lock()
		delete(w.due, a)
		w.mu.Unlock()
	}
}

// Stalled reports how far past its deadline the scheduler's work is, or
// 0: a running attempt whose worker has not returned a minute after its
// timeout, or the loop stuck in one store call for more than a minute.
// Waiting for a person (a gate), for a backoff or for work is no stall.
func (s *Scheduler) Stalled() time.Duration {
	now := s.clock.Now()
	var late time.Duration
	if c := s.watch.call.Load(); c != 0 {
		late = now.Sub(time.Unix(0, c).Add(storeTimeout))
	}
	s.watch.mu.Lock()
	defer s.watch.mu.Unlock()
	for _, due := range s.watch.due {
		late = max(late, now.Sub(due.Add(attemptSlack)))
	}
	return max(late, 0)
}

// Staller reports how far past its deadline its work is (Stalled).
type Staller interface {
	Stalled() time.Duration
}

// Watchdog calls onStall once s has stalled for more than grace, checking
// every interval on clock, until ctx ends. The runner's onStall logs and
// exits non-zero, so a supervisor restarts it and the scheduler resumes
// where it was.
func Watchdog(ctx context.Context, clock agentrunner.Clock, s Staller, grace, interval time.Duration, onStall func(late time.Duration)) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-clock.After(interval):
		}
		if late := s.Stalled(); late > grace {
			onStall(late)
			return
		}
	}
}

// watchedStore times the scheduler's store calls for Stalled. Only the
// loop calls its store, one call at a time.
type watchedStore struct {
	Store
	s *Scheduler
}

// timed runs one store call, marking the loop busy in it meanwhile.
func timed[T any](w *watchedStore, call func() (T, error)) (T, error) {
	w.s.watch.call.Store(w.s.clock.Now().UnixNano())
	defer w.s.watch.call.Store(0)
	return call()
}

func (w *watchedStore) ApplyAll(ctx context.Context, chs ...*agentrunner.Change) error {
	_, err := timed(w, func() (struct{}, error) { return struct{}{}, w.Store.ApplyAll(ctx, chs...) })
	return err
}

func (w *watchedStore) ApplyGroup(ctx context.Context, chs ...*agentrunner.Change) ([]error, error) {
	return timed(w, func() ([]error, error) { return w.Store.ApplyGroup(ctx, chs...) })
}

func (w *watchedStore) Run(ctx context.Context, id string) (*agentrunner.Run, error) {
	return timed(w, func() (*agentrunner.Run, error) { return w.Store.Run(ctx, id) })
}

func (w *watchedStore) Runs(ctx context.Context, f agentrunner.RunFilter) ([]*agentrunner.Run, error) {
	return timed(w, func() ([]*agentrunner.Run, error) { return w.Store.Runs(ctx, f) })
}

func (w *watchedStore) StepRuns(ctx context.Context, f agentrunner.StepRunFilter) ([]*agentrunner.StepRun, error) {
	return timed(w, func() ([]*agentrunner.StepRun, error) { return w.Store.StepRuns(ctx, f) })
}

func (w *watchedStore) Attempts(ctx context.Context, runID string) ([]*agentrunner.Attempt, error) {
	return timed(w, func() ([]*agentrunner.Attempt, error) { return w.Store.Attempts(ctx, runID) })
}

func (w *watchedStore) PendingCommands(ctx context.Context) ([]*agentrunner.Command, error) {
	return timed(w, func() ([]*agentrunner.Command, error) { return w.Store.PendingCommands(ctx) })
}

func (w *watchedStore) Control(ctx context.Context) (*agentrunner.Control, error) {
	return timed(w, func() (*agentrunner.Control, error) { return w.Store.Control(ctx) })
}
