package config

import (
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// EnvPrefix starts every environment override: AGENTRUNNER_<SECTION>_<KEY>
// overrides the key of that section (FR-073), e.g. AGENTRUNNER_SERVER_LISTEN,
// AGENTRUNNER_SCHEDULE_EVERY, AGENTRUNNER_AGENTS_PLAN_TIMEOUT. Top-level keys
// drop the section: AGENTRUNNER_ARTIFACTS_DIR. Lists are comma-separated.
const EnvPrefix = "AGENTRUNNER"

// envName is the variable that overrides a key path element.
func envName(prefix, key string) string {
	var b strings.Builder
	b.WriteString(prefix)
	b.WriteByte('_')
	for _, r := range strings.ToUpper(key) {
		if (r >= 'A' && r <= 'Z') || (r >= '0' && r <= '9') {
			b.WriteRune(r)
		} else {
			b.WriteByte('_')
		}
	}
	return b.String()
}

// applyEnv overrides keys of v from the environment. Sections (structs)
// are gone into key by key, and so are the entries of maps of sections
// (agents, steps, providers), through the entries the file defines; every
// other key is set from its one variable (setEnv). It reports whether any
// variable applied.
func (d *decoder) applyEnv(v reflect.Value, prefix, path string, lookup func(string) (string, bool)) bool {
	if !walked(v.Type()) {
		return d.envValue(v, prefix, path, lookup)
	}
	switch v.Kind() {
	case reflect.Pointer:
		elem := reflect.New(v.Type().Elem())
		if !v.IsNil() {
			elem = v
		}
		applied := d.applyEnv(elem.Elem(), prefix, path, lookup)
		if applied && v.IsNil() {
			v.Set(elem)
		}
		return applied
	case reflect.Struct:
		applied := false
		t := v.Type()
		for i := 0; i < t.NumField(); i++ {
			name, _, _ := strings.Cut(t.Field(i).Tag.Get("yaml"), ",")
			if name == "" || name == "-" {
				continue
			}
			if d.applyEnv(v.Field(i), envName(prefix, name), JoinKey(path, name), lookup) {
				applied = true
			}
		}
		return applied
	}
	applied := false
	for _, k := range v.MapKeys() {
		if d.applyEnv(v.MapIndex(k), envName(prefix, k.String()), JoinKey(path, k.String()), lookup) {
			applied = true
		}
	}
	return applied
}

// walked reports whether applyEnv goes into a value of type t key by key
// rather than setting it from one variable: sections (structs, but the
// types decoded whole: Duration, OnCap), pointers to them, and maps of
// named sections.
func walked(t reflect.Type) bool {
	switch {
	case t == durationType || t == onCapType:
		return false
	case t.Kind() == reflect.Struct:
		return true
	case t.Kind() == reflect.Pointer:
		return t.Elem().Kind() == reflect.Struct && walked(t.Elem())
	case t.Kind() == reflect.Map:
		return t.Elem().Kind() == reflect.Pointer && walked(t.Elem())
	}
	return false
}

// plain reports whether a value of type t is written in a variable as
// it is (a string, a number, a duration, true or false), or as a
// comma-separated list of such values. Other keys (lists of sections,
// maps, JSON Schemas, on_cap) take YAML, of which JSON is a part.
func plain(t reflect.Type) bool {
	if t == durationType {
		return true
	}
	switch t.Kind() {
	case reflect.Pointer:
		return plain(t.Elem())
	case reflect.String, reflect.Int, reflect.Int64, reflect.Float64, reflect.Bool:
		return true
	case reflect.Slice:
		return t != jsonType && t.Elem().Kind() != reflect.Slice && t.Elem().Kind() != reflect.Pointer && plain(t.Elem())
	}
	return false
}

// envValue sets one key from its variable, when it is set.
func (d *decoder) envValue(v reflect.Value, name, path string, lookup func(string) (string, bool)) bool {
	raw, ok := lookup(name)
	if !ok {
		return false
	}
	where := "environment variable " + name
	if !plain(v.Type()) {
		return d.envYAML(v, raw, where, path)
	}
	if err := setScalar(v, raw); err != nil {
		d.problems = append(d.problems, Problem{Where: where, Key: path, Message: err.Error()})
		return false
	}
	d.lines[path] = where
	return true
}

// envYAML sets a key whose value is not plain from YAML (or JSON) in a
// variable, decoded as strictly as the file, with its problems located
// at the variable.
func (d *decoder) envYAML(v reflect.Value, raw, where, path string) bool {
	var doc yaml.Node
	if err := yaml.Unmarshal([]byte(raw), &doc); err != nil || len(doc.Content) == 0 {
		d.problems = append(d.problems, Problem{Where: where, Key: path, Message: "want a YAML or JSON value, e.g. [{...}] or {key: value}"})
		return false
	}
	sub := &decoder{file: where, lines: map[string]string{}, toolKeys: d.toolKeys}
	fresh := reflect.New(v.Type()).Elem()
	sub.decode(doc.Content[0], fresh, path)
	for _, p := range sub.problems {
		d.problems = append(d.problems, Problem{Where: where, Key: p.Key, Message: p.Message})
	}
	if len(sub.problems) > 0 {
		return false
	}
	v.Set(fresh)
	for k := range sub.lines {
		d.lines[k] = where
	}
	d.lines[path] = where
	return true
}

func setScalar(v reflect.Value, raw string) error {
	if v.Kind() == reflect.Pointer {
		elem := reflect.New(v.Type().Elem())
		if err := setScalar(elem.Elem(), raw); err != nil {
			return err
		}
		v.Set(elem)
		return nil
	}
	if v.Type() == durationType {
		dur, err := time.ParseDuration(raw)
		if err != nil || dur < 0 {
			return fmt.Errorf("invalid duration %q: want a Go duration such as 90s, 30m or 6h", raw)
		}
		v.SetInt(int64(dur))
		return nil
	}
	switch v.Kind() {
	case reflect.String:
		v.SetString(raw)
	case reflect.Int, reflect.Int64:
		i, err := strconv.ParseInt(raw, 10, v.Type().Bits())
		if err != nil {
			return fmt.Errorf("want an integer, got %q", raw)
		}
		v.SetInt(int64(i))
	case reflect.Float64:
		f, err := strconv.ParseFloat(raw, 64)
		if err != nil {
			return fmt.Errorf("want a number, got %q", raw)
		}
		v.SetFloat(f)
	case reflect.Bool:
		b, err := strconv.ParseBool(raw)
		if err != nil {
			return fmt.Errorf("want true or false, got %q", raw)
		}
		v.SetBool(b)
	case reflect.Slice:
		var parts []string
		for _, p := range strings.Split(raw, ",") {
			if p = strings.TrimSpace(p); p != "" {
				parts = append(parts, p)
			}
		}
		s := reflect.MakeSlice(v.Type(), len(parts), len(parts))
		for i, p := range parts {
			if err := setScalar(s.Index(i), p); err != nil {
				return err
			}
		}
		v.Set(s)
	default:
		return fmt.Errorf("cannot be set from the environment")
	}
	return nil
}

// IsOverride reports whether name is an environment override of some
// configuration: AGENTRUNNER_ and the key path of a key that can be set
// from the environment, where the name of an agent, provider, step, tool or
// MCP server stands for any name. Other AGENTRUNNER_* variables, such as
// secrets an operator named so, are not configuration. The keys of a
// tool's kind are its package's, so under tools any key but one every
// tool has is taken, unless its last word says it holds a secret
// (AGENTRUNNER_TOOLS_X_API_KEY is not a key but a secret named so).
func IsOverride(name string) bool {
	rest, ok := strings.CutPrefix(name, EnvPrefix+"_")
	return ok && overridable(reflect.TypeOf(Config{}), rest)
}

// overridable reports whether rest is the variable suffix of a key of t
// that applyEnv sets.
func overridable(t reflect.Type, rest string) bool {
	if t.Kind() == reflect.Pointer && t.Elem().Kind() == reflect.Struct {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.Struct:
		if t == durationType {
			return false
		}
		for i := 0; i < t.NumField(); i++ {
			name, _, _ := strings.Cut(t.Field(i).Tag.Get("yaml"), ",")
			if name == "" || name == "-" {
				continue
			}
			key := strings.TrimPrefix(envName("", name), "_")
			ft := t.Field(i).Type
			if rest == key && settable(ft) {
				return true
			}
			if sub, ok := strings.CutPrefix(rest, key+"_"); ok && overridable(ft, sub) {
				return true
			}
		}
	case reflect.Map:
		if !walked(t) {
			return false
		}
		// The entry's name is one or more parts of rest.
		for i := 1; i < len(rest); i++ {
			if rest[i] == '_' && (overridable(t.Elem(), rest[i+1:]) || t.Elem().Elem() == toolType && kindKey(rest[i+1:])) {
				return true
			}
		}
	}
	return false
}

// settable reports whether applyEnv sets a key of type t from one variable.
func settable(t reflect.Type) bool { return !walked(t) }

// kindKey reports whether rest may name a key of a tool's kind: not a key
// every tool has (those are decided by Tool's type), and not a secret.
func kindKey(rest string) bool {
	words := strings.Split(rest, "_")
	if slices.Contains(words, "") || slices.Contains(secretWords, words[len(words)-1]) {
		return false
	}
	for _, name := range slices.Collect(maps.Keys(yamlFields(toolType))) {
		key := strings.TrimPrefix(envName("", name), "_")
		if rest == key || strings.HasPrefix(rest, key+"_") {
			return false
		}
	}
	return true
}

// Key is one key of a configuration, as the file writes it and as the
// environment overrides it.
type Key struct {
	// Path is the dotted key path, map entries by the names the file gives
	// them ("agents.plan.timeout").
	Path string
	// Env is the variable that overrides it (AGENTRUNNER_AGENTS_PLAN_TIMEOUT).
	Env string
	// Type is the Go type the key decodes into.
	Type reflect.Type
}

// Keys lists every key c can set, in the order of its key paths: the
// entries of agents, providers, steps, tools and servers by the names the
// file gives them (not those the defaults add, such as the mock provider,
// which no variable reaches), and the keys of tools' kinds when c was read
// with them. validate names the AGENTRUNNER_* variables that are none of
// these.
func (c *Config) Keys() []Key {
	w := keyWalk{given: c.lines}
	w.walk(reflect.ValueOf(c).Elem(), EnvPrefix, "")
	for name, t := range c.Tools {
		if _, given := c.lines["tools."+name]; given && t != nil && t.Settings != nil {
			w.walk(reflect.ValueOf(t.Settings), envName(envName(EnvPrefix, "tools"), name), "tools."+name)
		}
	}
	keys := w.keys
	slices.SortFunc(keys, func(a, b Key) int { return strings.Compare(a.Path, b.Path) })
	return keys
}

// keyWalk collects the keys of a configuration.
type keyWalk struct {
	// given are the key paths the file gives.
	given map[string]string
	keys  []Key
}

// walk appends the keys of v as applyEnv reaches them; a section not
// given (a nil pointer) is walked as its zero value, since a variable may
// set its keys.
func (w *keyWalk) walk(v reflect.Value, prefix, path string) {
	t := v.Type()
	if !walked(t) {
		w.keys = append(w.keys, Key{Path: path, Env: prefix, Type: t})
		return
	}
	switch t.Kind() {
	case reflect.Pointer:
		if v.IsNil() {
			v = reflect.New(t.Elem())
		}
		w.walk(v.Elem(), prefix, path)
	case reflect.Struct:
		for i := 0; i < t.NumField(); i++ {
			name, _, _ := strings.Cut(t.Field(i).Tag.Get("yaml"), ",")
			if name != "" && name != "-" {
				w.walk(v.Field(i), envName(prefix, name), JoinKey(path, name))
			}
		}
	case reflect.Map:
		for _, k := range v.MapKeys() {
			if _, given := w.given[JoinKey(path, k.String())]; given {
				w.walk(v.MapIndex(k), envName(prefix, k.String()), JoinKey(path, k.String()))
			}
		}
	}
}
