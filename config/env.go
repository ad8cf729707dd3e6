package config

import (
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"
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

// applyEnv overrides scalar keys of v from the environment. Keys of maps
// (agents, steps, providers) are reached through the entries the file
// defines. It reports whether any variable applied.
func (d *decoder) applyEnv(v reflect.Value, prefix, path string, lookup func(string) (string, bool)) bool {
	if v.Type() == durationType {
		return d.envScalar(v, prefix, path, lookup)
	}
	switch v.Kind() {
	case reflect.Pointer:
		if v.Type().Elem().Kind() != reflect.Struct {
			return d.envScalar(v, prefix, path, lookup)
		}
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
			if d.applyEnv(v.Field(i), envName(prefix, name), join(path, name), lookup) {
				applied = true
			}
		}
		return applied
	case reflect.Map:
		applied := false
		for _, k := range v.MapKeys() {
			elem := v.MapIndex(k)
			if elem.Kind() != reflect.Pointer {
				continue // maps of scalars (env of a process) are not overridden one by one
			}
			if d.applyEnv(elem, envName(prefix, k.String()), join(path, k.String()), lookup) {
				applied = true
			}
		}
		return applied
	case reflect.Slice:
		if k := v.Type().Elem(); k.Kind() != reflect.String && k != durationType {
			return false
		}
	}
	return d.envScalar(v, prefix, path, lookup)
}

func (d *decoder) envScalar(v reflect.Value, name, path string, lookup func(string) (string, bool)) bool {
	raw, ok := lookup(name)
	if !ok {
		return false
	}
	where := "environment variable " + name
	fail := func(format string, args ...any) bool {
		d.problems = append(d.problems, Problem{Where: where, Key: path, Message: fmt.Sprintf(format, args...)})
		return false
	}
	if err := setScalar(v, raw); err != nil {
		return fail("%v", err)
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
		if t.Elem().Kind() != reflect.Pointer {
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
func settable(t reflect.Type) bool {
	if t == durationType {
		return true
	}
	switch t.Kind() {
	case reflect.Pointer:
		return t.Elem().Kind() != reflect.Struct && settable(t.Elem())
	case reflect.String, reflect.Int, reflect.Int64, reflect.Float64, reflect.Bool:
		return true
	case reflect.Slice:
		return t.Elem().Kind() == reflect.String || t.Elem() == durationType
	}
	return false
}

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
