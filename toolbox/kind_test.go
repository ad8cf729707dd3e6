package toolbox

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentrunner/agentrunner"
	"github.com/agentrunner/agentrunner/config"
	"github.com/agentrunner/agentrunner/examples/crypton"
	"github.com/agentrunner/agentrunner/tool"
	"github.com/agentrunner/agentrunner/workspace"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

// echoSettings are the settings of a kind of tool that exists only in this
// test: its package (here, the test) owns them, and no type of config or
// toolbox names them.
type echoSettings struct {
	Greeting string          `yaml:"greeting"`
	Repeat   int             `yaml:"repeat"`
	Pause    config.Duration `yaml:"pause"`
}

func (s *echoSettings) Check(report config.Reporter) {
	if s.Repeat < 1 {
		report("repeat", "must be at least 1, got %d", s.Repeat)
	}
}

// echoKind answers with its greeting, Repeat times.
var echoKind = Kind{
	Config: config.ToolKind{Timeout: 3 * time.Second, Settings: func() config.ToolSettings { return &echoSettings{} }},
	Build: func(_ *config.Config, t *config.Tool, _ Deps) (tool.Spec, tool.Handler, error) {
		s, err := settingsOf[*echoSettings](t)
		if err != nil {
			return tool.Spec{}, nil, err
		}
		spec, err := tool.FromConfig(tool.Spec{Name: "echo", Description: "Greets."}, t)
		h := tool.HandlerFunc(func(context.Context, json.RawMessage) (string, error) {
			return strings.Repeat(s.Greeting, s.Repeat), nil
		})
		return spec, h, err
	},
	Needs: func(*config.Config, *config.Tool) []string { return []string{"ECHO_TOKEN"} },
}

// echoWorkspace writes the example workspace with a "shout" tool of kind
// echo, given to the research agent, whose section is section.
func echoWorkspace(t *testing.T, section string) string {
	t.Helper()
	dir := t.TempDir()
	if _, err := crypton.Write(dir, true, "openai"); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, config.FileName)
	edit(t, path, "\ntools:\n", "\ntools:\n  shout:\n"+section)
	edit(t, path, "    tools: [web_search, web_fetch, bird, technical_indicators, memory_append, memory_search]\n    memory: true\n    inputs:\n      - {artifact: plan.md",
		"    tools: [web_search, web_fetch, bird, technical_indicators, memory_append, memory_search, shout]\n    memory: true\n    inputs:\n      - {artifact: plan.md")
	edit(t, filepath.Join(dir, "tools.md"), "## web_search", "## shout\n\nShouts.\n\n## web_search")
	return path
}

// edit replaces old, which must be in the file once, with new.
func edit(t *testing.T, path, old, new string) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Count(string(data), old) != 1 {
		t.Fatalf("%s: %q is not there once", path, old)
	}
	if err := os.WriteFile(path, []byte(strings.Replace(string(data), old, new, 1)), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestANewKindNeedsNoSharedType: a kind registered in a table of its
// own, with its own section, is decoded, checked, overridden from the
// environment, loaded into a workspace, built and called.
func TestANewKindNeedsNoSharedType(t *testing.T) {
	kinds := Builtin()
	kinds["echo"] = echoKind
	path := echoWorkspace(t, "    kind: echo\n    greeting: \"hey \"\n    retries: {max: 0}\n")
	t.Setenv("AGENTRUNNER_TOOLS_SHOUT_REPEAT", "3")
	cfg, err := kinds.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	ws, err := workspace.Load(cfg)
	if err != nil {
		t.Fatal(err)
	}
	shout := ws.Config.Tools["shout"]
	if diff := cmp.Diff(config.ToolSettings(&echoSettings{Greeting: "hey ", Repeat: 3}), shout.Settings); diff != "" {
		t.Errorf("settings (-want +got):\n%s", diff)
	}
	if shout.Timeout.D() != 3*time.Second {
		t.Errorf("timeout = %s, want the kind's default 3s", shout.Timeout)
	}
	box, err := Build(context.Background(), cfg, []string{"shout"}, Deps{LookupEnv: noEnv, Now: time.Now, Kinds: kinds})
	if err != nil {
		t.Fatal(err)
	}
	defer box.Close()
	scope := tool.NewExecutor(box.Registry, tool.Options{}).Scope([]string{"shout"})
	got := scope.Execute(context.Background(), agentrunner.ToolCall{Name: "shout", Arguments: json.RawMessage(`{}`), Agent: "research"})
	if want := (agentrunner.ToolResult{Message: "hey hey hey "}); got != want {
		t.Errorf("call = %+v, want %+v", got, want)
	}
	if diff := cmp.Diff([]string{"ECHO_TOKEN"}, Needs(cfg, kinds, "shout")); diff != "" {
		t.Errorf("needs (-want +got):\n%s", diff)
	}
	if _, err := Builtin().Load(path); err == nil || !strings.Contains(err.Error(), `tools.shout.kind: no implementation of kind "echo"`) {
		t.Errorf("without the kind: err = %v", err)
	}
}

// TestANewKindIsDecodedStrictly: mistakes in the new kind's section are
// named at their file:line, as everywhere else in the file.
func TestANewKindIsDecodedStrictly(t *testing.T) {
	kinds := Builtin()
	kinds["echo"] = echoKind
	path := echoWorkspace(t, "    kind: echo\n    greeting: [hey]\n    repat: 2\n    pause: soon\n    cache_ttl: 1m\n")
	_, err := kinds.Load(path)
	var ps config.Problems
	if !errors.As(err, &ps) {
		t.Fatalf("err = %v, want Problems", err)
	}
	line := strings.Count(strings.Split(mustRead(t, path), "  shout:\n")[0], "\n") + 1 // the line of "shout:"
	want := []string{
		at(path, line+2, 15) + `: tools.shout.greeting: want a string, got a list`,
		at(path, line+3, 5) + `: tools.shout: unknown key "repat" (did you mean "repeat"?)`,
		at(path, line+4, 12) + `: tools.shout.pause: invalid duration "soon": want a Go duration such as 90s, 30m or 6h`,
	}
	if diff := cmp.Diff(want, strings.Split(ps.Error(), "\n")); diff != "" {
		t.Errorf("decoding problems (-want +got):\n%s", diff)
	}

	path = echoWorkspace(t, "    kind: echo\n    repeat: 0\n    cache_ttl: 1m\n")
	_, err = kinds.Load(path)
	line = strings.Count(strings.Split(mustRead(t, path), "  shout:\n")[0], "\n") + 1
	want = []string{
		at(path, line+3, 5) + `: tools.shout.cache_ttl: applies to tools of kind current_position, technical_indicators, not echo`,
		at(path, line+2, 5) + `: tools.shout.repeat: must be at least 1, got 0`,
	}
	if !errors.As(err, &ps) {
		t.Fatalf("err = %v, want Problems", err)
	}
	if diff := cmp.Diff(want, strings.Split(ps.Error(), "\n")); diff != "" {
		t.Errorf("validation problems (-want +got):\n%s", diff)
	}
}

func mustRead(t *testing.T, path string) string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

// at is a problem's position: file:line:column.
func at(path string, line, col int) string {
	return fmt.Sprintf("%s:%d:%d", path, line, col)
}

// TestBuiltinKindsCheckTheirKeys: each built-in kind decodes and checks
// its own keys, and a key of another kind is named as such, each at the
// line of the key.
func TestBuiltinKindsCheckTheirKeys(t *testing.T) {
	dir := t.TempDir()
	if _, err := crypton.Write(dir, true, "mock"); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, config.FileName)
	inserts := []struct{ after, key, want string }{
		{"    api_key_env: BRAVE_API_KEY\n", "    api_key_env: \"sk-live abc\"\n",
			`tools.web_search.api_key_env: "sk-live abc" is not an environment variable name (give the name of the variable that holds the key, not the key)`},
		{"  web_fetch:\n", "    max_redirects: -1\n", `tools.web_fetch.max_redirects: must not be negative, got -1`},
		{"  bird:\n", "    env: {set: {AUTH_TOKEN: abc}}\n",
			`tools.bird.env.set.AUTH_TOKEN: AUTH_TOKEN looks like a secret: do not write it in the file; put it in the runner's environment and pass it by name (env: {pass: [AUTH_TOKEN]})`},
		{"  current_position:\n", "    base_url: \"https://exec.example\"\n",
			`tools.current_position.base_url: applies to tools of kind technical_indicators, web_search, not current_position`},
		{"  technical_indicators:\n", "    ema_periods: [20, 0]\n", `tools.technical_indicators.ema_periods[1]: must be at least 1`},
	}
	edit(t, path, inserts[0].after, inserts[0].key) // the example gives it: replaced
	for _, in := range inserts[1:] {
		edit(t, path, in.after, in.after+in.key)
	}
	_, err := Builtin().Load(path)
	var ps config.Problems
	if !errors.As(err, &ps) {
		t.Fatalf("err = %v, want Problems", err)
	}
	lines := strings.Split(mustRead(t, path), "\n")
	var want []string
	for _, in := range inserts {
		line := slicesIndex(lines, strings.TrimSuffix(in.key, "\n")) + 1
		want = append(want, fmt.Sprintf("%s:%d", path, line)+": "+in.want)
	}
	var got []string
	for _, p := range ps {
		where, _, _ := strings.Cut(strings.TrimPrefix(p.Where, path+":"), ":") // file:line, without the column
		got = append(got, path+":"+where+": "+p.Key+": "+p.Message)
	}
	if diff := cmp.Diff(want, got, cmpopts.SortSlices(func(a, b string) bool { return a < b })); diff != "" {
		t.Errorf("problems (-want +got):\n%s", diff)
	}
}

// slicesIndex is the index of the line s, or -2 so the line reads -1.
func slicesIndex(lines []string, s string) int {
	for i, l := range lines {
		if l == s {
			return i
		}
	}
	return -2
}
