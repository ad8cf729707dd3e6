package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentrunner/agentrunner/llm/fake"
)

// movesConfig is a pipeline of one model agent on the provider first, a
// fake OpenAI server; second is another one, third has no key nor base
// URL. The agent may use web_fetch, which no agent uses at the start.
const movesConfig = `version: 1
name: moves
providers:
  first: {kind: openai, model: gpt-first, base_url: "%FIRST%", api_key_env: MOVES_FIRST_KEY}
  second: {kind: openai, model: gpt-second, base_url: "%SECOND%", api_key_env: MOVES_SECOND_KEY}
  third: {kind: openai, model: gpt-third, api_key_env: MOVES_THIRD_KEY}
tools:
  web_fetch: {}
defaults: {provider: first, timeout: 1m, retries: {max: 0}}
agents:
  writer: {identity: agent.md, output: {file: note.md, template: note.md}}
pipelines:
  notes: {start: write, steps: {write: {agent: writer, next: end}}}
server:
  listen: "%LISTEN%"
  auth: {api_keys: [{name: ops, key_env: MOVES_OPS_KEY, role: admin}]}
`

// TestServeReloadMovesAnAgentToAnotherProvider: while serve runs, a reload
// moves the agent to another model provider, and its next attempt asks
// that provider's server for its model, with no restart (FR-011/075). A
// reload naming a provider whose key is missing, or giving the agent a
// tool the runner did not build, is refused and the agent stays where it
// was.
func TestServeReloadMovesAnAgentToAnotherProvider(t *testing.T) {
	note := fake.OpenAIReply{Text: "# Note\n\n## Body\nDone.\n"}
	first, second := fake.NewOpenAI(t, "", note), fake.NewOpenAI(t, "", note, note)
	dir := t.TempDir()
	addr := cliFreeAddr(t)
	cfg := filepath.Join(dir, "agentrunner.yaml")
	src := strings.NewReplacer("%FIRST%", first.URL(), "%SECOND%", second.URL(), "%LISTEN%", addr).Replace(movesConfig)
	for name, text := range map[string]string{
		"agentrunner.yaml": src, "agent.md": "# Agent\n", "note.md": "# Note\n\n## Body\n<!-- text -->\n",
		"tools.md": "# Tools\n\n## web_fetch\nFetch a page.\n",
	} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	t.Setenv("MOVES_FIRST_KEY", "sk-first")
	t.Setenv("MOVES_SECOND_KEY", "sk-second")
	t.Setenv("MOVES_OPS_KEY", "ops-key-moves-0123456789")
	t.Setenv("OPENAI_BASE_URL", "")

	_, stderr, done := serving(t, cfg)
	c := apiClient(t, addr, "ops-key-moves-0123456789")
	startRun(t, c, first, 1, done, stderr)

	reload := func(old, new, want string) {
		t.Helper()
		editFile(t, cfg, old, new)
		cmd, err := c.Reload(t.Context(), "moves")
		if err != nil {
			t.Fatalf("reload: %v", err)
		}
		var result string
		waitFor(t, "the reload's result", func() bool {
			list, err := c.Audit(t.Context(), 10, 0)
			for _, got := range list.Commands {
				if err == nil && got.ID == cmd.ID && got.ConsumedAt != nil {
					result = got.Result
				}
			}
			return result != ""
		})
		if !strings.HasPrefix(result, want) {
			t.Errorf("reload %q → %q: result %q, want %q…", old, new, result, want)
		}
	}
	reload("defaults: {provider: first", "defaults: {provider: second", "reloaded ")
	startRun(t, c, second, 1, done, stderr)
	if got := second.Requests()[0].Model; got != "gpt-second" {
		t.Errorf("the request after the reload asks for model %q, want gpt-second", got)
	}

	reload("defaults: {provider: second", "defaults: {provider: third", "ignored: the agents' runtimes cannot be built: ")
	reload("  writer: {identity: agent.md,", "  writer: {identity: agent.md, tools: [web_fetch],", "ignored: the agents' runtimes cannot be built: ")
	startRun(t, c, second, 2, done, stderr)
	if n := len(first.Requests()); n != 1 {
		t.Errorf("the first provider got %d requests, want 1", n)
	}
	for _, text := range []string{"MOVES_THIRD_KEY", "tool web_fetch is not registered"} {
		if !strings.Contains(stderr.String(), text) {
			t.Errorf("serve's log does not say %q:\n%s", text, stderr.String())
		}
	}
}

// editFile replaces old with new in the file at path, once.
func editFile(t *testing.T, path, old, new string) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(data), old) {
		t.Fatalf("%s has no %q", path, old)
	}
	if err := os.WriteFile(path, []byte(strings.Replace(string(data), old, new, 1)), 0o600); err != nil {
		t.Fatal(err)
	}
}
