// Package prompt assembles the context an agent is given for one attempt,
// always in the order of FR-150 and spec 1 Appendix A: identity → tools →
// mailbox → input artifacts → output template → where to write the output.
//
// Files are given by path, not inlined: agents read them at runtime, and the
// operator can read the exact prompt an agent saw in its attempt folder.
package prompt

import (
	"encoding/json"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strings"

	"github.com/agentrunner/agentrunner"
)

// Tool is one tool the agent may use, with its tools.md section.
type Tool struct {
	Name    string
	Section string
}

// Context is what goes into one agent's prompt.
type Context struct {
	CycleID string
	Step    string
	Agent   string
	Attempt int

	// Identity is the text of the agent's identity file.
	Identity string
	Tools    []Tool
	// MailboxPath is the agent's mailbox; MaxMessages is its capacity.
	MailboxPath string
	MaxMessages int
	Inputs      []agentrunner.Input
	// TemplatePath is the output template; SchemaPath its JSON Schema.
	TemplatePath string
	SchemaPath   string
	// OutputPath is where the agent must write its artifact.
	OutputPath string
	// FinalAnswer: the agent answers with the artifact's content instead
	// of writing a file (a model agent, which cannot write files).
	FinalAnswer bool
	// Inline holds the content of files given in the prompt itself instead
	// of by path, keyed by path (a model agent with inline_inputs).
	Inline map[string]string
	// RunInputs are the input variables the run was started with.
	RunInputs map[string]any
}

// runInputs lists the run's input variables, one "- name: value" line
// each in name order; values that are not strings are JSON.
func (c Context) runInputs(b *strings.Builder) {
	if len(c.RunInputs) == 0 {
		return
	}
	b.WriteString("## Run inputs\n\nThe run was started with these inputs:\n\n")
	for _, k := range slices.Sorted(maps.Keys(c.RunInputs)) {
		v, ok := c.RunInputs[k].(string)
		if !ok {
			j, _ := json.Marshal(c.RunInputs[k])
			v = string(j)
		}
		fmt.Fprintf(b, "- %s: %s\n", k, strings.ReplaceAll(v, "\n", " "))
	}
	b.WriteString("\n")
}

// Build returns the assembled prompt.
func Build(c Context) string {
	var b strings.Builder
	b.WriteString(strings.TrimRight(c.Identity, "\n"))
	b.WriteString("\n\n---\n\n")
	fmt.Fprintf(&b, "# Run context\n\nYou are the %s agent, running step %q of cycle %s (attempt %d).\n\n", c.Agent, c.Step, c.CycleID, c.Attempt)

	b.WriteString("## Tools\n\n")
	if len(c.Tools) == 0 {
		b.WriteString("You have no tools in this step.\n\n")
	} else {
		names := make([]string, len(c.Tools))
		for i, t := range c.Tools {
			names[i] = t.Name
		}
		fmt.Fprintf(&b, "You may use these tools: %s.\n\n", strings.Join(names, ", "))
		for _, t := range c.Tools {
			b.WriteString(demote(strings.TrimSpace(t.Section)))
			b.WriteString("\n\n")
		}
	}

	b.WriteString("## Mailbox\n\n")
	fmt.Fprintf(&b, "Your mailbox: %s\n\n", c.MailboxPath)
	fmt.Fprintf(&b, "It holds the %d most recent messages for you, one JSON object per line, oldest first, each with id, time, from, kind (forward, backward, broadcast, inject, status), cycle_id and body. It may not exist yet. Read it before you start.\n\n", c.MaxMessages)
	c.inline(&b, c.MailboxPath)

	c.runInputs(&b)
	b.WriteString("## Inputs\n\n")
	if len(c.Inputs) == 0 {
		b.WriteString("No input artifacts for this step.\n\n")
	} else {
		for _, in := range c.Inputs {
			fmt.Fprintf(&b, "- %s: %s\n", in.Name, in.Path)
		}
		b.WriteString("\n")
		for _, in := range c.Inputs {
			c.inline(&b, in.Path)
		}
	}

	b.WriteString("## Output template\n\n")
	fmt.Fprintf(&b, "Template: %s\n", c.TemplatePath)
	if c.SchemaPath != "" {
		fmt.Fprintf(&b, "JSON Schema: %s\n", c.SchemaPath)
	}
	b.WriteString("\n")
	c.inline(&b, c.TemplatePath)
	c.inline(&b, c.SchemaPath)

	b.WriteString("## Output\n\n")
	switch {
	case c.FinalAnswer:
		fmt.Fprintf(&b, "Your final answer is the artifact %s: answer with its complete content and nothing else (no preamble, no code fence). Before that, read your inputs", filepath.Base(c.OutputPath))
		if len(c.Inline) == 0 {
			b.WriteString(" with filesystem_read (filesystem_tree lists what you may read)")
		}
		b.WriteString(" and use your tools as you need.\n\n")
	default:
		fmt.Fprintf(&b, "Write your result to exactly this file: %s\n\n", c.OutputPath)
	}
	if c.SchemaPath != "" {
		b.WriteString("It must be one JSON document that follows the template and validates against the schema. Fill every {{placeholder}}.\n")
	} else {
		b.WriteString("Keep every heading of the template exactly as written, give every section content, keep every table's columns and labelled rows, and fill every {{placeholder}}. Output that breaks the template is rejected.\n")
	}
	return b.String()
}

// inline writes the content of a file given in the prompt, if it is.
func (c Context) inline(b *strings.Builder, path string) {
	content, ok := c.Inline[path]
	if !ok || path == "" {
		return
	}
	fence := "```"
	for strings.Contains(content, fence) {
		fence += "`"
	}
	fmt.Fprintf(b, "Content of %s:\n\n%s\n%s\n%s\n\n", path, fence, strings.TrimRight(content, "\n"), fence)
}

// demote turns the "## tool" headings of a tools.md section into "###", so
// tool sections nest under the prompt's Tools heading.
func demote(section string) string {
	lines := strings.Split(section, "\n")
	fence := ""
	for i, l := range lines {
		t := strings.TrimLeft(l, " ")
		if fence == "" && (strings.HasPrefix(t, "```") || strings.HasPrefix(t, "~~~")) {
			fence = t[:3]
			continue
		}
		if fence != "" {
			if strings.HasPrefix(t, fence) {
				fence = ""
			}
			continue
		}
		if strings.HasPrefix(l, "#") {
			lines[i] = "#" + l
		}
	}
	return strings.Join(lines, "\n")
}
