package process

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/agentrunner/agentrunner"
)

// placeholderNames lists every {name} a command argument may contain, in the
// order the documentation gives them, so error messages list them the same way.
var placeholderNames = []string{
	"prompt_file", "output", "dir", "cycle_dir", "mailbox", "memory",
	"template", "schema", "cycle_id", "step", "agent", "attempt", "mcp_config", "workspace", "workdir",
}

// placeholderValue returns what a placeholder stands for in one invocation.
// name is always one of placeholderNames: New rejected every other name.
func placeholderValue(inv *agentrunner.Invocation, name string) string {
	switch name {
	case "prompt_file":
		return inv.PromptPath
	case "output":
		return inv.OutputPath
	case "dir":
		return inv.Dir
	case "cycle_dir":
		return inv.CycleDir
	case "mailbox":
		return inv.MailboxPath
	case "memory":
		return inv.MemoryPath
	case "template":
		return inv.TemplatePath
	case "schema":
		return inv.SchemaPath
	case "cycle_id":
		return inv.CycleID
	case "step":
		return inv.Step
	case "agent":
		return inv.Agent
	case "attempt":
		return strconv.Itoa(inv.Attempt)
	case "mcp_config":
		return inv.MCPConfig
	case "workdir":
		return WorkDir(inv)
	case "workspace":
		return inv.WorkspaceDir
	}
	return ""
}

// argTemplate is one command argument split into literal text and
// placeholders, parsed once by New so Run cannot meet a malformed one.
type argTemplate []argPart

// argPart is either literal text or, when placeholder is set, a placeholder.
type argPart struct {
	literal     string
	placeholder string
}

// parseArg splits arg into literal text and {name} placeholders. It returns
// the names that look like placeholders but are not known, so New can name
// every typo at once. "{{" is a literal "{" and "${" is left to the shell
// (sh -c '... ${HOME} ...'), so neither starts a placeholder; a brace that
// does not enclose a name ("{}", `{"a":1}`) is literal text.
func parseArg(arg string) (argTemplate, []string) {
	var (
		parts   argTemplate
		unknown []string
		lit     strings.Builder
	)
	flush := func() {
		if lit.Len() > 0 {
			parts = append(parts, argPart{literal: lit.String()})
			lit.Reset()
		}
	}
	for i := 0; i < len(arg); {
		switch {
		case strings.HasPrefix(arg[i:], "{{"):
			lit.WriteByte('{')
			i += 2
		case strings.HasPrefix(arg[i:], "${"):
			lit.WriteString("${")
			i += 2
		case arg[i] == '{':
			end := strings.IndexByte(arg[i+1:], '}')
			if end < 0 || !isPlaceholderName(arg[i+1:i+1+end]) {
				lit.WriteByte('{')
				i++
				continue
			}
			name := arg[i+1 : i+1+end]
			if !slices.Contains(placeholderNames, name) {
				unknown = append(unknown, name)
			}
			flush()
			parts = append(parts, argPart{placeholder: name})
			i += end + 2
		default:
			lit.WriteByte(arg[i])
			i++
		}
	}
	flush()
	return parts, unknown
}

// isPlaceholderName reports whether s has the shape of a placeholder name
// (an identifier), known or not.
func isPlaceholderName(s string) bool {
	if s == "" {
		return false
	}
	for i, c := range s {
		switch {
		case c == '_', 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z':
		case '0' <= c && c <= '9' && i > 0:
		default:
			return false
		}
	}
	return true
}

// expand returns the argument with every placeholder replaced.
func (t argTemplate) expand(inv *agentrunner.Invocation) string {
	var b strings.Builder
	for _, p := range t {
		if p.placeholder != "" {
			b.WriteString(placeholderValue(inv, p.placeholder))
		} else {
			b.WriteString(p.literal)
		}
	}
	return b.String()
}

// knownPlaceholders formats the placeholder names for error messages.
func knownPlaceholders() string {
	braced := make([]string, len(placeholderNames))
	for i, n := range placeholderNames {
		braced[i] = fmt.Sprintf("{%s}", n)
	}
	return strings.Join(braced, " ")
}
