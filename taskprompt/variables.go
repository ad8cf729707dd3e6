package taskprompt

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/agentrunner/agentrunner/agentout"
	"github.com/agentrunner/agentrunner/config"
)

// variable is one known variable.
type variable struct {
	name     string // as written between the braces
	taskOnly bool   // needs a task, so not in ScopeBacklog
	value    func(v *Vars) string
}

// variables are the known variables, in the order of the package
// documentation. Build calls a taskOnly value only once Check has made sure
// there is a task.
var variables = []variable{
	{"task.title", true, func(v *Vars) string { return text(v.Task.Title) }},
	{"task.description", true, func(v *Vars) string { return text(v.Task.Description) }},
	{"task.state", true, func(v *Vars) string { return text(v.Task.State) }},
	{"task.priority", true, func(v *Vars) string { return text(v.Task.Priority) }},
	{"task.acceptanceCriteria", true, func(v *Vars) string { return text(v.Task.AcceptanceCriteria) }},
	{"task.executionOrder", true, func(v *Vars) string { return order(v.Task.ExecutionOrder) }},
	{"backlogItem.title", false, func(v *Vars) string { return text(v.Item.Title) }},
	{"backlogItem.description", false, func(v *Vars) string { return text(v.Item.Description) }},
	{"backlogItem.acceptanceCriteria", false, func(v *Vars) string { return text(v.Item.AcceptanceCriteria) }},
	{"backlogItem.refiningIterations", false, func(v *Vars) string { return strconv.Itoa(v.Item.RefiningIterations) }},
	{"context.language", false, func(v *Vars) string { return text(v.Context.Language) }},
	{"context.framework", false, func(v *Vars) string { return text(v.Context.Framework) }},
	{"context.repoPath", false, func(v *Vars) string { return text(v.Context.RepoPath) }},
	{"artifacts", false, artifactList},
	{"artifacts.split", false, latest(agentout.KindTaskSplit)},
	{"artifacts.plan", false, latest(agentout.KindPlan)},
	{"artifacts.implementation", false, latest(agentout.KindImplementation)},
	{"artifacts.test", false, latest(agentout.KindTest)},
	{"artifacts.general", false, latest(agentout.KindGeneral)},
}

var byName = func() map[string]*variable {
	m := make(map[string]*variable, len(variables))
	for i := range variables {
		m[variables[i].name] = &variables[i]
	}
	return m
}()

// check judges every variable of a parsed template.
func check(t string, pieces []piece, scope Scope) Problems {
	var ps Problems
	for _, p := range pieces {
		if p.name == "" {
			continue
		}
		if bad, ok := judge(p.name, scope); !ok {
			bad.Line, bad.Column = position(t, p.at)
			ps = append(ps, bad)
		}
	}
	return ps
}

// judge says if a variable may be used in the scope, and if not why. Any
// {task.…} name is out of a backlog item agent's scope, typo or not: that
// there is no task is what the writer needs to know first.
func judge(name string, scope Scope) (Problem, bool) {
	if scope != ScopeTask && strings.HasPrefix(name, "task.") {
		return Problem{Name: name, OutOfScope: true, Message: fmt.Sprintf(
			"{%s}: a %s (backlog_state) has no task, so its prompt cannot use {task.…} variables", name, scope)}, false
	}
	if byName[name] != nil {
		return Problem{}, true
	}
	return Problem{Name: name, Message: unknown(name, scope)}, false
}

// unknown is the message for an unknown variable: the nearest known name,
// or, with none near, every name and how to write the braces as text (the
// name may be code, as in a shell's ${HOME}).
func unknown(name string, scope Scope) string {
	if s := suggest(name, scope); s != "" {
		return fmt.Sprintf("unknown variable {%s} (did you mean {%s}?)", name, s)
	}
	return fmt.Sprintf(`unknown variable {%s} (known: %s); to write {%s} as text, write \{%s}`,
		name, strings.Join(Names(scope), ", "), name, name)
}

// suggest returns the known name of the scope nearest to name, ignoring
// case, when it is within a third of name's length (at least two edits),
// or "". A field that begins a known field of its namespace is near
// ({context.lang} is {context.language}).
func suggest(name string, scope Scope) string {
	lower := strings.ToLower(name)
	best, bestDist := "", max(2, len(name)/3)+1
	for _, v := range variables {
		if v.taskOnly && scope != ScopeTask {
			continue
		}
		if d := distance(lower, strings.ToLower(v.name)); d < bestDist {
			best, bestDist = v.name, d
		}
	}
	return best
}

func distance(name, known string) int {
	if strings.Contains(name, ".") && strings.HasPrefix(known, name) {
		return 1
	}
	return config.EditDistance(name, known)
}

// text is a value as it goes into a prompt: without its leading blank
// lines and trailing white space, which would only add blank lines around
// the place the template gives it.
func text(s string) string {
	s = strings.TrimRight(s, " \t\r\n")
	for {
		line, rest, ok := strings.Cut(s, "\n")
		if !ok || strings.TrimSpace(line) != "" {
			return s
		}
		s = rest
	}
}

// order is an execution order, empty when it is not set.
func order(n int) string {
	if n <= 0 {
		return ""
	}
	return strconv.Itoa(n)
}

// content is an artifact's content, Empty when it has none.
func content(s string) string {
	if t := text(s); t != "" {
		return t
	}
	return Empty
}

// latest returns the value of an {artifacts.…} variable: the content of
// the most recent artifact of the kind, None when there is none.
func latest(kind agentout.Kind) func(v *Vars) string {
	return func(v *Vars) string {
		for i := len(v.Artifacts) - 1; i >= 0; i-- {
			if v.Artifacts[i].Kind == kind {
				return content(v.Artifacts[i].Content)
			}
		}
		return None
	}
}

// artifactList is {artifacts}: each artifact under a heading, oldest first.
func artifactList(v *Vars) string {
	if len(v.Artifacts) == 0 {
		return None
	}
	var b strings.Builder
	for i, a := range v.Artifacts {
		if i > 0 {
			b.WriteString("\n\n")
		}
		b.WriteString(heading(a, v.Task != nil))
		b.WriteString("\n\n")
		b.WriteString(content(a.Content))
	}
	return b.String()
}

// heading names an artifact's kind, the step that produced it on one line
// and, for a task agent, whose it is.
func heading(a Artifact, forTask bool) string {
	h := "### " + string(a.Kind)
	if step := strings.Join(strings.Fields(a.Step), " "); step != "" {
		h += " from " + step
	}
	switch {
	case !forTask:
	case a.Owner == OwnerTask:
		h += ", for this task"
	default:
		h += ", for the backlog item"
	}
	return h
}
