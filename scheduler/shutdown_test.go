package scheduler_test

import (
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/agentrunner/agentrunner"
	"github.com/agentrunner/agentrunner/internal/clocktest"
	"github.com/agentrunner/agentrunner/internal/heartbeat"
	"github.com/agentrunner/agentrunner/internal/syncbuf"
	"github.com/agentrunner/agentrunner/scheduler"
)

// heldKind holds each attempt until the test releases it or its context
// ends; stopped, it fails as interrupted, as an agent process does.
type heldKind struct {
	started chan int // attempt numbers, as they start
	release chan struct{}
}

func newHeldKind() *heldKind {
	return &heldKind{started: make(chan int, 16), release: make(chan struct{})}
}

func (k *heldKind) Run(ctx context.Context, a *agentrunner.StepAttempt) (*agentrunner.StepResult, error) {
	k.started <- a.Attempt.Number
	select {
	case <-k.release:
		return &agentrunner.StepResult{Output: []byte("done")}, nil
	case <-ctx.Done():
		return nil, agentrunner.Fail(agentrunner.ClassInterrupted, "agent interrupted: %v", context.Cause(ctx))
	}
}

// waitStarted waits for the kind's next attempt to start and returns its
// number.
func (k *heldKind) waitStarted(t *testing.T) int {
	t.Helper()
	select {
	case n := <-k.started:
		return n
	case <-time.After(30 * time.Second):
		t.Fatal("no attempt started")
		return 0
	}
}

// heldHarness runs pipeline "deploy": work (held) then after (scripted),
// with the shutdown grace and the log in the returned buffer.
func heldHarness(t *testing.T, grace time.Duration) (*harness, *heldKind, *syncbuf.Buffer) {
	held := newHeldKind()
	p := &agentrunner.Pipeline{Name: "deploy", Start: "work", Steps: steps(
		&agentrunner.Step{ID: "work", Kind: "held", Next: "after", Retry: agentrunner.RetryPolicy{Max: 0}},
		&agentrunner.Step{ID: "after", Next: agentrunner.EndStep},
	)}
	h := newHarness(t, &scriptKind{}, p)
	h.kinds = map[string]agentrunner.StepKind{"held": held}
	h.maxInt = 1 // a second interruption would fail the step
	logs := &syncbuf.Buffer{}
	h.options = func(o *scheduler.Options) {
		o.ShutdownGrace = func() time.Duration { return grace }
		o.Logger = slog.New(slog.NewTextHandler(logs, nil))
	}
	return h, held, logs
}

// attemptList lists a run's attempts as "step#number:status[:class]".
func attemptList(t *testing.T, h *harness, run string) []string {
	t.Helper()
	atts, err := h.store.Attempts(context.Background(), run)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, a := range atts {
		s := fmt.Sprintf("%s#%d:%s", a.Step, a.Number, a.Status)
		if a.ErrorClass != "" {
			s += ":" + string(a.ErrorClass)
		}
		if !a.NotBefore.IsZero() {
			s += ":backoff"
		}
		out = append(out, s)
	}
	return out
}

// TestAShutdownLetsTheRunningAttemptFinishWithinTheGrace: SIGTERM while
// work runs, with a grace long enough. work finishes and is committed as
// succeeded; after, which it opens, does not start but waits, pending,
// and runs at the next start.
func TestAShutdownLetsTheRunningAttemptFinishWithinTheGrace(t *testing.T) {
	h, held, logs := heldHarness(t, time.Hour)
	h.run()
	id := h.startRun("deploy", nil)
	held.waitStarted(t)
	stopped := make(chan struct{})
	go func() { h.shutdown(); close(stopped) }()
	select {
	case <-stopped:
		t.Fatal("the scheduler stopped before the running attempt finished, within its grace")
	case <-time.After(200 * time.Millisecond):
	}
	close(held.release)
	<-stopped
	if diff := cmp.Diff([]string{"work#1:succeeded", "after#1:pending"}, attemptList(t, h, id)); diff != "" {
		t.Fatalf("attempts after the shutdown (-want +got):\n%s", diff)
	}
	if n := len(h.kind.Calls()); n != 0 {
		t.Errorf("after ran %d times during the shutdown, want 0", n)
	}
	if got := logs.String(); !strings.Contains(got, `msg="shutting down: `) || !strings.Contains(got, "attempts=1 grace=1h0m0s") {
		t.Errorf("no line announces the shutdown with its attempts and grace:\n%s", got)
	}
	h.run()
	if r, _ := h.waitDone(id); r.Status != agentrunner.RunCompleted {
		t.Fatalf("run %s after the restart: %s (%s)", id, r.Status, r.Error)
	}
	if diff := cmp.Diff([]string{"work#1:succeeded", "after#1:succeeded"}, attemptList(t, h, id)); diff != "" {
		t.Errorf("attempts (-want +got):\n%s", diff)
	}
}

// TestShutdownsDuringAStepCostNoRetry: a step with no retries and one
// interruption allowed is shut down three times while it runs, each time
// after its grace (or at once, hurried by a second signal). Each attempt
// is recorded as shut down, the next one is pending with no backoff and
// starts at once at the next start, and the fourth one completes the run:
// no retry was spent and no interruption counted.
func TestShutdownsDuringAStepCostNoRetry(t *testing.T) {
	tests := []struct {
		name  string
		grace time.Duration
		hurry bool
	}{
		{name: "after the grace", grace: 20 * time.Millisecond},
		{name: "hurried by a second signal", grace: time.Hour, hurry: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h, held, logs := heldHarness(t, tt.grace)
			h.run()
			id := h.startRun("deploy", nil)
			var want []string
			for i := 1; i <= 3; i++ {
				if n := held.waitStarted(t); n != i {
					t.Fatalf("attempt %d started, want %d", n, i)
				}
				if tt.hurry {
					go func() { time.Sleep(50 * time.Millisecond); h.sched.Hurry() }()
				}
				h.shutdown()
				want = append(want, fmt.Sprintf("work#%d:failed:shutdown", i))
				if diff := cmp.Diff(append(want, fmt.Sprintf("work#%d:pending", i+1)), attemptList(t, h, id)); diff != "" {
					t.Fatalf("attempts after shutdown %d (-want +got):\n%s", i, diff)
				}
				h.run()
			}
			held.waitStarted(t)
			close(held.release)
			if r, _ := h.waitDone(id); r.Status != agentrunner.RunCompleted {
				t.Fatalf("run %s: %s (%s), want completed", id, r.Status, r.Error)
			}
			want = append(want, "work#4:succeeded", "after#1:succeeded")
			if diff := cmp.Diff(want, attemptList(t, h, id)); diff != "" {
				t.Errorf("attempts (-want +got):\n%s", diff)
			}
			checkShutdownEvents(t, h, id)
			if got := logs.String(); strings.Contains(got, "level=ERROR") || strings.Contains(got, "level=WARN") {
				t.Errorf("the shutdowns logged problems:\n%s", got)
			}
		})
	}
}

// checkShutdownEvents checks that the run's shut-down attempts have each
// an attempt.interrupted event of class shutdown, at level info.
func checkShutdownEvents(t *testing.T, h *harness, id string) {
	t.Helper()
	evs, err := h.store.Events(context.Background(), agentrunner.EventFilter{CycleID: id, Type: agentrunner.EventAttemptInterrupted})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, ev := range evs {
		got = append(got, fmt.Sprintf("%v:%s:%s", ev.Details["attempt"], ev.Details["error_class"], ev.Level))
	}
	if diff := cmp.Diff([]string{"1:shutdown:info", "2:shutdown:info", "3:shutdown:info"}, got); diff != "" {
		t.Errorf("attempt.interrupted events (-want +got):\n%s", diff)
	}
}

// TestAnAttemptACrashCutShortEndsWhenTheRunnerWasLastAlive: the runner
// dies 30s into an attempt and starts again 10 minutes later. The
// interrupted attempt is recorded as ended when the runner was last known
// alive (its last heartbeat, or its run's newest event), not at the
// restart: its duration does not count the downtime.
func TestAnAttemptACrashCutShortEndsWhenTheRunnerWasLastAlive(t *testing.T) {
	t0 := time.Date(2026, 11, 22, 14, 0, 0, 0, time.UTC)
	tests := []struct {
		name      string
		heartbeat bool
		eventAt   time.Duration // a tool call's event, if not 0
		want      time.Duration // the attempt's recorded duration
	}{
		{name: "its last heartbeat", heartbeat: true, want: 30 * time.Second},
		{name: "the newest event of its run", eventAt: 20 * time.Second, want: 20 * time.Second},
		{name: "the later of both", heartbeat: true, eventAt: 32 * time.Second, want: 32 * time.Second},
		{name: "its start, when nothing else is known", want: 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clock := clocktest.New(t0)
			k := &scriptKind{block: map[string]bool{"work": true}}
			p := &agentrunner.Pipeline{Name: "long", Start: "work", Steps: steps(&agentrunner.Step{ID: "work", Next: agentrunner.EndStep})}
			h := newHarness(t, k, p)
			h.clock, h.poll = clock, 5*time.Millisecond
			beats := heartbeat.File{Path: filepath.Join(h.dir, "alive")}
			if tt.heartbeat {
				h.options = func(o *scheduler.Options) { o.Heartbeat = beats }
			}
			h.run()
			id := h.startRun("long", nil)
			waitCalls(t, k, 1)
			clock.Advance(30 * time.Second)
			if tt.heartbeat {
				waitBeat(t, beats, t0.Add(30*time.Second))
			}
			if tt.eventAt > 0 {
				ev := &agentrunner.Event{Timestamp: t0.Add(tt.eventAt), Type: "tool.called", CycleID: id, Step: "work", Level: agentrunner.LevelInfo, Details: map[string]any{}}
				if err := h.store.Apply(context.Background(), &agentrunner.Change{Events: []*agentrunner.Event{ev}}); err != nil {
					t.Fatal(err)
				}
			}
			h.stop() // a crash
			clock.Advance(10 * time.Minute)
			h.run()
			waitCalls(t, k, 2)
			atts, err := h.store.Attempts(context.Background(), id)
			if err != nil {
				t.Fatal(err)
			}
			a := atts[0]
			if a.ErrorClass != agentrunner.ClassInterrupted || a.EndedAt.Sub(a.StartedAt) != tt.want {
				t.Errorf("attempt 1: %s, from %s to %s (%v); want interrupted, lasting %v",
					a.ErrorClass, a.StartedAt.Format(time.TimeOnly), a.EndedAt.Format(time.TimeOnly), a.EndedAt.Sub(a.StartedAt), tt.want)
			}
			evs, _ := h.store.Events(context.Background(), agentrunner.EventFilter{CycleID: id, Type: agentrunner.EventAttemptInterrupted})
			if len(evs) != 1 || evs[0].Details["duration_ms"] != float64(tt.want.Milliseconds()) {
				t.Errorf("attempt.interrupted events %v, want one with duration_ms %d", evs, tt.want.Milliseconds())
			}
		})
	}
}

// waitBeat waits until the heartbeat says at.
func waitBeat(t *testing.T, beats heartbeat.File, at time.Time) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		last, err := beats.Last()
		if err == nil && last.Equal(at) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the heartbeat says %v (%v), want %v", last, err, at)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
