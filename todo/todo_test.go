package todo_test

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentrunner/agentrunner"
	"github.com/agentrunner/agentrunner/internal/clocktest"
	"github.com/agentrunner/agentrunner/sqlite"
	"github.com/agentrunner/agentrunner/todo"
	"github.com/agentrunner/agentrunner/tool"
	"github.com/google/go-cmp/cmp"
)

var now = time.Date(2026, 11, 28, 9, 30, 0, 0, time.UTC)

// newService is the to-do lists on a real store.
func newService(t *testing.T) (*todo.Service, *sqlite.Store) {
	t.Helper()
	st, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "state.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return todo.NewService(st, todo.Options{Clock: clocktest.New(now)}), st
}

// plan is a list of three to-dos, the third with the status given.
func plan(third agentrunner.TodoStatus) []agentrunner.Todo {
	return []agentrunner.Todo{
		{ID: "t1", Title: "Survey the funding rates", Status: agentrunner.TodoDone, Note: "positive on three venues"},
		{ID: "t2", Title: "Compare with open interest", Status: agentrunner.TodoInProgress},
		{ID: "t3", Title: "Write the synthesis", Status: third},
	}
}

func TestCheckNamesEachProblemByIndexAndField(t *testing.T) {
	with := func(i int, change func(*agentrunner.Todo)) []agentrunner.Todo {
		todos := plan(agentrunner.TodoPending)
		change(&todos[i])
		return todos
	}
	many := make([]agentrunner.Todo, todo.MaxTodos+1)
	for i := range many {
		many[i] = agentrunner.Todo{ID: fmt.Sprint("t", i), Title: "step", Status: agentrunner.TodoPending}
	}
	for _, tc := range []struct {
		name  string
		todos []agentrunner.Todo
		want  string
	}{
		{"an unknown status", plan("later"), `todos[2].status: "later" is not one of pending, in_progress, done, cancelled`},
		{"no status", with(0, func(td *agentrunner.Todo) { td.Status = "" }), `todos[0].status: "" is not one of`},
		{"an empty id", with(1, func(td *agentrunner.Todo) { td.ID = " " }), "todos[1].id: is empty"},
		{"a long id", with(1, func(td *agentrunner.Todo) { td.ID = strings.Repeat("é", 33) }), "todos[1].id: is 66 bytes, more than 64"},
		{"a repeated id", with(2, func(td *agentrunner.Todo) { td.ID = "t1" }), `todos[2].id: "t1" is the id of todos[0] too`},
		{"an id with a control character", with(0, func(td *agentrunner.Todo) { td.ID = "t\x001" }), "todos[0].id: has a control character (U+0000) at byte 1"},
		{"an empty title", with(2, func(td *agentrunner.Todo) { td.Title = "\n " }), "todos[2].title: is empty"},
		{"a long title", with(0, func(td *agentrunner.Todo) { td.Title = strings.Repeat("x", todo.MaxTitleChars+1) }), "todos[0].title: is 501 characters, more than 500"},
		{"a title over two lines", with(1, func(td *agentrunner.Todo) { td.Title = "one\ntwo" }), "todos[1].title: has a control character (U+000A) at byte 3"},
		{"a note with a bell", with(0, func(td *agentrunner.Todo) { td.Note = "ding\a" }), "todos[0].note: has a control character (U+0007)"},
		{"a long note", with(0, func(td *agentrunner.Todo) { td.Note = strings.Repeat("n", todo.MaxNoteChars+1) }), "todos[0].note: is 2001 characters"},
		{"invalid UTF-8", with(1, func(td *agentrunner.Todo) { td.Title = "bad \xff byte" }), "todos[1].title: is not valid UTF-8 (at byte 4)"},
		{"too many", many, "todos: 101 to-dos, more than 100"},
		{"every problem at once", []agentrunner.Todo{{ID: "a", Title: "", Status: "x"}, {ID: "a", Title: "t", Status: "done"}},
			`todos[0].title: is empty: say what the step of the plan is; todos[0].status: "x" is not one of pending, in_progress, done, cancelled; todos[1].id: "a" is the id of todos[0] too`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := todo.Check(tc.todos)
			if agentrunner.ErrorCode(err) != agentrunner.EINVALID || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Check: %v, want EINVALID saying %q", err, tc.want)
			}
		})
	}

	// A list that passes is stored trimmed; a note may span lines, and a
	// U+FFFD written as such is text.
	in := plan(agentrunner.TodoCancelled)
	in[0].ID, in[1].Title, in[2].Note = " t1 ", "\tCompare with open interest ", "first line\n\tsecond line �"
	got, err := todo.Check(in)
	if err != nil {
		t.Fatal(err)
	}
	want := plan(agentrunner.TodoCancelled)
	want[2].Note = "first line\n\tsecond line �"
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("the checked list (-want +got):\n%s", d)
	}
	if got, err := todo.Check(nil); err != nil || len(got) != 0 {
		t.Errorf("an empty list: %v, %v; want it accepted", got, err)
	}
}

func TestWriteKeepsEveryVersionAndRefusesAStaleOne(t *testing.T) {
	svc, _ := newService(t)
	ctx := context.Background()
	empty, err := svc.Current(ctx, "20261128_090000")
	if err != nil || empty.Version != 0 || len(empty.Todos) != 0 {
		t.Fatalf("the list of a run without one: %+v, %v; want an empty list at version 0", empty, err)
	}
	l := agentrunner.TodoList{RunID: "20261128_090000", Todos: plan(agentrunner.TodoPending), Agent: "lead", Step: "lead"}
	v1, err := svc.Write(ctx, l, 0)
	if err != nil || v1.Version != 1 || !v1.WrittenAt.Equal(now) || v1.Agent != "lead" {
		t.Fatalf("the first write: %+v, %v", v1, err)
	}
	l.Todos = plan(agentrunner.TodoInProgress)
	if v2, err := svc.Write(ctx, l, 1); err != nil || v2.Version != 2 {
		t.Fatalf("a write on version 1: %+v, %v", v2, err)
	}
	_, err = svc.Write(ctx, l, 1)
	if agentrunner.ErrorCode(err) != agentrunner.ECONFLICT || !strings.Contains(err.Error(), "is at version 2, not 1") {
		t.Errorf("a write on version 1 again: %v, want a conflict naming version 2", err)
	}
	l.Todos = plan("soon")
	if _, err := svc.Write(ctx, l, 0); agentrunner.ErrorCode(err) != agentrunner.EINVALID {
		t.Errorf("a list that fails the checks: %v, want EINVALID", err)
	}
	if _, err := svc.Write(ctx, agentrunner.TodoList{Todos: plan(agentrunner.TodoDone)}, 0); agentrunner.ErrorCode(err) != agentrunner.EINVALID {
		t.Errorf("a list of no run: %v, want EINVALID", err)
	}
	hist, err := svc.History(ctx, l.RunID)
	if err != nil || len(hist) != 2 || hist[0].Todos[2].Status != agentrunner.TodoPending || hist[1].Todos[2].Status != agentrunner.TodoInProgress {
		t.Errorf("history: %+v, %v; want versions 1 and 2, oldest first", hist, err)
	}
	if v, err := svc.Version(ctx, l.RunID, 1); err != nil || v.Version != 1 {
		t.Errorf("version 1: %+v, %v", v, err)
	}
	if _, err := svc.Version(ctx, l.RunID, 3); agentrunner.ErrorCode(err) != agentrunner.ENOTFOUND {
		t.Errorf("version 3: %v, want ENOTFOUND", err)
	}
}

// executor is the to-do tools behind a real executor, as an agent's step
// calls them.
func executor(t *testing.T, svc *todo.Service) *tool.Scope {
	t.Helper()
	reg := tool.NewRegistry()
	if err := reg.Register(todo.ReadSpec, svc.ReadHandler()); err != nil {
		t.Fatal(err)
	}
	if err := reg.Register(todo.WriteSpec, svc.WriteHandler()); err != nil {
		t.Fatal(err)
	}
	return tool.NewExecutor(reg, tool.Options{}).Scope([]string{todo.ToolRead, todo.ToolWrite})
}

func TestToolsWorkOnTheCallersRun(t *testing.T) {
	svc, st := newService(t)
	scope := executor(t, svc)
	ctx := context.Background()
	call := func(run, name, args string) agentrunner.ToolResult {
		return scope.Execute(ctx, agentrunner.ToolCall{Name: name, Arguments: json.RawMessage(args), Agent: "lead", Step: "plan", CycleID: run, Attempt: 1})
	}
	const run, other = "20261128_090000", "20261128_100000"

	if res := call(run, todo.ToolRead, `{}`); res.IsError || res.Message != `{"version":0,"todos":[]}` {
		t.Errorf("a read before any write: %+v", res)
	}
	write := `{"todos": [{"id": "t1", "title": "Survey the funding rates", "status": "in_progress"},` +
		`{"id": "t2", "title": "Write the synthesis", "status": "pending", "note": "after t1"}]}`
	res := call(run, todo.ToolWrite, write)
	want := `{"version":1,"todos":[{"id":"t1","title":"Survey the funding rates","status":"in_progress"},` +
		`{"id":"t2","title":"Write the synthesis","status":"pending","note":"after t1"}]}`
	if res.IsError || res.Message != want {
		t.Fatalf("the first write: %+v\nwant message %s", res, want)
	}
	if res := call(run, todo.ToolRead, ``); res.IsError || res.Message != want {
		t.Errorf("a read after it: %+v", res)
	}
	stored, err := st.Todos(ctx, run, 1)
	if err != nil || stored.Agent != "lead" || stored.Step != "plan" || !stored.WrittenAt.Equal(now) {
		t.Errorf("the stored list: %+v, %v; want it written by the caller, now", stored, err)
	}

	// On the version read; then on a stale one.
	res = call(run, todo.ToolWrite, `{"version": 1, "todos": [{"id": "t1", "title": "Survey the funding rates", "status": "done"}]}`)
	if res.IsError || !strings.HasPrefix(res.Message, `{"version":2,`) {
		t.Errorf("a write on version 1: %+v", res)
	}
	res = call(run, todo.ToolWrite, `{"version": 1, "todos": []}`)
	if !res.IsError || !strings.Contains(res.Message, "is at version 2, not 1") || !strings.Contains(res.Message, "read it again") {
		t.Errorf("a write on a stale version: %+v, want a refusal saying to read again", res)
	}
	// What the schema lets through and the checks refuse.
	res = call(run, todo.ToolWrite, `{"todos": [{"id": "a", "title": "x", "status": "done"}, {"id": "a", "title": "y", "status": "done"}]}`)
	if !res.IsError || !strings.Contains(res.Message, `todos[1].id: "a" is the id of todos[0] too`) {
		t.Errorf("repeated ids: %+v", res)
	}
	// What the schema refuses, naming the argument.
	for args, wantIn := range map[string]string{
		`{"todos": [{"id": "a", "title": "x", "status": "later"}]}`:          "/todos/0/status",
		`{"todos": [{"id": "a", "title": "x", "status": "done", "due": 1}]}`: "/todos/0",
		`{"todos": [], "agent": "other"}`:                                    "(root)",
		`{}`:                                                                 "todos",
		`{"todos": [], "version": -1}`:                                       "/version",
	} {
		if res := call(run, todo.ToolWrite, args); !res.IsError || !strings.Contains(res.Message, wantIn) {
			t.Errorf("write %s: %+v, want an error about %s", args, res, wantIn)
		}
	}
	if res := call(run, todo.ToolRead, `{"run": "other"}`); !res.IsError {
		t.Errorf("a read with an argument: %+v", res)
	}

	// Another run has its own list.
	if res := call(other, todo.ToolRead, `{}`); res.IsError || res.Message != `{"version":0,"todos":[]}` {
		t.Errorf("another run's list: %+v", res)
	}
	if l, _ := svc.Current(ctx, run); l.Version != 2 {
		t.Errorf("the run's list is at version %d after the refused writes, want 2", l.Version)
	}

	// A call from no run is refused, saying why.
	for _, name := range []string{todo.ToolRead, todo.ToolWrite} {
		res := call("", name, `{"todos": []}`)
		if name == todo.ToolRead {
			res = call("", name, `{}`)
		}
		if !res.IsError || !strings.HasPrefix(res.Message, name+": the to-do list is the one of the run") || !strings.Contains(res.Message, "comes from no run") {
			t.Errorf("%s from no run: %+v", name, res)
		}
	}
}

// TestHandlersOutsideAnExecutorAreRefused: a handler called without a
// caller (no executor put one in the context) has no run to work on.
func TestHandlersOutsideAnExecutorAreRefused(t *testing.T) {
	svc, _ := newService(t)
	if _, err := svc.ReadHandler().Call(context.Background(), json.RawMessage(`{}`)); err == nil || !strings.Contains(err.Error(), "comes from no run") {
		t.Errorf("a read without a caller: %v", err)
	}
	if _, err := svc.WriteHandler().Call(context.Background(), json.RawMessage(`{"todos": []}`)); err == nil || !strings.Contains(err.Error(), "comes from no run") {
		t.Errorf("a write without a caller: %v", err)
	}
}
