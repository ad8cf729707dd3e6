package http_test

import (
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/agentrunner/agentrunner"
	arhttp "github.com/agentrunner/agentrunner/http"
	"github.com/agentrunner/agentrunner/internal/clocktest"
	"github.com/agentrunner/agentrunner/todo"
	"github.com/google/go-cmp/cmp"
)

// TestTodosShowEveryVersionOfARunsList: the list a run's lead agent
// wrote, on a real store, as the API shows it: the newest version, one
// version, every version, and an empty list for a run without one.
func TestTodosShowEveryVersionOfARunsList(t *testing.T) {
	store := openStore(t)
	ctx := t.Context()
	const run, quiet = "20260314_060000", "20260314_000000"
	for _, id := range []string{quiet, run} {
		if err := store.Apply(ctx, &agentrunner.Change{Cycle: &agentrunner.Cycle{ID: id, Pipeline: "crypton", Status: agentrunner.CycleCompleted,
			Dir: "/w/cycles/" + id, StartedAt: now.Add(-3 * time.Hour), EndedAt: now.Add(-2 * time.Hour)}}); err != nil {
			t.Fatal(err)
		}
	}
	clock := clocktest.New(now.Add(-150 * time.Minute))
	svc := todo.NewService(store, todo.Options{Clock: clock})
	l := agentrunner.TodoList{RunID: run, Agent: "lead", Step: "plan", Todos: []agentrunner.Todo{
		{ID: "t1", Title: "Survey the funding rates", Status: agentrunner.TodoInProgress},
		{ID: "t2", Title: "Write the synthesis", Status: agentrunner.TodoPending},
	}}
	if _, err := svc.Write(ctx, l, 0); err != nil {
		t.Fatal(err)
	}
	clock.Advance(time.Minute)
	l.Todos[0].Status, l.Todos[0].Note = agentrunner.TodoDone, "positive on three venues"
	if _, err := svc.Write(ctx, l, 1); err != nil {
		t.Fatal(err)
	}
	srv := newServer(t, arhttp.Options{Store: store, Config: testConfig(), Clock: clocktest.New(now), Logger: slog.New(slog.DiscardHandler)})
	get := func(target string) (int, string) {
		rec := httptest.NewRecorder()
		srv.Handler().ServeHTTP(rec, localRequest(http.MethodGet, target, nil))
		return rec.Code, rec.Body.String()
	}

	v1 := `{"run_id": "20260314_060000", "version": 1, "written_at": "2026-03-14T06:56:53Z", "agent": "lead", "step": "plan", "todos": [
		{"id": "t1", "title": "Survey the funding rates", "status": "in_progress"},
		{"id": "t2", "title": "Write the synthesis", "status": "pending"}]}`
	v2 := `{"run_id": "20260314_060000", "version": 2, "written_at": "2026-03-14T06:57:53Z", "agent": "lead", "step": "plan", "todos": [
		{"id": "t1", "title": "Survey the funding rates", "status": "done", "note": "positive on three venues"},
		{"id": "t2", "title": "Write the synthesis", "status": "pending"}]}`
	for _, tc := range []struct {
		target string
		want   string
	}{
		{"/api/runs/" + run + "/todos", v2},
		{"/api/runs/" + run + "/todos?history=false", v2},
		{"/api/runs/" + run + "/todos?version=1", v1},
		{"/api/runs/" + run + "/todos?history=true", `{"run_id": "20260314_060000", "versions": [` + v1 + `, ` + v2 + `]}`},
		{"/api/runs/" + quiet + "/todos", `{"run_id": "20260314_000000", "version": 0, "todos": []}`},
		{"/api/runs/" + quiet + "/todos?history=true", `{"run_id": "20260314_000000", "versions": []}`},
	} {
		code, body := get(tc.target)
		if code != http.StatusOK {
			t.Errorf("GET %s: %d\n%s", tc.target, code, body)
			continue
		}
		var got any
		if err := json.Unmarshal([]byte(body), &got); err != nil {
			t.Fatalf("GET %s: %v\n%s", tc.target, err, body)
		}
		if d := cmp.Diff(decode(t, tc.want), got); d != "" {
			t.Errorf("GET %s (-want +got):\n%s", tc.target, d)
		}
	}

	for _, tc := range []struct {
		target string
		code   int
		want   string
	}{
		{"/api/runs/" + run + "/todos?version=3", 404, `run \"20260314_060000\" has no to-do list version 3: its versions are 1 to 2`},
		{"/api/runs/" + quiet + "/todos?version=1", 404, `run \"20260314_000000\" has no to-do list`},
		{"/api/runs/20260101_000000/todos", 404, "no run 20260101_000000"},
		{"/api/runs/" + run + "/todos?version=two", 400, `query parameter version: want a version, 1 or more, got \"two\"`},
		{"/api/runs/" + run + "/todos?version=1&history=true", 400, "give one, not both"},
		{"/api/runs/" + run + "/todos?history=yes", 400, `query parameter history: want true or false`},
		{"/api/runs/" + run + "/todos?step=plan", 400, `unknown query parameter \"step\"`},
		{"/api/runs/" + run + "/todos?version=1&version=2", 400, "given 2 times"},
	} {
		code, body := get(tc.target)
		if code != tc.code || !strings.Contains(body, tc.want) {
			t.Errorf("GET %s: %d %s, want %d saying %s", tc.target, code, body, tc.code, tc.want)
		}
	}
}
