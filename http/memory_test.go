package http_test

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentrunner/agentrunner"
	"github.com/agentrunner/agentrunner/config"
	arhttp "github.com/agentrunner/agentrunner/http"
	"github.com/agentrunner/agentrunner/internal/clocktest"
	"github.com/agentrunner/agentrunner/memory"
)

// memoryFixture is a server with credentials and the agents' memories: a
// real memory Log over a real store, its files in a temporary directory.
type memoryFixture struct {
	*capsuleFixture
	dir   string
	clock *clocktest.Clock
	mem   *memory.Log
	// failWrites makes the Log's file writes fail.
	failWrites atomic.Bool
}

func newMemoryFixture(t *testing.T) *memoryFixture {
	t.Helper()
	f := &memoryFixture{capsuleFixture: &capsuleFixture{t: t, store: openStore(t)}, dir: t.TempDir(), clock: clocktest.New(now)}
	cfg := testConfig()
	cfg.Server.MaxBodyBytes = 1 << 20
	cfg.Agents = map[string]*config.Agent{"planner": {Memory: true}, "researcher": {Memory: true}, "trader": {}}
	cfg.Server.Auth.APIKeys = []config.APIKey{
		{Name: "grafana", KeyEnv: "VIEWER_KEY", Role: config.RoleViewer},
		{Name: "alice", KeyEnv: "OPERATOR_KEY", Role: config.RoleOperator},
	}
	env := map[string]string{"VIEWER_KEY": viewerKey, "OPERATOR_KEY": operatorKey}
	auth, err := arhttp.NewAuthenticator(cfg.Server.Auth, t.TempDir(), func(k string) (string, bool) { v, ok := env[k]; return v, ok }, func() time.Time { return now })
	if err != nil {
		t.Fatal(err)
	}
	f.mem, err = memory.NewLog(f.store, memory.LogOptions{
		Path:  f.path,
		Clock: f.clock,
		Faults: func(op string) error {
			if op == memory.OpWriteFile && f.failWrites.Load() {
				return errors.New("disk full at " + f.dir)
			}
			return nil
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	f.srv = newServer(t, arhttp.Options{Store: f.store, Config: cfg, Clock: clocktest.New(now), Auth: auth,
		Logger: slog.New(slog.NewTextHandler(&f.log, nil)), Memory: f.mem})
	return f
}

// path is the memory file of an agent.
func (f *memoryFixture) path(agent string) string { return filepath.Join(f.dir, agent, "memory.md") }

// file is what the agent's memory file holds.
func (f *memoryFixture) file(agent string) string {
	f.t.Helper()
	data, err := os.ReadFile(f.path(agent))
	if err != nil {
		f.t.Fatal(err)
	}
	return string(data)
}

// add appends a note through the API and returns the entry.
func (f *memoryFixture) add(agent, text string) arhttp.MemoryAppended {
	f.t.Helper()
	var e arhttp.MemoryAppended
	f.do("POST", "/api/memory/"+agent, capsuleJSON(map[string]any{"text": text})).json(f.t, http.StatusCreated, &e)
	f.clock.Advance(time.Minute)
	return e
}

// TestMemoryRoutes: an append through the API is in the agent's entries
// and in its memory file; a search finds entries across agents and among
// those named.
func TestMemoryRoutes(t *testing.T) {
	f := newMemoryFixture(t)
	ctx := t.Context()

	// An agent's own append, with its cycle, step and attempt.
	byAgent, err := f.mem.Append(ctx, agentrunner.MemoryEntry{Agent: "planner", RunID: "20260314_060000", Step: "plan", Attempt: 2,
		Text: "Funding flips negative before the weekly expiry."})
	if err != nil {
		t.Fatal(err)
	}
	f.clock.Advance(time.Minute)

	// POST: 201 with the entry, which the store and the file have.
	first := f.add("planner", "  The price feed rate-limits at 10 requests a second.\n")
	if first.ID <= byAgent.ID || first.Agent != "planner" || first.Text != "The price feed rate-limits at 10 requests a second." ||
		!first.Time.Equal(now.Add(time.Minute)) || first.CycleID != "" || first.Step != "" || first.Attempt != 0 || first.Warning != "" {
		t.Errorf("appended: %+v", first)
	}
	if !strings.Contains(f.log.String(), "memory appended") || !strings.Contains(f.log.String(), "operator=alice") {
		t.Errorf("the append is not logged with its operator:\n%s", f.log.String())
	}
	file := f.file("planner")
	for _, want := range []string{"# Memory of planner", fmt.Sprintf("<!-- memory:%d -->", byAgent.ID), fmt.Sprintf("<!-- memory:%d -->", first.ID),
		"The price feed rate-limits at 10 requests a second."} {
		if !strings.Contains(file, want) {
			t.Errorf("the memory file lacks %q:\n%s", want, file)
		}
	}
	other := f.add("researcher", "The exchange's rate limits reset every minute.")

	// GET: the agent's entries, oldest first, who appended them included.
	var list arhttp.MemoryEntries
	f.do("GET", "/api/memory/planner", "").json(t, http.StatusOK, &list)
	if list.Agent != "planner" || len(list.Entries) != 2 {
		t.Fatalf("entries: %+v", list)
	}
	if e := list.Entries[0]; e.ID != byAgent.ID || e.CycleID != "20260314_060000" || e.Step != "plan" || e.Attempt != 2 || !e.Time.Equal(now) {
		t.Errorf("the agent's entry: %+v", e)
	}
	if e := list.Entries[1]; e != first.MemoryEntry {
		t.Errorf("the appended entry: %+v, want %+v", e, first.MemoryEntry)
	}
	a := f.do("GET", "/api/memory/trader", "")
	a.json(t, http.StatusOK, &list)
	if list.Agent != "trader" || list.Entries == nil || len(list.Entries) != 0 || !strings.Contains(a.body, `"entries": []`) {
		t.Errorf("an agent without entries: %+v\n%s", list, a.body)
	}

	// Search: across agents, and among those named.
	var hits arhttp.MemoryHits
	f.do("GET", "/api/memory/search?q=rate+limits", "").json(t, http.StatusOK, &hits)
	if len(hits.Hits) != 2 || !hasHit(hits, first.ID) || !hasHit(hits, other.ID) {
		t.Fatalf("a search of every agent: %+v", hits)
	}
	for _, h := range hits.Hits {
		if h.Snippet == "" || !strings.Contains(h.Snippet, "«") || h.Text == "" || h.Agent == "" || h.Time.IsZero() {
			t.Errorf("a hit: %+v", h)
		}
	}
	f.do("GET", "/api/memory/search?q=rate+limits&agent=researcher", "").json(t, http.StatusOK, &hits)
	if len(hits.Hits) != 1 || hits.Hits[0].ID != other.ID || hits.Hits[0].Agent != "researcher" {
		t.Errorf("a search of the researcher's: %+v", hits)
	}
	f.do("GET", "/api/memory/search?q=rate+OR+expiry&agent=planner&agent=researcher&limit=2", "").json(t, http.StatusOK, &hits)
	if len(hits.Hits) != 2 {
		t.Errorf("a search of two agents, limited to 2: %+v", hits)
	}
	f.do("GET", "/api/memory/search?q=expiry", "").json(t, http.StatusOK, &hits)
	if len(hits.Hits) != 1 || hits.Hits[0].ID != byAgent.ID || hits.Hits[0].CycleID != "20260314_060000" {
		t.Errorf("a search for the agent's entry: %+v", hits)
	}
	a = f.do("GET", "/api/memory/search?q=nothinglikethis", "")
	a.json(t, http.StatusOK, &hits)
	if hits.Hits == nil || len(hits.Hits) != 0 {
		t.Errorf("a search that finds nothing: %+v\n%s", hits, a.body)
	}
}

// hasHit reports whether the hits include the entry id.
func hasHit(hits arhttp.MemoryHits, id int64) bool {
	for _, h := range hits.Hits {
		if h.ID == id {
			return true
		}
	}
	return false
}

// TestMemoryAppendWithTheFileBehind: when the memory file cannot be
// written after the store took the entry, the append is 201 with the entry
// and a warning; the next append adds both entries to the file.
func TestMemoryAppendWithTheFileBehind(t *testing.T) {
	f := newMemoryFixture(t)
	f.add("planner", "Written before the disk filled.")
	f.failWrites.Store(true)
	behind := f.add("planner", "Stored while the file could not be written.")
	if behind.ID < 1 || !strings.Contains(behind.Warning, "is stored") || !strings.Contains(behind.Warning, "behind") {
		t.Errorf("an append whose file write failed: %+v", behind)
	}
	if strings.Contains(behind.Warning, f.dir) || strings.Contains(behind.Warning, "disk full") {
		t.Errorf("the warning shows the cause, which is for the log only: %q", behind.Warning)
	}
	if !strings.Contains(f.log.String(), "memory file behind the store") || !strings.Contains(f.log.String(), "disk full") {
		t.Errorf("the log does not say why the file is behind:\n%s", f.log.String())
	}
	if strings.Contains(f.file("planner"), "Stored while the file") {
		t.Errorf("the file has the entry its write failed to add:\n%s", f.file("planner"))
	}
	var list arhttp.MemoryEntries
	f.do("GET", "/api/memory/planner", "").json(t, http.StatusOK, &list)
	if len(list.Entries) != 2 || list.Entries[1].ID != behind.ID {
		t.Errorf("the store's entries: %+v", list)
	}

	f.failWrites.Store(false)
	next := f.add("planner", "Written after the disk was freed.")
	if next.Warning != "" {
		t.Errorf("an append after the fault: %+v", next)
	}
	file := f.file("planner")
	i, j := strings.Index(file, "Stored while the file"), strings.Index(file, "Written after the disk")
	if i < 0 || j < i || strings.Count(file, "<!-- memory:") != 3 {
		t.Errorf("the file does not have every entry once, in order:\n%s", file)
	}
}

// TestMemoryBadInputs: each bad request is refused with a status and a
// message that says what is wrong.
func TestMemoryBadInputs(t *testing.T) {
	f := newMemoryFixture(t)
	f.add("planner", "Funding flips negative before the expiry.")
	tests := []struct {
		name, method, target, body string
		code                       int
		// says are in the message; never is not.
		says  []string
		never []string
	}{
		{name: "entries of an unknown agent", method: "GET", target: "/api/memory/nobody", code: 404, says: []string{`"nobody"`, "planner, researcher, trader"}},
		{name: "an append to an unknown agent", method: "POST", target: "/api/memory/nobody", body: `{"text": "x"}`, code: 404, says: []string{`"nobody"`}},
		{name: "a query on the entries", method: "GET", target: "/api/memory/planner?after=3", code: 400, says: []string{`"after"`, "takes none"}},
		{name: "a query on an append", method: "POST", target: "/api/memory/planner?cycle_id=x", body: `{"text": "x"}`, code: 400, says: []string{`"cycle_id"`}},
		{name: "an empty text", method: "POST", target: "/api/memory/planner", body: `{"text": " \n "}`, code: 400, says: []string{"text is empty"}},
		{name: "no text", method: "POST", target: "/api/memory/planner", body: `{}`, code: 400, says: []string{"text is empty"}},
		{name: "a text too long", method: "POST", target: "/api/memory/planner", body: capsuleJSON(map[string]any{"text": strings.Repeat("x", memory.MaxEntryChars+1)}),
			code: 400, says: []string{"8001 characters, more than 8000"}},
		{name: "an unknown field", method: "POST", target: "/api/memory/planner", body: `{"text": "x", "agent": "researcher"}`, code: 400, says: []string{`unknown field "agent"`}},
		{name: "a search without q", method: "GET", target: "/api/memory/search", code: 400, says: []string{"query is empty"}},
		{name: "a blank search", method: "GET", target: "/api/memory/search?q=+", code: 400, says: []string{"query is empty"}},
		{name: "limit over 100", method: "GET", target: "/api/memory/search?q=funding&limit=101", code: 400, says: []string{"limit must be from 1 to 100", "101"}},
		{name: "a negative limit", method: "GET", target: "/api/memory/search?q=funding&limit=-1", code: 400, says: []string{"limit must be from 1 to 100"}},
		{name: "limit not a number", method: "GET", target: "/api/memory/search?q=funding&limit=ten", code: 400, says: []string{"limit", `"ten"`}},
		{name: "an unknown parameter", method: "GET", target: "/api/memory/search?q=funding&workspace=x", code: 400, says: []string{`"workspace"`, "q, agent, limit"}},
		{name: "q given twice", method: "GET", target: "/api/memory/search?q=a&q=b", code: 400, says: []string{"q is given 2 times"}},
		{name: "a search of an unknown agent", method: "GET", target: "/api/memory/search?q=funding&agent=planner&agent=nobody", code: 400,
			says: []string{"agent", `"nobody"`, "planner, researcher, trader"}},
		{name: "a search the index cannot parse", method: "GET", target: "/api/memory/search?q=%22funding+flips", code: 400,
			says: []string{"not valid full-text syntax"}, never: []string{"SQL", "fts5"}},
		{name: "another search the index cannot parse", method: "GET", target: "/api/memory/search?q=funding+AND", code: 400, never: []string{"SQL", "fts5"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			msg := f.do(tc.method, tc.target, tc.body).message(t, tc.code)
			for _, s := range tc.says {
				if !strings.Contains(msg, s) {
					t.Errorf("the message does not say %q:\n%s", s, msg)
				}
			}
			for _, s := range tc.never {
				if strings.Contains(msg, s) {
					t.Errorf("the message says %q:\n%s", s, msg)
				}
			}
		})
	}
	var list arhttp.MemoryEntries
	f.do("GET", "/api/memory/planner", "").json(t, http.StatusOK, &list)
	if len(list.Entries) != 1 {
		t.Errorf("refused appends stored entries: %+v", list)
	}
}

// TestMemoryAppendNeedsAnOperator: a viewer reads and searches the
// memories; its append is refused with 403 and stores nothing.
func TestMemoryAppendNeedsAnOperator(t *testing.T) {
	f := newMemoryFixture(t)
	f.add("planner", "Funding flips negative before the expiry.")
	if a := f.as(viewerKey, "POST", "/api/memory/planner", "application/json", `{"text": "A viewer's note."}`); a.code != http.StatusForbidden {
		t.Errorf("POST /api/memory/planner as a viewer: %d, want 403\n%s", a.code, a.body)
	}
	var list arhttp.MemoryEntries
	f.as(viewerKey, "GET", "/api/memory/planner", "", "").json(t, http.StatusOK, &list)
	if len(list.Entries) != 1 || strings.Contains(f.file("planner"), "A viewer's note.") {
		t.Errorf("a viewer's append changed the memory: %+v", list)
	}
	var hits arhttp.MemoryHits
	f.as(viewerKey, "GET", "/api/memory/search?q=funding", "", "").json(t, http.StatusOK, &hits)
	if len(hits.Hits) != 1 {
		t.Errorf("a viewer's search: %+v", hits)
	}
	if a := f.as("", "GET", "/api/memory/planner", "", ""); a.code != http.StatusUnauthorized {
		t.Errorf("without a key: %d", a.code)
	}
}

// TestMemoryNotServed: without a memory Log every memory route answers
// 503, saying so.
func TestMemoryNotServed(t *testing.T) {
	srv := newServer(t, arhttp.Options{Store: openStore(t), Config: testConfig(), Clock: clocktest.New(now), Logger: slog.New(slog.DiscardHandler)})
	for _, rt := range [][3]string{{"GET", "/api/memory/planner", ""}, {"POST", "/api/memory/planner", `{"text": "x"}`}, {"GET", "/api/memory/search?q=x", ""}} {
		var body io.Reader
		if rt[2] != "" {
			body = strings.NewReader(rt[2])
		}
		req := localRequest(rt[0], rt[1], body)
		rec := httptest.NewRecorder()
		srv.Handler().ServeHTTP(rec, req)
		if rec.Code != http.StatusServiceUnavailable || !strings.Contains(rec.Body.String(), "memories are not served by this server") {
			t.Errorf("%s %s: %d\n%s", rt[0], rt[1], rec.Code, rec.Body)
		}
	}
}
