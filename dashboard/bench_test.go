package dashboard

import (
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/agentrunner/agentrunner"
	"github.com/agentrunner/agentrunner/config"
	arhttp "github.com/agentrunner/agentrunner/http"
	"github.com/agentrunner/agentrunner/internal/runtest"
	"github.com/agentrunner/agentrunner/sqlite"
)

// pageBudget is the time a page may take on the embedded store.
const pageBudget = 200 * time.Millisecond

// BenchmarkPages times each page of the dashboard on a store that holds
// 1,000 runs of a 5-step pipeline (every run with its step runs,
// attempts, events and an artifact; 100 of them in flight, 20 at a
// waiting gate), and fails a page whose mean time is over 200 ms.
//
//	go test -run '^$' -bench Pages ./dashboard/
func BenchmarkPages(b *testing.B) {
	h, run := seededDashboard(b, 1000)
	pages := []string{"/", "/runs", "/runs?status=running", "/runs/" + run, "/runs/" + run + "/artifacts/plan.md",
		"/runs/" + run + "/artifacts/plan.md?with_run=bench-000998", "/runs/" + run + "/steps/s3/attempts/2",
		"/gates", "/errors", "/audit", "/charts"}
	for _, page := range pages {
		b.Run(page, func(b *testing.B) {
			start := time.Now()
			n := 0
			for b.Loop() {
				rec := httptest.NewRecorder()
				req := httptest.NewRequest(http.MethodGet, "http://127.0.0.1"+page, nil)
				h.ServeHTTP(rec, req)
				if rec.Code != http.StatusOK {
					b.Fatalf("GET %s: %d\n%s", page, rec.Code, rec.Body)
				}
				n++
			}
			if mean := time.Since(start) / time.Duration(n); mean > pageBudget {
				b.Errorf("GET %s takes %v on average, over the budget of %v", page, mean, pageBudget)
			}
		})
	}
}

// seededDashboard serves the dashboard (without credentials) over a
// store seeded with runs runs, and returns the handler and the newest
// run's id.
func seededDashboard(b *testing.B, runs int) (http.Handler, string) {
	b.Helper()
	dir := b.TempDir()
	store, err := sqlite.Open(b.Context(), filepath.Join(dir, "state.db"))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { store.Close() })
	p := runtest.ChainPipeline("bench", 5)
	p.RunID = agentrunner.RunIDSeq
	p.Steps["gate"] = &agentrunner.Step{ID: "gate", Kind: agentrunner.KindGate, Next: agentrunner.EndStep}
	p.Steps["s5"].Next = "gate"
	pipelines := runtest.Pipelines(p)
	seed(b, store, runs)
	cfg := &config.Config{Name: "bench", Dir: dir, ArtifactsDir: filepath.Join(dir, "artifacts"), Agents: map[string]*config.Agent{"agent": {}}}
	cfg.Pipelines = map[string]*config.Pipeline{"bench": {}}
	cfg.Server.MaxBodyBytes = 1 << 20
	if err := os.MkdirAll(cfg.ArtifactsDir, 0o755); err != nil {
		b.Fatal(err)
	}
	api, err := arhttp.New(arhttp.Options{Store: store, Config: cfg, Logger: slog.New(slog.DiscardHandler), Pipelines: pipelines})
	if err != nil {
		b.Fatal(err)
	}
	dash, err := New(Options{Store: store, Config: cfg, Pipelines: pipelines, API: api})
	if err != nil {
		b.Fatal(err)
	}
	return api.Mount(dash).Handler(), fmt.Sprintf("bench-%06d", runs)
}

// seed writes runs runs: the oldest completed, the newest 100 in flight
// (every fifth of those at its gate), each with five step runs of one
// attempt each (the third step's retried once), their events and a
// plan.md.
func seed(b *testing.B, store *sqlite.Store, runs int) {
	b.Helper()
	t0 := time.Now().UTC().Add(-time.Duration(runs) * time.Minute)
	var chs []*agentrunner.Change
	for i := 1; i <= runs; i++ {
		chs = append(chs, seedRun(i, runs, t0.Add(time.Duration(i)*time.Minute)))
		if len(chs) == 100 {
			if err := store.ApplyAll(b.Context(), chs...); err != nil {
				b.Fatal(err)
			}
			chs = nil
		}
	}
	if err := store.ApplyAll(b.Context(), chs...); err != nil {
		b.Fatal(err)
	}
}

// seedRun is one run of the seed, started at start.
func seedRun(i, runs int, start time.Time) *agentrunner.Change {
	id := fmt.Sprintf("bench-%06d", i)
	inFlight := i > runs-100
	run := &agentrunner.Run{ID: id, Pipeline: "bench", Status: agentrunner.RunCompleted, StartedAt: start, EndedAt: start.Add(50 * time.Second),
		Dir: "/nonexistent/" + id}
	ch := &agentrunner.Change{Runs: []*agentrunner.Run{run}}
	at := start
	for s := 1; s <= 5; s++ {
		step := fmt.Sprintf("s%d", s)
		sr := &agentrunner.StepRun{RunID: id, Step: step, Visit: 1, Status: agentrunner.StepRunSucceeded, OpenedAt: at, EndedAt: at.Add(9 * time.Second)}
		if s > 1 {
			sr.From = fmt.Sprintf("s%d#1", s-1)
		}
		ch.StepRuns = append(ch.StepRuns, sr)
		n := 1
		if s == 3 {
			ch.Attempts = append(ch.Attempts, &agentrunner.Attempt{CycleID: id, Step: step, Number: 1, Visit: 1, Agent: "agent",
				Status: agentrunner.AttemptFailed, ErrorClass: agentrunner.ClassTimeout, StartedAt: at, EndedAt: at.Add(2 * time.Second)})
			n = 2
		}
		ch.Attempts = append(ch.Attempts, &agentrunner.Attempt{CycleID: id, Step: step, Number: n, Visit: 1, Agent: "agent",
			Status: agentrunner.AttemptSucceeded, StartedAt: at.Add(3 * time.Second), EndedAt: at.Add(9 * time.Second),
			Usage: agentrunner.Usage{InputTokens: 1200, OutputTokens: 400, ToolCalls: 2}})
		ch.Events = append(ch.Events, &agentrunner.Event{Timestamp: at, Type: agentrunner.EventAttemptStarted, Step: step, CycleID: id, Level: agentrunner.LevelInfo},
			&agentrunner.Event{Timestamp: at.Add(9 * time.Second), Type: agentrunner.EventAttemptSucceeded, Step: step, CycleID: id, Level: agentrunner.LevelInfo})
		at = at.Add(10 * time.Second)
	}
	ch.Events = append(ch.Events, &agentrunner.Event{Timestamp: start.Add(25 * time.Second), Type: agentrunner.EventAttemptFailed, Step: "s3", CycleID: id,
		Level: agentrunner.LevelWarn, Details: map[string]any{"class": "timeout"}})
	plan := fmt.Sprintf("# Plan %d\n\n## Hypotheses\n- one\n- two\n\n## Questions\n- why %d?\n", i, i)
	ch.Files = []*agentrunner.StoredFile{{RunID: id, Step: "s1", Visit: 1, Attempt: 1, Kind: agentrunner.FileArtifact, Name: "plan.md",
		Data: []byte(plan), Size: int64(len(plan)), SHA256: "00", CreatedAt: start.Add(9 * time.Second)}}
	if inFlight {
		run.Status, run.EndedAt = agentrunner.RunRunning, time.Time{}
		last := ch.StepRuns[len(ch.StepRuns)-1]
		last.Status, last.EndedAt = agentrunner.StepRunOpen, time.Time{}
		if i%5 == 0 {
			last.Status = agentrunner.StepRunSucceeded
			last.EndedAt = at
			ch.StepRuns = append(ch.StepRuns, &agentrunner.StepRun{RunID: id, Step: "gate", Visit: 1, Status: agentrunner.StepRunWaiting, OpenedAt: at, From: "s5#1"})
		}
	}
	return ch
}
