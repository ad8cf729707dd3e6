package tasks

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/agentrunner/agentrunner"
	"github.com/agentrunner/agentrunner/backlog"
	"github.com/agentrunner/agentrunner/config"
	"github.com/agentrunner/agentrunner/worktree"
	"github.com/google/go-cmp/cmp"
)

// fakeRuns is a store of child runs and a starter of them in one: a
// child ends as soon as it starts, with the status its task's title asks
// for ("fail" in the title: failed).
type fakeRuns struct {
	mu     sync.Mutex
	split  string
	runs   map[string]*agentrunner.Run
	starts []string // task titles, in start order
}

func (f *fakeRuns) StartChild(_ context.Context, pipeline string, inputs map[string]any, parent string) (string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	id := fmt.Sprintf("%s-%06d", pipeline, len(f.runs)+1)
	status := agentrunner.RunCompleted
	title, _ := inputs["title"].(string)
	if strings.Contains(title, "fail") {
		status = agentrunner.RunFailed
	}
	f.runs[id] = &agentrunner.Run{ID: id, Pipeline: pipeline, Parent: parent, Inputs: inputs, Status: status}
	f.starts = append(f.starts, title)
	return id, nil
}

func (f *fakeRuns) Run(_ context.Context, id string) (*agentrunner.Run, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if r := f.runs[id]; r != nil {
		return r, nil
	}
	return nil, agentrunner.Errorf(agentrunner.ENOTFOUND, "no run %s", id)
}

func (f *fakeRuns) Runs(_ context.Context, flt agentrunner.RunFilter) ([]*agentrunner.Run, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []*agentrunner.Run
	for _, r := range f.runs {
		if r.Parent == flt.Parent {
			out = append(out, r)
		}
	}
	return out, nil
}

func (f *fakeRuns) Files(_ context.Context, flt agentrunner.FileFilter) ([]*agentrunner.StoredFile, error) {
	if flt.Step != "splitting" || flt.Name != "task_split.md" {
		return nil, nil
	}
	return []*agentrunner.StoredFile{{Name: flt.Name, Step: flt.Step, Data: []byte(f.split)}}, nil
}

// fakeTrees records the worktrees made and removed.
type fakeTrees struct {
	mu      sync.Mutex
	made    []string
	removed []string
}

func (f *fakeTrees) Ensure(_ context.Context, _, dir, branch, _ string) (worktree.Worktree, bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.made = append(f.made, dir)
	return worktree.Worktree{Dir: dir, Branch: branch}, true, nil
}

func (f *fakeTrees) Remove(_ context.Context, _, dir string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.removed = append(f.removed, dir)
	return nil
}

// split writes a task_split whose tasks have these titles, each after
// the one before it.
func split(titles ...string) string {
	type task struct {
		Title          string `json:"title"`
		ExecutionOrder int    `json:"executionOrder"`
		DependsOn      []int  `json:"dependsOn"`
	}
	var ts []task
	for i, title := range titles {
		t := task{Title: title, ExecutionOrder: i + 1, DependsOn: []int{}}
		if i > 0 {
			t.DependsOn = []int{i}
		}
		ts = append(ts, t)
	}
	data, _ := json.Marshal(map[string]any{"tasks": ts})
	return "# Split\n\n```json\n" + string(data) + "\n```\n\nConfidence: 90\n"
}

func attempt(remove string) (*Kind, *fakeRuns, *fakeTrees, *agentrunner.StepAttempt) {
	cfg := &config.Config{Dir: "/ws", ArtifactsDir: "/ws/artifacts", Backlog: &config.Backlog{Pipeline: "backlog", Worktrees: config.Worktrees{Remove: remove}}}
	runs, trees := &fakeRuns{runs: map[string]*agentrunner.Run{}}, &fakeTrees{}
	k, err := New(Options{Config: cfg, Starter: runs, Store: runs, Worktrees: trees, Poll: 1})
	if err != nil {
		panic(err)
	}
	item := &backlog.Item{Title: "Greeter", Repo: "/repo", BaseBranch: "main"}
	step := &config.Step{ID: "tasks", Kind: config.StepTasks, Tasks: &config.TasksStep{Pipeline: "task", From: "splitting"}}
	a := &agentrunner.StepAttempt{
		Run:  &agentrunner.Run{ID: "backlog-000001", Pipeline: "backlog", Inputs: item.Inputs()},
		Step: &agentrunner.Step{ID: "tasks", Config: step}, StepRun: &agentrunner.StepRun{Step: "tasks", Visit: 1},
		Attempt: &agentrunner.Attempt{Number: 1}, RunDir: "/ws/artifacts/runs/backlog/backlog-000001",
	}
	return k, runs, trees, a
}

// outcomes reads the statuses of the step's tasks.json.
func outcomes(t *testing.T, res *agentrunner.StepResult) []string {
	t.Helper()
	var sum struct{ Tasks []Outcome }
	if err := json.Unmarshal(res.Output, &sum); err != nil {
		t.Fatalf("tasks.json: %v\n%s", err, res.Output)
	}
	var out []string
	for _, o := range sum.Tasks {
		out = append(out, fmt.Sprintf("%d %s %s kept=%v", o.Order, o.Title, o.Status, o.Kept))
	}
	return out
}

// TestTasksRunInOrderEachInItsWorktree: the tasks of the split start in
// execution order, each after its worktree is made on its own branch, and
// the worktrees of the tasks that completed are removed.
func TestTasksRunInOrderEachInItsWorktree(t *testing.T) {
	k, runs, trees, a := attempt("")
	runs.split = split("schema", "api", "docs")
	res, err := k.Run(context.Background(), a)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"schema", "api", "docs"}, runs.starts); diff != "" {
		t.Errorf("starts (-want +got):\n%s", diff)
	}
	want := []string{"/ws/artifacts/worktrees/backlog-000001-1", "/ws/artifacts/worktrees/backlog-000001-2", "/ws/artifacts/worktrees/backlog-000001-3"}
	if diff := cmp.Diff(want, trees.made); diff != "" {
		t.Errorf("worktrees made (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(want, trees.removed); diff != "" {
		t.Errorf("worktrees removed (-want +got):\n%s", diff)
	}
	r, _ := runs.Run(context.Background(), "task-000002")
	task, err := backlog.TaskOf(r)
	if err != nil || task.Branch != "task/backlog-000001-2-api" || task.Key != "backlog-000001/tasks/2" || task.Item.ID != "backlog-000001" {
		t.Errorf("task 2 = %+v (%v)", task, err)
	}
	if diff := cmp.Diff([]string{"1 schema completed kept=false", "2 api completed kept=false", "3 docs completed kept=false"}, outcomes(t, res)); diff != "" {
		t.Errorf("tasks.json (-want +got):\n%s", diff)
	}
}

// TestTasksAreNotStartedTwice: an attempt run again (after a crash) finds
// the children the first one started, and starts none.
func TestTasksAreNotStartedTwice(t *testing.T) {
	k, runs, _, a := attempt("")
	runs.split = split("schema", "api")
	if _, err := k.Run(context.Background(), a); err != nil {
		t.Fatal(err)
	}
	a.Attempt = &agentrunner.Attempt{Number: 2}
	if _, err := k.Run(context.Background(), a); err != nil {
		t.Fatal(err)
	}
	if len(runs.starts) != 2 {
		t.Errorf("children started: %v, want the two of the first attempt only", runs.starts)
	}
}

// TestAFailedTaskStopsTheOnesAfterIt: a task that fails keeps its
// worktree (on_success), the tasks that follow it are not started, and
// the step fails naming it; with remove: always its worktree goes too.
func TestAFailedTaskStopsTheOnesAfterIt(t *testing.T) {
	for _, tt := range []struct {
		remove      string
		wantRemoved int
		wantKept    string
	}{
		{"", 1, "kept=true"},
		{config.RemoveAlways, 2, "kept=false"},
		{config.RemoveNever, 0, "kept=true"},
	} {
		t.Run("remove="+tt.remove, func(t *testing.T) {
			k, runs, trees, a := attempt(tt.remove)
			runs.split = split("schema", "api that will fail", "docs")
			res, err := k.Run(context.Background(), a)
			if agentrunner.ClassOf(err) != agentrunner.ClassConfig || !strings.Contains(err.Error(), `task 2 "api that will fail" (failed)`) {
				t.Fatalf("err = %v, want a config failure naming task 2", err)
			}
			if len(runs.starts) != 2 || len(trees.removed) != tt.wantRemoved {
				t.Errorf("started %v, removed %v", runs.starts, trees.removed)
			}
			got := outcomes(t, res)
			if !strings.HasSuffix(got[1], tt.wantKept) || !strings.HasPrefix(got[2], "3 docs queued") {
				t.Errorf("tasks.json: %q", got)
			}
		})
	}
}
