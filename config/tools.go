package config

import (
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// ToolSettings are the keys of a tool's section that belong to its kind,
// as the kind's package declares them: a pointer to a struct whose yaml
// tags name the keys. They are decoded as strictly as the rest of the
// file (unknown keys, wrong types, each at its file:line), and environment
// overrides reach them (AGENTRUNNER_TOOLS_<NAME>_<KEY>).
type ToolSettings interface {
	// Check reports what is wrong with the settings, each problem at a key
	// of the tool's section ("" for the section itself).
	Check(report Reporter)
}

// ToolSettingsInConfig are settings that name other parts of the
// configuration (subagent_run's pipeline): besides Check, they are checked
// against the whole configuration once it is read.
type ToolSettingsInConfig interface {
	ToolSettings
	// CheckIn reports what c lacks that the settings name, each problem
	// at a key of the tool's section.
	CheckIn(c *Config, report Reporter)
}

// Reporter records a problem at a key path relative to what is checked.
type Reporter func(key, format string, args ...any)

// ToolKind is what configuration knows of one kind of tool. The kind's
// package provides it; a table of them is given to LoadWith, so adding a
// kind changes no type of this package.
type ToolKind struct {
	// Timeout is the default time limit of one call; 0: DefaultToolTimeout.
	Timeout time.Duration
	// Settings returns new, empty settings of the kind; nil: the kind
	// takes only the keys every tool has.
	Settings func() ToolSettings
}

// ToolKinds are the kinds of tool a configuration may declare, by name.
type ToolKinds map[string]ToolKind

var toolType = reflect.TypeOf(Tool{})

// decodeTool decodes the keys every tool has, and keeps the others for
// the tool's kind (decodeToolSettings), which is known only once the whole
// file and the environment are read.
func (d *decoder) decodeTool(n *yaml.Node, v reflect.Value, path string) {
	fields := yamlFields(toolType)
	var rest [][2]*yaml.Node
	for _, p := range d.pairs(n, path) {
		idx, ok := fields[p[0].Value]
		if !ok {
			rest = append(rest, p)
			continue
		}
		key := JoinKey(path, p[0].Value)
		d.lines[key] = d.pos(p[0])
		d.decode(p[1], v.Field(idx), key)
	}
	d.toolKeys[path] = rest
}

// decodeToolSettings decodes each tool's own keys with its kind and
// applies the environment overrides of its settings. An unknown kind, and
// a key of another kind, are left for validation to report with the
// tool's other problems. Without kinds it reads nothing.
func (d *decoder) decodeToolSettings(c *Config, kinds ToolKinds, lookup func(string) (string, bool)) {
	if kinds == nil {
		return
	}
	c.toolProblems = map[string]Problems{}
	for _, name := range slices.Sorted(maps.Keys(c.Tools)) {
		t := c.Tools[name]
		if t == nil {
			continue // reported by validation
		}
		path := "tools." + name
		kind := t.Kind
		if kind == "" {
			kind = name
		}
		k, ok := kinds[kind]
		if !ok {
			c.toolProblems[name] = Problems{{Where: c.Where(path + ".kind"), Key: path + ".kind",
				Message: fmt.Sprintf("no implementation of kind %q (built-in kinds: %s)", kind, strings.Join(slices.Sorted(maps.Keys(kinds)), ", "))}}
			continue
		}
		if _, given := d.lines[path+".timeout"]; !given && t.Timeout == 0 && k.Timeout > 0 {
			t.Timeout = Duration(k.Timeout)
		}
		if k.Settings == nil {
			c.toolProblems[name] = d.ownKeys(d.toolKeys[path], reflect.Value{}, path, kind, kinds)
			continue
		}
		s := k.Settings()
		v := reflect.ValueOf(s).Elem()
		c.toolProblems[name] = d.ownKeys(d.toolKeys[path], v, path, kind, kinds)
		d.applyEnv(v, envName(envName(EnvPrefix, "tools"), name), path, lookup)
		t.Settings = s
	}
}

// ownKeys decodes the keys of a tool's section that are not common to
// every tool into its kind's settings v (invalid: the kind has none). It
// returns the keys that belong to other kinds.
func (d *decoder) ownKeys(pairs [][2]*yaml.Node, v reflect.Value, path, kind string, kinds ToolKinds) Problems {
	var foreign Problems
	fields := map[string]int{}
	if v.IsValid() {
		fields = yamlFields(v.Type())
	}
	for _, p := range pairs {
		name := p[0].Value
		idx, ok := fields[name]
		if !ok {
			foreign = append(foreign, d.foreignKey(p[0], path, kind, kinds, fields)...)
			continue
		}
		key := JoinKey(path, name)
		d.lines[key] = d.pos(p[0])
		d.decode(p[1], v.Field(idx), key)
	}
	return foreign
}

// foreignKey reports a key the tool's kind does not take: a key of no
// kind is an unknown key, reported now; a key of other kinds is returned,
// naming them, since a setting put on the wrong tool is a likelier
// mistake than a typo.
func (d *decoder) foreignKey(k *yaml.Node, path, kind string, kinds ToolKinds, own map[string]int) Problems {
	name := k.Value
	var takers []string
	envKey := false
	for _, other := range slices.Sorted(maps.Keys(kinds)) {
		if kinds[other].Settings == nil {
			continue
		}
		t := reflect.TypeOf(kinds[other].Settings()).Elem()
		if i, ok := yamlFields(t)[name]; ok {
			takers = append(takers, other)
			envKey = t.Field(i).Type == envType
		}
	}
	switch {
	case len(takers) == 0:
		known := maps.Clone(own)
		maps.Copy(known, yamlFields(toolType))
		d.fail(k, path, "unknown key %q%s", name, suggest(name, known))
		return nil
	case envKey:
		return Problems{{Where: d.pos(k), Key: JoinKey(path, name),
			Message: fmt.Sprintf("only CLI-backed tools (%s) start a process that takes an environment", strings.Join(takers, ", "))}}
	}
	return Problems{{Where: d.pos(k), Key: JoinKey(path, name),
		Message: fmt.Sprintf("applies to tools of kind %s, not %s", strings.Join(takers, ", "), kind)}}
}

// MarshalYAML writes a tool as its section is written: the keys every
// tool has and its kind's, side by side.
func (t Tool) MarshalYAML() (any, error) {
	type common Tool // without this method
	var n yaml.Node
	if err := n.Encode(common(t)); err != nil {
		return nil, err
	}
	if t.Settings != nil {
		var s yaml.Node
		if err := s.Encode(t.Settings); err != nil {
			return nil, err
		}
		n.Content = append(n.Content, s.Content...)
	}
	return &n, nil
}

// IsEnvName reports whether name is the name of an environment variable.
func IsEnvName(name string) bool { return envNamePattern.MatchString(name) }
