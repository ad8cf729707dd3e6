package taskprompt

import (
	"fmt"
	"strings"

	"github.com/agentrunner/agentrunner/agentout"
)

// Scope is the kind of agent a prompt is for, which decides the variables
// it may use. The zero value is ScopeBacklog, the narrower one, so that a
// scope left unset never lets a {task.…} variable through.
type Scope int

const (
	// ScopeBacklog is a backlog item agent's (backlog_state): it has no
	// task.
	ScopeBacklog Scope = iota
	// ScopeTask is a task agent's (state): every variable.
	ScopeTask
)

// String names the agents of the scope, for messages.
func (s Scope) String() string {
	if s == ScopeTask {
		return "task agent"
	}
	return "backlog item agent"
}

// Item is the backlog item a prompt is about.
type Item struct {
	Title, Description, AcceptanceCriteria string
	RefiningIterations                     int
}

// Task is the task a task agent works on.
type Task struct {
	Title, Description, State, Priority, AcceptanceCriteria string
	// ExecutionOrder is the task's order within its item, from 1; 0 is
	// not set.
	ExecutionOrder int
}

// Context is what was detected of the repository.
type Context struct {
	Language, Framework, RepoPath string
}

// Owner says whose artifact it is: a task agent sees both its backlog
// item's artifacts (the split) and its task's.
type Owner string

// The owners of an artifact.
const (
	OwnerItem Owner = "item"
	OwnerTask Owner = "task"
)

// Artifact is one output of an earlier agent.
type Artifact struct {
	Kind agentout.Kind
	// Step is the state or step that produced it, e.g. "Planning".
	Step    string
	Owner   Owner
	Content string
}

// Vars are the values of the variables for one prompt.
type Vars struct {
	Item Item
	// Task is nil for a backlog item agent, which makes Build check the
	// template with ScopeBacklog.
	Task    *Task
	Context Context
	// Artifacts are oldest first: the most recent of a kind is the last.
	Artifacts []Artifact
}

// Placeholders of the artifact variables, which are never empty.
const (
	// None is an artifact variable's value when no artifact of its kind
	// exists.
	None = "(none)"
	// Empty is its value when the most recent artifact has no content.
	Empty = "(empty)"
)

// Problem is one thing wrong with a template.
type Problem struct {
	// Line and Column place the variable's "{" in the template, both from
	// 1; the column counts characters.
	Line, Column int
	// Name is the variable as written, without its braces.
	Name string
	// OutOfScope is true for a {task.…} variable in a backlog item agent's
	// prompt: a name that may be right for a task agent.
	OutOfScope bool
	// Message says what is wrong, without the place.
	Message string
}

func (p Problem) String() string {
	return fmt.Sprintf("%d:%d: %s", p.Line, p.Column, p.Message)
}

// Problems is every problem of a template, one error, so that a prompt
// writer fixes them all in one go.
type Problems []Problem

func (ps Problems) Error() string {
	lines := make([]string, len(ps))
	for i, p := range ps {
		lines[i] = p.String()
	}
	return strings.Join(lines, "\n")
}

// Names returns the variables a scope may use, as written in a template
// ("{task.title}"), in the order of the package documentation.
func Names(scope Scope) []string {
	var out []string
	for _, v := range variables {
		if scope == ScopeTask || !v.taskOnly {
			out = append(out, "{"+v.name+"}")
		}
	}
	return out
}

// Check returns Problems listing every variable of the template that is
// unknown or not in the scope, or nil.
func Check(template string, scope Scope) error {
	if ps := check(template, parse(template), scope); len(ps) > 0 {
		return ps
	}
	return nil
}

// Build fills in the template's variables with v's values, in one pass. It
// checks the template first, with ScopeTask when v has a Task and
// ScopeBacklog when not, and returns Check's Problems if any; an artifact
// with an unknown kind or owner is an error too, as it is the caller's
// mistake and would give a wrong heading.
func Build(template string, v Vars) (string, error) {
	scope := ScopeBacklog
	if v.Task != nil {
		scope = ScopeTask
	}
	pieces := parse(template)
	if ps := check(template, pieces, scope); len(ps) > 0 {
		return "", ps
	}
	if err := checkArtifacts(&v); err != nil {
		return "", err
	}
	var b strings.Builder
	for _, p := range pieces {
		if p.name == "" {
			b.WriteString(p.text)
			continue
		}
		b.WriteString(byName[p.name].value(&v))
	}
	return b.String(), nil
}

// checkArtifacts reports the first artifact whose kind or owner is not one
// of the known ones.
func checkArtifacts(v *Vars) error {
	for i, a := range v.Artifacts {
		switch {
		case !a.Kind.Valid():
			return fmt.Errorf("artifact %d: unknown kind %q (kinds: %s)", i+1, a.Kind, kindList())
		case a.Owner != OwnerItem && a.Owner != OwnerTask:
			return fmt.Errorf("artifact %d: owner %q, want %q or %q", i+1, a.Owner, OwnerItem, OwnerTask)
		case a.Owner == OwnerTask && v.Task == nil:
			return fmt.Errorf("artifact %d: owner %q, but there is no task (Vars.Task is nil)", i+1, a.Owner)
		}
	}
	return nil
}

func kindList() string {
	names := make([]string, len(agentout.Kinds))
	for i, k := range agentout.Kinds {
		names[i] = string(k)
	}
	return strings.Join(names, ", ")
}
