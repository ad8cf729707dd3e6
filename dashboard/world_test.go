package dashboard

import (
	"encoding/base64"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/agentrunner/agentrunner"
	"github.com/agentrunner/agentrunner/config"
	arhttp "github.com/agentrunner/agentrunner/http"
	"github.com/agentrunner/agentrunner/internal/clocktest"
	"github.com/agentrunner/agentrunner/internal/runtest"
	"github.com/agentrunner/agentrunner/sqlite"
	"github.com/agentrunner/agentrunner/workspace"
)

// The test's API keys, one per role.
const (
	viewerKey   = "viewer-key-0123456789abcdef"
	operatorKey = "operator-key-0123456789abcdef"
	adminKey    = "admin-key-0123456789abcdef"
)

// world is the API and the dashboard on 127.0.0.1 over a real SQLite
// store, with a real scheduler running the review pipeline of runtest:
// a scripted draft, the gate signoff, and publish on approve.
type world struct {
	t     testing.TB
	store *sqlite.Store
	sched *runtest.Scheduler
	kind  *runtest.HoldKind
	clock *clocktest.Clock
	url   string
	// auth is the API's authenticator, for a test to reload credentials.
	auth *arhttp.Authenticator
}

// newWorld serves a world; with auth, API keys are configured (grafana:
// viewer, alice: operator, root: admin), else every caller is the local
// admin.
func newWorld(t testing.TB, auth bool) *world {
	t.Helper()
	return newWorldWith(t, auth, worldSetup{})
}

// worldSetup changes a world before it is served.
type worldSetup struct {
	// config changes the configuration before any server reads it.
	config func(*config.Config)
	// workspace is the dashboard's workspace.
	workspace *workspace.Workspace
}

// newWorldWith serves a world set up as setup says.
func newWorldWith(t testing.TB, auth bool, setup worldSetup) *world {
	t.Helper()
	dir := t.TempDir()
	store, err := sqlite.Open(t.Context(), filepath.Join(dir, "state.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	w := &world{t: t, store: store, kind: &runtest.HoldKind{Hold: runtest.HeldInputs}, clock: clocktest.New(time.Now().UTC())}
	pipelines := runtest.Pipelines(runtest.ReviewPipeline())
	w.sched = runtest.Start(t, store, dir, w.kind, pipelines)
	t.Cleanup(w.kind.Release)
	cfg := &config.Config{Name: "crypton", Dir: dir, ArtifactsDir: filepath.Join(dir, "artifacts"),
		Agents: map[string]*config.Agent{"writer": {}, "reviewer": {}}}
	cfg.Server.MaxBodyBytes = 1 << 20
	if setup.config != nil {
		setup.config(cfg)
	}
	if err := os.MkdirAll(cfg.ArtifactsDir, 0o755); err != nil {
		t.Fatal(err)
	}
	if auth {
		cfg.Server.Auth.APIKeys = []config.APIKey{
			{Name: "grafana", KeyEnv: "VIEWER_KEY", Role: config.RoleViewer},
			{Name: "alice", KeyEnv: "OPERATOR_KEY", Role: config.RoleOperator},
			{Name: "root", KeyEnv: "ADMIN_KEY", Role: config.RoleAdmin},
		}
	}
	env := map[string]string{"VIEWER_KEY": viewerKey, "OPERATOR_KEY": operatorKey, "ADMIN_KEY": adminKey}
	authn, err := arhttp.NewAuthenticator(cfg.Server.Auth, dir, func(k string) (string, bool) { v, ok := env[k]; return v, ok }, nil)
	if err != nil {
		t.Fatal(err)
	}
	w.auth = authn
	api, err := arhttp.New(arhttp.Options{Store: store, Config: cfg, Auth: authn, Logger: slog.New(slog.DiscardHandler),
		Pipelines: pipelines, Runs: w.sched})
	if err != nil {
		t.Fatal(err)
	}
	var ws func() *workspace.Workspace
	if setup.workspace != nil {
		ws = func() *workspace.Workspace { return setup.workspace }
	}
	dash, err := New(Options{Store: store, Config: cfg, Workspace: ws, Pipelines: pipelines, API: api, Clock: w.clock, Logger: testLogger(t), OnAuthenticated: api.MarkAuthenticated})
	if err != nil {
		t.Fatal(err)
	}
	api.Mount(dash)
	ts := httptest.NewServer(api.Handler())
	t.Cleanup(ts.Close)
	w.url = ts.URL
	return w
}

// browser is a client with its own cookies that does not follow
// redirects, so a test sees each answer.
type browser struct {
	w      *world
	client *http.Client
}

func (w *world) browser() *browser {
	jar, _ := cookiejar.New(nil)
	return &browser{w: w, client: &http.Client{Jar: jar, Timeout: 20 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
}

// page is an answer: its status, headers and body.
type page struct {
	status int
	header http.Header
	body   string
}

// do sends a request with extra headers.
func (b *browser) do(method, path string, form url.Values, header map[string]string) page {
	b.w.t.Helper()
	var rd io.Reader
	if form != nil {
		rd = strings.NewReader(form.Encode())
	}
	req, err := http.NewRequestWithContext(b.w.t.Context(), method, b.w.url+path, rd)
	if err != nil {
		b.w.t.Fatal(err)
	}
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := b.client.Do(req)
	if err != nil {
		b.w.t.Fatal(err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		b.w.t.Fatal(err)
	}
	return page{status: resp.StatusCode, header: resp.Header, body: string(data)}
}

func (b *browser) get(path string) page { return b.do(http.MethodGet, path, nil, nil) }

func (b *browser) post(path string, form url.Values) page {
	return b.do(http.MethodPost, path, form, nil)
}

// login signs in with key and fails the test if that does not work.
func (b *browser) login(key string) {
	b.w.t.Helper()
	p := b.post("/login", url.Values{"credential": {key}, "next": {"/"}})
	if p.status != http.StatusSeeOther {
		b.w.t.Fatalf("login: %d\n%s", p.status, p.body)
	}
}

var csrfField = regexp.MustCompile(`name="csrf" value="([^"]+)"`)

// csrf reads the CSRF token from a page the session was shown.
func (b *browser) csrf() string {
	b.w.t.Helper()
	p := b.get("/confirm?action=pause")
	if m := csrfField.FindStringSubmatch(p.body); m != nil {
		return m[1]
	}
	p = b.get("/")
	m := csrfField.FindStringSubmatch(p.body)
	if m == nil {
		b.w.t.Fatalf("no CSRF token on the page:\n%s", p.body)
	}
	return m[1]
}

// startRun starts a run of the review pipeline through the API and
// waits until its gate signoff waits.
func (w *world) startRun(hold bool) string {
	w.t.Helper()
	req, _ := http.NewRequestWithContext(w.t.Context(), http.MethodPost, w.url+"/api/pipelines/review/runs",
		strings.NewReader(`{"inputs": {"hold": `+map[bool]string{true: "true", false: "false"}[hold]+`}}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+operatorKey)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		w.t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusCreated && resp.StatusCode != http.StatusAccepted {
		w.t.Fatalf("start a run: %d", resp.StatusCode)
	}
	runs, err := w.store.Runs(w.t.Context(), agentrunner.RunFilter{Pipeline: "review", Limit: 1})
	if err != nil || len(runs) == 0 {
		w.t.Fatalf("no run was started: %v", err)
	}
	return runs[0].ID
}

// waitFor polls cond until it holds, or fails the test.
func (w *world) waitFor(what string, cond func() bool) {
	w.t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for time.Now().Before(deadline) {
		if cond() {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	w.t.Fatalf("timed out waiting for %s", what)
}

// gateWaits reports whether run's gate signoff waits.
func (w *world) gateWaits(run string) bool {
	srs, err := w.store.StepRuns(w.t.Context(), agentrunner.StepRunFilter{RunID: run, Status: agentrunner.StepRunWaiting})
	return err == nil && len(srs) == 1
}

// runStatus returns a run's status.
func (w *world) runStatus(run string) agentrunner.RunStatus {
	r, err := w.store.Run(w.t.Context(), run)
	if err != nil {
		w.t.Fatal(err)
	}
	return r.Status
}

func decodeB64(t testing.TB, s string) string {
	t.Helper()
	data, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

func encodeB64(s string) string { return base64.RawURLEncoding.EncodeToString([]byte(s)) }

// fmtArgs shows a command's arguments, keys sorted.
func fmtArgs(args map[string]any) string { return fmt.Sprint(args) }

// testLogger logs to the test's output, so a failure shows the cause of
// a 500.
func testLogger(t testing.TB) *slog.Logger {
	return slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelWarn}))
}

type testWriter struct{ t testing.TB }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}
