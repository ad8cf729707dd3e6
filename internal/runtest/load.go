package runtest

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentrunner/agentrunner"
	"github.com/agentrunner/agentrunner/scheduler"
)

// KindSleep is the step kind of SleepKind in ChainPipeline.
const KindSleep = "sleep"

// SleepKind is a mock agent that takes a fixed time and produces nothing.
type SleepKind time.Duration

// Run waits the kind's time, or until the run ends.
func (d SleepKind) Run(ctx context.Context, _ *agentrunner.StepAttempt) (*agentrunner.StepResult, error) {
	select {
	case <-time.After(time.Duration(d)):
		return &agentrunner.StepResult{}, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// ChainPipeline is a pipeline of n steps of KindSleep, s1 to sn, each
// followed by the next.
func ChainPipeline(name string, n int) *agentrunner.Pipeline {
	p := &agentrunner.Pipeline{Name: name, Start: "s1", Steps: map[string]*agentrunner.Step{}}
	for i := 1; i <= n; i++ {
		next := fmt.Sprintf("s%d", i+1)
		if i == n {
			next = agentrunner.EndStep
		}
		id := fmt.Sprintf("s%d", i)
		p.Steps[id] = &agentrunner.Step{ID: id, Next: next, Kind: KindSleep}
	}
	return p
}

// Load is many runs of one pipeline in flight at once, as the benchmarks
// measure them: the commands that start them are written first, then
// the scheduler is started, so every run is queued before the first one
// runs.
type Load struct {
	// Scheduler runs the load; its Stats count the transitions.
	Scheduler *scheduler.Scheduler

	runs      int
	completed atomic.Int64
	done      chan struct{}
}

// NewLoad writes the commands that start runs runs of p into store and
// makes the scheduler that will run them, with at most runs attempts at
// once and kind for the steps of KindSleep; runs' directories are under
// dir.
func NewLoad(tb testing.TB, store agentrunner.Store, dir string, p *agentrunner.Pipeline, kind agentrunner.StepKind, runs int) *Load {
	tb.Helper()
	l := &Load{runs: runs, done: make(chan struct{})}
	s, err := scheduler.New(scheduler.Options{
		Store: store, Pipelines: Pipelines(p), MaxAttempts: runs,
		Kinds:  map[string]agentrunner.StepKind{KindSleep: kind},
		RunDir: func(p, id string) string { return filepath.Join(dir, "runs", p, id) },
		AttemptDir: func(runDir, step string, n int) string {
			return filepath.Join(runDir, "attempts", fmt.Sprintf("%s-%d", step, n))
		},
		OnEvent: l.onEvent,
	})
	if err != nil {
		tb.Fatal(err)
	}
	l.Scheduler = s
	for range runs {
		c := &agentrunner.Command{Kind: agentrunner.CommandStartRun, Args: map[string]any{"pipeline": p.Name}, CreatedAt: time.Now().UTC()}
		if err := store.AddCommand(context.Background(), c); err != nil {
			tb.Fatal(err)
		}
	}
	return l
}

func (l *Load) onEvent(ev *agentrunner.Event) {
	if ev.Type == scheduler.EventRunCompleted && l.completed.Add(1) == int64(l.runs) {
		close(l.done)
	}
}

// Run starts the scheduler, waits until every run completed (at most
// limit), stops the scheduler and returns the time from its start to the
// last run's completion.
func (l *Load) Run(tb testing.TB, limit time.Duration) time.Duration {
	tb.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	errc := make(chan error, 1)
	start := time.Now()
	go func() { errc <- l.Scheduler.Run(ctx) }()
	select {
	case <-l.done:
	case err := <-errc:
		tb.Fatalf("the scheduler stopped: %v", err)
	case <-time.After(limit):
		cancel()
		<-errc
		tb.Fatalf("only %d of %d runs completed in %v", l.completed.Load(), l.runs, limit)
	}
	elapsed := time.Since(start)
	cancel()
	if err := <-errc; err != nil {
		tb.Fatal(err)
	}
	return elapsed
}

// PeakRSS is the process's peak resident set size in bytes (VmHWM on
// Linux), 0 where the system does not say.
func PeakRSS() int64 {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "VmHWM:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
			return kb << 10
		}
	}
	return 0
}
