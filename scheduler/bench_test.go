package scheduler_test

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/agentrunner/agentrunner"
	"github.com/agentrunner/agentrunner/internal/runtest"
	"github.com/agentrunner/agentrunner/sqlite"
)

// BenchmarkRunsInFlight keeps AGENTRUNNER_BENCH_RUNS runs (default 1,000)
// of a 5-step pipeline in flight, each step a mock agent that takes 50 ms,
// on SQLite with synchronous=FULL in TMPDIR, and reports step transitions
// per second (a step run closed and its successor opened), store commits
// per transition (each commit is one fsync of the WAL; group commit puts
// many transitions in one) and the process's peak RSS.
//
//	TMPDIR=<dir on the disk to measure> go test -run '^$' -bench RunsInFlight -benchtime 3x -count 5 ./scheduler/
func BenchmarkRunsInFlight(b *testing.B) {
	runs := benchRuns()
	const stepsPerRun = 5
	p := runtest.ChainPipeline("bench", stepsPerRun)
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
	if rss := runtest.PeakRSS(); rss > 0 {
		b.ReportMetric(float64(rss)/(1<<20), "peak-rss-MB")
	}
}

// benchRuns is AGENTRUNNER_BENCH_RUNS, 1,000 if unset.
func benchRuns() int {
	if n, err := strconv.Atoi(os.Getenv("AGENTRUNNER_BENCH_RUNS")); err == nil && n > 0 {
		return n
	}
	return 1000
}

// benchRound runs runs runs of p at once over a new store in TMPDIR and
// returns the time until every one completed, the commits and the
// scheduler's transitions.
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
	l := runtest.NewLoad(b, st, dir, p, runtest.SleepKind(50*time.Millisecond), runs)
	commits0 := st.Commits()
	b.StartTimer()
	elapsed := l.Run(b, 10*time.Minute)
	b.StopTimer()
	return elapsed, st.Commits() - commits0, l.Scheduler.Stats().Transitions
}
