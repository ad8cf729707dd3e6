package config

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// withChildEnv gives the process provider, the agent on it, an MCP server
// and a bird tool an env each.
func withChildEnv(provider, agent, server, tool string) string {
	src := strings.Replace(valid, `  cli: {kind: process, command: [agent-cli, --prompt, "{prompt_file}"]}`,
		"  cli:\n    kind: process\n    command: [agent-cli]\n    env: "+provider, 1)
	src = strings.Replace(src, "    provider: cli\n", "    provider: cli\n    env: "+agent+"\n", 1)
	src = strings.Replace(src, "tools: {web_search: {}, web_fetch: {}}", "tools: {web_search: {}, web_fetch: {}, x: {kind: bird, env: "+tool+"}}", 1)
	return src + "mcp_servers:\n  files:\n    command: [files-server]\n    env: " + server + "\n"
}

func TestChildProcessEnvDecodes(t *testing.T) {
	src := withChildEnv(
		`{pass: [ANTHROPIC_API_KEY, HTTPS_PROXY], set: {CLAUDE_CODE_MAX_OUTPUT_TOKENS: "8000", NO_COLOR: "1"}}`,
		`{pass: [GITHUB_TOKEN]}`,
		`{pass: [FILES_TOKEN], set: {FILES_ROOT: /srv/files}}`,
		`{pass: [DBUS_SESSION_BUS_ADDRESS]}`)
	c, err := parse(t, src, map[string]string{"AGENTRUNNER_PROVIDERS_CLI_ENV_PASS": "ANTHROPIC_API_KEY, NO_PROXY"})
	if err != nil {
		t.Fatal(err)
	}
	got := []Env{c.Providers["cli"].Env, c.Agents["report"].Env, c.MCPServers["files"].Env, c.Tools["x"].Settings.(*cliSettings).Env, c.Agents["plan"].Env}
	want := []Env{
		{Pass: []string{"ANTHROPIC_API_KEY", "NO_PROXY"}, Set: map[string]string{"CLAUDE_CODE_MAX_OUTPUT_TOKENS": "8000", "NO_COLOR": "1"}},
		{Pass: []string{"GITHUB_TOKEN"}},
		{Pass: []string{"FILES_TOKEN"}, Set: map[string]string{"FILES_ROOT": "/srv/files"}},
		{Pass: []string{"DBUS_SESSION_BUS_ADDRESS"}},
		{},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("env (-want +got):\n%s", diff)
	}
}

func TestChildProcessEnvProblems(t *testing.T) {
	const none = "{}"
	tests := []struct {
		name                          string
		provider, agent, server, tool string
		want                          []string
	}{
		{
			name:     "the old plain map shows the new shape",
			provider: "{ANTHROPIC_API_KEY: sk-ant-123, MODE: fast}",
			agent:    none, server: "{FILES_ROOT: /srv}", tool: none,
			want: []string{
				`agentrunner.yaml:7:11: providers.cli.env: env is {pass: [NAMES], set: {NAME: value}}, not a map of variables: write set: {ANTHROPIC_API_KEY: ...} for a plain setting, or pass: [ANTHROPIC_API_KEY] to give the variable of the runner's environment (secrets are always passed by name)`,
				`agentrunner.yaml:42:11: mcp_servers.files.env: env is {pass: [NAMES], set: {NAME: value}}, not a map of variables: write set: {FILES_ROOT: ...} for a plain setting, or pass: [FILES_ROOT] to give the variable of the runner's environment (secrets are always passed by name)`,
			},
		},
		{
			name:     "not a mapping",
			provider: "[ANTHROPIC_API_KEY]", agent: none, server: none, tool: none,
			want: []string{
				`agentrunner.yaml:7:10: providers.cli.env: want a mapping {pass: [NAMES], set: {NAME: value}}, got a list`,
			},
		},
		{
			name:     "malformed and reserved names",
			provider: `{pass: [ANTHROPIC_API_KEY, "1ST", "A-B", ANTHROPIC_API_KEY, AGENTRUNNER_KEY_ALICE], set: {"bad name": x, PWD: /}}`,
			agent:    `{set: {AGENTRUNNER_OUTPUT: /tmp/x}}`, server: `{pass: [""]}`, tool: none,
			want: []string{
				`agentrunner.yaml:7:37: providers.cli.env.pass[1]: "1ST" is not an environment variable name (letters, digits and _, not starting with a digit)`,
				`agentrunner.yaml:7:44: providers.cli.env.pass[2]: "A-B" is not an environment variable name (letters, digits and _, not starting with a digit)`,
				`agentrunner.yaml:7:51: providers.cli.env.pass[3]: ANTHROPIC_API_KEY is passed twice`,
				`agentrunner.yaml:7:70: providers.cli.env.pass[4]: AGENTRUNNER_KEY_ALICE is the runner's own: it sets the AGENTRUNNER_* variables and PWD an agent gets`,
				`agentrunner.yaml:7:115: providers.cli.env.set.PWD: PWD is the runner's own: it sets the AGENTRUNNER_* variables and PWD an agent gets`,
				`agentrunner.yaml:7:100: providers.cli.env.set.bad name: "bad name" is not an environment variable name (letters, digits and _, not starting with a digit)`,
				`agentrunner.yaml:23:17: agents.report.env.set.AGENTRUNNER_OUTPUT: AGENTRUNNER_OUTPUT is the runner's own: it sets the AGENTRUNNER_* variables and PWD an agent gets`,
				`agentrunner.yaml:42:18: mcp_servers.files.env.pass[0]: "" is not an environment variable name (letters, digits and _, not starting with a digit)`,
			},
		},
		{
			name:     "no secret written in the file",
			provider: `{set: {ANTHROPIC_API_KEY: sk-ant-123, HTTPS_PROXY: "http://op:hunter2@proxy:3128", HTTP_PROXY: "http://proxy:3128"}}`,
			agent:    `{set: {GITHUB_TOKEN: ghp_123}}`, server: `{set: {DB_PASSWORD: x}}`, tool: `{set: {AUTH_TOKEN: abc}}`,
			want: []string{
				`agentrunner.yaml:7:17: providers.cli.env.set.ANTHROPIC_API_KEY: ANTHROPIC_API_KEY looks like a secret: do not write it in the file; put it in the runner's environment and pass it by name (env: {pass: [ANTHROPIC_API_KEY]})`,
				`agentrunner.yaml:7:48: providers.cli.env.set.HTTPS_PROXY: HTTPS_PROXY looks like a secret: do not write it in the file; put it in the runner's environment and pass it by name (env: {pass: [HTTPS_PROXY]})`,
				`agentrunner.yaml:23:17: agents.report.env.set.GITHUB_TOKEN: GITHUB_TOKEN looks like a secret: do not write it in the file; put it in the runner's environment and pass it by name (env: {pass: [GITHUB_TOKEN]})`,
				`agentrunner.yaml:38:68: tools.x.env.set.AUTH_TOKEN: AUTH_TOKEN looks like a secret: do not write it in the file; put it in the runner's environment and pass it by name (env: {pass: [AUTH_TOKEN]})`,
				`agentrunner.yaml:42:17: mcp_servers.files.env.set.DB_PASSWORD: DB_PASSWORD looks like a secret: do not write it in the file; put it in the runner's environment and pass it by name (env: {pass: [DB_PASSWORD]})`,
			},
		},
		{
			name:     "both passed and set",
			provider: `{pass: [MODE], set: {MODE: fast}}`, agent: none, server: none, tool: none,
			want: []string{
				`agentrunner.yaml:7:31: providers.cli.env.set.MODE: MODE is both passed and set`,
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := problems(t, withChildEnv(tt.provider, tt.agent, tt.server, tt.tool), nil)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestChildProcessEnvOnlyWhereAProcessStarts(t *testing.T) {
	src := strings.Replace(valid, "    memory: true\n", "    memory: true\n    env: {pass: [GITHUB_TOKEN]}\n", 1) // plan is on mock
	src = strings.Replace(src, "  cli: {kind: process", "  oai: {kind: openai, base_url: \"http://127.0.0.1:1/v1\", env: {pass: [X]}}\n  cli: {kind: process", 1)
	src = strings.Replace(src, "tools: {web_search: {}, web_fetch: {}}", "tools: {web_search: {}, web_fetch: {env: {pass: [X]}}}", 1)
	src += "mcp_servers:\n  remote: {url: \"https://mcp.example/mcp\", env: {set: {X: y}}}\n"
	want := []string{
		`agentrunner.yaml:4:58: providers.oai.env: only process providers start a process that takes an environment`,
		`agentrunner.yaml:13:5: agents.plan.env: only agents on a process provider run as a process that takes an environment`,
		`agentrunner.yaml:36:37: tools.web_fetch.env: only CLI-backed tools (bird) start a process that takes an environment`,
		`agentrunner.yaml:38:44: mcp_servers.remote.env: only a command (stdio) server is a process that takes an environment`,
	}
	if diff := cmp.Diff(want, problems(t, src, nil)); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

func TestIsOverride(t *testing.T) {
	tests := map[string]bool{
		"AGENTRUNNER_SERVER_LISTEN":                   true,
		"AGENTRUNNER_ARTIFACTS_DIR":                   true,
		"AGENTRUNNER_SCHEDULE_EVERY":                  true,
		"AGENTRUNNER_AGENTS_RESEARCH_PROVIDER":        true,
		"AGENTRUNNER_AGENTS_MY_AGENT_2_TOOLS":         true,
		"AGENTRUNNER_AGENTS_REPORT_RETRIES_MAX":       true,
		"AGENTRUNNER_PROVIDERS_CLI_ENV_PASS":          true,
		"AGENTRUNNER_TOOLS_WEB_SEARCH_BASE_URL":       true,
		"AGENTRUNNER_TOOLS_FEED_BINARY":               true, // a key of a kind, which config does not know
		"AGENTRUNNER_TOOLS_TA_EMA_PERIODS":            true,
		"AGENTRUNNER_TOOLS_X_RETRIES_MAX":             true,
		"AGENTRUNNER_TOOLS_WEB_SEARCH_API_KEY":        false, // a secret named so, not a key
		"AGENTRUNNER_TOOLS_FEED_AUTH_TOKEN":           false,
		"AGENTRUNNER_TOOLS_X_RETRIES":                 false,
		"AGENTRUNNER_EXECUTION_SERVICE_URL":           true,
		"AGENTRUNNER_SERVER_AUTH_JWT_SECRET_ENV":      true,
		"AGENTRUNNER_KEY_ALICE":                       false, // an operator's API key, named so
		"AGENTRUNNER_WEBHOOK_SECRET":                  false,
		"AGENTRUNNER_TEST_SECRET":                     false,
		"AGENTRUNNER_SERVER":                          false, // a section, not a key
		"AGENTRUNNER_AGENTS_RESEARCH":                 false,
		"AGENTRUNNER_PROVIDERS_CLI_ENV_SET":           true, // a map of values, in YAML
		"AGENTRUNNER_PROVIDERS_CLI_ENV_SET_X":         false,
		"AGENTRUNNER_AGENTS__PROVIDER":                false,
		"AGENTRUNNER_TOOLS_X_PARAMETERS":              true, // a JSON Schema, in YAML or JSON
		"AGENTRUNNER_SERVER_AUTH_API_KEYS":            true, // a list of sections, in YAML or JSON
		"OPENAI_API_KEY":                              false,
		"AGENTRUNNER_PROMPT_FILE":                     false,
		"AGENTRUNNER_EXECUTION_SERVICE_URL_AND_TOKEN": false,
	}
	for name, want := range tests {
		if got := IsOverride(name); got != want {
			t.Errorf("IsOverride(%s) = %v, want %v", name, got, want)
		}
	}
}
