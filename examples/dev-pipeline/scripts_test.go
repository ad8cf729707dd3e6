package devpipeline_test

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/agentrunner/agentrunner/agentdef"
	"github.com/agentrunner/agentrunner/agentout"
	devpipeline "github.com/agentrunner/agentrunner/examples/dev-pipeline"
)

// workspace writes the example into a fresh directory and loads its agents.
func workspace(t *testing.T) (string, *agentdef.Set) {
	t.Helper()
	dir := t.TempDir()
	if _, err := devpipeline.Write(dir, false, ""); err != nil {
		t.Fatal(err)
	}
	set, err := agentdef.Load(dir)
	if err != nil {
		t.Fatalf("load the example's agents: %v", err)
	}
	return dir, set
}

// need skips the test when a tool the scripts run is missing.
func need(t *testing.T, tools ...string) {
	t.Helper()
	for _, tool := range tools {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s is not on PATH", tool)
		}
	}
}

// vars are the values of spec 5's prompt variables for one run.
type vars map[string]string

// item is a backlog item about a Go repository, with three parts.
func item() vars {
	return vars{
		"backlogItem.title":              "Greeting",
		"backlogItem.description":        "Greet people by name.\n\n- Add the greeter\n- Choose the greeting [ask]\n- Document the greeting",
		"backlogItem.acceptanceCriteria": "",
		"backlogItem.refiningIterations": "1",
		"context.language":               "go",
		"context.framework":              "",
		"context.repoPath":               "/src/greeting",
		"artifacts":                      "",
		"artifacts.split":                "",
		"artifacts.plan":                 "",
		"artifacts.implementation":       "",
	}
}

// task is task order of item, titled title.
func task(order, title string) vars {
	v := item()
	v["task.title"] = title
	v["task.description"] = "Part " + order + " of the backlog item \"Greeting\": " + title + "."
	v["task.executionOrder"] = order
	v["task.acceptanceCriteria"] = ""
	v["task.priority"] = "2"
	v["task.state"] = "Planning"
	return v
}

var variable = regexp.MustCompile(`\{([A-Za-z]+(?:\.[A-Za-z]+)?)\}`)

// prompt builds an agent's prompt as the runner does: the variables filled
// in (an unknown {name.x} fails the test, other braces stay), then the run
// context, the answers given so far and where to write the output.
func prompt(t *testing.T, a *agentdef.Agent, v vars, answers ...string) string {
	t.Helper()
	text := variable.ReplaceAllStringFunc(a.Prompt, func(m string) string {
		name := m[1 : len(m)-1]
		if !strings.Contains(name, ".") && name != "artifacts" {
			return m
		}
		val, ok := v[name]
		if !ok {
			t.Fatalf("%s: unknown variable %s", a.ID, m)
		}
		return val
	})
	var b strings.Builder
	b.WriteString(strings.TrimRight(text, "\n"))
	b.WriteString("\n\n# Run context\n- Run: run-1\n- Step: " + a.StateName() + "\n- Attempt: 1\n")
	if len(answers) > 0 {
		b.WriteString("\n## Answers from a person\n")
		for i, ans := range answers {
			b.WriteString("- Visit " + strconv.Itoa(i+1) + ". Question: Which approach?\n  Answer (OPERATOR): " + ans + "\n")
		}
	}
	b.WriteString("\n## Output\nWrite your artifact to the output file.\n")
	return b.String()
}

// run runs the scripted agent of step on a prompt, in workdir, and returns
// its output; env adds to the environment.
func run(t *testing.T, dir, step, text, workdir string, env ...string) (string, error) {
	t.Helper()
	tmp := t.TempDir()
	promptFile, out := filepath.Join(tmp, "prompt.md"), filepath.Join(tmp, "output.md")
	if err := os.WriteFile(promptFile, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("sh", filepath.Join(dir, "agents", "scripts", "agent.sh"), dir, out, promptFile)
	cmd.Dir = workdir
	cmd.Env = append(cleanEnv(), "AGENTRUNNER_STEP="+step, "AGENTRUNNER_WORKDIR="+workdir,
		"AGENTRUNNER_OUTPUT="+out, "AGENTRUNNER_PROMPT_FILE="+promptFile, "AGENTRUNNER_CYCLE_ID=run-1", "AGENTRUNNER_ATTEMPT=1")
	cmd.Env = append(cmd.Env, env...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		return stderr.String(), err
	}
	data, err := os.ReadFile(out)
	if err != nil {
		t.Fatalf("%s wrote no output: %v", step, err)
	}
	return string(data), nil
}

// cleanEnv is the test's environment without the runner's variables, and
// with git's user and system configuration out of the way.
func cleanEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "AGENTRUNNER_") && !strings.HasPrefix(kv, "DEV_PIPELINE_") && !strings.HasPrefix(kv, "GIT_") {
			env = append(env, kv)
		}
	}
	return append(env, "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL="+os.DevNull)
}

// parse parses an output as the runner does, and checks that it ends with
// its confidence line.
func parse(t *testing.T, kind agentout.Kind, out string) *agentout.Artifact {
	t.Helper()
	a, err := agentout.Parse(kind, []byte(out))
	if err != nil {
		t.Fatalf("invalid %s output: %v\n%s", kind, err, out)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if last := lines[len(lines)-1]; !regexp.MustCompile(`^Confidence: [0-9]+$`).MatchString(last) {
		t.Errorf("the output ends with %q, not its confidence line", last)
	}
	return a
}

// repo makes a git repository with one Go file and a task branch.
func repo(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "greet.go"), []byte("package greet\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		{"init", "-q", "-b", "main"},
		{"add", "."},
		{"-c", "user.name=test", "-c", "user.email=test@localhost", "commit", "-q", "-m", "init"},
		{"checkout", "-q", "-b", "task/run-1-2-choose-the-greeting"},
	} {
		git(t, dir, args...)
	}
	return dir
}

func git(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir, cmd.Env = dir, cleanEnv()
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return strings.TrimSpace(string(out))
}

func resolve(t *testing.T, set *agentdef.Set, state string, ctx agentdef.Context) *agentdef.Agent {
	t.Helper()
	a, _, err := set.Resolve(state, ctx)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// TestAgents: the agent files load, every prompt uses only spec 5's
// variables, and the variants are chosen for Go and Angular repositories.
func TestAgents(t *testing.T) {
	_, set := workspace(t)
	all := task("1", "Add the greeter")
	for _, a := range set.Agents() {
		prompt(t, a, all)
	}
	for _, c := range []struct {
		state string
		ctx   agentdef.Context
		want  string
	}{
		{"Refining", agentdef.Context{Language: "go"}, "refining-default"},
		{"Splitting", agentdef.Context{Language: "go"}, "split-default"},
		{"Planning", agentdef.Context{Language: "python"}, "planning-default"},
		{"Planning", agentdef.Context{Language: "go"}, "planning-go"},
		{"Implementing", agentdef.Context{Language: "python"}, "implementing-default"},
		{"Implementing", agentdef.Context{Language: "go"}, "implementing-go"},
		{"Implementing", agentdef.Context{Language: "typescript", Framework: "angular", Files: []string{"angular.json", "src/main.ts"}}, "implementing-angular"},
		{"Implementing", agentdef.Context{Language: "typescript", Framework: "angular"}, "implementing-default"},
	} {
		if got := resolve(t, set, c.state, c.ctx); got.ID != c.want {
			t.Errorf("%s in %+v: %s, want %s", c.state, c.ctx, got.ID, c.want)
		}
	}
}

// TestEveryAgentScripted: the script of each agent's state reads its
// prompt, default or variant, and writes a valid artifact of the agent's
// output type.
func TestEveryAgentScripted(t *testing.T) {
	need(t, "sh", "git")
	dir, set := workspace(t)
	steps := map[string]string{"Refining": "refining", "Splitting": "splitting", "Planning": "planning", "Implementing": "implementing"}
	for _, a := range set.Agents() {
		t.Run(a.ID, func(t *testing.T) {
			step := steps[a.StateName()]
			if step == "" {
				t.Fatalf("no script for the state %q", a.StateName())
			}
			v := task("1", "Add the greeter")
			if m := a.Match; m != nil {
				v["context.language"], v["context.framework"] = m.Language, m.Framework
			}
			out, err := run(t, dir, step, prompt(t, a, v), repo(t))
			if err != nil {
				t.Fatalf("%v: %s", err, out)
			}
			parse(t, agentout.Kind(a.Output.Type), out)
		})
	}
}

// TestSplit: one task per list item of the description, in order, each
// depending on the one before; no list gives two tasks.
func TestSplit(t *testing.T) {
	need(t, "sh")
	dir, set := workspace(t)
	split := resolve(t, set, "Splitting", agentdef.Context{Language: "go"})

	out, err := run(t, dir, "splitting", prompt(t, split, item()), t.TempDir())
	if err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	a := parse(t, agentout.KindTaskSplit, out)
	want := []agentout.Task{
		{Title: "Add the greeter", ExecutionOrder: 1, DependsOn: []int{}},
		{Title: "Choose the greeting [ask]", ExecutionOrder: 2, DependsOn: []int{1}},
		{Title: "Document the greeting", ExecutionOrder: 3, DependsOn: []int{2}},
	}
	if len(a.Tasks) != len(want) {
		t.Fatalf("%d tasks, want %d:\n%s", len(a.Tasks), len(want), out)
	}
	for i, w := range want {
		got := a.Tasks[i]
		if got.Title != w.Title || got.ExecutionOrder != w.ExecutionOrder || !slices.Equal(got.DependsOn, w.DependsOn) || got.Description == "" {
			t.Errorf("task %d = %+v, want %+v with a description", i+1, got, w)
		}
	}
	if a.Confidence != 80 {
		t.Errorf("confidence %d, want 80", a.Confidence)
	}

	v := item()
	v["backlogItem.description"] = `Greet people by "name", with a \ in it.`
	out, err = run(t, dir, "splitting", prompt(t, split, v), t.TempDir())
	if err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	a = parse(t, agentout.KindTaskSplit, out)
	if len(a.Tasks) != 2 || a.Tasks[0].Title != "Add Greeting core" || a.Tasks[1].Title != "Document Greeting" || !slices.Equal(a.Tasks[1].DependsOn, []int{1}) {
		t.Errorf("without a list: %+v, want Add Greeting core, then Document Greeting", a.Tasks)
	}
}

// TestRefining: a refined specification with its sections, confident
// enough to pass the backlog's threshold.
func TestRefining(t *testing.T) {
	need(t, "sh")
	dir, set := workspace(t)
	out, err := run(t, dir, "refining", prompt(t, resolve(t, set, "Refining", agentdef.Context{}), item()), t.TempDir())
	if err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	a := parse(t, agentout.KindGeneral, out)
	for _, s := range []string{"# Refined specification: Greeting", "## Summary", "## Acceptance criteria", "## Open questions", "Choose the greeting [ask]"} {
		if !strings.Contains(out, s) {
			t.Errorf("the specification has no %q:\n%s", s, out)
		}
	}
	if a.Confidence != 85 || a.HumanInput != nil {
		t.Errorf("confidence %d, human input %v; want 85 and none", a.Confidence, a.HumanInput)
	}
}

// TestPlanningAsks: a task marked [ask] asks a person, below the Planning
// threshold, until the prompt carries an answer; then the plan quotes it.
func TestPlanningAsks(t *testing.T) {
	need(t, "sh")
	dir, set := workspace(t)
	planning := resolve(t, set, "Planning", agentdef.Context{Language: "go"})
	thresholds := agentout.Thresholds{Default: 60, PerState: map[string]int{"Planning": 70}}
	v := task("2", "Choose the greeting [ask]")

	out, err := run(t, dir, "planning", prompt(t, planning, v), t.TempDir())
	if err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	a := parse(t, agentout.KindPlan, out)
	if a.HumanInput == nil || a.HumanInput.Question != "Which approach should task 2 take?" || len(a.HumanInput.Options) != 2 {
		t.Fatalf("human input %+v, want the question on task 2 with two options:\n%s", a.HumanInput, out)
	}
	if a.Confidence != 40 {
		t.Errorf("confidence %d, want 40", a.Confidence)
	}
	if open, why := thresholds.Gate("Planning", a); !open {
		t.Errorf("the gate stays closed: %s", why)
	}

	out, err = run(t, dir, "planning", prompt(t, planning, v, "Add a separate module for it"), t.TempDir())
	if err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	a = parse(t, agentout.KindPlan, out)
	if a.HumanInput != nil || a.Confidence != 90 || !strings.Contains(out, "> Add a separate module for it") {
		t.Errorf("answered: human input %+v, confidence %d; want none, 90 and the answer quoted:\n%s", a.HumanInput, a.Confidence, out)
	}
	for _, s := range []string{"## Summary", "## Affected Files", "`task_2.go`", "## Implementation Steps"} {
		if !strings.Contains(out, s) {
			t.Errorf("the plan has no %q", s)
		}
	}
	if open, why := thresholds.Gate("Planning", a); open {
		t.Errorf("the gate opens: %s", why)
	}

	out, err = run(t, dir, "planning", prompt(t, planning, task("1", "Add the greeter")), t.TempDir())
	if err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if a = parse(t, agentout.KindPlan, out); a.HumanInput != nil || a.Confidence != 85 {
		t.Errorf("without [ask]: human input %+v, confidence %d; want none and 85", a.HumanInput, a.Confidence)
	}
}

// TestImplementingCommitsOnce: the implementing script commits in its
// worktree, and a repeated attempt of the same run finds the commit by its
// Task-Key and makes no second one.
func TestImplementingCommitsOnce(t *testing.T) {
	need(t, "sh", "git")
	dir, set := workspace(t)
	impl := resolve(t, set, "Implementing", agentdef.Context{Language: "go"})
	wt := repo(t)
	text := prompt(t, impl, task("2", `Choose the "greeting" [ask]`))

	var outs []string
	for attempt := 1; attempt <= 2; attempt++ {
		out, err := run(t, dir, "implementing", text, wt, "DEV_PIPELINE_PAUSE=0")
		if err != nil {
			t.Fatalf("attempt %d: %v: %s", attempt, err, out)
		}
		if a := parse(t, agentout.KindImplementation, out); a.Confidence != 90 {
			t.Errorf("attempt %d: confidence %d, want 90", attempt, a.Confidence)
		}
		outs = append(outs, out)
	}
	if got := git(t, wt, "log", "--format=%s", "main..HEAD"); got != `task 2: Choose the "greeting" [ask]` {
		t.Errorf("the branch's commits: %q, want one, task 2", got)
	}
	if got := git(t, wt, "log", "-1", "--format=%(trailers:key=Task-Key,valueonly)"); got != "run-1" {
		t.Errorf("Task-Key %q, want run-1", got)
	}
	src, err := os.ReadFile(filepath.Join(wt, "task_2.go"))
	if err != nil || !strings.Contains(string(src), "package greet\n") {
		t.Errorf("task_2.go is not in the repository's package: %v\n%s", err, src)
	}
	head := git(t, wt, "rev-parse", "HEAD")
	for i, out := range outs {
		for _, s := range []string{"- Commit: " + head, "- Branch: task/run-1-2-choose-the-greeting", "added: task_2.go", "## Verification Log"} {
			if !strings.Contains(out, s) {
				t.Errorf("attempt %d's report has no %q:\n%s", i+1, s, out)
			}
		}
	}
	if !strings.Contains(outs[1], "did not commit again") {
		t.Errorf("the second attempt does not say it found the commit:\n%s", outs[1])
	}

	// Another language: a markdown note under docs/tasks.
	v := task("3", "Document the greeting")
	v["context.language"] = ""
	out, err := run(t, dir, "implementing", prompt(t, resolve(t, set, "Implementing", agentdef.Context{}), v), wt, "AGENTRUNNER_CYCLE_ID=run-2")
	if err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if !strings.Contains(out, "added: docs/tasks/task-3.md") {
		t.Errorf("no docs/tasks/task-3.md in the report:\n%s", out)
	}
}

// TestMissingField: a prompt without a line a script reads fails the
// attempt, and says which line.
func TestMissingField(t *testing.T) {
	need(t, "sh")
	dir, _ := workspace(t)
	msg, err := run(t, dir, "planning", "## Task\nTask order: 1\n\n## Task description\nx\n", t.TempDir())
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 1 || !strings.Contains(msg, `"Task title:"`) {
		t.Errorf("got %v, %q; want exit status 1 naming the Task title line", err, msg)
	}
	msg, err = run(t, dir, "planning", "Task title: x\nTask order: first\n\n## Task description\nx\n", t.TempDir())
	if err == nil || !strings.Contains(msg, "not a positive integer") {
		t.Errorf("got %v, %q; want a failure on the order", err, msg)
	}
}

// TestWriteProvider: --provider sets the backlog's provider line only.
func TestWriteProvider(t *testing.T) {
	for kind, name := range devpipeline.Providers {
		dir := t.TempDir()
		if _, err := devpipeline.Write(dir, false, kind); err != nil {
			t.Fatalf("%s: %v", kind, err)
		}
		data, err := os.ReadFile(filepath.Join(dir, "agentrunner.yaml"))
		if err != nil {
			t.Fatal(err)
		}
		_, backlog, _ := strings.Cut(string(data), "\nbacklog:")
		if !strings.Contains(backlog, "\n  provider: "+name+" ") {
			t.Errorf("%s: the backlog's provider is not %s", kind, name)
		}
		if !strings.Contains(string(data), "\ndefaults:") || !strings.Contains(string(data), "\n  provider: scripts\n") {
			t.Errorf("%s: the defaults' provider changed", kind)
		}
	}
	if _, err := devpipeline.Write(t.TempDir(), false, "nope"); err == nil {
		t.Error("an unknown provider kind is accepted")
	}
}
