package runtest

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/agentrunner/agentrunner"
	"github.com/agentrunner/agentrunner/backlog"
	"github.com/agentrunner/agentrunner/config"
)

// BacklogDoc is a workspace of spec 5's agent pipeline, as the
// dev-pipeline example has it: a backlog item runs the pipeline backlog
// (refining, splitting, tasks), and each of its tasks the pipeline task
// (planning, implementing).
const BacklogDoc = `version: 1
name: dev
defaults: {provider: mock}
backlog: {pipeline: backlog}
pipelines:
  backlog:
    max_concurrent_runs: 4
    start: refining
    steps:
      refining:  {kind: state, state: Refining, next: splitting}
      splitting: {kind: state, state: Splitting, next: tasks}
      tasks:     {kind: tasks, tasks: {pipeline: task, from: splitting}, next: end}
  task:
    start: planning
    steps:
      planning:     {kind: state, state: Planning, next: implementing}
      implementing: {kind: state, state: Implementing, next: end}
`

// Backlog writes the backlog workspace into dir and loads it. It returns
// its configuration, which the views of items and tasks read, and its
// pipelines as a test's scheduler runs them: their state and tasks steps
// are KindScript steps, so a HoldKind stands in for the agents, and the
// tasks step starts no task (a test adds tasks with AddTask).
func Backlog(t testing.TB, dir string) (*config.Config, map[string]*agentrunner.Pipeline) {
	t.Helper()
	cfg := Workspace(t, dir, BacklogDoc, nil)
	ps := cfg.Graphs()
	for _, p := range ps {
		for _, st := range p.Steps {
			if st.Kind == config.StepState || st.Kind == config.StepTasks {
				st.Kind = KindScript
			}
		}
	}
	return cfg, ps
}

// GitRepo makes a git repository in a temporary folder: branch main with
// one commit of a Go module, so its language is go. git reads no user or
// system configuration. It skips the test when git is not installed.
func GitRepo(t testing.TB) string {
	t.Helper()
	repo := filepath.Join(t.TempDir(), "repo")
	GitRepoAt(t, repo, map[string]string{"go.mod": "module example.com/greet\n\ngo 1.22\n", "greet.go": "package greet\n"})
	return repo
}

// GitRepoAt makes a repository at dir on main with one commit of files,
// whatever the user's git configuration; the test is skipped without git.
func GitRepoAt(t testing.TB, dir string, files map[string]string) {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git is not installed")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	home := t.TempDir()
	env := append(os.Environ(), "HOME="+home, "XDG_CONFIG_HOME="+home, "GIT_CONFIG_NOSYSTEM=1",
		"GIT_AUTHOR_NAME=Test", "GIT_AUTHOR_EMAIL=test@example.com",
		"GIT_COMMITTER_NAME=Test", "GIT_COMMITTER_EMAIL=test@example.com")
	for _, args := range [][]string{{"init", "--quiet", "-b", "main"}, {"add", "."}, {"commit", "--quiet", "-m", "first"}} {
		cmd := exec.Command("git", args...)
		cmd.Dir, cmd.Env = dir, env
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
}

// AddTask adds the task of order n of item, a run of the backlog
// pipeline, as the tasks step would start it: a running run of the
// pipeline task, child of item, at its step planning. It returns its id,
// task-00000N.
func AddTask(t testing.TB, store agentrunner.Store, item *agentrunner.Run, n int, title string) string {
	t.Helper()
	it, err := backlog.ItemOf(item)
	if err != nil {
		t.Fatal(err)
	}
	id := fmt.Sprintf("task-%06d", n)
	task := backlog.Task{Key: id, Title: title, ExecutionOrder: n, Item: backlog.ItemRef{ID: item.ID, Title: it.Title},
		Context: it.Context, Repo: it.Repo, BaseBranch: it.BaseBranch,
		Branch: "task/" + id, Worktree: filepath.Join(filepath.Dir(item.Dir), "worktrees", id)}
	at := time.Now().UTC().Truncate(time.Second)
	ch := &agentrunner.Change{
		Runs: []*agentrunner.Run{{ID: id, Pipeline: "task", Status: agentrunner.RunRunning, Dir: filepath.Join(t.TempDir(), id),
			StartedAt: at, Inputs: task.Inputs(), Parent: item.ID}},
		StepRuns: []*agentrunner.StepRun{{RunID: id, Step: "planning", Visit: 1, Status: agentrunner.StepRunOpen, OpenedAt: at}},
	}
	if err := store.Apply(t.Context(), ch); err != nil {
		t.Fatal(err)
	}
	return id
}
