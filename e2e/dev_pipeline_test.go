package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/agentrunner/agentrunner"
	"github.com/agentrunner/agentrunner/backlog"
	arhttp "github.com/agentrunner/agentrunner/http"
	"github.com/agentrunner/agentrunner/internal/runtest"
	"github.com/agentrunner/agentrunner/sqlite"
)

// devPipeline is the dev-pipeline example served by the real binary, and
// the git repository its items are about.
type devPipeline struct {
	dir, cfg, repo string
	srv            *crashServer
}

// newDevPipeline writes the example and a small Go repository, and
// starts serve; env is added to serve's environment.
func newDevPipeline(t *testing.T, env ...string) *devPipeline {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("the dev pipeline works on git repositories, and git is not installed")
	}
	root := t.TempDir()
	d := &devPipeline{dir: filepath.Join(root, "dev"), repo: filepath.Join(root, "repo")}
	d.cfg = filepath.Join(d.dir, "agentrunner.yaml")
	if out, err := exec.Command(binary, "init", d.dir, "--example", "dev-pipeline").CombinedOutput(); err != nil {
		t.Fatalf("init: %v\n%s", err, out)
	}
	runtest.GitRepoAt(t, d.repo, map[string]string{"go.mod": "module greeter\n\ngo 1.22\n", "main.go": "package main\n\nfunc main() {}\n"})
	d.srv = newCrashServer(t, d.cfg)
	d.srv.env = append(d.srv.env, env...)
	d.srv.start(t)
	return d
}

func git(t *testing.T, dir string, args ...string) string {
	t.Helper()
	out, err := exec.Command("git", append([]string{"-C", dir}, args...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return strings.TrimSpace(string(out))
}

// add adds a backlog item with the CLI, as a user does, and returns its id.
func (d *devPipeline) add(t *testing.T, title, description string) string {
	t.Helper()
	out, err := exec.Command(binary, "backlog", "add", "--title", title, "--description", description,
		"--repo", d.repo, "--server", "http://"+d.srv.addr, "-c", d.cfg).CombinedOutput()
	if err != nil {
		t.Fatalf("backlog add: %v\n%s", err, out)
	}
	for _, f := range strings.Fields(string(out)) {
		if strings.HasPrefix(f, "backlog-") {
			return strings.TrimRight(f, ".:,")
		}
	}
	t.Fatalf("backlog add printed no item id:\n%s", out)
	return ""
}

// waitRun waits up to a minute for run id to end, and returns its status.
func (d *devPipeline) waitRun(t *testing.T, id string) agentrunner.RunStatus {
	t.Helper()
	var status agentrunner.RunStatus
	deadline := time.Now().Add(time.Minute)
	for time.Now().Before(deadline) {
		r, err := d.srv.api.Run(context.Background(), id)
		if err == nil && r.Run.Status.Finished() {
			return r.Run.Status
		}
		if err == nil {
			status = r.Run.Status
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("run %s did not end within a minute (%s)", id, status)
	return ""
}

// gate waits for a gate to open and returns it.
func (d *devPipeline) gate(t *testing.T) arhttp.Gate {
	t.Helper()
	var g arhttp.Gate
	waitUntil(t, "a gate opens", func() bool {
		list, err := d.srv.api.Gates(context.Background())
		if err != nil || len(list.Gates) == 0 {
			return false
		}
		g = list.Gates[0]
		return true
	})
	return g
}

// store opens the state database, once serve stopped.
func (d *devPipeline) store(t *testing.T) *sqlite.Store {
	t.Helper()
	s, err := sqlite.Open(context.Background(), filepath.Join(d.dir, "artifacts", "state.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// tasksOf reads the item's task runs, in execution order.
func tasksOf(t *testing.T, store *sqlite.Store, item string) []*backlog.Task {
	t.Helper()
	runs, err := store.Runs(context.Background(), agentrunner.RunFilter{Parent: item})
	if err != nil {
		t.Fatal(err)
	}
	var out []*backlog.Task
	for _, r := range runs {
		task, err := backlog.TaskOf(r)
		if err != nil {
			t.Fatal(err)
		}
		if r.Status != agentrunner.RunCompleted {
			t.Errorf("task %d (%s) ended %s: %s", task.ExecutionOrder, r.ID, r.Status, r.Error)
		}
		out = append(out, task)
	}
	slices.SortFunc(out, func(a, b *backlog.Task) int { return a.ExecutionOrder - b.ExecutionOrder })
	return out
}

// taskCommits lists the commits a task's branch has over main.
func taskCommits(t *testing.T, repo string, task *backlog.Task) []string {
	t.Helper()
	log := git(t, repo, "log", "--format=%H %s", "main.."+task.Branch)
	if log == "" {
		return nil
	}
	return strings.Split(log, "\n")
}

// TestDevPipelineImplementsEachTaskInItsOwnWorktree: an item of three
// bullets is refined and split into three tasks, which are planned and
// implemented one after the other, each in its own worktree on its own
// branch with its own commit. The second task's plan asks a question: a
// gate opens with it, is answered through the API, and the planning
// agent's next visit gets the answer and goes on. The worktrees of the
// tasks that succeeded are removed; their branches stay.
func TestDevPipelineImplementsEachTaskInItsOwnWorktree(t *testing.T) {
	d := newDevPipeline(t)
	item := d.add(t, "Greeter", "- add a greeter\n- choose its home [ask]\n- test the greeter")

	g := d.gate(t)
	if g.Step != "planning" || !strings.Contains(g.Question, "Which approach should task 2 take?") || len(g.Options) != 2 {
		t.Fatalf("gate = %+v, want task 2's planning question with its two options", g)
	}
	ctx := context.Background()
	if _, err := d.srv.api.Decide(ctx, g.Run, g.Step, arhttp.GateDecision{Decision: agentrunner.DecisionRoute, To: "planning", Comment: "Add a separate module"}); err != nil {
		t.Fatal(err)
	}
	if status := d.waitRun(t, item); status != agentrunner.RunCompleted {
		t.Fatalf("item %s ended %s", item, status)
	}
	d.srv.stop(t)

	store := d.store(t)
	tasks := tasksOf(t, store, item)
	if len(tasks) != 3 {
		t.Fatalf("%d tasks, want 3", len(tasks))
	}
	for i, task := range tasks {
		commits := taskCommits(t, d.repo, task)
		if task.ExecutionOrder != i+1 || len(commits) != 1 {
			t.Errorf("task %d on %s: commits over main %q, want one", task.ExecutionOrder, task.Branch, commits)
		}
		if files := git(t, d.repo, "diff", "--name-only", "main", task.Branch); !strings.HasSuffix(files, ".go") {
			t.Errorf("task %d changed %q; the Go variant of Implementing writes a Go file", task.ExecutionOrder, files)
		}
		if _, err := os.Stat(task.Worktree); !os.IsNotExist(err) {
			t.Errorf("the worktree of task %d (%s) is still there after it succeeded: %v", task.ExecutionOrder, task.Worktree, err)
		}
	}
	if wts := git(t, d.repo, "worktree", "list"); strings.Count(wts, "\n") != 0 {
		t.Errorf("worktrees left:\n%s", wts)
	}
	checkJudged(t, store, g.Run)
	plan := artifactOf(t, store, tasks[1], "planning", "plan.md")
	if !strings.Contains(plan, "Add a separate module") || !strings.Contains(plan, "Confidence: 90") {
		t.Errorf("task 2's plan does not follow the answer:\n%s", plan)
	}
}

// checkJudged wants the planning of the task that asked to have been
// judged twice: 40% confident, below Planning's threshold of 70, and
// asking, so it waited; then, with the answer, confident and on its way.
func checkJudged(t *testing.T, store *sqlite.Store, run string) {
	t.Helper()
	evs, err := store.Events(context.Background(), agentrunner.EventFilter{CycleID: run, Type: backlog.EventJudged})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, ev := range evs {
		if ev.Step == "planning" {
			got = append(got, fmt.Sprintf("confidence %v gate %v", ev.Details["confidence"], ev.Details["gate"]))
		}
	}
	if want := []string{"confidence 40 gate true", "confidence 90 gate false"}; !slices.Equal(got, want) {
		t.Errorf("the planning of %s was judged %q, want %q", run, got, want)
	}
}

// artifactOf returns the newest copy of a task's artifact.
func artifactOf(t *testing.T, store *sqlite.Store, task *backlog.Task, step, name string) string {
	t.Helper()
	runs, err := store.Runs(context.Background(), agentrunner.RunFilter{Parent: task.Item.ID})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range runs {
		if r.Inputs["task_key"] != task.Key {
			continue
		}
		fs, err := store.Files(context.Background(), agentrunner.FileFilter{RunID: r.ID, Kind: agentrunner.FileArtifact, Step: step, Name: name, Latest: true})
		if err != nil || len(fs) == 0 {
			t.Fatalf("%s of %s: %v", name, r.ID, err)
		}
		return string(fs[0].Data)
	}
	t.Fatalf("no run of task %s", task.Key)
	return ""
}

// TestDevPipelineKilledDuringImplementationResumesInTheSameWorktree: the
// runner is killed with SIGKILL while the implementing agent runs, after
// it committed. After the restart the task's implementing step runs again
// in the same worktree: no second worktree is made, the commit is not
// lost and not repeated, and the task and its item complete.
func TestDevPipelineKilledDuringImplementationResumesInTheSameWorktree(t *testing.T) {
	d := newDevPipeline(t, "DEV_PIPELINE_PAUSE=1")
	item := d.add(t, "Greeter", "- add a greeter")

	waitUntil(t, "the implementing agent commits", func() bool {
		out, err := exec.Command("git", "-C", d.repo, "log", "--all", "--format=%s").Output()
		return err == nil && strings.Contains(string(out), "task 1:")
	})
	wts := git(t, d.repo, "worktree", "list", "--porcelain")
	d.srv.kill(t)
	d.srv.start(t)
	if status := d.waitRun(t, item); status != agentrunner.RunCompleted {
		t.Fatalf("item %s ended %s", item, status)
	}
	d.srv.stop(t)

	store := d.store(t)
	tasks := tasksOf(t, store, item)
	if len(tasks) != 1 {
		t.Fatalf("%d tasks, want 1", len(tasks))
	}
	task := tasks[0]
	if !strings.Contains(wts, task.Worktree) || strings.Count(wts, "worktree ") != 2 {
		t.Errorf("before the kill, the worktrees were:\n%s\nwant the main one and %s", wts, task.Worktree)
	}
	if commits := taskCommits(t, d.repo, task); len(commits) != 1 {
		t.Errorf("the task's branch has %d commits over main, want its one commit: %q", len(commits), commits)
	}
	impl := artifactOf(t, store, task, "implementing", "implementation.md")
	if head := git(t, d.repo, "rev-parse", task.Branch); !strings.Contains(impl, head) {
		t.Errorf("implementation.md names another commit than the branch's head %s:\n%s", head, impl)
	}
	checkImplementingAttempts(t, store, item)
}

// checkImplementingAttempts wants the task's implementing step to have
// run twice: the attempt the kill interrupted, and the one after it.
func checkImplementingAttempts(t *testing.T, store *sqlite.Store, item string) {
	t.Helper()
	runs, err := store.Runs(context.Background(), agentrunner.RunFilter{Parent: item})
	if err != nil || len(runs) != 1 {
		t.Fatalf("runs of %s: %v (%d)", item, err, len(runs))
	}
	atts, err := store.Attempts(context.Background(), runs[0].ID)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, a := range atts {
		if a.Step == "implementing" {
			got = append(got, string(a.Status))
		}
	}
	if len(got) != 2 || got[1] != string(agentrunner.AttemptSucceeded) {
		t.Errorf("implementing attempts: %v, want one cut short by the kill and one that succeeded", got)
	}
}
