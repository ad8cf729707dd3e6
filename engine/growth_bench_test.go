package engine

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/agentrunner/agentrunner"
	"github.com/agentrunner/agentrunner/internal/dbtest"
)

// BenchmarkDatabaseGrowth runs b.N cycles of the benchSteps-step pipeline
// (one op is a cycle, an hour apart on the bench's clock) and measures the
// state database after them: its size (main file and WAL, checkpointed)
// per cycle and per 1,000 cycles, how much of it the free list holds, the
// size of a compacted copy, and the growth per cycle over the second half
// of the run, which is what the file keeps growing by once a retention
// window is full. With a retention, the events and the stored prompts and
// validation reports older than that many cycles are pruned every 10
// cycles, as serve's events.retention does every hour.
//
//	go test -run '^$' -bench DatabaseGrowth -benchtime 1000x ./engine/
func BenchmarkDatabaseGrowth(b *testing.B) {
	for _, keep := range []int{0, 100} {
		name := "no-retention"
		if keep > 0 {
			name = fmt.Sprintf("retention-%d-cycles", keep)
		}
		b.Run(name, func(b *testing.B) {
			path := filepath.Join(benchDir(b), "state.db")
			e, store, clock := benchEngineAt(b, benchShape{}, path)
			ctx := context.Background()
			var half dbtest.Size
			for i := 0; i < b.N; i++ {
				if c, err := e.RunOnce(ctx); err != nil || c.Status != agentrunner.CycleCompleted {
					b.Fatalf("cycle: %v %+v", err, c)
				}
				clock.Advance(time.Hour)
				if keep > 0 && i%10 == 9 {
					pruneBefore(b, store, clock.Now().Add(-time.Duration(keep)*time.Hour))
				}
				if i+1 == b.N/2 {
					b.StopTimer()
					half = dbtest.Measure(b, path)
					b.StartTimer()
				}
			}
			b.StopTimer()
			reportGrowth(b, dbtest.Measure(b, path), half)
		})
	}
}

// pruneBefore prunes what events.retention prunes.
func pruneBefore(b *testing.B, store agentrunner.Store, before time.Time) {
	ctx := context.Background()
	if _, err := store.PruneEvents(ctx, before); err != nil {
		b.Fatal(err)
	}
	if _, err := store.PruneFiles(ctx, before, agentrunner.FilePrompt, agentrunner.FileValidation); err != nil {
		b.Fatal(err)
	}
}

// reportGrowth reports the size of a database after b.N cycles, and
// half, its size after b.N/2.
func reportGrowth(b *testing.B, end, half dbtest.Size) {
	n := float64(b.N)
	b.ReportMetric(float64(end.Bytes)/n, "db-B/cycle")
	b.ReportMetric(float64(end.Bytes)/n*1000/(1<<20), "db-MiB/1000cycles")
	b.ReportMetric(float64(end.Vacuumed)/n, "vacuumed-B/cycle")
	b.ReportMetric(float64(end.FreePages)/float64(max(end.Pages, 1))*100, "free-%")
	if h := b.N / 2; h > 0 && b.N-h > 0 {
		b.ReportMetric(float64(end.Bytes-half.Bytes)/float64(b.N-h), "growth-B/cycle")
	}
}
