package http_test

import (
	"net/http"
	"net/http/httptest"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentrunner/agentrunner"
	arhttp "github.com/agentrunner/agentrunner/http"
	"github.com/agentrunner/agentrunner/internal/runtest"
)

// apiBacklog is the backlog of the OpenAPI tests: a server of the backlog
// workspace with a real scheduler over its own store, one item added
// about a git repository, held in Refining, and one task of it.
type apiBacklog struct {
	srv              *arhttp.Server
	repo, item, task string
}

// startAPIBacklog serves the backlog workspace; nil when git is not
// installed, as the items' repositories need it.
func startAPIBacklog(t *testing.T, w *apiWorld) *apiBacklog {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		t.Log("git is not installed: the backlog's routes are not exercised")
		return nil
	}
	b := &apiBacklog{repo: runtest.GitRepo(t)}
	cfg, ps := runtest.Backlog(t, t.TempDir())
	cfg.Server.MaxBodyBytes = 1 << 20
	kind := &runtest.HoldKind{Hold: func(*agentrunner.StepAttempt) bool { return true }}
	t.Cleanup(kind.Release)
	store := openStore(t)
	sched := runtest.Start(t, store, cfg.Dir, kind, ps)
	b.srv = w.server(t, func(o *arhttp.Options) { o.Store, o.Config, o.Pipelines, o.Runs = store, cfg, ps, sched })

	rec := httptest.NewRecorder()
	b.srv.Handler().ServeHTTP(rec, localRequest(http.MethodPost, "/api/backlog", strings.NewReader(b.itemBody(t, "Greeting", ""))))
	if rec.Code != http.StatusCreated {
		t.Fatalf("POST /api/backlog: %d\n%s", rec.Code, rec.Body)
	}
	b.item = "backlog-000001"
	run, err := store.Run(t.Context(), b.item)
	if err != nil {
		t.Fatal(err)
	}
	b.task = runtest.AddTask(t, store, run, 1, "first")
	return b
}

// itemBody is the body of POST /api/backlog adding an item about the
// repository, with extra fields when not empty.
func (b *apiBacklog) itemBody(t *testing.T, title, extra string) string {
	t.Helper()
	body := jsonBody(t, map[string]any{"title": title, "description": "- first\n- second", "repo": b.repo})
	if extra != "" {
		body = strings.TrimSuffix(body, "}") + ", " + extra + "}"
	}
	return body
}

// backlogCases are the OpenAPI tests' requests of the backlog's routes,
// served by srv; none when b is nil.
func backlogCases(t *testing.T, b *apiBacklog, srv string) []apiCase {
	if b == nil {
		return nil
	}
	notRepo := t.TempDir()
	return []apiCase{
		{name: "backlog without a backlog", method: "GET", target: "/api/backlog", want: 404},
		{name: "add an item without a backlog", method: "POST", target: "/api/backlog", body: b.itemBody(t, "x", ""), want: 404},
		{name: "tasks without a backlog", method: "GET", target: "/api/tasks", want: 404},
		{name: "backlog", srv: srv, method: "GET", target: "/api/backlog", want: 200},
		{name: "backlog by status", srv: srv, method: "GET", target: "/api/backlog?status=running&limit=1", want: 200},
		{name: "backlog of an unknown status", srv: srv, method: "GET", target: "/api/backlog?status=sleeping", want: 400},
		{name: "backlog with an unknown parameter", srv: srv, method: "GET", target: "/api/backlog?owner=me", want: 400},
		{name: "add an item", srv: srv, method: "POST", target: "/api/backlog", body: b.itemBody(t, "Farewell", `"priority": "high", "base_branch": "main"`), want: 201},
		{name: "add an item without a title", srv: srv, method: "POST", target: "/api/backlog", body: jsonBody(t, map[string]any{"repo": b.repo}), want: 422, breaksSchema: true},
		{name: "add an item about a relative repo", srv: srv, method: "POST", target: "/api/backlog", body: `{"title": "x", "repo": "greet"}`, want: 422},
		{name: "add an item about a folder that is no repository", srv: srv, method: "POST", target: "/api/backlog", body: jsonBody(t, map[string]any{"title": "x", "repo": filepath.Join(notRepo, ".")}), want: 422},
		{name: "add an item with an unknown field", srv: srv, method: "POST", target: "/api/backlog", body: b.itemBody(t, "x", `"owner": "me"`), want: 400, breaksSchema: true},
		{name: "a backlog item", srv: srv, method: "GET", target: "/api/backlog/" + b.item, want: 200},
		{name: "a task as a backlog item", srv: srv, method: "GET", target: "/api/backlog/" + b.task, want: 404},
		{name: "a backlog item of a bad id", srv: srv, method: "GET", target: "/api/backlog/-x", want: 400},
		{name: "tasks", srv: srv, method: "GET", target: "/api/tasks", want: 200},
		{name: "an item's tasks", srv: srv, method: "GET", target: "/api/tasks?item=" + b.item + "&status=running&limit=5", want: 200},
		{name: "tasks of a bad item id", srv: srv, method: "GET", target: "/api/tasks?item=-x", want: 400},
		{name: "a task", srv: srv, method: "GET", target: "/api/tasks/" + b.task, want: 200},
		{name: "an item as a task", srv: srv, method: "GET", target: "/api/tasks/" + b.item, want: 404},
	}
}

// backlogRoute reports whether an operation is one of the backlog's,
// which are exercised only where git is installed.
func backlogRoute(op apiOperation) bool {
	return strings.HasPrefix(op.Path, "/api/backlog") || strings.HasPrefix(op.Path, "/api/tasks")
}
