package config

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

const valid = `version: 1
name: loop
providers:
  cli: {kind: process, command: [agent-cli, --prompt, "{prompt_file}"]}
defaults:
  provider: mock
agents:
  plan:
    identity: prompts/plan.md
    timeout: 20m
    memory: true
    tools: [web_search]
    inputs:
      - {memory: plan}
      - {artifact: report.md, history: {last: 3}}
    output: {file: plan.md, template: templates/plan.md}
  report:
    identity: prompts/report.md
    provider: cli
    retries: {max: 1}
    inputs: [{artifact: plan.md, description: this cycle's plan}]
    output: {file: report.md, template: templates/report.md}
  strategist:
    identity: prompts/s.md
    output: {file: s.json, template: templates/s.json, schema: templates/s.schema.json}
pipeline:
  start: plan
  steps:
    plan: {agent: plan, next: report, deliver: [{kind: forward, to: [report], section: Questions}]}
    report: {agent: report, next: strategy, timeout: 5m, retries: {backoff: [1s]}}
    strategy: {agent: strategist, next: execute}
    execute: {kind: execution, artifact: s.json, next: end, validity: {until: /valid_until}}
execution_service: {url: "http://127.0.0.1:9090"}
tools: {web_search: {}, web_fetch: {}}
`

func parse(t *testing.T, src string, env map[string]string) (*Config, error) {
	t.Helper()
	return ParseWith("agentrunner.yaml", []byte(src), Options{ToolKinds: testKinds, LookupEnv: func(k string) (string, bool) {
		v, ok := env[k]
		return v, ok
	}})
}

func TestValidConfigGetsDefaults(t *testing.T) {
	c, err := parse(t, valid, nil)
	if err != nil {
		t.Fatal(err)
	}
	type summary struct {
		Artifacts, State, Tools, Listen string
		Every, Min, Max, ExecTimeout    time.Duration
		MaxMessages                     int
		PlanProvider, ReportProvider    string
		PlanTimeout, ReportTimeout      time.Duration
		Providers                       []string
		PlanMaxBytes                    int
	}
	got := summary{
		Artifacts: c.ArtifactsDir, State: c.State.Path, Tools: c.ToolsFile, Listen: c.Server.Listen,
		Every: c.Schedule.Every.D(), Min: c.Schedule.MinCycle.D(), Max: c.Schedule.MaxCycle.D(),
		ExecTimeout: c.ExecutionService.Timeout.D(), MaxMessages: c.Mailbox.MaxMessages,
		PlanProvider: c.Agents["plan"].Provider, ReportProvider: c.Agents["report"].Provider,
		PlanTimeout: c.Agents["plan"].Timeout.D(), ReportTimeout: c.Agents["report"].Timeout.D(),
		Providers:    slices.Sorted(maps.Keys(c.Providers)),
		PlanMaxBytes: c.Agents["plan"].Output.MaxBytes,
	}
	want := summary{
		Artifacts: "./artifacts", State: "artifacts/state.db", Tools: "tools.md", Listen: "127.0.0.1:8080",
		Every: 6 * time.Hour, Min: time.Hour, Max: 24 * time.Hour, ExecTimeout: 2 * time.Hour, MaxMessages: 5,
		PlanProvider: "mock", ReportProvider: "cli", PlanTimeout: 20 * time.Minute, ReportTimeout: 30 * time.Minute,
		Providers: []string{"cli", "mock"}, PlanMaxBytes: 8 << 20,
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	steps := c.Pipeline.Steps
	for _, tt := range []struct {
		step    string
		policy  Policy
		timeout time.Duration
	}{
		{"plan", Policy{Max: 3, Backoff: []time.Duration{5 * time.Minute, 15 * time.Minute, 45 * time.Minute}}, 20 * time.Minute},
		{"report", Policy{Max: 1, Backoff: []time.Duration{time.Second}}, 5 * time.Minute},
		{"execute", Policy{Max: 3, Backoff: []time.Duration{5 * time.Minute, 15 * time.Minute, 45 * time.Minute}}, 2 * time.Hour},
	} {
		if diff := cmp.Diff(tt.policy, c.StepPolicy(steps[tt.step])); diff != "" {
			t.Errorf("%s policy (-want +got):\n%s", tt.step, diff)
		}
		if got := c.StepTimeout(steps[tt.step]); got != tt.timeout {
			t.Errorf("%s timeout = %v, want %v", tt.step, got, tt.timeout)
		}
	}
	if w := (Policy{Backoff: []time.Duration{1, 2}}); w.Wait(1) != 1 || w.Wait(2) != 2 || w.Wait(7) != 2 || w.Wait(0) != 0 {
		t.Error("Policy.Wait does not repeat the last backoff")
	}
	if steps := c.LoopSteps(); len(steps) != 4 {
		t.Errorf("LoopSteps = %v, want 4 steps", steps)
	}
	if c.Abs("x/y") != c.Dir+"/x/y" || c.Abs("/abs") != "/abs" {
		t.Error("Abs does not resolve against the config directory")
	}
}

// problems parses src and returns the problem lines.
func problems(t *testing.T, src string, env map[string]string) []string {
	t.Helper()
	_, err := parse(t, src, env)
	var ps Problems
	if !errors.As(err, &ps) {
		t.Fatalf("err = %v, want Problems", err)
	}
	return strings.Split(ps.Error(), "\n")
}

func TestDecodeErrorsNameFileLineAndKey(t *testing.T) {
	src := strings.Replace(valid, "    timeout: 20m\n", "    timeout: 20 minutes\n    identiy: x\n", 1)
	src = strings.Replace(src, "name: loop", "name: loop\nversion: 2", 1)
	src = strings.Replace(src, "    memory: true\n", "    memory: yes please\n", 1)
	src = strings.Replace(src, "provider: cli\n", "provider: [cli]\n", 1)
	src += "server: {listen: 1}\nmailbox: {max_messages: many}\n"
	got := problems(t, src, nil)
	want := []string{
		`agentrunner.yaml:3:1: version: duplicate key (first at line 1)`,
		`agentrunner.yaml:11:14: agents.plan.timeout: invalid duration "20 minutes": want a Go duration such as 90s, 30m or 6h`,
		`agentrunner.yaml:12:5: agents.plan: unknown key "identiy" (did you mean "identity"?)`,
		`agentrunner.yaml:13:13: agents.plan.memory: want true or false, got the string "yes please"`,
		`agentrunner.yaml:21:15: agents.report.provider: want a string, got a list`,
		`agentrunner.yaml:38:25: mailbox.max_messages: want an integer, got the string "many"`,
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

func TestUnknownKeyListsKnownKeys(t *testing.T) {
	got := problems(t, valid+"server: {port: 8080}\n", nil)
	want := `agentrunner.yaml:35:10: server: unknown key "port" (known keys: auth, idle_timeout, listen, max_body_bytes, max_connections, max_header_bytes, public, read_header_timeout, read_timeout, write_timeout)`
	if len(got) != 1 || got[0] != want {
		t.Errorf("got %q, want %q", got, want)
	}
}

func TestMalformedYAML(t *testing.T) {
	for _, src := range []string{"version: [1\n", "", "# only a comment\n", "- a list\n"} {
		if _, err := parse(t, src, nil); err == nil || !strings.HasPrefix(err.Error(), "agentrunner.yaml") {
			t.Errorf("%q: err = %v, want a located error", src, err)
		}
	}
	two := problems(t, valid+"---\nversion: 2\n", nil)
	if want := fmt.Sprintf("agentrunner.yaml:%d: a second YAML document (after ---): the configuration is one document", strings.Count(valid, "\n")+1); len(two) != 1 || two[0] != want {
		t.Errorf("a second document: got %q, want %q", two, want)
	}
	if _, err := Load("does/not/exist.yaml"); err == nil || !strings.Contains(err.Error(), "cannot read configuration") {
		t.Errorf("Load of a missing file: %v", err)
	}
}

func TestEnvironmentOverrides(t *testing.T) {
	c, err := parse(t, valid, map[string]string{
		"AGENTRUNNER_SERVER_LISTEN":              "0.0.0.0:9999",
		"AGENTRUNNER_ARTIFACTS_DIR":              "/var/lib/agentrunner",
		"AGENTRUNNER_AGENTS_PLAN_TIMEOUT":        "7m",
		"AGENTRUNNER_AGENTS_PLAN_TOOLS":          "web_search, web_fetch",
		"AGENTRUNNER_AGENTS_REPORT_RETRIES_MAX":  "0",
		"AGENTRUNNER_DEFAULTS_RETRIES_BACKOFF":   "1m,2m",
		"AGENTRUNNER_EXECUTION_SERVICE_URL":      "https://exec.example",
		"AGENTRUNNER_PIPELINE_STEPS_PLAN_MEMORY": "ignored: no such key",
	})
	if err != nil {
		t.Fatal(err)
	}
	got := []any{c.Server.Listen, c.ArtifactsDir, c.State.Path, c.Agents["plan"].Timeout.D(), c.Agents["plan"].Tools,
		*c.Agents["report"].Retries.Max, c.StepPolicy(c.Pipeline.Steps["plan"]).Backoff, c.ExecutionService.URL}
	want := []any{"0.0.0.0:9999", "/var/lib/agentrunner", "/var/lib/agentrunner/state.db", 7 * time.Minute,
		[]string{"web_search", "web_fetch"}, 0, []time.Duration{time.Minute, 2 * time.Minute}, "https://exec.example"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	bad := problems(t, valid, map[string]string{"AGENTRUNNER_SCHEDULE_EVERY": "soon", "AGENTRUNNER_MAILBOX_MAX_MESSAGES": "x"})
	wantBad := []string{
		`environment variable AGENTRUNNER_SCHEDULE_EVERY: schedule.every: invalid duration "soon": want a Go duration such as 90s, 30m or 6h`,
		`environment variable AGENTRUNNER_MAILBOX_MAX_MESSAGES: mailbox.max_messages: want an integer, got "x"`,
	}
	if diff := cmp.Diff(wantBad, bad); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	inv := problems(t, valid, map[string]string{"AGENTRUNNER_MAILBOX_MAX_MESSAGES": "0"})
	if len(inv) != 1 || inv[0] != "environment variable AGENTRUNNER_MAILBOX_MAX_MESSAGES: mailbox.max_messages: must be at least 1, got 0" {
		t.Errorf("validation of an overridden value is not located at its variable: %q", inv)
	}
}

func TestValidationReportsEveryProblem(t *testing.T) {
	tests := []struct {
		name string
		edit func(string) string
		want []string
	}{
		{"unknown agent and provider", func(s string) string {
			s = strings.Replace(s, "agent: strategist,", "agent: strategy_bot,", 1)
			return strings.Replace(s, "provider: cli", "provider: gpt", 1)
		}, []string{
			`agentrunner.yaml:19:5: agents.report.provider: unknown provider "gpt" (defined: cli, mock)`,
			`agentrunner.yaml:31:16: pipeline.steps.strategy.agent: unknown agent "strategy_bot"`,
		}},
		{"loop in the graph", func(s string) string {
			return strings.Replace(s, "next: end, validity", "next: plan, validity", 1)
		}, []string{`agentrunner.yaml:26:1: pipeline: step "plan" is reached twice in one cycle: a loop within a cycle needs a cap, which the learning loop's chain does not have (graphs under pipelines: do: max_visits)`}},
		{"input read before it is produced", func(s string) string {
			return strings.Replace(s, "{memory: plan}", "{artifact: s.json}", 1)
		}, []string{`agentrunner.yaml:14:10: agents.plan.inputs[0].artifact: "s.json" is not produced by a step before "plan"`}},
		{"execution step", func(s string) string {
			s = strings.Replace(s, "artifact: s.json, next: end", "artifact: report.md, next: end", 1)
			s = strings.Replace(s, "until: /valid_until", "until: valid_until", 1)
			return strings.Replace(s, `execution_service: {url: "http://127.0.0.1:9090"}`, `execution_service: {url: "ftp://x", token_env: "sk-123"}`, 1)
		}, []string{
			`agentrunner.yaml:32:32: pipeline.steps.execute.artifact: must be a JSON artifact, got "report.md"`,
			`agentrunner.yaml:32:75: pipeline.steps.execute.validity.until: must be a JSON pointer such as /validity/valid_until, got "valid_until"`,
			`agentrunner.yaml:33:21: execution_service.url: want an http or https URL, got "ftp://x"`,
			`agentrunner.yaml:33:37: execution_service.token_env: "sk-123" is not an environment variable name (give the name of the variable that holds the token, not the token)`,
		}},
		{"output and inputs", func(s string) string {
			s = strings.Replace(s, "{file: report.md, template: templates/report.md}", "{file: report.md, template: templates/report.md, max_bytes: 0}", 1)
			s = strings.Replace(s, "{file: plan.md, template: templates/plan.md}", "{file: ../plan.md, template: templates/plan.md}", 1)
			s = strings.Replace(s, "{memory: plan}", "{memory: report}", 1)
			return strings.Replace(s, "{artifact: report.md, history: {last: 3}}", "{artifact: report.md, history: {}}", 1)
		}, []string{
			`agentrunner.yaml:16:14: agents.plan.output.file: must be a file name without directories, got "../plan.md"`,
			`agentrunner.yaml:14:10: agents.plan.inputs[0].memory: "report" is not an agent with memory: true`,
			`agentrunner.yaml:15:31: agents.plan.inputs[1].history: set last, within or both`,
			`agentrunner.yaml:22:62: agents.report.output.max_bytes: must be at least 1, got 0`,
		}},
		{"delivery", func(s string) string {
			return strings.Replace(s, "[{kind: forward, to: [report], section: Questions}]", "[{kind: sideways, to: [nobody], field: /x}]", 1)
		}, []string{
			`agentrunner.yaml:29:50: pipeline.steps.plan.deliver[0].kind: unknown kind "sideways" (supported: forward, backward, broadcast, status)`,
			`agentrunner.yaml:29:66: pipeline.steps.plan.deliver[0].to: unknown agent "nobody"`,
			`agentrunner.yaml:29:80: pipeline.steps.plan.deliver[0].field: quotes a JSON field, but the step produces plan.md`,
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := problems(t, tt.edit(valid), nil)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestModelProvidersToolsAndMCPServers(t *testing.T) {
	src := strings.Replace(valid, "defaults:\n  provider: mock\n", `defaults:
  provider: mock
  model: small-model
`, 1)
	src = strings.Replace(src, "  cli: {kind: process", `  oai: {kind: openai, base_url: "http://127.0.0.1:11434/v1", model: provider-model}
  claude: {kind: anthropic}
  cli: {kind: process`, 1)
	src += `mcp_servers:
  files: {command: [files-server, --stdio]}
  remote: {url: "https://mcp.example/mcp", prefix: r_, bearer_env: REMOTE_TOKEN}
budgets: {cycle_tokens: 200000}
`
	src = strings.Replace(src, "tools: {web_search: {}, web_fetch: {}}", "tools: {web_search: {}, web_fetch: {}, current_position: {}}", 1)
	src = strings.Replace(src, "    provider: cli\n", "    provider: oai\n    temperature: 0.2\n    token_budget: 50000\n    tools: [files_read, r_lookup]\n", 1)
	c, err := parse(t, src, nil)
	if err != nil {
		t.Fatal(err)
	}
	report := c.Agents["report"]
	got := []any{c.Providers["oai"].APIKeyEnv, c.Providers["claude"].APIKeyEnv, c.Providers["oai"].RequestTimeout.D(),
		report.Model, report.MaxTurns, report.MaxTokens, *report.RepairTurns, c.Agents["plan"].Model,
		c.Tools["web_search"].Timeout.D(), c.Tools["current_position"].Timeout.D(), *c.Tools["web_fetch"].Retries.Max,
		c.Tools["web_fetch"].Breaker.Failures, c.Tools["web_fetch"].Kind, c.MCPServers["files"].Prefix, c.MCPServers["remote"].Prefix,
		c.Budgets.CycleTokens}
	want := []any{"OPENAI_API_KEY", "ANTHROPIC_API_KEY", 2 * time.Minute,
		"small-model", 20, 4096, 1, "small-model",
		30 * time.Second, 10 * time.Second, 2, 5, "web_fetch", "files_", "r_", 200000}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}

	noDefaultModel := strings.Replace(src, "  model: small-model\n", "", 1)
	c, err = parse(t, noDefaultModel, nil)
	if err != nil {
		t.Fatal(err)
	}
	if c.Agents["report"].Model != "provider-model" {
		t.Errorf("model = %q, want the provider's model", c.Agents["report"].Model)
	}

	bad := strings.Replace(src, "    temperature: 0.2\n", "    temperature: 3\n    model: \"\"\n", 1)
	bad = strings.Replace(bad, "tools: [files_read, r_lookup]", "tools: [files_read, nowhere_tool]", 1)
	bad = strings.Replace(bad, "  files: {command: [files-server, --stdio]}", "  files: {command: [files-server], url: \"http://x\"}", 1)
	bad += "  filesystem_read: {}\n"
	bad = strings.Replace(bad, "tools: {web_search: {}, web_fetch: {}, current_position: {}}", "tools: {web_search: {}, web_fetch: {}, current_position: {}, \"bad name!\": {}, filesystem_read: {}}", 1)
	bad = strings.TrimSuffix(bad, "  filesystem_read: {}\n")
	got2 := problems(t, bad, nil)
	for _, want := range []string{
		`agents.report.model: is required for an agent on a openai provider (set it here or in defaults.model)`,
		`agents.report.temperature: must be between 0 and 2, got 3`,
		`agents.report.tools[1]: tool "nowhere_tool" is not declared under tools (nor imported from an MCP server by its prefix)`,
		`mcp_servers.files: set exactly one of command (a stdio server) or url (a streamable-HTTP server)`,
		`tools.bad name!: tool names are letters, digits, _ and -, at most 64 (as model providers require)`,
		`tools.filesystem_read: "filesystem_read" is a built-in tool of every model agent and cannot be declared`,
	} {
		found := false
		for _, g := range got2 {
			if strings.HasSuffix(g, want) {
				found = true
			}
		}
		if !found {
			t.Errorf("missing problem %q in:\n%s", want, strings.Join(got2, "\n"))
		}
	}
}

// TestServerConnectionSettings: the API server's timeouts and limits have
// their documented defaults, can be set in the file or the environment,
// and bad values are reported with their place.
func TestServerConnectionSettings(t *testing.T) {
	type settings struct {
		ReadHeader, Read, Write, Idle time.Duration
		HeaderBytes, Connections      int
	}
	of := func(c *Config) settings {
		s := c.Server
		return settings{s.ReadHeaderTimeout.D(), s.ReadTimeout.D(), s.WriteTimeout.D(), s.IdleTimeout.D(), s.MaxHeaderBytes, s.MaxConnections}
	}
	c, err := parse(t, valid, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := settings{10 * time.Second, 30 * time.Second, 30 * time.Second, 30 * time.Second, 32 << 10, 1024}
	if diff := cmp.Diff(want, of(c)); diff != "" {
		t.Errorf("defaults (-want +got):\n%s", diff)
	}
	src := valid + "server: {read_header_timeout: 2s, read_timeout: 5s, write_timeout: 7s, idle_timeout: 1m, max_header_bytes: 8192}\n"
	c, err = parse(t, src, map[string]string{"AGENTRUNNER_SERVER_MAX_CONNECTIONS": "64"})
	if err != nil {
		t.Fatal(err)
	}
	want = settings{2 * time.Second, 5 * time.Second, 7 * time.Second, time.Minute, 8192, 64}
	if diff := cmp.Diff(want, of(c)); diff != "" {
		t.Errorf("set (-want +got):\n%s", diff)
	}

	bad := valid + "server:\n  read_header_timeout: 1m\n  read_timeout: 30s\n  write_timeout: 0s\n  idle_timeout: 0s\n  max_header_bytes: 100\n  max_connections: 2\n"
	got := problems(t, bad, nil)
	wantProblems := []string{
		`agentrunner.yaml:38:3: server.write_timeout: must be positive, got 0s`,
		`agentrunner.yaml:39:3: server.idle_timeout: must be positive, got 0s`,
		`agentrunner.yaml:36:3: server.read_header_timeout: 1m0s is longer than server.read_timeout 30s, which bounds the headers too`,
		`agentrunner.yaml:40:3: server.max_header_bytes: must be from 4096 to 1048576, got 100`,
		`agentrunner.yaml:41:3: server.max_connections: must be at least 8, got 2`,
	}
	if diff := cmp.Diff(wantProblems, got); diff != "" {
		t.Errorf("problems (-want +got):\n%s", diff)
	}
}

func TestSchedulerSettings(t *testing.T) {
	c, err := parse(t, valid, nil)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(Scheduler{MaxConcurrentAttempts: 16, MaxInterruptions: 10}, c.Scheduler); diff != "" {
		t.Errorf("defaults (-want +got):\n%s", diff)
	}
	c, err = parse(t, valid+"scheduler: {max_concurrent_attempts: 4}\n", map[string]string{"AGENTRUNNER_SCHEDULER_MAX_INTERRUPTIONS": "30"})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(Scheduler{MaxConcurrentAttempts: 4, MaxInterruptions: 30}, c.Scheduler); diff != "" {
		t.Errorf("set (-want +got):\n%s", diff)
	}
	got := problems(t, valid+"scheduler:\n  max_concurrent_attempts: 0\n  max_interruptions: -1\n", nil)
	want := []string{
		`agentrunner.yaml:36:3: scheduler.max_concurrent_attempts: must be positive, got 0`,
		`agentrunner.yaml:37:3: scheduler.max_interruptions: must be positive, got -1`,
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("problems (-want +got):\n%s", diff)
	}
}

func TestTrustedProxies(t *testing.T) {
	src := valid + "server:\n  auth:\n    trusted_proxies: [10.0.0.0/8, 192.168.1.7, \"::1\", 10.1.2.3/33, proxy.local]\n"
	got := problems(t, src, nil)
	want := []string{
		`agentrunner.yaml:37:55: server.auth.trusted_proxies[3]: want an IP address or a CIDR range such as 10.0.0.0/8, got "10.1.2.3/33"`,
		`agentrunner.yaml:37:68: server.auth.trusted_proxies[4]: want an IP address or a CIDR range such as 10.0.0.0/8, got "proxy.local"`,
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("problems (-want +got):\n%s", diff)
	}
	for _, tc := range []struct{ in, want string }{
		{"10.0.0.0/8", "10.0.0.0/8"}, {"10.9.9.9/8", "10.0.0.0/8"}, {"192.168.1.7", "192.168.1.7/32"},
		{"::1", "::1/128"}, {"::ffff:10.0.0.1", "10.0.0.1/32"},
	} {
		if p, err := ParseProxy(tc.in); err != nil || p.String() != tc.want {
			t.Errorf("ParseProxy(%q) = %v, %v; want %s", tc.in, p, err, tc.want)
		}
	}
}
