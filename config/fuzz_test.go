package config

import (
	"errors"
	"reflect"
	"regexp"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

// yamlLine is a line a message names.
var yamlLine = regexp.MustCompile(`\bline [0-9]+\b`)

// positionPattern is a problem's position: file:line:col, file:line, an
// environment variable, or the file alone (a key the file does not give).
var positionPattern = regexp.MustCompile(`^(agentrunner\.yaml(:[1-9][0-9]*(:[1-9][0-9]*)?)?|.*/agentrunner\.yaml|environment variable AGENTRUNNER_[A-Z0-9_]+)$`)

// checkParse parses data with env and checks what holds for any input:
// every problem is located and is not an internal error, parsing again
// gives the same result, and a valid configuration stays valid and
// unchanged when its defaults and validation run again.
func checkParse(t *testing.T, data []byte, env map[string]string) (*Config, Problems) {
	t.Helper()
	c, err := parse(t, string(data), env)
	var ps Problems
	if err != nil && !errors.As(err, &ps) {
		t.Fatalf("err = %v (%T), want Problems", err, err)
	}
	for _, p := range ps {
		if !positionPattern.MatchString(p.Where) {
			t.Errorf("problem %q: want a position in the file or an environment variable", p)
		}
		if p.Where == "agentrunner.yaml" && yamlLine.MatchString(p.Message) {
			t.Errorf("problem %q: the message names a line, but the problem is not located there", p)
		}
		if strings.Contains(p.Message, "internal error") {
			t.Errorf("problem %q: an internal error of the decoder", p)
		}
	}
	again, errAgain := parse(t, string(data), env)
	if diff := cmp.Diff(errString(err), errString(errAgain)); diff != "" {
		t.Fatalf("parsing twice gives other problems (-first +second):\n%s", diff)
	}
	if !equalConfigs(c, again) {
		t.Fatalf("parsing twice gives another configuration (-first +second):\n%s", cmp.Diff(c, again, sameConfig...))
	}
	if err == nil {
		again.WithDefaults()
		if !equalConfigs(c, again) {
			t.Fatalf("the defaults change a configuration that has them (-before +after):\n%s", cmp.Diff(c, again, sameConfig...))
		}
		if ps := again.validate(); len(ps) > 0 {
			t.Fatalf("a valid configuration is invalid when validated again: %v", ps)
		}
	}
	return c, ps
}

// sameConfig compares configurations: NaN equals NaN, and nil and empty
// are the same.
var sameConfig = []cmp.Option{cmpopts.EquateEmpty(), cmpopts.EquateNaNs(), cmp.AllowUnexported(Config{})}

// equalConfigs is cmp.Equal with sameConfig, after reflect.DeepEqual,
// which decides most inputs several times faster.
func equalConfigs(a, b *Config) bool {
	return reflect.DeepEqual(a, b) || cmp.Equal(a, b, sameConfig...)
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// FuzzParse decodes fuzzed YAML: never a panic, every problem located
// (file:line:col, or file:line for YAML syntax), and a deterministic
// result that the defaults and validation leave as it is.
func FuzzParse(f *testing.F) {
	f.Add([]byte(valid))
	for _, change := range []struct{ old, new string }{
		{"timeout: 20m", "timeout: 20 minutes"},
		{"timeout: 20m", "timeout: -20m"},
		{"memory: true", "memory: yes"},
		{"memory: true", "memory: 1"},
		{"retries: {max: 1}", "retries: {max: 0x10}"},
		{"retries: {max: 1}", "retries: {max: 99999999999999999999}"},
		{"retries: {max: 1}", "retries: {max: 1.5}"},
		{"version: 1", "version: 1\nversion: 2"},
		{"name: loop", "name: [loop]"},
		{"name: loop", "<<: {name: loop}"},
		{"name: loop", "name: &n loop\nartifacts_dir: *n"},
		{"name: loop", "? [a]\n: b"},
		{"name: loop", "name: loop\nhealth: {min_free_disk_mib: 100, max_engine_lag: 5m}"},
		{"name: loop", "name: loop\nmailbox: {max_messages: 3}"},
		{"name: loop", "name: loop\nbudgets: {cycle_tokens: -1}"},
		{"name: loop", "name: loop\nserver: {listen: '127.0.0.1:0', max_body_bytes: 1024, public: [health]}"},
		{"name: loop", "name: loop\nevents: {retention: 720h}"},
		{"name: loop", "name: loop\n  indented: wrong"},
		{"name: loop", "name: 'unterminated"},
		{"name: loop", "name: \"\\x\""},
		{"name: loop", "name: loop\n\tname: tab"},
		{"tools: {web_search: {}, web_fetch: {}}", "tools: {web_search: {parameters: {type: object, properties: {q: {type: string}}}}, web_fetch: {}}"},
		{"tools: {web_search: {}, web_fetch: {}}", "tools: {web_search: {parameters: {1: x}}, web_fetch: {}}"},
		{"tools: {web_search: {}, web_fetch: {}}", "tools: {web_search: {base_url: x, cache_ttl: 1m, limits: [1]}, web_fetch: {colour: x, env: {}}}"},
		{"tools: {web_search: {}, web_fetch: {}}", "tools: {web_search: {kind: bird, env: {pass: [A]}}, web_fetch: {kind: nowhere, x: 1}}"},
		{"provider: cli", "provider: nowhere"},
		{"start: plan", "start: nowhere"},
		{"agent: report, next: strategy", "agent: report, next: plan"},
	} {
		f.Add([]byte(strings.Replace(valid, change.old, change.new, 1)))
	}
	graphs := valid + graphDoc
	f.Add([]byte(graphs))
	for _, change := range []struct{ old, new string }{
		{"on_cap: halt", "on_cap: stop"},
		{"on_cap: {gate: decide}", "on_cap: {to: decide, gate: decide}"},
		{"join: any", "join: all"},
		{"max_visits: 3, on_cap: halt", "next: end"},
		{"{otherwise: end}", "{when: reject, to: nowhere}"},
		{"then: [check, report]", "then: [check]"},
		{"label: {pointer: /verdict}", "label: {regex: '(a'}"},
		{"review:\n    start", "loop:\n    start"},
	} {
		f.Add([]byte(strings.Replace(graphs, change.old, change.new, 1)))
	}
	f.Add([]byte(""))
	f.Add([]byte("---\n...\n"))
	f.Add([]byte("[1, 2]"))
	f.Add([]byte("version: 1\n---\nversion: 2\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		checkParse(t, data, nil)
	})
}

// envValid is valid with the plan agent on a model provider, whose
// settings (temperature) are validated.
var envValid = strings.NewReplacer(
	"  cli: {kind: process,", "  api: {kind: openai}\n  cli: {kind: process,",
	"    identity: prompts/plan.md\n", "    identity: prompts/plan.md\n    provider: api\n    model: gpt-test\n",
).Replace(valid)

// envKeys are the overridable keys of envValid, one of each kind of value,
// with the variable that overrides each.
// example is a value each must take.
var envKeys = []struct{ name, key, example string }{
	{"AGENTRUNNER_SERVER_LISTEN", "server.listen", "0.0.0.0:9999"},
	{"AGENTRUNNER_ARTIFACTS_DIR", "artifacts_dir", "/var/lib/agentrunner"},
	{"AGENTRUNNER_SCHEDULE_EVERY", "schedule.every", "90m"},
	{"AGENTRUNNER_MAILBOX_MAX_MESSAGES", "mailbox.max_messages", "3"},
	{"AGENTRUNNER_AGENTS_REPORT_RETRIES_MAX", "agents.report.retries.max", "0"},
	{"AGENTRUNNER_AGENTS_PLAN_TEMPERATURE", "agents.plan.temperature", "0.7"},
	{"AGENTRUNNER_AGENTS_PLAN_MEMORY", "agents.plan.memory", "true"},
	{"AGENTRUNNER_AGENTS_PLAN_TOOLS", "agents.plan.tools", "web_search, web_fetch"},
	{"AGENTRUNNER_DEFAULTS_RETRIES_BACKOFF", "defaults.retries.backoff", "1m,2m"},
	{"AGENTRUNNER_HEALTH_MIN_FREE_DISK_MIB", "health.min_free_disk_mib", "100"},
	{"AGENTRUNNER_SERVER_MAX_BODY_BYTES", "server.max_body_bytes", "1048576"},
	{"AGENTRUNNER_SERVER_PUBLIC", "server.public", "health,metrics"},
	{"AGENTRUNNER_EXECUTION_SERVICE_URL", "execution_service.url", "https://exec.example"},
}

// FuzzEnvOverrides overrides keys of a valid configuration with fuzzed
// values: the properties of FuzzParse hold, a value refused is reported at
// its variable, a value taken is located at its variable, and each key's
// example is taken.
func FuzzEnvOverrides(f *testing.F) {
	for i, k := range envKeys {
		f.Add(uint8(i), k.example)
	}
	for i, v := range []string{"", " ", "-1", "1e3", "0x10", "soon", "TRUE", "1m,,soon", "NaN", "9223372036854775808", "2562047h47m16.854775808s"} {
		f.Add(uint8(i), v)
	}
	f.Fuzz(func(t *testing.T, which uint8, value string) {
		k := envKeys[int(which)%len(envKeys)]
		c, ps := checkParse(t, []byte(envValid), map[string]string{k.name: value})
		at := "environment variable " + k.name
		for _, p := range ps {
			if p.Where != at && p.Where != c.Where(p.Key) {
				t.Errorf("problem %q of an override of %s is not located at its variable", p, k.key)
			}
		}
		if c != nil && len(ps) == 0 && !validTemperature(c.Agents["plan"].Temperature) {
			t.Errorf("%s=%q gives a temperature out of 0..2, and the configuration is valid", k.name, value)
		}
		if value == k.example && len(ps) > 0 {
			t.Errorf("%s=%q is refused: %v", k.name, value, ps)
		}
		if c != nil && c.Where(k.key) != at {
			t.Errorf("%s=%q was taken, but %s is located at %s", k.name, value, k.key, c.Where(k.key))
		}
	})
}

// TestSuggestionIsDeterministic: of two known keys as close to an unknown
// one, the same is suggested every time (FuzzParse found it random).
func TestSuggestionIsDeterministic(t *testing.T) {
	for range 20 {
		ps := problems(t, "ents: x\n", nil)
		if want := `agentrunner.yaml:1:1: unknown key "ents" (did you mean "agents"?)`; ps[0] != want {
			t.Fatalf("problem %q, want %q", ps[0], want)
		}
	}
}

// validTemperature reports whether a temperature is unset or from 0 to 2.
func validTemperature(t *float64) bool { return t == nil || (*t >= 0 && *t <= 2) }
