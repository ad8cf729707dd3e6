package scheduler_test

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
	"github.com/agentrunner/agentrunner/sqlite"
)

// sleepKind is a mock agent that takes a fixed time and produces nothing.
type sleepKind time.Duration

func (d sleepKind) Run(ctx context.Context, _ *agentrunner.StepAttempt) (*agentrunner.StepResult, error) {
	select {
	case <-time.After(time.Duration(d)):
		return &agentrunner.StepResult{}, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// BenchmarkRunsInFlight keeps AGENTRUNNER_BENCH_RUNS runs (default 1,000)
// of a 5-step pipeline in flight, each step a mock agent that takes 50 ms,
// on SQLite with synchronous=FULL in TMPDIR, and reports step transitions
// per second (a step run closed and its successor opened), store commits
// per transition (group commit puts many in one) and the process's peak
// RSS.
//
//	TMPDIR=<dir on the disk to measure> go test -run '^$' -bench RunsInFlight -benchtime 3x -count 5 ./scheduler/
func BenchmarkRunsInFlight(b *testing.B) {
	runs := 1000
	if n, err := strconv.Atoi(os.Getenv("AGENTRUNNER_BENCH_RUNS")); err == nil && n > 0 {
		runs = n
	}
	const stepsPerRun = 5
	p := &agentrunner.Pipeline{Name: "bench", Start: "s1", Steps: steps(
		&agentrunner.Step{ID: "s1", Next: "s2", Kind: "sleep"},
		&agentrunner.Step{ID: "s2", Next: "s3", Kind: "sleep"},
		&agentrunner.Step{ID: "s3", Next: "s4", Kind: "sleep"},
		&agentrunner.Step{ID: "s4", Next: "s5", Kind: "sleep"},
		&agentrunner.Step{ID: "s5", Next: agentrunner.EndStep, Kind: "sleep"},
	)}
	var elapsed time.Duration
	var commits, transitions int64
	for i := 0; i < b.N; i++ {
		e, c, t := benchRound(b, p, runs)
		elapsed += e
		commits += c
		transitions += t
	}
	stepTransitions := float64(b.N * runs * stepsPerRun)
	b.ReportMetric(stepTransitions/elapsed.Seconds(), "transitions/s")
	b.ReportMetric(float64(commits)/stepTransitions, "commits/transition")
	b.ReportMetric(float64(transitions)/stepTransitions, "changes/transition")
	if rss := peakRSS(); rss > 0 {
		b.ReportMetric(float64(rss)/(1<<20), "peak-rss-MB")
	}
}

// benchRound starts runs runs at once, waits until every one completed
// and returns the time that took, the commits and the scheduler's
// transitions.
func benchRound(b *testing.B, p *agentrunner.Pipeline, runs int) (time.Duration, int64, int64) {
	b.StopTimer()
	dir, err := os.MkdirTemp("", "agentrunner-sched-bench-")
	if err != nil {
		b.Fatal(err)
	}
	defer os.RemoveAll(dir)
	st, err := sqlite.Open(context.Background(), filepath.Join(dir, "state.db"))
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	var completed atomic.Int64
	done := make(chan struct{})
	s, err := scheduler.New(scheduler.Options{
		Store: st, Pipelines: map[string]*agentrunner.Pipeline{p.Name: p}, MaxAttempts: runs,
		Kinds:  map[string]agentrunner.StepKind{"sleep": sleepKind(50 * time.Millisecond)},
		RunDir: func(p, id string) string { return filepath.Join(dir, "runs", p, id) },
		AttemptDir: func(runID, step string, n int) string {
			return filepath.Join(dir, "attempts", runID, fmt.Sprintf("%s-%d", step, n))
		},
		OnEvent: func(ev *agentrunner.Event) {
			if ev.Type == scheduler.EventRunCompleted && completed.Add(1) == int64(runs) {
				close(done)
			}
		},
	})
	if err != nil {
		b.Fatal(err)
	}
	for range runs {
		c := &agentrunner.Command{Kind: agentrunner.CommandStartRun, Args: map[string]any{"pipeline": p.Name}, CreatedAt: time.Now().UTC()}
		if err := st.AddCommand(context.Background(), c); err != nil {
			b.Fatal(err)
		}
	}
	commits0 := st.Commits()
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	b.StartTimer()
	start := time.Now()
	go func() { errc <- s.Run(ctx) }()
	select {
	case <-done:
	case err := <-errc:
		b.Fatalf("the scheduler stopped: %v", err)
	case <-time.After(10 * time.Minute):
		b.Fatalf("only %d of %d runs completed in 10 minutes", completed.Load(), runs)
	}
	elapsed := time.Since(start)
	b.StopTimer()
	cancel()
	if err := <-errc; err != nil {
		b.Fatal(err)
	}
	return elapsed, st.Commits() - commits0, s.Stats().Transitions
}

// peakRSS is the process's peak resident set size in bytes (Linux), 0
// where the system does not say.
func peakRSS() int64 {
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
