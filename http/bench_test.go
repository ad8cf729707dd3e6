package http_test

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/agentrunner/agentrunner"
	"github.com/agentrunner/agentrunner/config"
	arhttp "github.com/agentrunner/agentrunner/http"
	"github.com/agentrunner/agentrunner/internal/clocktest"
	"github.com/agentrunner/agentrunner/internal/cputime"
	"github.com/agentrunner/agentrunner/internal/historytest"
	"github.com/agentrunner/agentrunner/internal/mailboxtest"
	"github.com/agentrunner/agentrunner/mailbox"
	"github.com/agentrunner/agentrunner/sqlite"
)

// histories are the histories built in this process, by number of cycles,
// so each is built once however many times the benchmark runs (-count).
var histories struct {
	sync.Mutex
	dir string
	byN map[int]*benchHistory
}

// benchHistory is a built history with a server over it.
type benchHistory struct {
	n     int
	store *sqlite.Store
	srv   *arhttp.Server
}

func TestMain(m *testing.M) {
	code := m.Run()
	histories.Lock()
	for _, h := range histories.byN {
		h.store.Close()
	}
	if histories.dir != "" {
		os.RemoveAll(histories.dir)
	}
	histories.Unlock()
	os.Exit(code)
}

// keepEnv names a directory where the histories are kept between runs
// (the 100k history takes a minute or more to build); by default they are
// built in a temporary directory removed at the end.
const keepEnv = "AGENTRUNNER_BENCH_HISTORIES"

// historyDir is the directory of the history of n cycles; the caller
// holds histories' lock.
func historyDir(n int) (string, error) {
	if kept := os.Getenv(keepEnv); kept != "" {
		return filepath.Join(kept, strconv.Itoa(n)), nil
	}
	if histories.dir == "" {
		dir, err := os.MkdirTemp("", "agentrunner-history-")
		if err != nil {
			return "", err
		}
		histories.dir = dir
	}
	return filepath.Join(histories.dir, strconv.Itoa(n)), nil
}

const benchKey = "bench-viewer-key-0123456789"

// history returns the history of n cycles, building it on first use.
func history(b *testing.B, n int) *benchHistory {
	b.Helper()
	histories.Lock()
	defer histories.Unlock()
	if h := histories.byN[n]; h != nil {
		return h
	}
	if histories.byN == nil {
		histories.byN = map[int]*benchHistory{}
	}
	dir, err := historyDir(n)
	if err != nil {
		b.Fatal(err)
	}
	path := filepath.Join(dir, "state.db")
	if _, err := os.Stat(path); err != nil {
		// Built aside and renamed, so a run stopped halfway leaves no
		// partial history to be taken for a whole one.
		start := time.Now()
		os.RemoveAll(dir + ".building")
		if _, err := historytest.Build(context.Background(), dir+".building", n); err != nil {
			b.Fatal(err)
		}
		os.RemoveAll(dir)
		if err := os.Rename(dir+".building", dir); err != nil {
			b.Fatal(err)
		}
		b.Logf("built a history of %d cycles in %v", n, time.Since(start).Round(time.Millisecond))
	}
	store, err := sqlite.Open(context.Background(), path)
	if err != nil {
		b.Fatal(err)
	}
	h := &benchHistory{n: n, store: store, srv: benchServer(b, dir, store, n)}
	histories.byN[n] = h
	return h
}

// benchServer is the API over store, as serve wires it, with an API key
// (a server without credentials answers loopback callers only).
func benchServer(b *testing.B, dir string, store *sqlite.Store, n int) *arhttp.Server {
	cfg := testConfig()
	cfg.Dir = dir
	cfg.ArtifactsDir = filepath.Join(dir, "artifacts")
	cfg.Agents = map[string]*config.Agent{
		"plan": {}, "research": {Tools: historytest.Tools}, "analysis": {Tools: historytest.Tools[:2]}, "synthesis": {}, "evaluation": {},
	}
	cfg.Server.Auth.APIKeys = []config.APIKey{{Name: "grafana", KeyEnv: "BENCH_KEY", Role: config.RoleViewer}}
	auth, err := arhttp.NewAuthenticator(cfg.Server.Auth, dir, func(string) (string, bool) { return benchKey, true }, nil)
	if err != nil {
		b.Fatal(err)
	}
	boxes, err := mailbox.New(filepath.Join(cfg.ArtifactsDir, "mailboxes"), 5)
	if err != nil {
		b.Fatal(err)
	}
	last := historytest.CycleStart(n - 1)
	for i := range 5 {
		msg := mailbox.Message{ID: fmt.Sprintf("m%d", i), Time: last.Add(time.Duration(i) * time.Minute), From: "plan", Kind: mailbox.Forward, Body: "look at BTC funding"}
		mailboxtest.Deposit(b, store, boxes, "research", msg)
	}
	srv, err := arhttp.New(arhttp.Options{Store: store, Config: cfg, Clock: clocktest.New(last.Add(time.Hour)),
		Logger: slog.New(slog.DiscardHandler), Auth: auth, Mailboxes: boxes})
	if err != nil {
		b.Fatal(err)
	}
	return srv
}

// endpoints are the reads measured, by name.
var endpoints = []string{
	"status", "cycles", "cycles_before", "cycles_failed", "cycle", "errors", "errors_before",
	"events", "events_tail", "events_since_id", "events_type", "events_type_since_id", "events_step_type", "events_step_type_since_id", "events_level_error",
	"events_level_warn", "events_cycle", "events_since_time", "events_type_since_time",
	"tools", "tools_since", "audit", "audit_before", "mailbox",
}

// paths are the reads to measure on h, by name: each list's first page, a
// page from the middle of the history (a cursor), and each filter.
func (h *benchHistory) paths(b *testing.B) map[string]string {
	ctx := context.Background()
	mid := historytest.CycleID(h.n / 2)
	evs, err := h.store.Events(ctx, agentrunner.EventFilter{CycleID: mid, Limit: 1})
	if err != nil || len(evs) != 1 {
		b.Fatalf("the first event of cycle %s: %v", mid, err)
	}
	midEvent := strconv.FormatInt(evs[0].ID, 10)
	newest, err := h.store.Events(ctx, agentrunner.EventFilter{Newest: true, Limit: 1})
	if err != nil || len(newest) != 1 {
		b.Fatalf("the newest event: %v", err)
	}
	tail := strconv.FormatInt(newest[0].ID-100, 10)
	cmds, err := h.store.Commands(ctx, agentrunner.CommandFilter{Limit: 1})
	if err != nil || len(cmds) != 1 {
		b.Fatalf("the newest command: %v", err)
	}
	midCommand := strconv.FormatInt(cmds[0].ID/2, 10)
	lastHour := historytest.CycleStart(h.n - 1).Format(time.RFC3339)
	lastDay := historytest.CycleStart(h.n - 24).Format(time.RFC3339)
	return map[string]string{
		"status":               "/api/status",
		"cycles":               "/api/cycles",
		"cycles_before":        "/api/cycles?before=" + mid,
		"cycles_failed":        "/api/cycles?status=failed&before=" + mid,
		"cycle":                "/api/cycles/" + mid,
		"errors":               "/api/errors",
		"errors_before":        "/api/errors?before=" + midEvent,
		"events":               "/api/events",
		"events_tail":          "/api/events?since=" + tail,
		"events_since_id":      "/api/events?since=" + midEvent,
		"events_type":          "/api/events?type=tool.call",
		"events_type_since_id": "/api/events?type=tool.call&since=" + midEvent,
		// The events of every step are not in the type index: they walk the ids.
		"events_step_type":          "/api/events?type=state.transition",
		"events_step_type_since_id": "/api/events?type=state.transition&since=" + midEvent,
		"events_level_error":        "/api/events?level=error&since=" + midEvent,
		"events_level_warn":         "/api/events?level=warn&since=" + midEvent,
		"events_cycle":              "/api/events?cycle_id=" + mid,
		"events_since_time":         "/api/events?since=" + lastHour,
		"events_type_since_time":    "/api/events?type=tool.call&since=" + lastDay,
		"tools":                     "/api/tools",
		"tools_since":               "/api/tools?since=" + lastDay,
		"audit":                     "/api/audit",
		"audit_before":              "/api/audit?before=" + midCommand,
		"mailbox":                   "/api/mailboxes/research",
	}
}

// BenchmarkReadHistory serves each read of the API, through the server's
// handler over the SQLite store, with 1k, 10k and 100k cycles of history
// (40 events per cycle). A read that is served from an index costs
// about the same at every size. The sizes of one read run one after the
// other, so they meet the same load on a shared machine; cpu-ns/op is the
// process's CPU time per request.
//
//	go test -run '^$' -bench BenchmarkReadHistory -benchtime 200ms -count 5 ./http/ > history.txt
//	benchstat -col /cycles -row /endpoint history.txt
func BenchmarkReadHistory(b *testing.B) {
	sizes := []int{1000, 10000, 100000}
	for _, n := range sizes {
		history(b, n) // built before any timing
	}
	for _, name := range endpoints {
		b.Run("endpoint="+name, func(b *testing.B) {
			for _, n := range sizes {
				h := history(b, n)
				path := h.paths(b)[name]
				b.Run("cycles="+strconv.Itoa(n/1000)+"k", func(b *testing.B) {
					h.serve(b, path)
				})
			}
		})
	}
}

// serve answers GET path b.N times and fails on any answer but 200.
func (h *benchHistory) serve(b *testing.B, path string) {
	handler := h.srv.Handler()
	user0, sys0, cpuOK := cputime.Self()
	defer func() {
		if user1, sys1, _ := cputime.Self(); cpuOK {
			b.ReportMetric(float64(user1-user0+sys1-sys0)/float64(b.N), "cpu-ns/op")
		}
	}()
	for b.Loop() {
		req := httptest.NewRequest(http.MethodGet, path, nil)
		req.Host, req.RemoteAddr = "127.0.0.1:8080", "127.0.0.1:50000"
		req.Header.Set("Authorization", "Bearer "+benchKey)
		rec := httptest.NewRecorder()
		handler.ServeHTTP(rec, req)
		if rec.Code != http.StatusOK {
			b.Fatalf("GET %s: %d %s", path, rec.Code, rec.Body)
		}
	}
}
