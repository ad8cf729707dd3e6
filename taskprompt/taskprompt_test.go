package taskprompt

import (
	"errors"
	"strings"
	"testing"

	"github.com/agentrunner/agentrunner/agentout"
	"github.com/google/go-cmp/cmp"
)

// taskVars has a distinct value for every variable of a task agent.
func taskVars() Vars {
	return Vars{
		Item: Item{Title: "Item", Description: "Item description", AcceptanceCriteria: "Item criteria", RefiningIterations: 2},
		Task: &Task{Title: "Task", Description: "Task description", State: "Planning", Priority: "high",
			AcceptanceCriteria: "Task criteria", ExecutionOrder: 3},
		Context: Context{Language: "go", Framework: "stdlib", RepoPath: "/repo"},
	}
}

func TestBuildFillsInEveryVariable(t *testing.T) {
	v := taskVars()
	v.Artifacts = []Artifact{
		{Kind: agentout.KindTaskSplit, Step: "Splitting", Owner: OwnerItem, Content: "split"},
		{Kind: agentout.KindPlan, Step: "Planning", Owner: OwnerTask, Content: "plan 1"},
		{Kind: agentout.KindImplementation, Step: "Implementing", Owner: OwnerTask, Content: "impl"},
		{Kind: agentout.KindTest, Step: "Testing", Owner: OwnerTask, Content: "test"},
		{Kind: agentout.KindGeneral, Step: "Refining", Owner: OwnerItem, Content: "notes"},
		{Kind: agentout.KindPlan, Step: "Planning", Owner: OwnerTask, Content: "plan 2"},
	}
	want := map[string]string{
		"{task.title}": "Task", "{task.description}": "Task description", "{task.state}": "Planning",
		"{task.priority}": "high", "{task.acceptanceCriteria}": "Task criteria", "{task.executionOrder}": "3",
		"{backlogItem.title}": "Item", "{backlogItem.description}": "Item description",
		"{backlogItem.acceptanceCriteria}": "Item criteria", "{backlogItem.refiningIterations}": "2",
		"{context.language}": "go", "{context.framework}": "stdlib", "{context.repoPath}": "/repo",
		"{artifacts.split}": "split", "{artifacts.plan}": "plan 2", "{artifacts.implementation}": "impl",
		"{artifacts.test}": "test", "{artifacts.general}": "notes",
		"{artifacts}": "### task_split from Splitting, for the backlog item\n\nsplit\n\n" +
			"### plan from Planning, for this task\n\nplan 1\n\n" +
			"### implementation from Implementing, for this task\n\nimpl\n\n" +
			"### test from Testing, for this task\n\ntest\n\n" +
			"### general from Refining, for the backlog item\n\nnotes\n\n" +
			"### plan from Planning, for this task\n\nplan 2",
	}
	names := Names(ScopeTask)
	if len(want) != len(names) {
		t.Fatalf("the test covers %d variables, Names has %d", len(want), len(names))
	}
	for _, name := range names {
		got, err := Build("<"+name+">", v)
		if err != nil {
			t.Fatalf("Build(%s): %v", name, err)
		}
		if w := "<" + want[name] + ">"; got != w {
			t.Errorf("Build(%s) = %q, want %q", name, got, w)
		}
	}
}

func TestBuild(t *testing.T) {
	tests := []struct {
		name     string
		template string
		vars     func(v *Vars)
		want     string
	}{
		{"no variables", "plain text\n", nil, "plain text\n"},
		{"empty template", "", nil, ""},
		{"JSON is text", `{"tasks": [{"title": "a"}]} {task.title}`, nil, `{"tasks": [{"title": "a"}]} Task`},
		{"code is text", "func() {} {} { a: 1 } {\n}", nil, "func() {} {} { a: 1 } {\n}"},
		{"not identifiers", "{1a} {_a} {a.} {.a} {a.b.c} {a-b} {a b} {tâche} { task.title }", nil,
			"{1a} {_a} {a.} {.a} {a.b.c} {a-b} {a b} {tâche} { task.title }"},
		{"unclosed", "{task.title", nil, "{task.title"},
		{"doubled braces are text", "<h1>{{title}}</h1> {{task.title}}", nil, "<h1>{{title}}</h1> {{task.title}}"},
		{"tripled braces are text", "{{{body}}}", nil, "{{{body}}}"},
		{"a brace before a variable", "{{task.title}", nil, "{Task"},
		{"a brace after a variable", `{"order": {task.executionOrder}}`, nil, `{"order": 3}`},
		{"other doubled braces are text", "{{ .Name }} {{}} }}{{", nil, "{{ .Name }} {{}} }}{{"},
		{"a backslash escapes a variable", `\{task.title} is "{task.title}"`, nil, `{task.title} is "Task"`},
		{"a backslash escapes an unknown name", `echo $\{HOME}`, nil, `echo ${HOME}`},
		{"a backslash before text stays", `\{1} \d{2,3} \n`, nil, `\{1} \d{2,3} \n`},
		{"a doubled backslash escapes once", `\\{task.title}`, nil, `\{task.title}`},
		{"values are not read again", "{task.title}|{task.description}", func(v *Vars) {
			v.Task.Title, v.Task.Description = "{task.description}", `\{x} {{task.title}}`
		}, `{task.description}|\{x} {{task.title}}`},
		{"blank fields are empty", "[{task.description}][{backlogItem.acceptanceCriteria}][{context.framework}]", func(v *Vars) {
			v.Task.Description, v.Item.AcceptanceCriteria, v.Context.Framework = "", " \n ", ""
		}, "[][][]"},
		{"an unset order is empty", "[{task.executionOrder}]", func(v *Vars) { v.Task.ExecutionOrder = 0 }, "[]"},
		{"no refining yet is 0", "[{backlogItem.refiningIterations}]", func(v *Vars) { v.Item.RefiningIterations = 0 }, "[0]"},
		{"values are trimmed", "[{task.description}]", func(v *Vars) { v.Task.Description = "\n \n  indented\nlast \n\n" }, "[  indented\nlast]"},
		{"no artifacts", "[{artifacts}][{artifacts.split}][{artifacts.plan}]", nil, "[(none)][(none)][(none)]"},
		{"an empty artifact", "[{artifacts.plan}]", func(v *Vars) {
			v.Artifacts = []Artifact{{Kind: agentout.KindPlan, Owner: OwnerTask, Content: "\n  \n"}}
		}, "[(empty)]"},
		{"a heading without a step, on one line", "{artifacts}", func(v *Vars) {
			v.Artifacts = []Artifact{
				{Kind: agentout.KindPlan, Owner: OwnerTask, Content: "a"},
				{Kind: agentout.KindGeneral, Step: " Code\nReview ", Owner: OwnerItem, Content: "b"},
			}
		}, "### plan, for this task\n\na\n\n### general from Code Review, for the backlog item\n\nb"},
		{"a backlog item agent's headings have no owner", "{artifacts}", func(v *Vars) {
			v.Task = nil
			v.Artifacts = []Artifact{{Kind: agentout.KindTaskSplit, Step: "Splitting", Owner: OwnerItem, Content: "tasks"}}
		}, "### task_split from Splitting\n\ntasks"},
		{"a line break is kept", "{task.title}\r\n{task.state}\r\n", nil, "Task\r\nPlanning\r\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v := taskVars()
			if tt.vars != nil {
				tt.vars(&v)
			}
			got, err := Build(tt.template, v)
			if err != nil {
				t.Fatalf("Build: %v", err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Build(%q) (-want +got):\n%s", tt.template, diff)
			}
		})
	}
}

const backlogNames = "{backlogItem.title}, {backlogItem.description}, {backlogItem.acceptanceCriteria}, " +
	"{backlogItem.refiningIterations}, {context.language}, {context.framework}, {context.repoPath}, " +
	"{artifacts}, {artifacts.split}, {artifacts.plan}, {artifacts.implementation}, {artifacts.test}, {artifacts.general}"

func TestCheckReportsEveryProblem(t *testing.T) {
	taskNames := "{task.title}, {task.description}, {task.state}, {task.priority}, {task.acceptanceCriteria}, " +
		"{task.executionOrder}, " + backlogNames
	tests := []struct {
		name     string
		template string
		scope    Scope
		want     Problems
	}{
		{"a typo", "Title: {task.titel}", ScopeTask, Problems{
			{1, 8, "task.titel", false, "unknown variable {task.titel} (did you mean {task.title}?)"}}},
		{"the case", "{Task.Title}", ScopeTask, Problems{
			{1, 1, "Task.Title", false, "unknown variable {Task.Title} (did you mean {task.title}?)"}}},
		{"a field cut short", "{context.lang}", ScopeTask, Problems{
			{1, 1, "context.lang", false, "unknown variable {context.lang} (did you mean {context.language}?)"}}},
		{"a namespace's field cut short", "{backlogItem.acceptance}", ScopeBacklog, Problems{
			{1, 1, "backlogItem.acceptance", false, "unknown variable {backlogItem.acceptance} (did you mean {backlogItem.acceptanceCriteria}?)"}}},
		{"the kind's name", "{artifacts.task_split}", ScopeTask, Problems{
			{1, 1, "artifacts.task_split", false, "unknown variable {artifacts.task_split} (did you mean {artifacts.split}?)"}}},
		{"nothing near, for a task agent", "{foo}", ScopeTask, Problems{
			{1, 1, "foo", false, "unknown variable {foo} (known: " + taskNames + `); to write {foo} as text, write \{foo}`}}},
		{"nothing near, for a backlog item agent", "${HOME}", ScopeBacklog, Problems{
			{1, 2, "HOME", false, "unknown variable {HOME} (known: " + backlogNames + `); to write {HOME} as text, write \{HOME}`}}},
		{"a task variable for a backlog item agent", "{task.title}", ScopeBacklog, Problems{
			{1, 1, "task.title", true, "{task.title}: a backlog item agent (backlog_state) has no task, so its prompt cannot use {task.…} variables"}}},
		{"a misspelt task variable for a backlog item agent", "{task.titel}", ScopeBacklog, Problems{
			{1, 1, "task.titel", true, "{task.titel}: a backlog item agent (backlog_state) has no task, so its prompt cannot use {task.…} variables"}}},
		{"every problem, with its line and column in characters", "é {task.title}\n\nok {artifacts}\n  «{artifact.plan}» {x}", ScopeBacklog, Problems{
			{1, 3, "task.title", true, "{task.title}: a backlog item agent (backlog_state) has no task, so its prompt cannot use {task.…} variables"},
			{4, 4, "artifact.plan", false, "unknown variable {artifact.plan} (did you mean {artifacts.plan}?)"},
			{4, 21, "x", false, "unknown variable {x} (known: " + backlogNames + `); to write {x} as text, write \{x}`},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := Check(tt.template, tt.scope)
			var got Problems
			if !errors.As(err, &got) {
				t.Fatalf("Check error = %v (%T), want Problems", err, err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Check(%q) (-want +got):\n%s", tt.template, diff)
			}
		})
	}
}

func TestCheckAcceptsEveryVariableOfItsScope(t *testing.T) {
	for _, scope := range []Scope{ScopeBacklog, ScopeTask} {
		template := strings.Join(Names(scope), "\n") + "\n{{foo}} \\{foo} {\"a\": 1}"
		if err := Check(template, scope); err != nil {
			t.Errorf("Check(%s) = %v, want nil", scope, err)
		}
	}
}

func TestProblemsError(t *testing.T) {
	err := Check("{task.titel}\n  {task.title}", ScopeBacklog)
	want := "1:1: {task.titel}: a backlog item agent (backlog_state) has no task, so its prompt cannot use {task.…} variables\n" +
		"2:3: {task.title}: a backlog item agent (backlog_state) has no task, so its prompt cannot use {task.…} variables"
	if err == nil || err.Error() != want {
		t.Errorf("error =\n%v\nwant\n%s", err, want)
	}
}

func TestBuildErrors(t *testing.T) {
	tests := []struct {
		name     string
		template string
		vars     func(v *Vars)
		want     string
	}{
		{"a task variable without a task", "{task.title} {backlogItem.title}", func(v *Vars) { v.Task = nil },
			"1:1: {task.title}: a backlog item agent (backlog_state) has no task, so its prompt cannot use {task.…} variables"},
		{"an unknown variable", "a\n{task.titel}", nil, "2:1: unknown variable {task.titel} (did you mean {task.title}?)"},
		{"an unknown kind", "x", func(v *Vars) {
			v.Artifacts = []Artifact{{Kind: agentout.KindPlan, Owner: OwnerTask}, {Kind: "review", Owner: OwnerTask}}
		}, `artifact 2: unknown kind "review" (kinds: task_split, plan, implementation, test, general)`},
		{"no owner", "x", func(v *Vars) { v.Artifacts = []Artifact{{Kind: agentout.KindPlan}} },
			`artifact 1: owner "", want "item" or "task"`},
		{"a task's artifact without a task", "x", func(v *Vars) {
			v.Task = nil
			v.Artifacts = []Artifact{{Kind: agentout.KindPlan, Owner: OwnerTask}}
		}, `artifact 1: owner "task", but there is no task (Vars.Task is nil)`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v := taskVars()
			if tt.vars != nil {
				tt.vars(&v)
			}
			got, err := Build(tt.template, v)
			if err == nil || err.Error() != tt.want {
				t.Errorf("Build error =\n%v\nwant\n%s", err, tt.want)
			}
			if got != "" {
				t.Errorf("Build returned %q with its error", got)
			}
		})
	}
}

func TestNames(t *testing.T) {
	want := strings.Split(backlogNames, ", ")
	if diff := cmp.Diff(want, Names(ScopeBacklog)); diff != "" {
		t.Errorf("Names(ScopeBacklog) (-want +got):\n%s", diff)
	}
	task := Names(ScopeTask)
	if diff := cmp.Diff(want, task[6:]); diff != "" || len(task) != 19 || task[0] != "{task.title}" {
		t.Errorf("Names(ScopeTask) = %v, want the six task variables, then %v", task, want)
	}
}

func TestScopeString(t *testing.T) {
	for scope, want := range map[Scope]string{ScopeBacklog: "backlog item agent", ScopeTask: "task agent", Scope(7): "backlog item agent"} {
		if got := scope.String(); got != want {
			t.Errorf("Scope(%d).String() = %q, want %q", scope, got, want)
		}
	}
}
