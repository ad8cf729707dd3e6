package config

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.yaml.in/yaml/v3"
)

// cliSettings are the settings of a fake CLI-backed kind: a program and
// the environment it gets.
type cliSettings struct {
	Binary string `yaml:"binary"`
	Env    Env    `yaml:"env"`
}

func (s *cliSettings) Check(report Reporter) { CheckEnv(report, "env", s.Env) }

// apiSettings are the settings of a fake kind that calls an HTTP API.
type apiSettings struct {
	BaseURL   string   `yaml:"base_url"`
	APIKeyEnv string   `yaml:"api_key_env"`
	CacheTTL  Duration `yaml:"cache_ttl"`
	Limits    []int    `yaml:"limits"`
}

func (s *apiSettings) Check(report Reporter) {
	if s.BaseURL != "" {
		CheckURL(report, "base_url", s.BaseURL)
	}
	if s.APIKeyEnv != "" && !IsEnvName(s.APIKeyEnv) {
		report("api_key_env", "%q is not an environment variable name", s.APIKeyEnv)
	}
	if len(s.Limits) > 3 {
		report("", "at most 3 limits, got %d", len(s.Limits))
	}
}

// testKinds are hand-written kinds named as the built-in ones, which this
// package cannot import: they import it.
var testKinds = ToolKinds{
	"web_search":       {Settings: func() ToolSettings { return &apiSettings{} }},
	"web_fetch":        {},
	"bird":             {Settings: func() ToolSettings { return &cliSettings{} }},
	"current_position": {Timeout: 10 * time.Second, Settings: func() ToolSettings { return &apiSettings{} }},
}

// withTools replaces the tools of valid with src.
func withTools(src string) string {
	return strings.Replace(valid, "tools: {web_search: {}, web_fetch: {}}\n", src, 1)
}

func TestToolKindDecodesItsOwnKeys(t *testing.T) {
	src := withTools("tools:\n  web_search: {base_url: \"https://search.example\", cache_ttl: 1m, limits: [1, 2]}\n  web_fetch: {}\n  pos: {kind: current_position}\n")
	c, err := parse(t, src, map[string]string{"AGENTRUNNER_TOOLS_WEB_SEARCH_API_KEY_ENV": "SEARCH_KEY", "AGENTRUNNER_TOOLS_POS_CACHE_TTL": "5s"})
	if err != nil {
		t.Fatal(err)
	}
	want := &apiSettings{BaseURL: "https://search.example", APIKeyEnv: "SEARCH_KEY", CacheTTL: Duration(time.Minute), Limits: []int{1, 2}}
	if diff := cmp.Diff(ToolSettings(want), c.Tools["web_search"].Settings); diff != "" {
		t.Errorf("web_search settings (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(ToolSettings(&apiSettings{CacheTTL: Duration(5 * time.Second)}), c.Tools["pos"].Settings); diff != "" {
		t.Errorf("pos settings (-want +got):\n%s", diff)
	}
	if c.Tools["web_fetch"].Settings != nil {
		t.Errorf("web_fetch has no settings, got %#v", c.Tools["web_fetch"].Settings)
	}
	timeouts := []time.Duration{c.Tools["web_search"].Timeout.D(), c.Tools["pos"].Timeout.D()}
	if diff := cmp.Diff([]time.Duration{DefaultToolTimeout, 10 * time.Second}, timeouts); diff != "" {
		t.Errorf("default timeouts, the kind's where it has one (-want +got):\n%s", diff)
	}
	if got := c.Where("tools.pos.cache_ttl"); got != "environment variable AGENTRUNNER_TOOLS_POS_CACHE_TTL" {
		t.Errorf("an overridden key of a kind is located at %s", got)
	}
}

func TestToolKindKeysAreStrict(t *testing.T) {
	tests := []struct {
		name, tools string
		env         map[string]string
		want        []string
	}{
		{
			name:  "a typo in a kind's key",
			tools: "tools:\n  web_search: {bse_url: x}\n  web_fetch: {}\n",
			want:  []string{`agentrunner.yaml:35:16: tools.web_search: unknown key "bse_url" (did you mean "base_url"?)`},
		},
		{
			name:  "a key no kind has, on a kind without settings",
			tools: "tools:\n  web_search: {}\n  web_fetch:\n    timeout: 5s\n    colour: blue\n",
			want: []string{`agentrunner.yaml:38:5: tools.web_fetch: unknown key "colour" ` +
				`(known keys: breaker, description, kind, parameters, retries, timeout)`},
		},
		{
			name:  "a wrong type in a kind's key",
			tools: "tools:\n  web_search: {limits: [1, two]}\n  web_fetch: {}\n",
			want:  []string{`agentrunner.yaml:35:28: tools.web_search.limits[1]: want an integer, got the string "two"`},
		},
		{
			name:  "a key of another kind",
			tools: "tools:\n  web_search: {}\n  web_fetch: {cache_ttl: 5s}\n  feed: {kind: bird, base_url: \"https://x.example\"}\n",
			want: []string{
				`agentrunner.yaml:37:22: tools.feed.base_url: applies to tools of kind current_position, web_search, not bird`,
				`agentrunner.yaml:36:15: tools.web_fetch.cache_ttl: applies to tools of kind current_position, web_search, not web_fetch`,
			},
		},
		{
			name:  "an unknown kind",
			tools: "tools:\n  web_search: {}\n  web_fetch: {}\n  scraper: {kind: web_scraper, depth: 3}\n",
			want:  []string{`agentrunner.yaml:37:13: tools.scraper.kind: no implementation of kind "web_scraper" (built-in kinds: bird, current_position, web_fetch, web_search)`},
		},
		{
			name:  "a kind's check",
			tools: "tools:\n  web_search: {base_url: \"ftp://x\", limits: [1, 2, 3, 4]}\n  web_fetch: {}\n",
			env:   map[string]string{"AGENTRUNNER_TOOLS_WEB_SEARCH_API_KEY_ENV": "the key"},
			want: []string{
				`agentrunner.yaml:35:16: tools.web_search.base_url: want an http or https URL, got "ftp://x"`,
				`environment variable AGENTRUNNER_TOOLS_WEB_SEARCH_API_KEY_ENV: tools.web_search.api_key_env: "the key" is not an environment variable name`,
				`agentrunner.yaml:35:3: tools.web_search: at most 3 limits, got 4`,
			},
		},
		{
			name:  "an override of a kind's key",
			tools: "tools: {web_search: {}, web_fetch: {}}\n",
			env:   map[string]string{"AGENTRUNNER_TOOLS_WEB_SEARCH_CACHE_TTL": "soon"},
			want:  []string{`environment variable AGENTRUNNER_TOOLS_WEB_SEARCH_CACHE_TTL: tools.web_search.cache_ttl: invalid duration "soon": want a Go duration such as 90s, 30m or 6h`},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, problems(t, withTools(tt.tools), tt.env)); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

// TestLoadWithoutKindsSkipsTheirKeys: a reader that builds no tool reads
// the keys every tool has, and leaves the kinds' own to their packages.
func TestLoadWithoutKindsSkipsTheirKeys(t *testing.T) {
	src := withTools("tools:\n  web_search: {base_url: \"https://search.example\", timeout: 3s}\n  web_fetch: {}\n  scraper: {kind: web_scraper}\n")
	c, err := Parse("agentrunner.yaml", []byte(src), func(string) (string, bool) { return "", false })
	if err != nil {
		t.Fatal(err)
	}
	if s := c.Tools["web_search"]; s.Settings != nil || s.Timeout.D() != 3*time.Second {
		t.Errorf("web_search = %+v, want its timeout and no settings", s)
	}
	bad := strings.Replace(src, "timeout: 3s", "timeout: soon", 1)
	if _, err := Parse("agentrunner.yaml", []byte(bad), func(string) (string, bool) { return "", false }); err == nil ||
		!strings.Contains(err.Error(), "tools.web_search.timeout: invalid duration") {
		t.Errorf("a bad key every tool has: err = %v", err)
	}
}

// TestToolMarshalsAsItsSection: the effective configuration shows a
// tool's own keys beside the common ones, as the file has them.
func TestToolMarshalsAsItsSection(t *testing.T) {
	c, err := parse(t, withTools("tools:\n  web_search: {base_url: \"https://search.example\"}\n  web_fetch: {}\n"), nil)
	if err != nil {
		t.Fatal(err)
	}
	data, err := yaml.Marshal(c.Tools)
	if err != nil {
		t.Fatal(err)
	}
	var got map[string]map[string]any
	if err := yaml.Unmarshal(data, &got); err != nil {
		t.Fatal(err)
	}
	if got["web_search"]["base_url"] != "https://search.example" || got["web_search"]["timeout"] != "30s" || got["web_search"]["kind"] != "web_search" {
		t.Errorf("web_search marshals as %v", got["web_search"])
	}
	if _, ok := got["web_fetch"]["base_url"]; ok {
		t.Errorf("web_fetch marshals with another kind's key: %v", got["web_fetch"])
	}
}
