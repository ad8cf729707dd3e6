package storetest

import (
	"context"
	"testing"
	"time"

	"github.com/agentrunner/agentrunner"
	"github.com/google/go-cmp/cmp"
)

// todoTests are the cases of the runs' to-do lists.
var todoTests = []struct {
	name string
	fn   func(t *testing.T, s agentrunner.Store)
}{
	{"TodoVersionsGrowFromOne", testTodoVersions},
	{"TodoHistoryIsEveryVersionOldestFirst", testTodoHistory},
	{"TodoWriteOnAStaleVersionConflicts", testTodoConflict},
	{"TodosOfARunWithoutAListAreNotFound", testTodosNotFound},
	{"TodoListsOfRunsAreApart", testTodosApart},
}

var todoTime = time.Date(2026, 11, 28, 10, 0, 0, 0, time.UTC)

// todoList is a list of run with one to-do per title, each pending.
func todoList(run string, minute int, titles ...string) *agentrunner.TodoList {
	l := &agentrunner.TodoList{RunID: run, WrittenAt: todoTime.Add(time.Duration(minute) * time.Minute), Agent: "lead", Step: "lead"}
	for i, title := range titles {
		l.Todos = append(l.Todos, agentrunner.Todo{ID: "t" + string(rune('1'+i)), Title: title, Status: agentrunner.TodoPending})
	}
	return l
}

func writeTodos(t *testing.T, s agentrunner.Store, l *agentrunner.TodoList, expected int) *agentrunner.TodoList {
	t.Helper()
	out, err := s.WriteTodos(context.Background(), l, expected)
	if err != nil {
		t.Fatalf("WriteTodos(%s, expected %d): %v", l.RunID, expected, err)
	}
	return out
}

func testTodoVersions(t *testing.T, s agentrunner.Store) {
	ctx := context.Background()
	first := todoList("run-1", 0, "Survey the funding rates")
	first.Todos[0].Note = "three venues"
	got := writeTodos(t, s, first, 0)
	want := *first
	want.Version = 1
	if d := cmp.Diff(&want, got); d != "" {
		t.Errorf("the first write (-want +got):\n%s", d)
	}
	second := todoList("run-1", 1, "Survey the funding rates", "Compare with open interest")
	second.Todos[0].Status = agentrunner.TodoDone
	if got := writeTodos(t, s, second, 1); got.Version != 2 {
		t.Errorf("the second write is version %d, want 2", got.Version)
	}
	// Version 0 writes whatever the list is at.
	third := todoList("run-1", 2)
	if got := writeTodos(t, s, third, 0); got.Version != 3 || got.Todos != nil {
		t.Errorf("the third write (an empty list): %+v, want version 3 without to-dos", got)
	}

	newest, err := s.Todos(ctx, "run-1", 0)
	if err != nil || newest.Version != 3 || len(newest.Todos) != 0 {
		t.Fatalf("the newest list: %+v, %v; want version 3, empty", newest, err)
	}
	v2, err := s.Todos(ctx, "run-1", 2)
	want2 := *second
	want2.Version = 2
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(&want2, v2); d != "" {
		t.Errorf("version 2 (-want +got):\n%s", d)
	}
	if v1, err := s.Todos(ctx, "run-1", 1); err != nil || v1.Todos[0].Note != "three venues" || !v1.WrittenAt.Equal(first.WrittenAt) {
		t.Errorf("version 1: %+v, %v", v1, err)
	}
}

func testTodoHistory(t *testing.T, s agentrunner.Store) {
	for i, titles := range [][]string{{"a"}, {"a", "b"}, {"b"}} {
		writeTodos(t, s, todoList("run-1", i, titles...), i)
	}
	hist, err := s.TodoHistory(context.Background(), "run-1")
	if err != nil {
		t.Fatal(err)
	}
	var got [][]string
	for i, l := range hist {
		if l.Version != i+1 || l.RunID != "run-1" || l.Agent != "lead" || !l.WrittenAt.Equal(todoTime.Add(time.Duration(i)*time.Minute)) {
			t.Errorf("history[%d] = %+v", i, l)
		}
		var titles []string
		for _, td := range l.Todos {
			titles = append(titles, td.Title)
		}
		got = append(got, titles)
	}
	if d := cmp.Diff([][]string{{"a"}, {"a", "b"}, {"b"}}, got); d != "" {
		t.Errorf("history, oldest first (-want +got):\n%s", d)
	}
	if hist, err := s.TodoHistory(context.Background(), "run-2"); err != nil || len(hist) != 0 {
		t.Errorf("the history of a run without a list: %v, %v; want none", hist, err)
	}
}

func testTodoConflict(t *testing.T, s agentrunner.Store) {
	ctx := context.Background()
	// Expecting a version of a run without a list.
	if _, err := s.WriteTodos(ctx, todoList("run-1", 0, "a"), 1); agentrunner.ErrorCode(err) != agentrunner.ECONFLICT {
		t.Errorf("a write expecting version 1 of no list: %v, want a conflict", err)
	}
	writeTodos(t, s, todoList("run-1", 0, "a"), 0)
	writeTodos(t, s, todoList("run-1", 1, "a", "b"), 1)
	// A writer that read version 1 comes late.
	_, err := s.WriteTodos(ctx, todoList("run-1", 2, "c"), 1)
	if agentrunner.ErrorCode(err) != agentrunner.ECONFLICT {
		t.Fatalf("a write on a stale version: %v, want a conflict", err)
	}
	if l, err := s.Todos(ctx, "run-1", 0); err != nil || l.Version != 2 || len(l.Todos) != 2 {
		t.Errorf("after the refused write the list is %+v, %v; want version 2 as it was", l, err)
	}
	for _, bad := range []struct {
		l        *agentrunner.TodoList
		expected int
	}{
		{todoList("", 0, "a"), 0},
		{todoList("run-1", 0, "a"), -1},
		{&agentrunner.TodoList{RunID: "run-1"}, 0},
	} {
		if _, err := s.WriteTodos(ctx, bad.l, bad.expected); agentrunner.ErrorCode(err) != agentrunner.EINVALID {
			t.Errorf("WriteTodos(%+v, %d): %v, want EINVALID", bad.l, bad.expected, err)
		}
	}
	if _, err := s.Todos(ctx, "run-1", -1); agentrunner.ErrorCode(err) != agentrunner.EINVALID {
		t.Errorf("version -1: %v, want EINVALID", err)
	}
}

func testTodosNotFound(t *testing.T, s agentrunner.Store) {
	ctx := context.Background()
	if _, err := s.Todos(ctx, "run-1", 0); agentrunner.ErrorCode(err) != agentrunner.ENOTFOUND {
		t.Errorf("the newest list of a run without one: %v, want ENOTFOUND", err)
	}
	if _, err := s.Todos(ctx, "run-1", 1); agentrunner.ErrorCode(err) != agentrunner.ENOTFOUND {
		t.Errorf("version 1 of a run without a list: %v, want ENOTFOUND", err)
	}
	writeTodos(t, s, todoList("run-1", 0, "a"), 0)
	if _, err := s.Todos(ctx, "run-1", 2); agentrunner.ErrorCode(err) != agentrunner.ENOTFOUND {
		t.Errorf("a version not written yet: %v, want ENOTFOUND", err)
	}
}

func testTodosApart(t *testing.T, s agentrunner.Store) {
	ctx := context.Background()
	writeTodos(t, s, todoList("run-1", 0, "one"), 0)
	writeTodos(t, s, todoList("run-1", 1, "one", "two"), 0)
	// Another run's list starts at version 1, and expecting run-1's
	// version of it is a conflict.
	if _, err := s.WriteTodos(ctx, todoList("run-2", 0, "x"), 2); agentrunner.ErrorCode(err) != agentrunner.ECONFLICT {
		t.Errorf("run-2 written at run-1's version: %v, want a conflict", err)
	}
	if got := writeTodos(t, s, todoList("run-2", 0, "x"), 0); got.Version != 1 {
		t.Errorf("run-2's first list is version %d, want 1", got.Version)
	}
	for run, want := range map[string]struct {
		version int
		title   string
	}{"run-1": {2, "two"}, "run-2": {1, "x"}} {
		l, err := s.Todos(ctx, run, 0)
		if err != nil || l.RunID != run || l.Version != want.version || l.Todos[len(l.Todos)-1].Title != want.title {
			t.Errorf("%s: %+v, %v; want version %d ending with %q", run, l, err, want.version, want.title)
		}
		if hist, _ := s.TodoHistory(ctx, run); len(hist) != want.version {
			t.Errorf("%s has %d versions, want %d", run, len(hist), want.version)
		}
	}
}
