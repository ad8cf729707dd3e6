package agentdef

import (
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/agentrunner/agentrunner/taskprompt"
	"go.yaml.in/yaml/v3"
)

// promptProblems checks the template variables of every loaded agent's
// prompt for the kind of agent it is (see Prompts in the package
// documentation). A prompt's own problems are reported once, in the file
// that writes it; an agent that inherits its prompt adds only what its
// move to a backlog state breaks.
func promptProblems(entries []*entry, set *Set, byID map[string]*entry) Problems {
	var out Problems
	for _, e := range entries {
		a := set.agents[e.agent.ID]
		if a == nil || a.Prompt == "" || a.StateName() == "" {
			continue
		}
		if e.set["prompt"] {
			out = append(out, e.ownPromptProblems(scopeOf(a))...)
		} else {
			out = append(out, inheritedPromptProblems(e, a, set, byID)...)
		}
	}
	return out
}

// scopeOf is the scope of an agent's prompt. An agent with both state and
// backlog_state is reported for that; the task scope then keeps its prompt
// from adding problems that only follow from the mistake.
func scopeOf(a *Agent) taskprompt.Scope {
	if a.State != "" {
		return taskprompt.ScopeTask
	}
	return taskprompt.ScopeBacklog
}

func templateProblems(prompt string, scope taskprompt.Scope) taskprompt.Problems {
	var ps taskprompt.Problems
	errors.As(taskprompt.Check(prompt, scope), &ps)
	return ps
}

// ownPromptProblems reports the problems of the prompt the entry writes,
// each at its variable when the file shows where that is.
func (e *entry) ownPromptProblems(scope taskprompt.Scope) Problems {
	var out Problems
	for _, p := range templateProblems(e.agent.Prompt, scope) {
		where, exact := e.promptPlace(p.Line, p.Column)
		msg := p.Message
		if !exact {
			msg = fmt.Sprintf("line %d, column %d of the prompt: %s", p.Line, p.Column, msg)
		}
		out = append(out, Problem{Where: where, Key: "prompt", Message: msg})
	}
	return out
}

// inheritedPromptProblems reports a backlog item agent whose inherited
// prompt is a task agent's that uses {task.…} variables: fine for the
// parent, so only the agent that set the backlog state can be told. It is
// one problem at its backlog_state, listing each variable where it is
// written.
func inheritedPromptProblems(e *entry, a *Agent, set *Set, byID map[string]*entry) Problems {
	src := promptSource(e, byID)
	if !e.set["backlog_state"] || src == nil || set.agents[src.agent.ID] == nil ||
		scopeOf(set.agents[src.agent.ID]) != taskprompt.ScopeTask {
		return nil
	}
	var uses []string
	for _, p := range templateProblems(a.Prompt, taskprompt.ScopeBacklog) {
		if p.OutOfScope {
			uses = append(uses, fmt.Sprintf("{%s} (%s)", p.Name, src.describePlace(p.Line, p.Column)))
		}
	}
	if len(uses) == 0 {
		return nil
	}
	return Problems{{Where: e.at("backlog_state"), Key: "prompt", Message: fmt.Sprintf(
		"the prompt inherited from %q uses %s, but a backlog item agent has no task: give this agent a prompt of its own",
		src.agent.ID, strings.Join(uses, ", "))}}
}

// promptSource is the entry that writes the prompt e inherits, or nil. It
// gives up after as many steps as there are agents, so that a chain into a
// cycle ends.
func promptSource(e *entry, byID map[string]*entry) *entry {
	cur := e
	for range len(byID) {
		cur = byID[cur.agent.Extends]
		if cur == nil || cur.set["prompt"] {
			return cur
		}
	}
	return nil
}

// describePlace is promptPlace for a message: the file:line:col, or the
// line and column within the prompt after the key's place.
func (e *entry) describePlace(line, col int) string {
	where, exact := e.promptPlace(line, col)
	if exact {
		return where
	}
	return fmt.Sprintf("%s, line %d, column %d of the prompt", where, line, col)
}

// promptPlace is the file:line:col of a line and column of the prompt, and
// true, when the file holds that line of the prompt as it is: in a literal
// block (|), each line of the prompt is a line of the file after its
// indentation, and a one-line plain or quoted value may be written without
// escapes. Otherwise (a folded block, escapes, a value over several lines)
// it is the prompt key's place, and false.
func (e *entry) promptPlace(line, col int) (string, bool) {
	n := e.prompt
	if n == nil {
		return e.at("prompt"), false
	}
	want := nthLine(n.Value, line)
	fileLine, start := 0, -1
	switch {
	case n.Style&yaml.LiteralStyle != 0:
		fileLine = n.Line + line
		start = e.indentOf(fileLine, want)
	case line == 1 && n.Style&yaml.FoldedStyle == 0 && !strings.Contains(n.Value, "\n"):
		fileLine = n.Line
		start = e.inlineStart(n, want)
	}
	if start < 0 {
		return e.at("prompt"), false
	}
	return fmt.Sprintf("%s:%d:%d", e.agent.File, fileLine, start+col), true
}

// nthLine is the n-th line of s, from 1.
func nthLine(s string, n int) string {
	for i := 1; ; i++ {
		line, rest, ok := strings.Cut(s, "\n")
		if i == n || !ok {
			return line
		}
		s = rest
	}
}

// fileLine is the file's line n, from 1, without a CR, and false past its
// end.
func (e *entry) fileLine(n int) (string, bool) {
	if n < 1 || n > len(e.lines) {
		return "", false
	}
	return strings.TrimSuffix(e.lines[n-1], "\r"), true
}

// indentOf is the number of characters of the file's line n before want,
// when that line is indentation then want, or -1.
func (e *entry) indentOf(n int, want string) int {
	raw, ok := e.fileLine(n)
	if !ok || !strings.HasSuffix(raw, want) {
		return -1
	}
	indent := raw[:len(raw)-len(want)]
	if strings.Trim(indent, " ") != "" {
		return -1
	}
	return len(indent)
}

// inlineStart is the number of characters of the value's line before the
// value, when the value is written there as it is (after its opening
// quote), or -1.
func (e *entry) inlineStart(n *yaml.Node, want string) int {
	raw, ok := e.fileLine(n.Line)
	start := n.Column - 1
	if n.Style&(yaml.SingleQuotedStyle|yaml.DoubleQuotedStyle) != 0 {
		start++
	}
	if !ok || start > utf8.RuneCountInString(raw) {
		return -1
	}
	if !strings.HasPrefix(string([]rune(raw)[start:]), want) {
		return -1
	}
	return start
}
