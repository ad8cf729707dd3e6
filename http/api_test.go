package http_test

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/agentrunner/agentrunner"
	"github.com/agentrunner/agentrunner/config"
	arhttp "github.com/agentrunner/agentrunner/http"
	"github.com/agentrunner/agentrunner/internal/clocktest"
	"github.com/agentrunner/agentrunner/internal/mailboxtest"
	"github.com/agentrunner/agentrunner/mailbox"
	"github.com/agentrunner/agentrunner/sqlite"
	"github.com/google/go-cmp/cmp"
)

// Keys of the API tests, one per role.
const (
	viewerKey   = "viewer-key-0123456789"
	operatorKey = "operator-key-0123456789"
	adminKey    = "admin-key-0123456789abc"
)

// apiFixture is a server over a real store with a cycle, its attempts,
// events, artifacts and a mailbox, and API keys for each role.
type apiFixture struct {
	t     testing.TB
	cfg   *config.Config
	store *sqlite.Store
	srv   *arhttp.Server
	cycle *agentrunner.Cycle
	woken int
	// stalled is what the engine reports to readiness.
	stalled time.Duration
	// reloaded is the engine's configuration after a reload; nil: the
	// server's own.
	reloaded *config.Config
}

func (f *apiFixture) Stalled() time.Duration { return f.stalled }

// Config is the configuration the fake engine runs with (reloaded sets it).
func (f *apiFixture) Config() *config.Config { return f.reloaded }

func apiConfig(t testing.TB) *config.Config {
	cfg := testConfig()
	cfg.Dir = t.TempDir()
	cfg.ArtifactsDir = filepath.Join(cfg.Dir, "artifacts")
	cfg.Agents = map[string]*config.Agent{
		"plan":     {Tools: []string{"web_search"}},
		"research": {Tools: []string{"web_search", "web_fetch"}},
	}
	cfg.Mailbox.MaxMessages = 5
	cfg.Server.MaxBodyBytes = 4096
	cfg.Health = config.Health{MinFreeDiskMiB: 0, MaxEngineLag: config.Duration(time.Minute)}
	cfg.Server.Auth.APIKeys = []config.APIKey{
		{Name: "grafana", KeyEnv: "VIEWER_KEY", Role: config.RoleViewer},
		{Name: "alice", KeyEnv: "OPERATOR_KEY", Role: config.RoleOperator},
		{Name: "root", KeyEnv: "ADMIN_KEY", Role: config.RoleAdmin},
	}
	return cfg
}

func newAPIFixture(t testing.TB, edit func(*config.Config)) *apiFixture {
	t.Helper()
	f := &apiFixture{t: t, cfg: apiConfig(t), store: openStore(t)}
	if edit != nil {
		edit(f.cfg)
	}
	if err := os.MkdirAll(f.cfg.ArtifactsDir, 0o755); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"VIEWER_KEY": viewerKey, "OPERATOR_KEY": operatorKey, "ADMIN_KEY": adminKey}
	auth, err := arhttp.NewAuthenticator(f.cfg.Server.Auth, f.cfg.Dir, func(k string) (string, bool) { v, ok := env[k]; return v, ok }, func() time.Time { return now })
	if err != nil {
		t.Fatal(err)
	}
	boxes, err := mailbox.New(filepath.Join(f.cfg.ArtifactsDir, "mailboxes"), 5)
	if err != nil {
		t.Fatal(err)
	}
	mailboxtest.Deposit(t, f.store, boxes, "research", mailbox.Message{ID: "m1", Time: now, From: "plan", Kind: mailbox.Forward, Body: "look at BTC"})
	f.seed()
	f.srv = newServer(t, arhttp.Options{
		Store: f.store, Config: f.cfg, Clock: clocktest.New(now), Logger: slog.New(slog.DiscardHandler),
		Auth: auth, Mailboxes: boxes, Wake: func() { f.woken++ }, Engine: f,
		Metrics: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "agentrunner_up 1\n") }),
	})
	return f
}

// seed writes a running cycle at research with a failed and a succeeded
// plan attempt, its events, two artifacts and tool calls.
func (f *apiFixture) seed() {
	started := now.Add(-time.Hour)
	f.cycle = running("20260314_082653", "research", "plan", started)
	f.cycle.Dir = filepath.Join(f.cfg.ArtifactsDir, "cycles", f.cycle.ID)
	if err := os.MkdirAll(f.cycle.Dir, 0o755); err != nil {
		f.t.Fatal(err)
	}
	for name, body := range map[string]string{"plan.md": "# Plan\n", "strategy.json": `{"ok": true}`} {
		if err := os.WriteFile(filepath.Join(f.cycle.Dir, name), []byte(body), 0o644); err != nil {
			f.t.Fatal(err)
		}
	}
	ev := func(min int, typ, step string, level agentrunner.Level, details map[string]any) *agentrunner.Event {
		return &agentrunner.Event{Timestamp: started.Add(time.Duration(min) * time.Minute), Type: typ, Step: step, CycleID: f.cycle.ID, Level: level, Details: details}
	}
	ch := &agentrunner.Change{
		From:  agentrunner.StateIdle,
		Cycle: f.cycle,
		Attempts: []*agentrunner.Attempt{
			{CycleID: f.cycle.ID, Step: "plan", Number: 1, Agent: "plan", Status: agentrunner.AttemptFailed, ErrorClass: agentrunner.ClassTimeout,
				Error: "timed out", StartedAt: started, EndedAt: started.Add(30 * time.Minute)},
			{CycleID: f.cycle.ID, Step: "plan", Number: 2, Agent: "plan", Status: agentrunner.AttemptSucceeded,
				StartedAt: started.Add(35 * time.Minute), EndedAt: started.Add(45 * time.Minute), Usage: agentrunner.Usage{InputTokens: 900, OutputTokens: 300}},
			{CycleID: f.cycle.ID, Step: "research", Number: 1, Agent: "research", Status: agentrunner.AttemptRunning, StartedAt: started.Add(45 * time.Minute)},
		},
		Events: []*agentrunner.Event{
			ev(0, agentrunner.EventCycleStarted, "", agentrunner.LevelInfo, nil),
			ev(30, agentrunner.EventAttemptFailed, "plan", agentrunner.LevelWarn, map[string]any{"error_class": "timeout", "error": "timed out"}),
			ev(31, "tool.call", "research", agentrunner.LevelInfo, map[string]any{"tool": "web_search", "is_error": false, "duration_ms": 120}),
			ev(32, "tool.call", "research", agentrunner.LevelWarn, map[string]any{"tool": "web_search", "is_error": true, "duration_ms": 80}),
			ev(45, agentrunner.EventAttemptSucceeded, "plan", agentrunner.LevelInfo, nil),
		},
	}
	if err := f.store.Apply(context.Background(), ch); err != nil {
		f.t.Fatal(err)
	}
}

// do sends a request with the key (none when empty) and returns the status
// and body.
func (f *apiFixture) do(method, path, key, body string) (int, string) {
	f.t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req := localRequest(method, path, rd)
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	rec := httptest.NewRecorder()
	f.srv.Handler().ServeHTTP(rec, req)
	return rec.Code, rec.Body.String()
}

// json decodes a response body.
func (f *apiFixture) json(code int, body string, wantCode int) map[string]any {
	f.t.Helper()
	if code != wantCode {
		f.t.Fatalf("status %d, want %d; body %s", code, wantCode, body)
	}
	v, ok := decode(f.t, body).(map[string]any)
	if !ok {
		f.t.Fatalf("body is not an object: %s", body)
	}
	return v
}

// TestAuthentication: every API route needs a key; each role may do what
// it is given and no more.
func TestAuthentication(t *testing.T) {
	f := newAPIFixture(t, nil)
	tests := []struct {
		method, path, key, body string
		code                    int
		errCode                 string
	}{
		{"GET", "/api/status", "", "", 401, "unauthorized"},
		{"GET", "/api/status", "not-a-key-0123456789", "", 401, "unauthorized"},
		{"GET", "/api/status", viewerKey, "", 200, ""},
		{"GET", "/api/cycles", viewerKey, "", 200, ""},
		{"GET", "/api/events/stream", "", "", 401, "unauthorized"},
		{"GET", "/health/ready", "", "", 401, "unauthorized"},
		{"GET", "/metrics", "", "", 401, "unauthorized"},
		{"POST", "/api/override/pause", "", "{}", 401, "unauthorized"},
		{"POST", "/api/override/pause", viewerKey, "{}", 403, "forbidden"},
		{"POST", "/api/mailboxes/plan", viewerKey, `{"message": "hi"}`, 403, "forbidden"},
		{"POST", "/api/override/pause", operatorKey, "{}", 202, ""},
		{"GET", "/api/config", operatorKey, "", 403, "forbidden"},
		{"GET", "/api/config", adminKey, "", 200, ""},
		{"POST", "/api/override/resume", adminKey, "", 202, ""},
	}
	for _, tt := range tests {
		code, body := f.do(tt.method, tt.path, tt.key, tt.body)
		if code != tt.code {
			t.Errorf("%s %s with %q: status %d, want %d; %s", tt.method, tt.path, tt.key, code, tt.code, body)
			continue
		}
		if tt.errCode != "" {
			got := f.json(code, body, tt.code)["error"].(map[string]any)["code"]
			if got != tt.errCode {
				t.Errorf("%s %s: error code %v, want %s", tt.method, tt.path, got, tt.errCode)
			}
			if tt.key != "" && strings.Contains(body, tt.key) {
				t.Errorf("the answer echoes the key: %s", body)
			}
		}
	}
	// The overrides are attributed to the key's name, never to a name the
	// caller sends.
	cmds, _ := f.store.Commands(context.Background(), agentrunner.CommandFilter{})
	if len(cmds) != 2 || cmds[1].Operator != "alice" || cmds[0].Operator != "root" || f.woken != 2 {
		t.Errorf("commands %+v, engine woken %d times", cmds, f.woken)
	}
}

// TestPublicHealthAndMetrics: health and metrics may be configured public.
func TestPublicHealthAndMetrics(t *testing.T) {
	f := newAPIFixture(t, func(c *config.Config) { c.Server.Public = []string{config.PublicHealth, config.PublicMetrics} })
	for _, path := range []string{"/health/live", "/health/ready", "/metrics"} {
		if code, body := f.do("GET", path, "", ""); code != 200 {
			t.Errorf("GET %s without a key: %d %s", path, code, body)
		}
	}
	if code, _ := f.do("GET", "/api/status", "", ""); code != 401 {
		t.Errorf("GET /api/status without a key: %d, want 401", code)
	}
}

// TestBadInput: every malformed request is refused with 400 (or 404) and
// the reason, and writes nothing.
func TestBadInput(t *testing.T) {
	f := newAPIFixture(t, nil)
	tests := []struct {
		name, method, path, body string
		code                     int
		message                  string
	}{
		{"malformed JSON", "POST", "/api/override/pause", `{"reason": `, 400, "the body is not valid JSON for this request: unexpected EOF"},
		{"unknown field", "POST", "/api/override/pause", `{"reason": "x", "force": true}`, 400, `the body is not valid JSON for this request: json: unknown field "force"`},
		{"two values", "POST", "/api/override/abort", `{} {}`, 400, "the body holds more than one JSON value"},
		{"body over the limit", "POST", "/api/override/abort", `{"reason": "` + strings.Repeat("x", 5000) + `"}`, 400, "the body is longer than 4096 bytes (server.max_body_bytes)"},
		{"reason too long", "POST", "/api/override/abort", `{"reason": "` + strings.Repeat("x", 1500) + `"}`, 400, "reason is 1500 bytes; at most 1024"},
		{"inject without a message", "POST", "/api/override/inject", `{"agent": "plan"}`, 400, "message is required"},
		{"inject to no agent", "POST", "/api/override/inject", `{"agent": "ghost", "message": "hi"}`, 400, `agent: no agent "ghost" (agents: plan, research)`},
		{"message on pause", "POST", "/api/override/pause", `{"message": "hi"}`, 400, "agent and message are for inject only"},
		{"unknown override", "POST", "/api/override/reboot", `{}`, 404, `no override "reboot" (pause, resume, abort, inject, force-cycle)`},
		{"mailbox of no agent", "POST", "/api/mailboxes/ghost", `{"message": "hi"}`, 404, `no agent "ghost" (agents: plan, research)`},
		{"unknown cycle", "GET", "/api/cycles/20990101_000000", "", 404, `cycle "20990101_000000" not found`},
		{"malformed cycle id", "GET", "/api/cycles/latest", "", 400, `cycle id: want YYYYMMDD_HHMMSS, got "latest"`},
		{"traversal in an artifact name", "GET", "/api/cycles/20260314_082653/artifacts/%2e%2e%2f%2e%2e%2fstate.db", "", 400, `artifact name: want a file name of the run directory (letters, digits, _, -, .), got "../../state.db"`},
		{"hidden artifact", "GET", "/api/cycles/20260314_082653/artifacts/.plan.md.tmp", "", 400, `artifact name: want a file name of the run directory (letters, digits, _, -, .), got ".plan.md.tmp"`},
		{"dot-dot artifact", "GET", "/api/cycles/20260314_082653/artifacts/plan..md", "", 400, `artifact name: want a file name of the run directory (letters, digits, _, -, .), got "plan..md"`},
		{"missing artifact", "GET", "/api/cycles/20260314_082653/artifacts/research.md", "", 404, "cycle 20260314_082653 has no artifact research.md"},
		{"bad limit", "GET", "/api/cycles?limit=0", "", 400, `query parameter limit: want an integer from 1 to 500, got "0"`},
		{"limit too large", "GET", "/api/audit?limit=501", "", 400, `query parameter limit: want an integer from 1 to 500, got "501"`},
		{"bad status filter", "GET", "/api/cycles?status=done", "", 400, `query parameter status: want running, halted, completed, failed or aborted, got "done"`},
		{"bad since", "GET", "/api/events?since=yesterday", "", 400, `query parameter since: want an event id or an RFC 3339 time, got "yesterday"`},
		{"bad level", "GET", "/api/events?level=loud", "", 400, `query parameter level: want debug, info, warn or error, got "loud"`},
		{"long level cut before a multi-byte rune", "GET", "/api/events?level=" + strings.Repeat("x", 63) + "%C3%A9", "", 400, `query parameter level: want debug, info, warn or error, got "` + strings.Repeat("x", 63) + `…"`},
		{"unknown route", "GET", "/api/nothing", "", 404, "no route GET /api/nothing"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, body := f.do(tt.method, tt.path, adminKey, tt.body)
			got := f.json(code, body, tt.code)
			want := decode(t, `{"error": {"code": "`+map[int]string{400: "invalid", 404: "not_found"}[tt.code]+`", "message": ""}}`).(map[string]any)
			want["error"].(map[string]any)["message"] = tt.message
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("body (-want +got):\n%s", diff)
			}
		})
	}
	if cmds, _ := f.store.Commands(context.Background(), agentrunner.CommandFilter{}); len(cmds) != 0 {
		t.Errorf("refused requests stored commands: %+v", cmds)
	}
}

// TestInternalErrorsDoNotLeak: a failing store gives a 500 with a generic
// message on every read endpoint.
func TestInternalErrorsDoNotLeak(t *testing.T) {
	secret := "/var/lib/agentrunner/state.db: database disk image is malformed"
	srv := newServer(t, arhttp.Options{Store: failingStore{errors.New(secret)}, Config: apiConfig(t), Clock: clocktest.New(now), Logger: slog.New(slog.DiscardHandler)})
	for _, path := range []string{"/api/status", "/api/cycles", "/api/cycles/20260314_082653", "/api/errors", "/api/events", "/api/tools", "/api/audit"} {
		rec := httptest.NewRecorder()
		srv.Handler().ServeHTTP(rec, localRequest("GET", path, nil))
		if rec.Code != 500 || strings.Contains(rec.Body.String(), "malformed") || !strings.Contains(rec.Body.String(), `"internal error"`) {
			t.Errorf("GET %s: %d %s", path, rec.Code, rec.Body)
		}
	}
}

// TestReads: the read endpoints show the seeded state.
func TestReads(t *testing.T) {
	f := newAPIFixture(t, nil)
	get := func(path string) map[string]any {
		t.Helper()
		code, body := f.do("GET", path, viewerKey, "")
		return f.json(code, body, 200)
	}

	cycles := get("/api/cycles?limit=1")
	if list := cycles["cycles"].([]any); len(list) != 1 || list[0].(map[string]any)["id"] != f.cycle.ID || cycles["next_before"] != f.cycle.ID {
		t.Errorf("cycles: %v", cycles)
	}

	detail := get("/api/cycles/" + f.cycle.ID)
	steps := detail["steps"].([]any)
	plan := steps[0].(map[string]any)
	if len(steps) != 2 || plan["step"] != "plan" || plan["status"] != "succeeded" || len(plan["attempts"].([]any)) != 2 {
		t.Errorf("steps: %v", steps)
	}
	if first := plan["attempts"].([]any)[0].(map[string]any); first["error_class"] != "timeout" || first["duration_ms"] != float64(30*60*1000) {
		t.Errorf("first plan attempt: %v", first)
	}
	sum := sha256.Sum256([]byte("# Plan\n"))
	arts := detail["artifacts"].([]any)
	if len(arts) != 2 || arts[0].(map[string]any)["name"] != "plan.md" || arts[0].(map[string]any)["size"] != float64(7) ||
		arts[0].(map[string]any)["sha256"] != hex.EncodeToString(sum[:]) {
		t.Errorf("artifacts: %v", arts)
	}
	if evs := detail["events"].([]any); len(evs) != 5 {
		t.Errorf("%d events of the cycle, want 5", len(evs))
	}

	code, body := f.do("GET", "/api/cycles/"+f.cycle.ID+"/artifacts/strategy.json", viewerKey, "")
	if code != 200 || body != `{"ok": true}` {
		t.Errorf("artifact: %d %q", code, body)
	}

	errs := get("/api/errors")["errors"].([]any)
	if len(errs) != 2 || errs[0].(map[string]any)["event_type"] != "tool.call" || errs[1].(map[string]any)["event_type"] != agentrunner.EventAttemptFailed {
		t.Errorf("errors, newest first: %v", errs)
	}

	page := get("/api/events?limit=2")
	evs := page["events"].([]any)
	next := page["next_since"].(float64)
	rest := get("/api/events?since=" + strconv.FormatInt(int64(next), 10) + "&limit=10")["events"].([]any)
	if len(evs) != 2 || len(rest) != 3 || rest[0].(map[string]any)["id"].(float64) != next+1 {
		t.Errorf("events paged: %v then %v", evs, rest)
	}
	if byTime := get("/api/events?since=" + now.Add(-time.Hour+31*time.Minute).Format(time.RFC3339))["events"].([]any); len(byTime) != 3 {
		t.Errorf("events since a time: %d, want 3", len(byTime))
	}
	// Nothing since a later time: next_since continues after the newest.
	if later := get("/api/events?since=" + now.Format(time.RFC3339)); len(later["events"].([]any)) != 0 || later["next_since"] != rest[2].(map[string]any)["id"] {
		t.Errorf("events since now: %v", later)
	}

	tools := get("/api/tools")["tools"].([]any)
	want := decode(t, `[
		{"name": "web_fetch", "description": "", "agents": ["research"], "usage": {"calls": 0, "errors": 0, "avg_duration_ms": 0}},
		{"name": "web_search", "description": "", "agents": ["plan", "research"],
		 "usage": {"calls": 2, "errors": 1, "avg_duration_ms": 100, "last_call": "2026-03-14T08:58:53Z"}}]`)
	if diff := cmp.Diff(want, any(tools)); diff != "" {
		t.Errorf("tools (-want +got):\n%s", diff)
	}

	// The mailbox is the store's, even with its file lost (a crash after
	// the commit, before the file was written).
	if err := os.Remove(filepath.Join(f.cfg.ArtifactsDir, "mailboxes", "mailbox.research")); err != nil {
		t.Fatal(err)
	}
	box := get("/api/mailboxes/research")
	if msgs := box["messages"].([]any); len(msgs) != 1 || msgs[0].(map[string]any)["body"] != "look at BTC" {
		t.Errorf("mailbox: %v", box)
	}
}

// TestOverridesAreAudited: each override and mailbox post is a command
// with the caller as operator, listed in the audit log newest first.
func TestOverridesAreAudited(t *testing.T) {
	f := newAPIFixture(t, nil)
	posts := []struct{ path, body string }{
		{"/api/override/pause", `{"reason": "maintenance"}`},
		{"/api/override/inject", `{"agent": "plan", "message": "Focus on ETH."}`},
		{"/api/mailboxes/research", `{"message": "Check the funding rates."}`},
		{"/api/override/force-cycle", ``},
		{"/api/override/abort", `{}`},
		{"/api/override/resume", `{"reason": "done"}`},
	}
	for _, p := range posts {
		code, body := f.do("POST", p.path, operatorKey, p.body)
		cmd := f.json(code, body, 202)["command"].(map[string]any)
		if cmd["operator"] != "alice" || cmd["consumed_at"] != nil {
			t.Errorf("POST %s: %v", p.path, cmd)
		}
	}
	code, body := f.do("GET", "/api/audit?limit=10", viewerKey, "")
	cmds := f.json(code, body, 200)["commands"].([]any)
	var got []string
	for _, c := range cmds {
		m := c.(map[string]any)
		got = append(got, m["kind"].(string)+" "+jsonArgs(m["args"]))
	}
	want := []string{
		`resume map[reason:done]`, `abort <nil>`, `force-cycle <nil>`,
		`inject map[agent:research message:Check the funding rates.]`,
		`inject map[agent:plan message:Focus on ETH.]`,
		`pause map[reason:maintenance]`,
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("audit (-want +got):\n%s", diff)
	}
	if f.woken != len(posts) {
		t.Errorf("the engine was woken %d times, want %d", f.woken, len(posts))
	}
}

func jsonArgs(v any) string {
	if v == nil {
		return "<nil>"
	}
	m := v.(map[string]any)
	var b strings.Builder
	b.WriteString("map[")
	first := true
	for _, k := range []string{"agent", "message", "reason"} {
		if val, ok := m[k]; ok {
			if !first {
				b.WriteString(" ")
			}
			first = false
			b.WriteString(k + ":" + val.(string))
		}
	}
	b.WriteString("]")
	return b.String()
}

// TestReadiness: ready while every check passes; each failing check is
// named with its reason and makes the answer 503.
func TestReadiness(t *testing.T) {
	f := newAPIFixture(t, nil)
	code, body := f.do("GET", "/health/ready", viewerKey, "")
	got := f.json(code, body, 200)
	checks := got["checks"].(map[string]any)
	for _, name := range []string{"database", "artifacts_writable", "disk_space", "engine"} {
		if c, ok := checks[name].(map[string]any); !ok || c["ok"] != true {
			t.Errorf("check %s: %v", name, checks[name])
		}
	}
	f.stalled = 2 * time.Minute
	code, body = f.do("GET", "/health/ready", viewerKey, "")
	got = f.json(code, body, 503)
	if c := got["checks"].(map[string]any)["engine"].(map[string]any); c["ok"] != false || !strings.Contains(c["message"].(string), "2m0s past its deadline") {
		t.Errorf("engine check: %v", c)
	}

	g := newAPIFixture(t, func(c *config.Config) { c.Health.MinFreeDiskMiB = 1 << 40 })
	code, body = g.do("GET", "/health/ready", viewerKey, "")
	disk := g.json(code, body, 503)["checks"].(map[string]any)["disk_space"].(map[string]any)
	if disk["ok"] != false || !strings.Contains(disk["message"].(string), "below health.min_free_disk_mib") {
		t.Errorf("disk check: %v", disk)
	}

	h := newAPIFixture(t, nil)
	os.RemoveAll(h.cfg.ArtifactsDir)
	os.WriteFile(h.cfg.ArtifactsDir, nil, 0o644) // a file where the directory should be
	code, body = h.do("GET", "/health/ready", viewerKey, "")
	if w := h.json(code, body, 503)["checks"].(map[string]any)["artifacts_writable"].(map[string]any); w["ok"] != false {
		t.Errorf("writable check: %v", w)
	}
}

// TestEventStream: a client receives the events committed while it is
// connected, with their ids, and resumes after Last-Event-ID.
func TestEventStream(t *testing.T) {
	f := newAPIFixture(t, nil)
	ts := httptest.NewServer(f.srv.Handler())
	defer ts.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	open := func(lastID string) (*bufio.Reader, func()) {
		req, _ := http.NewRequestWithContext(ctx, "GET", ts.URL+"/api/events/stream", nil)
		req.Header.Set("Authorization", "Bearer "+viewerKey)
		if lastID != "" {
			req.Header.Set("Last-Event-ID", lastID)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/event-stream" {
			t.Fatalf("stream: %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
		}
		return bufio.NewReader(resp.Body), func() { resp.Body.Close() }
	}
	// next reads one event's id and type.
	next := func(r *bufio.Reader) (string, string) {
		var id, typ string
		for {
			line, err := r.ReadString('\n')
			if err != nil {
				t.Fatalf("stream ended: %v", err)
			}
			line = strings.TrimSuffix(line, "\n")
			switch {
			case strings.HasPrefix(line, "id: "):
				id = strings.TrimPrefix(line, "id: ")
			case strings.HasPrefix(line, "event: "):
				typ = strings.TrimPrefix(line, "event: ")
			case line == "" && id != "":
				return id, typ
			}
		}
	}
	r, closeStream := open("")
	for _, typ := range []string{"step.one", "step.two"} {
		ev := &agentrunner.Event{Timestamp: now, Type: typ, CycleID: f.cycle.ID, Level: agentrunner.LevelInfo}
		if err := f.store.Apply(ctx, &agentrunner.Change{Events: []*agentrunner.Event{ev}}); err != nil {
			t.Fatal(err)
		}
	}
	firstID, typ := next(r)
	if typ != "step.one" {
		t.Fatalf("first streamed event %s, want step.one (only events after connecting)", typ)
	}
	if _, typ := next(r); typ != "step.two" {
		t.Fatalf("second streamed event %s", typ)
	}
	closeStream()
	// Reconnecting after the first event gets the second again.
	r, closeStream = open(firstID)
	defer closeStream()
	if _, typ := next(r); typ != "step.two" {
		t.Errorf("after Last-Event-ID %s: %s, want step.two", firstID, typ)
	}
}

// TestCycleEventsAreBounded: a cycle with more events than one answer
// shows says so.
func TestCycleEventsAreBounded(t *testing.T) {
	f := newAPIFixture(t, nil)
	var evs []*agentrunner.Event
	for range 10000 {
		evs = append(evs, &agentrunner.Event{Timestamp: now, Type: "tool.call", CycleID: f.cycle.ID, Level: agentrunner.LevelInfo})
	}
	if err := f.store.Apply(context.Background(), &agentrunner.Change{Events: evs}); err != nil {
		t.Fatal(err)
	}
	code, body := f.do("GET", "/api/cycles/"+f.cycle.ID, viewerKey, "")
	got := f.json(code, body, 200)
	if n := len(got["events"].([]any)); n != 10000 || got["events_truncated"] != true {
		t.Errorf("%d events, truncated %v; want 10000 and true", n, got["events_truncated"])
	}
}

// TestReload: only an admin may reload; the status follows the engine's
// configuration once it has reloaded.
func TestReload(t *testing.T) {
	f := newAPIFixture(t, nil)
	if code, _ := f.do("POST", "/api/admin/reload", operatorKey, ""); code != 403 {
		t.Errorf("an operator's reload: %d, want 403", code)
	}
	code, body := f.do("POST", "/api/admin/reload", adminKey, `{"reason": "new prompts"}`)
	if cmd := f.json(code, body, 202)["command"].(map[string]any); cmd["kind"] != "reload" || cmd["operator"] != "root" {
		t.Errorf("reload command: %v", cmd)
	}
	reloaded := *f.cfg
	reloaded.Schedule.Every = config.Duration(12 * time.Hour)
	f.reloaded = &reloaded
	code, body = f.do("GET", "/api/status", viewerKey, "")
	// The running cycle started an hour ago: the next is due 11h from now.
	if got := f.json(code, body, 200)["next_scheduled_time"]; got != now.Add(11*time.Hour).Format(time.RFC3339) {
		t.Errorf("next_scheduled_time %v after a reload to every 12h", got)
	}
}

// TestToolsArePaged: GET /api/tools pages by name with after and
// next_after, and since counts the usage from the start of its hour.
func TestToolsArePaged(t *testing.T) {
	f := newAPIFixture(t, nil)
	get := func(path string) map[string]any {
		t.Helper()
		code, body := f.do("GET", path, viewerKey, "")
		return f.json(code, body, 200)
	}
	names := func(page map[string]any) []string {
		var out []string
		for _, v := range page["tools"].([]any) {
			out = append(out, v.(map[string]any)["name"].(string))
		}
		return out
	}
	first := get("/api/tools?limit=1")
	if diff := cmp.Diff([]string{"web_fetch"}, names(first)); diff != "" || first["next_after"] != "web_fetch" {
		t.Errorf("first page %v (-want +got):\n%s", first, diff)
	}
	second := get("/api/tools?limit=1&after=web_fetch")
	if diff := cmp.Diff([]string{"web_search"}, names(second)); diff != "" || second["next_after"] != nil {
		t.Errorf("last page %v (-want +got):\n%s", second, diff)
	}
	if all := get("/api/tools"); len(names(all)) != 2 || all["next_after"] != nil {
		t.Errorf("without limit: %v, want every tool", all)
	}
	usage := func(page map[string]any) any {
		return page["tools"].([]any)[1].(map[string]any)["usage"].(map[string]any)["calls"]
	}
	// The calls were at 08:57:53 and 08:58:53.
	if calls := usage(get("/api/tools?since=2026-03-14T08:59:00Z")); calls != float64(2) {
		t.Errorf("calls since 08:59, counted from 08:00: %v, want 2", calls)
	}
	if calls := usage(get("/api/tools?since=2026-03-14T09:00:00Z")); calls != float64(0) {
		t.Errorf("calls since 09:00: %v, want 0", calls)
	}
	for _, q := range []string{"since=yesterday", "limit=0", "limit=501"} {
		if code, body := f.do("GET", "/api/tools?"+q, viewerKey, ""); code != 400 || !strings.Contains(body, "query parameter") {
			t.Errorf("GET /api/tools?%s: %d %s, want 400 naming the parameter", q, code, body)
		}
	}
}

// TestReadinessWhenHaltedOrPaused: a halted run makes /health/ready 503
// whatever the settings, naming the pipeline and how to resume; a pause
// does only when health.ready_when_paused is false.
func TestReadinessWhenHaltedOrPaused(t *testing.T) {
	tests := []struct {
		name            string
		halted, paused  bool
		readyWhenPaused bool
		code            int
		says            string
	}{
		{name: "running", code: 200},
		{name: "halted", halted: true, readyWhenPaused: true, code: 503, says: "halted, waiting for an operator: crypton (1); resume with `agentrunner resume`"},
		{name: "paused, ready when paused", paused: true, readyWhenPaused: true, code: 200},
		{name: "paused, not ready when paused", paused: true, code: 503, says: "paused by alice since 2026-03-14T09:00:00Z (health.ready_when_paused is false)"},
		{name: "halted and paused", halted: true, paused: true, readyWhenPaused: true, code: 503, says: "halted, waiting for an operator: crypton (1)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newAPIFixture(t, func(c *config.Config) { c.Health.ReadyWhenPaused = tt.readyWhenPaused })
			f.reloaded = f.cfg
			// The fixture's cycle runs; halting it is a change of it.
			c := *f.cycle
			var changes []*agentrunner.Change
			if tt.halted {
				from := c.State()
				c.Status = agentrunner.CycleHalted
				changes = append(changes, &agentrunner.Change{From: from, Cycle: &c})
			}
			if tt.paused {
				changes = append(changes, &agentrunner.Change{Control: &agentrunner.Control{Paused: true, PausedBy: "alice", PausedAt: now.Add(-26*time.Minute - 53*time.Second)}})
			}
			for _, ch := range changes {
				if err := f.store.Apply(t.Context(), ch); err != nil {
					t.Fatal(err)
				}
			}
			code, body := f.do("GET", "/health/ready", viewerKey, "")
			loop := f.json(code, body, tt.code)["checks"].(map[string]any)["loop"].(map[string]any)
			msg, _ := loop["message"].(string)
			if loop["ok"] != (tt.code == 200) || !strings.Contains(msg, tt.says) || (tt.says == "") != (msg == "") {
				t.Errorf("loop check: %v, want ok=%v saying %q", loop, tt.code == 200, tt.says)
			}
		})
	}
}
