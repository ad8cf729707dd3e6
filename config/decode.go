package config

import (
	"encoding/json"
	"fmt"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// Problem is one thing wrong with a configuration, located as precisely as
// the source allows: file:line:column and the key path.
type Problem struct {
	// Where is "file:line:col", "file:line", "environment variable NAME" or
	// just the file.
	Where string
	// Key is the dotted key path, e.g. "agents.plan.timeout".
	Key     string
	Message string
}

func (p Problem) String() string {
	var b strings.Builder
	b.WriteString(p.Where)
	b.WriteString(": ")
	if p.Key != "" {
		b.WriteString(p.Key)
		b.WriteString(": ")
	}
	b.WriteString(p.Message)
	return b.String()
}

// Problems is every problem found, returned as one error so that a user
// fixes them all in one go instead of one per run.
type Problems []Problem

func (ps Problems) Error() string {
	lines := make([]string, len(ps))
	for i, p := range ps {
		lines[i] = p.String()
	}
	return strings.Join(lines, "\n")
}

// Duration is a time.Duration written as a Go duration string ("30m").
type Duration time.Duration

// D returns the time.Duration.
func (d Duration) D() time.Duration { return time.Duration(d) }

func (d Duration) String() string { return time.Duration(d).String() }

var durationType = reflect.TypeOf(Duration(0))

// JSON is a value written in YAML and kept as JSON, such as a JSON Schema.
type JSON json.RawMessage

var jsonType = reflect.TypeOf(JSON(nil))

var envType = reflect.TypeOf(Env{})

var onCapType = reflect.TypeOf(OnCap{})

// decoder decodes a yaml.Node tree into Go structs strictly: unknown keys,
// duplicate keys, wrong types and bad durations are all reported, each with
// its position, and decoding goes on to find the rest.
type decoder struct {
	file     string
	problems Problems
	// lines maps a key path to the position of its key.
	lines map[string]string
	// toolKeys are the keys of each tool's section (by key path) that
	// its kind decodes.
	toolKeys map[string][][2]*yaml.Node
}

func (d *decoder) pos(n *yaml.Node) string {
	return fmt.Sprintf("%s:%d:%d", d.file, n.Line, n.Column)
}

func (d *decoder) fail(n *yaml.Node, key, format string, args ...any) {
	d.problems = append(d.problems, Problem{
		Where:   d.pos(n),
		Key:     key,
		Message: fmt.Sprintf(format, args...),
	})
}

// JoinKey is the key path of key under path ("a.b" under "a").
func JoinKey(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

// NodeKind describes what a YAML node is, for a message that says what
// was found where something else was expected.
func NodeKind(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.ScalarNode:
		switch n.Tag {
		case "!!str":
			return fmt.Sprintf("the string %q", n.Value)
		case "!!null":
			return "null"
		}
		return fmt.Sprintf("%s %s", strings.TrimPrefix(n.Tag, "!!"), n.Value)
	}
	return "an unsupported node"
}

func (d *decoder) decode(n *yaml.Node, v reflect.Value, path string) {
	for n.Kind == yaml.AliasNode {
		n = n.Alias
	}
	if n.Kind == yaml.ScalarNode && n.Tag == "!!null" {
		return // an empty value leaves the zero value; validation decides if it is required
	}
	switch v.Type() {
	case durationType:
		d.decodeDuration(n, v, path)
		return
	case envType:
		d.decodeEnv(n, v, path)
		return
	case onCapType:
		d.decodeOnCap(n, v, path)
		return
	case toolType:
		d.decodeTool(n, v, path)
		return
	case jsonType:
		var x any
		if err := n.Decode(&x); err != nil {
			d.fail(n, path, "%v", err)
			return
		}
		data, err := json.Marshal(x)
		if err != nil {
			d.fail(n, path, "cannot be written as JSON: %v", err)
			return
		}
		v.SetBytes(data)
		return
	}
	switch v.Kind() {
	case reflect.Pointer:
		elem := reflect.New(v.Type().Elem())
		d.decode(n, elem.Elem(), path)
		v.Set(elem)
	case reflect.Struct:
		d.decodeStruct(n, v, path)
	case reflect.Map:
		d.decodeMap(n, v, path)
	case reflect.Slice:
		if n.Kind != yaml.SequenceNode {
			d.fail(n, path, "want a list, got %s", NodeKind(n))
			return
		}
		s := reflect.MakeSlice(v.Type(), len(n.Content), len(n.Content))
		for i, item := range n.Content {
			key := fmt.Sprintf("%s[%d]", path, i)
			d.lines[key] = d.pos(item)
			d.decode(item, s.Index(i), key)
		}
		v.Set(s)
	case reflect.String:
		if n.Kind != yaml.ScalarNode || n.Tag == "!!bool" {
			d.fail(n, path, "want a string, got %s", NodeKind(n))
			return
		}
		v.SetString(n.Value)
	case reflect.Int, reflect.Int64:
		if n.Kind != yaml.ScalarNode || n.Tag != "!!int" {
			d.fail(n, path, "want an integer, got %s", NodeKind(n))
			return
		}
		i, err := strconv.ParseInt(n.Value, 0, v.Type().Bits())
		if err != nil {
			d.fail(n, path, "want an integer, got %q", n.Value)
			return
		}
		v.SetInt(i)
	case reflect.Float64:
		if n.Kind != yaml.ScalarNode || (n.Tag != "!!int" && n.Tag != "!!float") {
			d.fail(n, path, "want a number, got %s", NodeKind(n))
			return
		}
		f, err := strconv.ParseFloat(n.Value, 64)
		if err != nil {
			d.fail(n, path, "want a number, got %q", n.Value)
			return
		}
		v.SetFloat(f)
	case reflect.Bool:
		if n.Kind != yaml.ScalarNode || n.Tag != "!!bool" {
			d.fail(n, path, "want true or false, got %s", NodeKind(n))
			return
		}
		b, _ := strconv.ParseBool(n.Value)
		v.SetBool(b)
	default:
		d.fail(n, path, "internal error: no decoder for %s", v.Type()) // a config type this decoder does not know
	}
}

func (d *decoder) decodeDuration(n *yaml.Node, v reflect.Value, path string) {
	if n.Kind != yaml.ScalarNode || n.Tag == "!!bool" {
		d.fail(n, path, "want a duration such as 30m, got %s", NodeKind(n))
		return
	}
	dur, err := time.ParseDuration(n.Value)
	if err != nil {
		d.fail(n, path, "invalid duration %q: want a Go duration such as 90s, 30m or 6h", n.Value)
		return
	}
	if dur < 0 {
		d.fail(n, path, "duration %q is negative", n.Value)
		return
	}
	v.SetInt(int64(dur))
}

// pairs returns a mapping's key/value pairs, reporting non-string keys,
// duplicate keys and merge keys.
func (d *decoder) pairs(n *yaml.Node, path string) [][2]*yaml.Node {
	if n.Kind != yaml.MappingNode {
		d.fail(n, path, "want a mapping, got %s", NodeKind(n))
		return nil
	}
	seen := map[string]*yaml.Node{}
	var out [][2]*yaml.Node
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, val := n.Content[i], n.Content[i+1]
		if k.Kind != yaml.ScalarNode {
			d.fail(k, path, "keys must be strings, got %s", NodeKind(k))
			continue
		}
		if k.Tag == "!!merge" {
			d.fail(k, path, "merge keys (<<) are not supported; use defaults: for shared settings")
			continue
		}
		if prev, dup := seen[k.Value]; dup {
			d.fail(k, JoinKey(path, k.Value), "duplicate key (first at line %d)", prev.Line)
			continue
		}
		seen[k.Value] = k
		out = append(out, [2]*yaml.Node{k, val})
	}
	return out
}

func (d *decoder) decodeMap(n *yaml.Node, v reflect.Value, path string) {
	pairs := d.pairs(n, path)
	if n.Kind != yaml.MappingNode {
		return
	}
	m := reflect.MakeMapWithSize(v.Type(), len(pairs))
	for _, p := range pairs {
		key := JoinKey(path, p[0].Value)
		d.lines[key] = d.pos(p[0])
		elem := reflect.New(v.Type().Elem()).Elem()
		d.decode(p[1], elem, key)
		m.SetMapIndex(reflect.ValueOf(p[0].Value), elem)
	}
	v.Set(m)
}

func (d *decoder) decodeStruct(n *yaml.Node, v reflect.Value, path string) {
	fields := yamlFields(v.Type())
	for _, p := range d.pairs(n, path) {
		name := p[0].Value
		key := JoinKey(path, name)
		idx, ok := fields[name]
		if !ok {
			d.fail(p[0], path, "unknown key %q%s", name, suggest(name, fields))
			continue
		}
		d.lines[key] = d.pos(p[0])
		d.decode(p[1], v.Field(idx), key)
	}
}

// decodeEnv decodes an env mapping, explaining the plain map of variables
// it once was, so an old configuration gets its fix and not just "unknown
// key".
func (d *decoder) decodeEnv(n *yaml.Node, v reflect.Value, path string) {
	if n.Kind != yaml.MappingNode {
		d.fail(n, path, "want a mapping {pass: [NAMES], set: {NAME: value}}, got %s", NodeKind(n))
		return
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k := n.Content[i]
		if k.Kind == yaml.ScalarNode && k.Value != "pass" && k.Value != "set" {
			d.fail(k, path, "env is {pass: [NAMES], set: {NAME: value}}, not a map of variables: "+
				"write set: {%s: ...} for a plain setting, or pass: [%s] to give the variable of the runner's environment "+
				"(secrets are always passed by name)", k.Value, k.Value)
			return
		}
	}
	d.decodeStruct(n, v, path)
}

// decodeOnCap decodes on_cap: the word halt or end, or {to: STEP} or
// {gate: STEP}.
func (d *decoder) decodeOnCap(n *yaml.Node, v reflect.Value, path string) {
	switch {
	case n.Kind == yaml.ScalarNode && n.Tag == "!!str" && n.Value == "halt":
		v.Set(reflect.ValueOf(OnCap{Halt: true}))
	case n.Kind == yaml.ScalarNode && n.Tag == "!!str" && n.Value == "end":
		v.Set(reflect.ValueOf(OnCap{End: true}))
	case n.Kind == yaml.MappingNode:
		d.decodeStruct(n, v, path)
	default:
		d.fail(n, path, "want halt, end, {to: STEP} or {gate: STEP}, got %s", NodeKind(n))
	}
}

// yamlFields maps the yaml names of a struct's fields to their index.
func yamlFields(t reflect.Type) map[string]int {
	fields := map[string]int{}
	for i := 0; i < t.NumField(); i++ {
		name, _, _ := strings.Cut(t.Field(i).Tag.Get("yaml"), ",")
		if name == "" || name == "-" {
			continue
		}
		fields[name] = i
	}
	return fields
}

// suggest names the closest known key, or lists them all. Keys are
// compared in order, so of two as close the same one is named every time.
func suggest(name string, fields map[string]int) string {
	known := make([]string, 0, len(fields))
	for k := range fields {
		known = append(known, k)
	}
	sort.Strings(known)
	return SuggestKey(name, known)
}

// SuggestKey names the known key closest to name (within two edits), the
// first of known when two are as close, or lists them all: the hint of an
// "unknown key" error, alike in every file agentrunner reads.
func SuggestKey(name string, known []string) string {
	best, bestDist := "", 3
	for _, k := range known {
		if dist := EditDistance(name, k); dist < bestDist {
			best, bestDist = k, dist
		}
	}
	if best != "" {
		return fmt.Sprintf(" (did you mean %q?)", best)
	}
	return fmt.Sprintf(" (known keys: %s)", strings.Join(known, ", "))
}

// EditDistance is the Levenshtein distance between a and b, in bytes.
func EditDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// MarshalYAML writes a duration as the string it is read from (90s, 6h).
func (d Duration) MarshalYAML() (any, error) { return d.String(), nil }

// MarshalYAML writes on_cap as it is read: halt, end, {to: STEP} or
// {gate: STEP}.
func (o OnCap) MarshalYAML() (any, error) {
	switch {
	case o.Halt:
		return "halt", nil
	case o.End:
		return "end", nil
	}
	type plain struct {
		To   string `yaml:"to,omitempty"`
		Gate string `yaml:"gate,omitempty"`
	}
	return plain{To: o.To, Gate: o.Gate}, nil
}
