package http_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
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

// BenchmarkStatusUnderLoad is the scheduler's BenchmarkRunsInFlight with
// a server on 127.0.0.1 in front of its store: 1,000 runs of a 5-step
// pipeline in flight, each step a mock agent that takes 50 ms, on SQLite
// with synchronous=FULL in TMPDIR, while 4 clients poll GET /api/status
// every 10 ms each during the whole load. It reports step transitions
// per second, store commits per transition, the process's peak RSS and
// the p50 and p99 of the status's latency.
//
//	TMPDIR=<dir on the disk to measure> go test -run '^$' -bench StatusUnderLoad -benchtime 1x -count 5 ./http/
func BenchmarkStatusUnderLoad(b *testing.B) {
	const runs, stepsPerRun = 1000, 5
	p := runtest.ChainPipeline("bench", stepsPerRun)
	var elapsed time.Duration
	var commits int64
	var latencies []time.Duration
	for i := 0; i < b.N; i++ {
		e, c, lat := statusRound(b, p, runs)
		elapsed += e
		commits += c
		latencies = append(latencies, lat...)
	}
	stepTransitions := float64(b.N * runs * stepsPerRun)
	b.ReportMetric(stepTransitions/elapsed.Seconds(), "transitions/s")
	b.ReportMetric(float64(commits)/stepTransitions, "commits/transition")
	if rss := runtest.PeakRSS(); rss > 0 {
		b.ReportMetric(float64(rss)/(1<<20), "peak-rss-MB")
	}
	slices.Sort(latencies)
	b.ReportMetric(float64(len(latencies))/float64(b.N), "status-calls/op")
	b.ReportMetric(ms(latencies[len(latencies)/2]), "status-p50-ms")
	b.ReportMetric(ms(latencies[len(latencies)*99/100]), "status-p99-ms")
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// statusRound serves a new store, starts runs runs of p on it while
// clients poll its status, and returns the time until every run
// completed, the commits and the latencies of the status calls.
func statusRound(b *testing.B, p *agentrunner.Pipeline, runs int) (time.Duration, int64, []time.Duration) {
	b.StopTimer()
	store := openStore(b)
	load := runtest.NewLoad(b, store, b.TempDir(), p, runtest.SleepKind(50*time.Millisecond), runs)
	srv := newServer(b, arhttp.Options{Store: store, Config: testConfig(), Logger: slog.New(slog.DiscardHandler),
		Pipelines: runtest.Pipelines(p), Runs: load.Scheduler})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(b.Context())
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ctx, ln) }()
	pollers := startPollers(b, "http://"+ln.Addr().String()+"/api/status", 4, 10*time.Millisecond)
	commits0 := store.Commits()
	b.StartTimer()
	elapsed := load.Run(b, 10*time.Minute)
	b.StopTimer()
	latencies := pollers.stop()
	cancel()
	if err := <-served; err != nil {
		b.Fatal(err)
	}
	return elapsed, store.Commits() - commits0, latencies
}

// pollers are clients that GET one URL, each at most once per period,
// until stopped, and time every call.
type pollers struct {
	b    *testing.B
	quit chan struct{}
	wg   sync.WaitGroup

	mu        sync.Mutex
	latencies []time.Duration
	err       error
	// running counts the answers whose runs summary had the bench
	// pipeline's runs in it.
	running int
}

func startPollers(b *testing.B, url string, n int, period time.Duration) *pollers {
	ps := &pollers{b: b, quit: make(chan struct{})}
	client := &http.Client{Timeout: time.Minute, Transport: &http.Transport{MaxIdleConnsPerHost: n}}
	for range n {
		ps.wg.Go(func() { ps.poll(client, url, period) })
	}
	return ps
}

func (ps *pollers) poll(client *http.Client, url string, period time.Duration) {
	tick := time.NewTicker(period)
	defer tick.Stop()
	for {
		start := time.Now()
		body, err := getBody(client, url)
		ps.record(time.Since(start), body, err)
		select {
		case <-ps.quit:
			return
		case <-tick.C:
		}
	}
}

func getBody(client *http.Client, url string) (string, error) {
	resp, err := client.Get(url)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err == nil && resp.StatusCode != http.StatusOK {
		err = fmt.Errorf("GET %s: %d %s", url, resp.StatusCode, body)
	}
	return string(body), err
}

func (ps *pollers) record(d time.Duration, body string, err error) {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	ps.latencies = append(ps.latencies, d)
	if strings.Contains(body, `"bench": {`) {
		ps.running++
	}
	if err != nil && ps.err == nil {
		ps.err = err
	}
}

// stop stops the clients and returns the latencies of their calls; a
// failed call, or a load no answer saw, fails the benchmark.
func (ps *pollers) stop() []time.Duration {
	close(ps.quit)
	ps.wg.Wait()
	if ps.err != nil {
		ps.b.Fatal(ps.err)
	}
	if ps.running == 0 {
		ps.b.Fatalf("none of %d status answers counted the bench pipeline's runs", len(ps.latencies))
	}
	return ps.latencies
}
