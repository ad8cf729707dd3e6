package config_test

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/agentrunner/agentrunner/config"
	"github.com/agentrunner/agentrunner/toolbox"
	"github.com/google/go-cmp/cmp"
	"go.yaml.in/yaml/v3"
)

// everySection is a configuration with an entry in every map of sections
// (providers, agents, steps of both kinds of pipeline, tools of every
// built-in kind, MCP servers) and the optional sections, so that Keys
// lists every key the configuration has.
func everySection(t *testing.T) map[string]any {
	t.Helper()
	src := `version: 1
name: loop
providers: {p: {kind: process, command: [x]}}
agents: {a: {identity: a.md, output: {file: a.md, template: t.md}}}
pipeline: {start: s, steps: {s: {agent: a, next: end}}}
pipelines: {g: {start: u, steps: {u: {agent: a, next: end}}}}
mcp_servers: {m: {command: [x]}}
backlog: {pipeline: g}
server: {auth: {jwt: {algorithm: HS256}}}
`
	var doc map[string]any
	if err := yaml.Unmarshal([]byte(src), &doc); err != nil {
		t.Fatal(err)
	}
	tools := map[string]any{}
	for _, kind := range toolbox.Builtin().Names() {
		tools[kind] = map[string]any{}
	}
	doc["tools"] = tools
	return doc
}

// TestEveryKeyCanBeSetBothWays sets every key of the configuration, as
// the Config type and the tools' kinds declare them (so a new key comes
// with its test), once in the file and once through its AGENTRUNNER_*
// variable, and checks that each decodes to the same value.
func TestEveryKeyCanBeSetBothWays(t *testing.T) {
	kinds := toolbox.Builtin().Config()
	base := everySection(t)
	c, err := parseDoc(t, base, kinds, nil)
	if c == nil {
		t.Fatalf("the configuration with every section does not decode: %v", err)
	}
	keys := c.Keys()
	if len(keys) < 150 {
		t.Fatalf("Keys lists %d keys; the walk missed sections", len(keys))
	}
	for _, k := range keys {
		want, y := example(k.Type)
		if !want.IsValid() {
			t.Errorf("%s: no example of a %s", k.Path, k.Type)
			continue
		}
		t.Run(k.Path, func(t *testing.T) {
			inFile, err := parseDoc(t, withKey(base, k.Path, y), kinds, nil)
			check(t, "in the file", inFile, err, k.Path, want)
			fromEnv, err := parseDoc(t, base, kinds, map[string]string{k.Env: envValue(k.Type, y)})
			check(t, "from "+k.Env, fromEnv, err, k.Path, want)
			if fromEnv != nil && fromEnv.Where(k.Path) != "environment variable "+k.Env {
				t.Errorf("from %s: located at %s", k.Env, fromEnv.Where(k.Path))
			}
		})
	}
}

// check reports a key that did not decode, or decoded to another value.
func check(t *testing.T, how string, c *config.Config, err error, path string, want reflect.Value) {
	t.Helper()
	if c == nil {
		t.Errorf("%s: does not decode: %v", how, err)
		return
	}
	got, ok := lookupKey(c, path)
	if !ok {
		t.Errorf("%s: no value at %s", how, path)
		return
	}
	if diff := cmp.Diff(want.Interface(), got.Interface()); diff != "" {
		t.Errorf("%s: value (-want +got):\n%s", how, diff)
	}
}

func parseDoc(t *testing.T, doc map[string]any, kinds config.ToolKinds, env map[string]string) (*config.Config, error) {
	t.Helper()
	data, err := yaml.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	return config.ParseWith("agentrunner.yaml", data, config.Options{ToolKinds: kinds, LookupEnv: func(k string) (string, bool) {
		v, ok := env[k]
		return v, ok
	}})
}

// withKey is a deep copy of doc with the key at path set to v.
func withKey(doc map[string]any, path string, v any) map[string]any {
	data, _ := json.Marshal(doc)
	var out map[string]any
	_ = json.Unmarshal(data, &out)
	m := out
	parts := strings.Split(path, ".")
	for _, p := range parts[:len(parts)-1] {
		next, ok := m[p].(map[string]any)
		if !ok {
			next = map[string]any{}
			m[p] = next
		}
		m = next
	}
	m[parts[len(parts)-1]] = v
	return out
}

// lookupKey follows a key path through c: struct fields by their yaml
// names, map entries, pointers, and a tool's settings for its kind's keys.
func lookupKey(c *config.Config, path string) (reflect.Value, bool) {
	v := reflect.ValueOf(c).Elem()
	for _, p := range strings.Split(path, ".") {
		for v.Kind() == reflect.Pointer || v.Kind() == reflect.Interface {
			if v.IsNil() {
				return reflect.Value{}, false
			}
			v = v.Elem()
		}
		switch v.Kind() {
		case reflect.Map:
			v = v.MapIndex(reflect.ValueOf(p))
		case reflect.Struct:
			f, ok := field(v, p)
			if !ok {
				return reflect.Value{}, false
			}
			v = f
		default:
			return reflect.Value{}, false
		}
		if !v.IsValid() {
			return v, false
		}
	}
	return v, true
}

// field is a struct's field by its yaml name, or a tool's setting.
func field(v reflect.Value, name string) (reflect.Value, bool) {
	for i := 0; i < v.NumField(); i++ {
		if tag, _, _ := strings.Cut(v.Type().Field(i).Tag.Get("yaml"), ","); tag == name {
			return v.Field(i), true
		}
	}
	if tool, ok := v.Addr().Interface().(*config.Tool); ok && tool.Settings != nil {
		return field(reflect.ValueOf(tool.Settings).Elem(), name)
	}
	return reflect.Value{}, false
}

// example returns a value of type t that is not its zero value, and the
// same as YAML would write it.
func example(t reflect.Type) (reflect.Value, any) {
	switch t {
	case reflect.TypeOf(config.Duration(0)):
		return reflect.ValueOf(config.Duration(90 * time.Second)), "1m30s"
	case reflect.TypeOf(config.OnCap{}):
		return reflect.ValueOf(config.OnCap{To: "x"}), map[string]any{"to": "x"}
	case reflect.TypeOf(config.JSON(nil)):
		return reflect.ValueOf(config.JSON(`{"a":1}`)), map[string]any{"a": 1}
	}
	v := reflect.New(t).Elem()
	switch t.Kind() {
	case reflect.Pointer:
		e, y := example(t.Elem())
		v.Set(reflect.New(t.Elem()))
		v.Elem().Set(e)
		return v, y
	case reflect.String:
		v.SetString("x")
		return v, "x"
	case reflect.Int, reflect.Int64:
		v.SetInt(7)
		return v, 7
	case reflect.Float64:
		v.SetFloat(0.5)
		return v, 0.5
	case reflect.Bool:
		v.SetBool(true)
		return v, true
	case reflect.Slice:
		e, y := example(t.Elem())
		return reflect.Append(v, e), []any{y}
	case reflect.Map:
		e, y := example(t.Elem())
		v.Set(reflect.MakeMap(t))
		v.SetMapIndex(reflect.ValueOf("k"), e)
		return v, map[string]any{"k": y}
	case reflect.Struct:
		return exampleStruct(v)
	}
	return reflect.Value{}, nil
}

// exampleStruct sets every field of a section given in a list (an input,
// an API key, a route).
func exampleStruct(v reflect.Value) (reflect.Value, any) {
	y := map[string]any{}
	for i := 0; i < v.NumField(); i++ {
		name, _, _ := strings.Cut(v.Type().Field(i).Tag.Get("yaml"), ",")
		if name == "" || name == "-" {
			continue
		}
		e, ey := example(v.Field(i).Type())
		if !e.IsValid() {
			return e, nil
		}
		v.Field(i).Set(e)
		y[name] = ey
	}
	return v, y
}

// envValue writes an example as its variable holds it: a plain value as
// it is, a list of plain values comma-separated, anything else as JSON.
func envValue(t reflect.Type, y any) string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if list, ok := y.([]any); ok && t.Elem().Kind() != reflect.Struct && t.Elem().Kind() != reflect.Map && t.Elem().Kind() != reflect.Uint8 {
		parts := make([]string, len(list))
		for i, e := range list {
			parts[i] = fmt.Sprint(e)
		}
		return strings.Join(parts, ",")
	}
	if _, ok := y.(map[string]any); !ok {
		if _, list := y.([]any); !list {
			return fmt.Sprint(y)
		}
	}
	data, _ := json.Marshal(y)
	return string(data)
}

// TestEnvYAMLProblemsNameTheVariable: a key that is not plain takes YAML
// from its variable, decoded as strictly as the file, and what is wrong
// with it is located at the variable.
func TestEnvYAMLProblemsNameTheVariable(t *testing.T) {
	const v = "AGENTRUNNER_SERVER_AUTH_API_KEYS"
	at := "environment variable " + v + ": server.auth.api_keys"
	tests := []struct{ value, want string }{
		{"[{name: a, rol: x}]", at + `[0]: unknown key "rol" (did you mean "role"?)`},
		{"[{name: a", at + ": want a YAML or JSON value, e.g. [{...}] or {key: value}"},
		{"{name: a}", at + ": want a list, got a mapping"},
	}
	for _, tc := range tests {
		_, err := parseDoc(t, everySection(t), nil, map[string]string{v: tc.value})
		if diff := cmp.Diff(tc.want, fmt.Sprint(err)); diff != "" {
			t.Errorf("%s=%s (-want +got):\n%s", v, tc.value, diff)
		}
	}
}
