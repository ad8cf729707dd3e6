// Package capsule is spec 3's hand-off store on top of a CapsuleStore:
// the checks a capsule must pass (its six sections, its size), the
// operations agents and operators use (store, fetch, update with the
// version read, search, export and import, compose …), and the tools that
// give them to model agents and, over MCP, to CLI agents. The REST API and
// the CLI call the same Service.
package capsule

import (
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/agentrunner/agentrunner"
)

// DefaultMaxChars is the size cap of a capsule's text, in characters.
const DefaultMaxChars = 12000

// Lint checks a capsule's text: the six sections of
// agentrunner.CapsuleSections as "## " headings, each once, in that order,
// and at most maxChars characters (0: DefaultMaxChars). The error says
// what to fix: the section missing or out of place, or the size.
func Lint(text string, maxChars int) error {
	if maxChars <= 0 {
		maxChars = DefaultMaxChars
	}
	if n := utf8.RuneCountInString(text); n > maxChars {
		return agentrunner.Errorf(agentrunner.EINVALID, "the capsule's text is %d characters, over the cap of %d: shorten it, or split it into several capsules", n, maxChars)
	}
	found := sections(text)
	var missing []string
	at := map[string]int{}
	for _, want := range agentrunner.CapsuleSections {
		i, ok := found[strings.ToLower(want)]
		if !ok {
			missing = append(missing, "## "+want)
			continue
		}
		at[want] = i
	}
	if len(missing) > 0 {
		return agentrunner.Errorf(agentrunner.EINVALID, "the capsule lacks the section(s) %s; a capsule has the sections %s, in that order", strings.Join(missing, ", "), sectionList())
	}
	for i := 1; i < len(agentrunner.CapsuleSections); i++ {
		prev, cur := agentrunner.CapsuleSections[i-1], agentrunner.CapsuleSections[i]
		if at[cur] < at[prev] {
			return agentrunner.Errorf(agentrunner.EINVALID, "the capsule's section ## %s (line %d) comes before ## %s (line %d); a capsule has the sections %s, in that order", cur, at[cur], prev, at[prev], sectionList())
		}
	}
	return nil
}

// sections maps the lower-case titles of the text's "## " headings
// outside code fences to the line of their first appearance.
func sections(text string) map[string]int {
	out := map[string]int{}
	fence := ""
	for i, line := range strings.Split(text, "\n") {
		t := strings.TrimSpace(line)
		if f := fenceOf(t); f != "" {
			switch {
			case fence == "":
				fence = f
			case strings.HasPrefix(t, fence):
				fence = ""
			}
			continue
		}
		if fence != "" {
			continue
		}
		title, ok := strings.CutPrefix(t, "## ")
		if !ok {
			continue
		}
		title = strings.ToLower(strings.TrimSpace(strings.TrimRight(title, " #:")))
		if _, seen := out[title]; !seen {
			out[title] = i + 1
		}
	}
	return out
}

// fenceOf returns the fence a line opens or closes (``` or ~~~), or "".
func fenceOf(line string) string {
	for _, f := range []string{"```", "~~~"} {
		if strings.HasPrefix(line, f) {
			return f
		}
	}
	return ""
}

func sectionList() string {
	var b strings.Builder
	for i, s := range agentrunner.CapsuleSections {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "## %s", s)
	}
	return b.String()
}
