package main

import (
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentrunner/agentrunner/config"
	"github.com/agentrunner/agentrunner/toolbox"
	"github.com/google/go-cmp/cmp"
)

// checksConfig has a process agent, a model agent with web_search and an
// operator's API key named AGENTRUNNER_KEY_ALICE; %s are the program, the
// provider's base URL and the search API's.
const checksConfig = `version: 1
name: checks
providers:
  cli: {kind: process, command: ["%PROGRAM%", "{prompt_file}"]}
  api: {kind: openai, model: m, base_url: "%LLM%", api_key_env: CHECK_OPENAI_KEY}
tools:
  web_search: {base_url: "%SEARCH%", api_key_env: CHECK_BRAVE_KEY}
agents:
  a: {identity: a.md, provider: cli, output: {file: a.md, template: t.md}}
  b: {identity: a.md, provider: api, tools: [web_search], output: {file: b.md, template: t.md}}
pipeline: {start: s, steps: {s: {agent: a, next: t}, t: {agent: b, next: end}}}
server:
  auth: {api_keys: [{name: alice, key_env: AGENTRUNNER_KEY_ALICE, role: admin}]}
`

func checksParse(t *testing.T, program, llm, search string, env map[string]string) *config.Config {
	t.Helper()
	src := strings.NewReplacer("%PROGRAM%", program, "%LLM%", llm, "%SEARCH%", search).Replace(checksConfig)
	cfg, err := config.ParseWith(filepath.Join(t.TempDir(), "agentrunner.yaml"), []byte(src), config.Options{
		ToolKinds: toolbox.Builtin().Config(), LookupEnv: func(k string) (string, bool) { v, ok := env[k]; return v, ok },
	})
	if cfg == nil {
		t.Fatal(err)
	}
	return cfg
}

// TestRunTimeProblems: each thing validate finds that would fail only at
// run time, and what it leaves alone.
func TestRunTimeProblems(t *testing.T) {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(t.TempDir(), "gone")
	tests := []struct {
		name, program string
		env           map[string]string
		want          []string
	}{
		{name: "an installed program and good variables", program: self,
			env: map[string]string{"AGENTRUNNER_SCHEDULE_EVERY": "1h", "AGENTRUNNER_KEY_ALICE": "k", "AGENTRUNNER_KEY_ALICE_FILE": "/k", "AGENTRUNNER_SERVER": "http://x", "AGENTRUNNER_PROMPT_FILE": "p"}},
		{name: "a placeholder or a relative path is found at run time", program: "{workspace}/agent.sh"},
		{name: "relative", program: "bin/agent"},
		{name: "a program not on PATH", program: "no-such-agent-cli-4711",
			want: []string{`providers.cli.command[0]: no-such-agent-cli-4711 cannot be run (executable file not found in $PATH): every agent on this provider would fail; install it, put it on PATH or give its absolute path`}},
		{name: "an absolute path to nothing", program: missing,
			want: []string{`providers.cli.command[0]: ` + missing + ` cannot be run (no such file or directory): every agent on this provider would fail; install it, put it on PATH or give its absolute path`}},
		{name: "a typo in an override", program: self, env: map[string]string{"AGENTRUNNER_SCHEDULE_EVRY": "1h"},
			want: []string{`environment variable AGENTRUNNER_SCHEDULE_EVRY: sets no configuration key, so it is ignored (did you mean "AGENTRUNNER_SCHEDULE_EVERY"?)`}},
		{name: "an agent the file does not have", program: self, env: map[string]string{"AGENTRUNNER_AGENTS_C_TIMEOUT": "1h"},
			want: []string{`environment variable AGENTRUNNER_AGENTS_C_TIMEOUT: sets no configuration key, so it is ignored (did you mean "AGENTRUNNER_AGENTS_A_TIMEOUT"?)`}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg := checksParse(t, tc.program, "http://127.0.0.1:1/v1", "http://127.0.0.1:1", nil)
			var environ []string
			for k, v := range tc.env {
				environ = append(environ, k+"="+v)
			}
			var got []string
			for _, p := range runTimeProblems(cfg, environ, exec.LookPath) {
				got = append(got, strings.TrimPrefix(p.String(), cfg.Path+":"))
			}
			for i := range got {
				got[i] = trimLine(got[i])
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

// trimLine drops the "line:col: " of a located problem.
func trimLine(s string) string {
	for range 2 {
		if i := strings.IndexByte(s, ':'); i > 0 && strings.Trim(s[:i], "0123456789") == "" {
			s = strings.TrimPrefix(s[i+1:], " ")
		}
	}
	return s
}

// TestValidateRefusesAnOpenListenWithoutAuth: validate says what serve
// would say when it refuses to start.
func TestValidateRefusesAnOpenListenWithoutAuth(t *testing.T) {
	t.Setenv("AGENTRUNNER_SERVER_LISTEN", "0.0.0.0:8080")
	dir := cliExample(t)
	code, _, stderr := cliRun(t, "validate", "-c", cliConfigPath(dir))
	want := requireLoopback("0.0.0.0:8080").Error()
	if code != exitFailure || !strings.Contains(stderr, "server.listen: "+want) {
		t.Errorf("exit %d, want %d and %q in:\n%s", code, exitFailure, want, stderr)
	}
}

// keyServer is a fake API on 127.0.0.1 that answers 200 to good and 401
// to any other value of header.
func keyServer(t *testing.T, path, header, good string) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.URL.Path != path:
			http.NotFound(w, r)
		case r.Header.Get(header) != good:
			http.Error(w, `{"error": "invalid key"}`, http.StatusUnauthorized)
		default:
			w.Write([]byte(`{"data": []}`))
		}
	}))
	t.Cleanup(srv.Close)
	return srv
}

// TestValidateOnline: with --online each key is checked by one request to
// its service; a key answered 401 is named as a bad key, one answered 200
// passes.
func TestValidateOnline(t *testing.T) {
	llm := keyServer(t, "/v1/models", "Authorization", "Bearer good-openai")
	search := keyServer(t, "/res/v1/web/search", "X-Subscription-Token", "good-brave")
	self, _ := os.Executable()
	tests := []struct {
		name      string
		env       map[string]string
		wantProbs []string
	}{
		{name: "good keys", env: map[string]string{"CHECK_OPENAI_KEY": "good-openai", "CHECK_BRAVE_KEY": "good-brave"}},
		{name: "bad keys", env: map[string]string{"CHECK_OPENAI_KEY": "bad", "CHECK_BRAVE_KEY": "bad"}, wantProbs: []string{
			"providers.api.api_key_env: the key in CHECK_OPENAI_KEY is a bad key: the openai provider api (GET " + llm.URL + "/v1/models) refused it (HTTP 401)",
			"tools.web_search.api_key_env: the key in CHECK_BRAVE_KEY is a bad key: the web_search tool web_search (GET " + search.URL + "/res/v1/web/search) refused it (HTTP 401)",
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg := checksParse(t, self, llm.URL+"/v1", search.URL, nil)
			lookup := func(k string) (string, bool) { v, ok := tc.env[k]; return v, ok }
			var got []string
			for _, p := range onlineProblems(t.Context(), cfg, lookup, &http.Client{}) {
				got = append(got, trimLine(strings.TrimPrefix(p.String(), cfg.Path+":")))
			}
			if diff := cmp.Diff(tc.wantProbs, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}
