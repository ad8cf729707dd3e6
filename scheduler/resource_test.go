package scheduler_test

import (
	"context"
	"fmt"
	"io/fs"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/agentrunner/agentrunner"
	"github.com/agentrunner/agentrunner/internal/clocktest"
	"github.com/agentrunner/agentrunner/scheduler"
)

var noon = time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)

// diskFull is the error of a write to a full disk.
func diskFull(path string) error {
	return &fs.PathError{Op: "write", Path: path, Err: syscall.ENOSPC}
}

// TestAnAttemptThatRanOutOfAResourceIsTriedAgainWithoutSpendingARetry:
// attempts that fail for want of a resource are tried again after 1s, 2s,
// 4s … with their retry base moved up, so a step with no retries left
// still goes on; another failure in between starts the waits again.
func TestAnAttemptThatRanOutOfAResourceIsTriedAgainWithoutSpendingARetry(t *testing.T) {
	crash := agentrunner.Fail(agentrunner.ClassCrash, "the agent crashed")
	full := agentrunner.Fail(agentrunner.ClassCrash, "write prompt: %w", diskFull("prompt.md"))
	backoff := 3 * time.Second
	tests := []struct {
		name     string
		retries  int
		failures []error // of attempts 1, 2 …; the next one succeeds
		bases    []int
		waits    []time.Duration // between an attempt's end and the next one's NotBefore
	}{
		{"three in a row, no retries", 0, []error{full, full, full}, []int{0, 1, 2, 3}, []time.Duration{time.Second, 2 * time.Second, 4 * time.Second}},
		{"a crash in between starts the waits again", 1, []error{full, full, crash, full},
			[]int{0, 1, 2, 2, 3}, []time.Duration{time.Second, 2 * time.Second, backoff, time.Second}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			k := &scriptKind{}
			k.fail = func(a *agentrunner.StepAttempt) error {
				if n := a.Attempt.Number; n <= len(tt.failures) {
					return tt.failures[n-1]
				}
				return nil
			}
			p := &agentrunner.Pipeline{Name: "disk", Start: "work", Steps: steps(&agentrunner.Step{ID: "work", Next: agentrunner.EndStep,
				Retry: agentrunner.RetryPolicy{Max: tt.retries, Backoff: []time.Duration{backoff}}})}
			h := newHarness(t, k, p)
			h.clock = clocktest.New(noon)
			h.run()
			id := h.startRun("disk", nil)
			if r, _ := h.waitDone(id); r.Status != agentrunner.RunCompleted {
				t.Fatalf("run %s is %s (%s)", id, r.Status, r.Error)
			}
			atts, err := h.store.Attempts(context.Background(), id)
			if err != nil {
				t.Fatal(err)
			}
			var bases []int
			var waits []time.Duration
			for i, a := range atts {
				bases = append(bases, a.RetryBase)
				if i > 0 {
					waits = append(waits, a.NotBefore.Sub(atts[i-1].EndedAt))
				}
			}
			if diff := cmp.Diff(tt.bases, bases); diff != "" {
				t.Errorf("retry bases (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.waits, waits); diff != "" {
				t.Errorf("waits (-want +got):\n%s", diff)
			}
			evs, _ := h.store.Events(context.Background(), agentrunner.EventFilter{CycleID: id, Type: agentrunner.EventResourceExhausted})
			ev := evs[0]
			want := map[string]any{"resource": "disk space", "operation": "write prompt.md", "wait": "1s", "attempt": float64(1), "visit": float64(1), "pipeline": "disk"}
			delete(ev.Details, "error")
			if diff := cmp.Diff(want, ev.Details); diff != "" || ev.Step != "work" {
				t.Errorf("the first resource.exhausted event of step %s (-want +got):\n%s", ev.Step, diff)
			}
		})
	}
}

// fullStore is a store whose next commits fail for want of disk space.
type fullStore struct {
	scheduler.Store
	mu    sync.Mutex
	fails int
	// tries are the batches ApplyGroup and ApplyAll were given, by size.
	tries []int
}

func (f *fullStore) ApplyAll(ctx context.Context, chs ...*agentrunner.Change) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.tries = append(f.tries, len(chs))
	if f.fails > 0 {
		f.fails--
		return fmt.Errorf("commit: %w", diskFull("state.db-wal"))
	}
	return f.Store.ApplyAll(ctx, chs...)
}

func (f *fullStore) ApplyGroup(ctx context.Context, chs ...*agentrunner.Change) ([]error, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.tries = append(f.tries, len(chs))
	if f.fails > 0 {
		f.fails--
		return nil, fmt.Errorf("commit: %w", diskFull("state.db-wal"))
	}
	return f.Store.ApplyGroup(ctx, chs...)
}

func (f *fullStore) failNext(n int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.fails, f.tries = n, nil
}

// TestACommitThatRanOutOfDiskSpaceIsTriedAgainWhole: the batch that
// starts a run fails three times for want of disk space; the scheduler
// waits 1s, 2s, 4s and commits the same batch, then records what
// happened.
func TestACommitThatRanOutOfDiskSpaceIsTriedAgainWhole(t *testing.T) {
	h := newHarness(t, &scriptKind{}, pair("two"))
	clock := clocktest.New(noon)
	h.clock = clock
	full := &fullStore{}
	h.options = func(o *scheduler.Options) {
		full.Store = o.Store
		o.Store = full
	}
	h.run()
	full.failNext(3)
	id := h.startRun("two", nil)
	if r, _ := h.waitDone(id); r.Status != agentrunner.RunCompleted {
		t.Fatalf("run %s is %s (%s)", id, r.Status, r.Error)
	}
	full.mu.Lock()
	tries := full.tries[:4]
	full.mu.Unlock()
	if tries[0] != tries[3] {
		t.Errorf("the batch had %d changes, then %d when it was tried again", tries[0], tries[3])
	}
	var got []string
	for _, ev := range eventsOfType(t, h, agentrunner.EventResourceExhausted) {
		got = append(got, fmt.Sprintf("%s %s after %s", ev.Details["resource"], ev.Details["operation"], ev.Details["wait"]))
	}
	want := []string{"disk space write state.db-wal after 1s", "disk space write state.db-wal after 2s", "disk space write state.db-wal after 4s"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("resource.exhausted events (-want +got):\n%s", diff)
	}
}
