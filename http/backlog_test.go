package http_test

import (
	"encoding/json"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/agentrunner/agentrunner"
	"github.com/agentrunner/agentrunner/backlog"
	arhttp "github.com/agentrunner/agentrunner/http"
	"github.com/agentrunner/agentrunner/internal/runtest"
)

// newBacklogWorld serves the backlog workspace of runtest.Backlog with a
// real scheduler over a real store; every agent's attempt waits until the
// test ends, so an item stays in its first state, Refining. It returns
// the world and a git repository to add items about.
func newBacklogWorld(t *testing.T) (*runsWorld, string) {
	t.Helper()
	repo := runtest.GitRepo(t)
	cfg, ps := runtest.Backlog(t, t.TempDir())
	kind := &runtest.HoldKind{Hold: func(*agentrunner.StepAttempt) bool { return true }}
	t.Cleanup(kind.Release)
	return startRunsWorld(t, kind, cfg, ps, nil), repo
}

// decodeAs turns an answer decoded as JSON into T.
func decodeAs[T any](t *testing.T, v any) T {
	t.Helper()
	var out T
	data, err := json.Marshal(v)
	if err == nil {
		err = json.Unmarshal(data, &out)
	}
	if err != nil {
		t.Fatalf("%v: %v", v, err)
	}
	return out
}

// jsonBody is v as a request body.
func jsonBody(t *testing.T, v any) string {
	t.Helper()
	data, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

// add adds an item through the API and returns the answer.
func (w *runsWorld) add(req arhttp.AddBacklogItemRequest) arhttp.AddedBacklogItem {
	w.t.Helper()
	code, h, v := w.call("POST", "/api/backlog", operatorKey, jsonBody(w.t, req))
	if code != http.StatusCreated {
		w.t.Fatalf("POST /api/backlog: %d, want 201: %v", code, v)
	}
	added := decodeAs[arhttp.AddedBacklogItem](w.t, v)
	if added.Item == nil || added.CommandID == 0 {
		w.t.Fatalf("POST /api/backlog: 201 without the item or the command: %v", v)
	}
	if loc := h.Get("Location"); loc != "/api/backlog/"+added.Item.ID {
		w.t.Errorf("Location %q, want /api/backlog/%s", loc, added.Item.ID)
	}
	return added
}

// itemSummary is what a test compares of an item, without its times.
type itemSummary struct {
	ID     string
	Item   backlog.Item
	Status agentrunner.RunStatus
	States []string
	Tasks  []string
}

func summarize(it *backlog.ItemView) itemSummary {
	s := itemSummary{ID: it.ID, Item: it.Item, Status: it.Status, States: it.States}
	for _, task := range it.Tasks {
		s.Tasks = append(s.Tasks, task.ID)
	}
	return s
}

// TestBacklogItemsAreAddedAndShown: an item added through the API is a
// run of the backlog pipeline whose inputs hold the item completed from
// its repository (top-level folder, the branch checked out, the detected
// language), started through the run.start command attributed to the
// caller; the lists and the item show it with its state and its tasks
// in execution order.
func TestBacklogItemsAreAddedAndShown(t *testing.T) {
	w, repo := newBacklogWorld(t)
	top, err := filepath.EvalSymlinks(repo)
	if err != nil {
		t.Fatal(err)
	}
	first := w.add(arhttp.AddBacklogItemRequest{Title: "Greeting", Description: "- first\n- second", Repo: filepath.Join(repo, ".")})
	second := w.add(arhttp.AddBacklogItemRequest{Title: "Farewell", AcceptanceCriteria: "says bye", Priority: "high", Repo: repo, BaseBranch: "release"})

	ctx := backlog.Context{Language: "go", Framework: "go", RepoPath: top}
	wantFirst := itemSummary{ID: "backlog-000001", Status: agentrunner.RunRunning, States: []string{"Refining"},
		Item: backlog.Item{Title: "Greeting", Description: "- first\n- second", Repo: top, BaseBranch: "main", Context: ctx}}
	wantSecond := itemSummary{ID: "backlog-000002", Status: agentrunner.RunRunning, States: []string{"Refining"},
		Item: backlog.Item{Title: "Farewell", AcceptanceCriteria: "says bye", Priority: "high", Repo: top, BaseBranch: "release", Context: ctx}}
	if diff := cmp.Diff(wantFirst, summarize(first.Item)); diff != "" {
		t.Errorf("the first item added (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(wantSecond, summarize(second.Item)); diff != "" {
		t.Errorf("the second item added (-want +got):\n%s", diff)
	}

	// The run's inputs are the item, context and base branch included.
	run := decodeAs[arhttp.RunDetail](t, w.want(200, "GET", "/api/runs/backlog-000001", viewerKey, "")).Run
	wantInputs := map[string]any{"title": "Greeting", "description": "- first\n- second", "repo": top, "base_branch": "main",
		"context": map[string]any{"language": "go", "framework": "go", "repoPath": top}}
	if run.Pipeline != "backlog" || !cmp.Equal(wantInputs, run.Inputs) {
		t.Errorf("run %s of %s, inputs (-want +got):\n%s", run.ID, run.Pipeline, cmp.Diff(wantInputs, run.Inputs))
	}
	// Audited as every start: the run.start command, by the caller.
	audit := decodeAs[arhttp.CommandList](t, w.want(200, "GET", "/api/audit", viewerKey, ""))
	if len(audit.Commands) != 2 {
		t.Fatalf("audit: %d commands, want the 2 starts: %+v", len(audit.Commands), audit.Commands)
	}
	for _, c := range audit.Commands {
		if c.Kind != agentrunner.CommandStartRun || c.Operator != "alice" || c.Args["pipeline"] != "backlog" || !strings.HasPrefix(c.Result, "started run backlog-") {
			t.Errorf("audit: %+v, want alice's run.start of backlog, started", c)
		}
	}

	// Two tasks of the first item, the second in execution order added first.
	items := map[string]*agentrunner.Run{}
	for _, id := range []string{"backlog-000001", "backlog-000002"} {
		if items[id], err = w.store.Run(t.Context(), id); err != nil {
			t.Fatal(err)
		}
	}
	runtest.AddTask(t, w.store, items["backlog-000001"], 2, "second")
	runtest.AddTask(t, w.store, items["backlog-000001"], 1, "first")

	lists := []struct {
		query string
		want  []string
	}{
		{"", []string{"backlog-000002", "backlog-000001"}},
		{"?status=running", []string{"backlog-000002", "backlog-000001"}},
		{"?status=completed", nil},
		{"?limit=1", []string{"backlog-000002"}},
	}
	for _, tt := range lists {
		list := decodeAs[arhttp.BacklogList](t, w.want(200, "GET", "/api/backlog"+tt.query, viewerKey, ""))
		var got []string
		for _, it := range list.Items {
			got = append(got, it.ID)
			if len(it.Tasks) != 0 {
				t.Errorf("GET /api/backlog%s: item %s lists its tasks", tt.query, it.ID)
			}
		}
		if diff := cmp.Diff(tt.want, got); diff != "" {
			t.Errorf("GET /api/backlog%s (-want +got):\n%s", tt.query, diff)
		}
	}

	item := decodeAs[backlog.ItemView](t, w.want(200, "GET", "/api/backlog/backlog-000001", viewerKey, ""))
	wantFirst.Tasks = []string{"task-000001", "task-000002"}
	if diff := cmp.Diff(wantFirst, summarize(&item)); diff != "" {
		t.Errorf("GET /api/backlog/backlog-000001 (-want +got):\n%s", diff)
	}

	tasks := []struct {
		query string
		want  []string
	}{
		{"", []string{"task-000002", "task-000001"}},
		{"?item=backlog-000001", []string{"task-000002", "task-000001"}},
		{"?item=backlog-000002", nil},
		{"?status=running&limit=1", []string{"task-000002"}},
		{"?status=failed", nil},
	}
	for _, tt := range tasks {
		list := decodeAs[arhttp.TaskList](t, w.want(200, "GET", "/api/tasks"+tt.query, viewerKey, ""))
		var got []string
		for _, task := range list.Tasks {
			got = append(got, task.ID)
		}
		if diff := cmp.Diff(tt.want, got); diff != "" {
			t.Errorf("GET /api/tasks%s (-want +got):\n%s", tt.query, diff)
		}
	}

	task := decodeAs[backlog.TaskView](t, w.want(200, "GET", "/api/tasks/task-000001", viewerKey, ""))
	got := []any{task.Title, task.ExecutionOrder, task.Item.ID, task.Item.Title, task.Branch, task.BaseBranch, task.Context, task.Status, task.States}
	want := []any{"first", 1, "backlog-000001", "Greeting", "task/task-000001", "main", ctx, agentrunner.RunRunning, []string{"Planning"}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("GET /api/tasks/task-000001 (-want +got):\n%s", diff)
	}

	notFound := []struct{ path, message string }{
		{"/api/backlog/task-000001", "not a backlog item"},
		{"/api/backlog/backlog-000009", "no backlog item backlog-000009"},
		{"/api/tasks/backlog-000001", "not a task"},
		{"/api/tasks/task-000009", "no task task-000009"},
	}
	for _, tt := range notFound {
		e := w.want(404, "GET", tt.path, viewerKey, "")["error"].(map[string]any)
		if msg, _ := e["message"].(string); !strings.Contains(msg, tt.message) {
			t.Errorf("GET %s: %v, want a message with %q", tt.path, e, tt.message)
		}
	}
	for _, path := range []string{"/api/backlog/-x", "/api/tasks?item=-x", "/api/backlog?status=sleeping", "/api/backlog?item=backlog-000001", "/api/tasks?limit=0"} {
		w.want(400, "GET", path, viewerKey, "")
	}
}

// TestAddBacklogItemRefusesWhatCannotBeWorkedOn: an item without a title,
// with a repo that is relative, missing or not a repository, or a body
// with an unknown field, is refused with a message naming the field, and
// nothing is started; a viewer may not add items.
func TestAddBacklogItemRefusesWhatCannotBeWorkedOn(t *testing.T) {
	w, repo := newBacklogWorld(t)
	plain := t.TempDir()
	tests := []struct {
		name  string
		body  string
		code  int
		names []string
	}{
		{"no title", jsonBody(t, map[string]any{"repo": repo}), 422, []string{"needs title"}},
		{"a blank title and no repo", `{"title": "  "}`, 422, []string{"title and repo"}},
		{"a relative repo", jsonBody(t, map[string]any{"title": "x", "repo": "greet"}), 422, []string{`repo "greet"`, "absolute path"}},
		{"a missing repo", jsonBody(t, map[string]any{"title": "x", "repo": filepath.Join(plain, "nosuch")}), 422, []string{"repo " + filepath.Join(plain, "nosuch"), "does not exist"}},
		{"a folder that is not a repository", jsonBody(t, map[string]any{"title": "x", "repo": plain}), 422, []string{"repo " + plain, "not inside a git repository"}},
		{"an unknown field", jsonBody(t, map[string]any{"title": "x", "repo": repo, "owner": "me"}), 400, []string{`unknown field "owner"`}},
		{"no body", "", 400, []string{"not valid JSON"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := w.want(tt.code, "POST", "/api/backlog", operatorKey, tt.body)["error"].(map[string]any)
			msg, _ := e["message"].(string)
			for _, n := range tt.names {
				if !strings.Contains(msg, n) {
					t.Errorf("the message does not name %q: %s", n, msg)
				}
			}
		})
	}
	w.want(403, "POST", "/api/backlog", viewerKey, jsonBody(t, map[string]any{"title": "x", "repo": repo}))
	if list := decodeAs[arhttp.BacklogList](t, w.want(200, "GET", "/api/backlog", viewerKey, "")); len(list.Items) != 0 {
		t.Errorf("refused items started runs: %+v", list.Items)
	}
	if audit := decodeAs[arhttp.CommandList](t, w.want(200, "GET", "/api/audit", viewerKey, "")); len(audit.Commands) != 0 {
		t.Errorf("refused items left commands: %+v", audit.Commands)
	}
}

// TestBacklogNeedsABacklogSection: a workspace without backlog: answers
// 404 on every backlog route, saying to add it.
func TestBacklogNeedsABacklogSection(t *testing.T) {
	w := newRunsWorld(t, &runtest.HoldKind{}, nil, runtest.LoadPipeline(0))
	calls := []struct{ method, path, body string }{
		{"GET", "/api/backlog", ""},
		{"POST", "/api/backlog", `{"title": "x", "repo": "/x"}`},
		{"GET", "/api/backlog/backlog-000001", ""},
		{"GET", "/api/tasks", ""},
		{"GET", "/api/tasks/task-000001", ""},
	}
	for _, c := range calls {
		e := w.want(404, c.method, c.path, operatorKey, c.body)["error"].(map[string]any)
		if msg, _ := e["message"].(string); !strings.Contains(msg, "add backlog: {pipeline: NAME} to agentrunner.yaml") {
			t.Errorf("%s %s: %v, want a message saying to add backlog:", c.method, c.path, e)
		}
	}
}
