package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestInitNamesWhatTheWorkspaceNeeds: for the crypton example on each
// provider, init names every variable and program its agents need, and
// nothing they do not, and how to run the mock Execution Service.
func TestInitNamesWhatTheWorkspaceNeeds(t *testing.T) {
	const (
		brave  = "variable BRAVE_API_KEY: tool web_search (agents plan, research)"
		bird   = "program bird on PATH"
		birdBy = "tool bird (agents plan, research); install: npm install -g @steipete/bird@0.8.0"
		mock   = "offline, run `agentrunner execsvc mock` in another terminal first"
	)
	cases := []struct {
		provider string
		want     []string
		not      []string
	}{
		{"mock", []string{"no key or program is needed", mock}, []string{"OPENAI_API_KEY", "ANTHROPIC_API_KEY", "BRAVE_API_KEY", bird, "claude"}},
		{"openai", []string{"variable OPENAI_API_KEY: the openai provider's API key (agents analysis, evaluation, plan, research, synthesis); not needed when OPENAI_BASE_URL",
			brave, bird, birdBy, mock}, []string{"ANTHROPIC_API_KEY", "claude"}},
		{"anthropic", []string{"variable ANTHROPIC_API_KEY: the anthropic provider's API key (agents analysis, evaluation, plan, research, synthesis)",
			brave, bird, birdBy, mock}, []string{"OPENAI_API_KEY", "claude"}},
		{"process", []string{"program claude on PATH", "the claude-code provider's command (agents analysis, evaluation, plan, research, synthesis); it gets only the variables providers.claude-code.env passes",
			brave, bird, birdBy, mock}, []string{"OPENAI_API_KEY", "variable ANTHROPIC_API_KEY"}},
	}
	for _, tc := range cases {
		t.Run(tc.provider, func(t *testing.T) {
			code, stdout, stderr := cliRun(t, "init", "--provider", tc.provider, filepath.Join(t.TempDir(), "ws"))
			if code != exitOK {
				t.Fatalf("init: exit %d\n%s", code, stderr)
			}
			for _, w := range tc.want {
				if !strings.Contains(stdout, w) {
					t.Errorf("init does not say %q:\n%s", w, stdout)
				}
			}
			for _, n := range tc.not {
				if strings.Contains(stdout, n) {
					t.Errorf("init names %q, which the workspace does not need:\n%s", n, stdout)
				}
			}
		})
	}
}

// TestNeedsFollowTheConfiguration: the hints come from the configuration
// as it is, not from a list per example: a renamed key variable, a tool
// no agent uses any more, a base_url, another Execution Service address.
func TestNeedsFollowTheConfiguration(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "ws")
	if code, _, stderr := cliRun(t, "init", "--provider", "openai", dir); code != exitOK {
		t.Fatalf("init: exit %d\n%s", code, stderr)
	}
	path := cliConfigPath(dir)
	cliEdit(t, path, "    api_key_env: BRAVE_API_KEY\n", "    api_key_env: MY_SEARCH_KEY\n")
	data, _ := os.ReadFile(path)
	os.WriteFile(path, []byte(strings.ReplaceAll(string(data), "tools: [web_search, web_fetch, bird,", "tools: [web_search, web_fetch,")), 0o644)
	cliEdit(t, path, "    model: gpt-4.1\n", "    model: gpt-4.1\n    base_url: http://127.0.0.1:11434/v1\n")
	cliEdit(t, path, "  url: http://127.0.0.1:9090\n", "  url: http://127.0.0.1:9191\n")
	var out bytes.Buffer
	printNeeds(&out, dir)
	for _, w := range []string{"variable MY_SEARCH_KEY: tool web_search", "OPENAI_API_KEY: the openai provider's API key (agents analysis, evaluation, plan, research, synthesis); optional: base_url http://127.0.0.1:11434/v1",
		"run `agentrunner execsvc mock --listen 127.0.0.1:9191`"} {
		if !strings.Contains(out.String(), w) {
			t.Errorf("the hints do not say %q:\n%s", w, &out)
		}
	}
	for _, n := range []string{"BRAVE_API_KEY", "bird"} {
		if strings.Contains(out.String(), n) {
			t.Errorf("the hints name %q, which the configuration no longer needs:\n%s", n, &out)
		}
	}
}
