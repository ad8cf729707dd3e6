package http_test

import (
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/agentrunner/agentrunner"
	arhttp "github.com/agentrunner/agentrunner/http"
	"github.com/agentrunner/agentrunner/internal/runtest"
)

// BenchmarkStatusWithRunsInFlight measures GET /api/status with its runs
// summary while 1,000 runs are unfinished (900 running, 100 of them at a
// waiting gate, and 100 queued): the summary reads them all.
func BenchmarkStatusWithRunsInFlight(b *testing.B) {
	store := openStore(b)
	started := time.Date(2026, 11, 24, 0, 0, 0, 0, time.UTC)
	var chs []*agentrunner.Change
	for i := range 1000 {
		run := &agentrunner.Run{ID: fmt.Sprintf("review-%06d", i+1), Pipeline: "review", Status: agentrunner.RunRunning,
			Dir: b.TempDir(), StartedAt: started, Inputs: map[string]any{"topic": "durable agents"}}
		ch := &agentrunner.Change{Runs: []*agentrunner.Run{run}}
		switch {
		case i >= 900:
			run.Status = agentrunner.RunQueued
		case i%9 == 0:
			ch.StepRuns = []*agentrunner.StepRun{{RunID: run.ID, Step: "signoff", Visit: 1, Status: agentrunner.StepRunWaiting, OpenedAt: started}}
		default:
			ch.StepRuns = []*agentrunner.StepRun{{RunID: run.ID, Step: "draft", Visit: 1, Status: agentrunner.StepRunOpen, OpenedAt: started}}
		}
		chs = append(chs, ch)
	}
	if err := store.ApplyAll(b.Context(), chs...); err != nil {
		b.Fatal(err)
	}
	srv := newServer(b, arhttp.Options{Store: store, Config: testConfig(), Logger: slog.New(slog.DiscardHandler),
		Pipelines: runtest.Pipelines(runtest.ReviewPipeline())})
	h := srv.Handler()
	b.ResetTimer()
	for b.Loop() {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, localRequest(http.MethodGet, "/api/status", nil))
		if rec.Code != http.StatusOK {
			b.Fatalf("GET /api/status: %d %s", rec.Code, rec.Body)
		}
	}
}
