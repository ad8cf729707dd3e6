package main

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/agentrunner/agentrunner"
	arhttp "github.com/agentrunner/agentrunner/http"
	"github.com/agentrunner/agentrunner/internal/clocktest"
	"github.com/agentrunner/agentrunner/sqlite"
	"github.com/agentrunner/agentrunner/todo"
	"github.com/google/go-cmp/cmp"
)

// TestTodosPrintsARunsList: the to-do list a lead agent wrote in two
// versions, read from the state database: the newest, every version, and
// as JSON; a run without a list, an unknown run and a workspace without a
// database say so.
func TestTodosPrintsARunsList(t *testing.T) {
	dir := cliExample(t)
	cfgPath := cliConfigPath(dir)
	const run, quiet = "20260314_060000", "20260314_000000"

	// Before there is a database: nothing is created.
	code, _, stderr := cliRun(t, "todos", run, "-c", cfgPath)
	if code != exitFailure || !strings.Contains(stderr, "no state database yet") {
		t.Errorf("todos without a database: exit %d, %s", code, stderr)
	}
	if files := cliFiles(t, dir); len(files) != len(cliExampleFiles) {
		t.Errorf("todos created files: %v", files)
	}

	cfg, err := loadConfig(cfgPath)
	if err != nil {
		t.Fatal(err)
	}
	store, err := sqlite.Open(t.Context(), cfg.Abs(cfg.State.Path))
	if err != nil {
		t.Fatal(err)
	}
	at := time.Date(2026, 3, 14, 6, 5, 0, 0, time.UTC)
	for _, id := range []string{quiet, run} {
		if err := store.Apply(t.Context(), &agentrunner.Change{Cycle: &agentrunner.Cycle{ID: id, Pipeline: "crypton",
			Status: agentrunner.CycleCompleted, Dir: cfg.Abs("cycles/" + id), StartedAt: at, EndedAt: at.Add(time.Hour)}}); err != nil {
			t.Fatal(err)
		}
	}
	clock := clocktest.New(at)
	svc := todo.NewService(store, todo.Options{Clock: clock})
	l := agentrunner.TodoList{RunID: run, Agent: "lead", Step: "plan", Todos: []agentrunner.Todo{
		{ID: "t1", Title: "Survey the funding rates", Status: agentrunner.TodoInProgress},
		{ID: "t2", Title: "Write the synthesis", Status: agentrunner.TodoPending},
	}}
	if _, err := svc.Write(t.Context(), l, 0); err != nil {
		t.Fatal(err)
	}
	clock.Advance(time.Minute)
	l.Todos[0].Status, l.Todos[0].Note = agentrunner.TodoDone, "positive on three venues\nnegative on one"
	if _, err := svc.Write(t.Context(), l, 1); err != nil {
		t.Fatal(err)
	}
	store.Close()

	v1 := "run 20260314_060000, to-do list version 1, written 2026-03-14T06:05:00Z by lead (step plan)\n" +
		"[in_progress] t1  Survey the funding rates\n" +
		"[pending] t2  Write the synthesis\n"
	v2 := "run 20260314_060000, to-do list version 2, written 2026-03-14T06:06:00Z by lead (step plan)\n" +
		"[done] t1  Survey the funding rates\n" +
		"    positive on three venues\n    negative on one\n" +
		"[pending] t2  Write the synthesis\n"
	if d := cmp.Diff(v2, cliOK(t, "todos", run, "-c", cfgPath)); d != "" {
		t.Errorf("todos (-want +got):\n%s", d)
	}
	if d := cmp.Diff(v1+"\n"+v2, cliOK(t, "todos", run, "--history", "-c", cfgPath)); d != "" {
		t.Errorf("todos --history (-want +got):\n%s", d)
	}
	var got arhttp.TodoList
	if err := json.Unmarshal([]byte(cliOK(t, "todos", run, "--json", "-c", cfgPath)), &got); err != nil {
		t.Fatal(err)
	}
	if got.RunID != run || got.Version != 2 || len(got.Todos) != 2 || got.Todos[0].Status != agentrunner.TodoDone || got.Agent != "lead" {
		t.Errorf("todos --json: %+v", got)
	}
	var hist arhttp.TodoHistory
	if err := json.Unmarshal([]byte(cliOK(t, "todos", run, "--history", "--json", "-c", cfgPath)), &hist); err != nil {
		t.Fatal(err)
	}
	if len(hist.Versions) != 2 || hist.Versions[0].Version != 1 || hist.Versions[1].Version != 2 {
		t.Errorf("todos --history --json: %+v", hist)
	}

	if out := cliOK(t, "todos", quiet, "-c", cfgPath); out != "run 20260314_000000 has no to-do list yet\n" {
		t.Errorf("todos of a run without a list: %q", out)
	}
	if out := cliOK(t, "todos", quiet, "--json", "-c", cfgPath); !strings.Contains(out, `"version": 0`) || !strings.Contains(out, `"todos": []`) {
		t.Errorf("todos --json of a run without a list:\n%s", out)
	}
	if code, _, stderr := cliRun(t, "todos", "20991231_000000", "-c", cfgPath); code != exitFailure || !strings.Contains(stderr, "no run 20991231_000000") {
		t.Errorf("todos of an unknown run: exit %d, %s", code, stderr)
	}
	if code, _, _ := cliRun(t, "todos", "-c", cfgPath); code != exitUsage {
		t.Errorf("todos without a run: exit %d, want %d", code, exitUsage)
	}
}
