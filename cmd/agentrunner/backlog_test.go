package main

import (
	"encoding/json"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/agentrunner/agentrunner"
	"github.com/agentrunner/agentrunner/backlog"
	arhttp "github.com/agentrunner/agentrunner/http"
	"github.com/agentrunner/agentrunner/internal/runtest"
	"github.com/agentrunner/agentrunner/sqlite"
)

// newBacklogFixture is the API of runtest's backlog workspace with a real
// scheduler, whose agents' attempts wait until the test ends (an item
// stays in Refining), and a git repository to add items about.
func newBacklogFixture(t *testing.T) (*runsFixture, string) {
	t.Helper()
	repo := runtest.GitRepo(t)
	cfg, ps := runtest.Backlog(t, t.TempDir())
	f := &runsFixture{kind: &runtest.HoldKind{Hold: func(*agentrunner.StepAttempt) bool { return true }}}
	t.Cleanup(f.kind.Release)
	f.remoteFixture = newRemoteFixtureWith(t, func(store *sqlite.Store, dir string, o *arhttp.Options) {
		f.sched = runtest.Start(t, store, dir, f.kind, ps)
		o.Config, o.Pipelines, o.Runs = cfg, ps, f.sched
	})
	t.Setenv(envServer, f.url)
	t.Setenv(envAPIKey, remoteOperatorKey)
	return f, repo
}

// TestBacklogThroughTheCLI: backlog add makes the repository's path
// absolute and passes the description as given, then prints what the
// server made of the item and the next commands; backlog list and show,
// tasks list and show print the items and tasks with their states.
func TestBacklogThroughTheCLI(t *testing.T) {
	f, repo := newBacklogFixture(t)
	top, err := filepath.EvalSymlinks(repo)
	if err != nil {
		t.Fatal(err)
	}
	out, _ := f.cli(t, exitOK, "backlog", "list")
	matchLines(t, "backlog list of an empty backlog", out, "no backlog items")

	// From the repository's parent, by a relative path.
	t.Chdir(filepath.Dir(repo))
	out, _ = f.cli(t, exitOK, "backlog", "add", "--title", "Greeting", "--description", "- first\n- second", "--repo", filepath.Base(repo))
	want := "added backlog item backlog-000001: Greeting\n" +
		"repo:         " + top + "\n" +
		"base branch:  main\n" +
		"context:      language go, framework go\n" +
		"status:       running: Refining\n" +
		"\nnext:\n" +
		"  agentrunner backlog show backlog-000001   # its states and its tasks\n" +
		"  agentrunner gates                         # what waits for a person\n"
	if diff := cmp.Diff(want, out); diff != "" {
		t.Errorf("backlog add (-want +got):\n%s", diff)
	}
	// A backslash and an n stay what they are: the shell makes newlines.
	f.cli(t, exitOK, "backlog", "add", "--title", "Farewell", "--description", `- a\n- b`, "--acceptance", "says bye",
		"--priority", "high", "--repo", repo, "--base-branch", "release")
	descriptions := map[string]string{"backlog-000001": "- first\n- second", "backlog-000002": `- a\n- b`}
	items := map[string]*agentrunner.Run{}
	for id, desc := range descriptions {
		if items[id], err = f.store.Run(t.Context(), id); err != nil {
			t.Fatal(err)
		}
		if got := items[id].Inputs["description"]; got != desc {
			t.Errorf("run %s: description %q, want %q", id, got, desc)
		}
	}

	out, _ = f.cli(t, exitOK, "backlog", "list")
	matchLines(t, "backlog list", out,
		`ID\s+STATUS\s+STATES\s+TITLE\s+STARTED`,
		`backlog-000002\s+running\s+Refining\s+Farewell\s+\S+`,
		`backlog-000001\s+running\s+Refining\s+Greeting\s+\S+`)
	out, _ = f.cli(t, exitOK, "backlog", "list", "--status", "completed")
	matchLines(t, "backlog list --status completed", out, "no backlog items")

	runtest.AddTask(t, f.store, items["backlog-000001"], 2, "second")
	runtest.AddTask(t, f.store, items["backlog-000001"], 1, "first")
	out, _ = f.cli(t, exitOK, "backlog", "show", "backlog-000001")
	matchLines(t, "backlog show", out,
		`item:\s+backlog-000001`, `title:\s+Greeting`, `repo:\s+`+regexp.QuoteMeta(top), `base branch:\s+main`,
		`context:\s+language go, framework go`, `status:\s+running`, `states:\s+Refining`, `ended:\s+-`,
		`description:`, `  - first`, `  - second`, `tasks: 2`,
		`ORDER\s+TASK RUN\s+STATUS\s+STATES\s+BRANCH\s+TITLE`,
		`1\s+task-000001\s+running\s+Planning\s+task/task-000001\s+first`,
		`2\s+task-000002\s+running\s+Planning\s+task/task-000002\s+second`)
	if i, j := strings.Index(out, "task-000001"), strings.Index(out, "task-000002"); i > j {
		t.Errorf("backlog show: the tasks are not in execution order:\n%s", out)
	}
	out, _ = f.cli(t, exitOK, "backlog", "show", "backlog-000002")
	matchLines(t, "backlog show of an item without tasks", out, `priority:\s+high`, `base branch:\s+release`,
		`  - a\\n- b`, `acceptance criteria:`, `  says bye`, "no tasks yet")
	out, _ = f.cli(t, exitOK, "backlog", "show", "backlog-000001", "--json")
	var item backlog.ItemView
	if err := json.Unmarshal([]byte(out), &item); err != nil {
		t.Fatal(err)
	}
	if item.ID != "backlog-000001" || item.Context.RepoPath != top || len(item.Tasks) != 2 || item.Tasks[0].ExecutionOrder != 1 {
		t.Errorf("backlog show --json: %+v", item)
	}

	out, _ = f.cli(t, exitOK, "tasks", "list")
	matchLines(t, "tasks list", out,
		`ID\s+ITEM\s+ORDER\s+STATUS\s+STATES\s+BRANCH\s+TITLE`,
		`task-000001\s+backlog-000001\s+1\s+running\s+Planning\s+task/task-000001\s+first`,
		`task-000002\s+backlog-000001\s+2\s+running\s+Planning\s+task/task-000002\s+second`)
	out, _ = f.cli(t, exitOK, "tasks", "list", "--item", "backlog-000002")
	matchLines(t, "tasks list --item", out, "no tasks")
	out, _ = f.cli(t, exitOK, "tasks", "show", "task-000001")
	matchLines(t, "tasks show", out, `task:\s+task-000001`, `title:\s+first`, `item:\s+backlog-000001 \(Greeting\)`,
		`order:\s+1`, `branch:\s+task/task-000001 \(from main\)`, `worktree:\s+\S+task-000001`, `states:\s+Planning`,
		`its step runs and prompts: agentrunner run-status task-000001`)
	out, _ = f.cli(t, exitOK, "tasks", "list", "--json")
	var tasks arhttp.TaskList
	if err := json.Unmarshal([]byte(out), &tasks); err != nil || len(tasks.Tasks) != 2 {
		t.Errorf("tasks list --json: %v\n%s", err, out)
	}
}

// TestBacklogCLIErrors: missing flags are usage errors; what the server
// refuses exits 1 with its message and code.
func TestBacklogCLIErrors(t *testing.T) {
	f, repo := newBacklogFixture(t)
	plain := t.TempDir()
	tests := []struct {
		args   []string
		code   int
		stderr string
	}{
		{[]string{"backlog", "add", "--repo", repo}, exitUsage, "--title is required"},
		{[]string{"backlog", "add", "--title", "x"}, exitUsage, "--repo is required"},
		{[]string{"backlog", "add", "--title", "x", "--repo", plain}, exitFailure, "is not inside a git repository with a working tree"},
		{[]string{"backlog", "add", "--title", "x", "--repo", "nosuch"}, exitFailure, "does not exist (unprocessable)"},
		{[]string{"backlog", "list", "--limit", "0"}, exitUsage, "--limit must be at least 1"},
		{[]string{"backlog", "list", "--status", "sleeping"}, exitFailure, "query parameter status"},
		{[]string{"backlog", "show", "backlog-000009"}, exitFailure, "no backlog item backlog-000009 (not_found)"},
		{[]string{"backlog", "show"}, exitUsage, "accepts 1 arg"},
		{[]string{"backlog", "nosuch"}, exitUsage, `unknown command "nosuch"`},
		{[]string{"tasks", "show", "task-000009"}, exitFailure, "no task task-000009 (not_found)"},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			_, stderr := f.cli(t, tt.code, tt.args...)
			if !strings.Contains(stderr, tt.stderr) {
				t.Errorf("stderr %q does not say %q", stderr, tt.stderr)
			}
		})
	}
}
