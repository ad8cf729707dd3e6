package agentdef

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/agentrunner/agentrunner/config"
	"go.yaml.in/yaml/v3"
)

// Problem and Problems are the configuration's: one thing wrong, located
// at file:line:col with its key, and every one of them as one error, so a
// user fixes them all in one go and reads them as the main file's.
type (
	Problem  = config.Problem
	Problems = config.Problems
)

// keys are the keys of an agent file, in the order they are documented.
var keys = []string{"id", "name", "state", "backlog_state", "description", "prompt", "output", "mcp_servers", "max_turns", "extends", "match"}

var outputKeys = []string{"type", "schema"}

var matchKeys = []string{"framework", "language", "files"}

// OutputTypes are the artifact types an agent's output may have.
var OutputTypes = []string{"task_split", "plan", "implementation", "test", "general"}

// entry is one decoded file: the agent as written, which keys it sets and
// where each key is.
type entry struct {
	agent Agent
	set   map[string]bool
	bad   map[string]bool   // keys given with a problem already reported
	pos   map[string]string // key → file:line:col of the key
	where string            // file:line:col of the document
	// prompt is the prompt's value and lines the file's lines, to place
	// the problems of its template variables.
	prompt *yaml.Node
	lines  []string
}

func (e *entry) at(key string) string {
	if p, ok := e.pos[key]; ok {
		return p
	}
	return e.where
}

type decoder struct {
	file     string
	problems Problems
}

func (d *decoder) pos(n *yaml.Node) string {
	return fmt.Sprintf("%s:%d:%d", d.file, n.Line, n.Column)
}

func (d *decoder) fail(n *yaml.Node, key, format string, args ...any) {
	d.problems = append(d.problems, Problem{Where: d.pos(n), Key: key, Message: fmt.Sprintf(format, args...)})
}

// decodeFile decodes one agent file strictly.
func decodeFile(file string, data []byte) (*entry, Problems) {
	d := &decoder{file: file}
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		msg := strings.TrimPrefix(err.Error(), "yaml: ")
		var line int
		if _, scanErr := fmt.Sscanf(msg, "line %d:", &line); scanErr == nil {
			_, rest, _ := strings.Cut(msg, ":")
			return nil, Problems{{Where: fmt.Sprintf("%s:%d", file, line), Message: strings.TrimSpace(rest)}}
		}
		return nil, Problems{{Where: file, Message: msg}}
	}
	if len(doc.Content) == 0 {
		return nil, Problems{{Where: file, Message: "the file is empty; want one agent (id, name, state, prompt …)"}}
	}
	root := doc.Content[0]
	e := &entry{set: map[string]bool{}, bad: map[string]bool{}, pos: map[string]string{}, where: d.pos(root)}
	for _, p := range d.pairs(root, "") {
		k, v := p[0], p[1]
		name := k.Value
		if !slices.Contains(keys, name) {
			d.fail(k, name, "unknown key%s", config.SuggestKey(name, keys))
			continue
		}
		e.pos[name] = d.pos(k)
		if v.Kind == yaml.ScalarNode && v.Tag == "!!null" {
			continue // an empty value is not set; a required key is reported missing
		}
		ok := true
		a := &e.agent
		switch name {
		case "id":
			a.ID, ok = d.str(v, name)
		case "name":
			a.Name, ok = d.str(v, name)
		case "state":
			a.State, ok = d.str(v, name)
		case "backlog_state":
			a.BacklogState, ok = d.str(v, name)
		case "description":
			a.Description, ok = d.str(v, name)
		case "prompt":
			a.Prompt, ok = d.str(v, name)
			e.prompt, e.lines = v, strings.Split(string(data), "\n")
		case "extends":
			a.Extends, ok = d.str(v, name)
		case "mcp_servers":
			a.MCPServers, ok = d.strs(v, name)
		case "max_turns":
			a.MaxTurns, ok = d.positive(v, name)
		case "output":
			a.Output, ok = d.output(v)
		case "match":
			a.Match, ok = d.match(v)
		}
		if ok {
			e.set[name] = true
		} else {
			e.bad[name] = true
		}
	}
	if root.Kind != yaml.MappingNode {
		return nil, d.problems
	}
	if e.set["state"] && e.set["backlog_state"] {
		d.problems = append(d.problems, Problem{Where: e.pos["backlog_state"], Key: "backlog_state",
			Message: "an agent has either state (a task agent) or backlog_state (a backlog item agent), not both"})
	}
	return e, d.problems
}

// pairs returns a mapping's key/value pairs, reporting non-string and
// duplicate keys.
func (d *decoder) pairs(n *yaml.Node, path string) [][2]*yaml.Node {
	if n.Kind != yaml.MappingNode {
		d.fail(n, path, "want a mapping, got %s", config.NodeKind(n))
		return nil
	}
	seen := map[string]*yaml.Node{}
	var out [][2]*yaml.Node
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		if k.Kind != yaml.ScalarNode || k.Tag == "!!merge" {
			d.fail(k, path, "keys must be plain strings, got %s", config.NodeKind(k))
			continue
		}
		key := config.JoinKey(path, k.Value)
		if prev, dup := seen[k.Value]; dup {
			d.fail(k, key, "duplicate key (first at line %d)", prev.Line)
			continue
		}
		seen[k.Value] = k
		out = append(out, [2]*yaml.Node{k, v})
	}
	return out
}

func (d *decoder) str(n *yaml.Node, key string) (string, bool) {
	if n.Kind != yaml.ScalarNode || n.Tag == "!!bool" || n.Tag == "!!null" {
		d.fail(n, key, "want a string, got %s", config.NodeKind(n))
		return "", false
	}
	return n.Value, true
}

func (d *decoder) strs(n *yaml.Node, key string) ([]string, bool) {
	if n.Kind != yaml.SequenceNode {
		d.fail(n, key, "want a list of strings, got %s", config.NodeKind(n))
		return nil, false
	}
	out := make([]string, 0, len(n.Content))
	ok := true
	for i, item := range n.Content {
		s, good := d.str(item, fmt.Sprintf("%s[%d]", key, i))
		if good && s == "" {
			d.fail(item, fmt.Sprintf("%s[%d]", key, i), "is empty")
			good = false
		}
		ok = ok && good
		out = append(out, s)
	}
	return out, ok
}

func (d *decoder) positive(n *yaml.Node, key string) (int, bool) {
	if n.Kind != yaml.ScalarNode || n.Tag != "!!int" {
		d.fail(n, key, "want a positive integer, got %s", config.NodeKind(n))
		return 0, false
	}
	i, err := strconv.ParseInt(n.Value, 0, 32)
	if err != nil || i <= 0 {
		d.fail(n, key, "want a positive integer, got %s", n.Value)
		return 0, false
	}
	return int(i), true
}

func (d *decoder) output(n *yaml.Node) (*Output, bool) {
	o := &Output{}
	pairs := d.pairs(n, "output")
	if n.Kind != yaml.MappingNode {
		return nil, false
	}
	ok := true
	for _, p := range pairs {
		k, v := p[0], p[1]
		key := config.JoinKey("output", k.Value)
		switch k.Value {
		case "type":
			s, good := d.str(v, key)
			if good && !slices.Contains(OutputTypes, s) {
				d.fail(v, key, "unknown output type %q (known: %s)", s, strings.Join(OutputTypes, ", "))
				good = false
			}
			o.Type, ok = s, ok && good
		case "schema":
			s, good := d.str(v, key)
			o.Schema, ok = s, ok && good
		default:
			d.fail(k, "output", "unknown key %q%s", k.Value, config.SuggestKey(k.Value, outputKeys))
			ok = false
		}
	}
	if o.Type == "" && ok {
		d.fail(n, "output.type", "missing required key")
		ok = false
	}
	return o, ok
}

func (d *decoder) match(n *yaml.Node) (*Match, bool) {
	m := &Match{}
	pairs := d.pairs(n, "match")
	if n.Kind != yaml.MappingNode {
		return nil, false
	}
	ok := true
	for _, p := range pairs {
		k, v := p[0], p[1]
		key := config.JoinKey("match", k.Value)
		switch k.Value {
		case "framework":
			s, good := d.str(v, key)
			m.Framework, ok = s, ok && good
		case "language":
			s, good := d.str(v, key)
			m.Language, ok = s, ok && good
		case "files":
			files, good := d.strs(v, key)
			if good && len(files) == 0 {
				d.fail(v, key, "is empty; list the files whose presence selects this variant")
				good = false
			}
			for i, f := range files {
				if good && !validPattern(f) {
					d.fail(v.Content[i], fmt.Sprintf("%s[%d]", key, i), "bad pattern %q", f)
					good = false
				}
			}
			m.Files, ok = files, ok && good
		default:
			d.fail(k, "match", "unknown key %q%s", k.Value, config.SuggestKey(k.Value, matchKeys))
			ok = false
		}
	}
	if ok && m.Framework == "" && m.Language == "" && len(m.Files) == 0 {
		d.fail(n, "match", "is empty; want framework, language or files")
		ok = false
	}
	return m, ok
}
