package toolbox

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentrunner/agentrunner/config"
	"github.com/agentrunner/agentrunner/examples/crypton"
	"github.com/agentrunner/agentrunner/tool"
	"github.com/agentrunner/agentrunner/tool/bird"
	"github.com/agentrunner/agentrunner/tool/indicators"
	"github.com/google/go-cmp/cmp"
)

func example(t *testing.T, provider string) *config.Config {
	t.Helper()
	dir := t.TempDir()
	if _, err := crypton.Write(dir, true, provider); err != nil {
		t.Fatal(err)
	}
	cfg, err := Builtin().Load(filepath.Join(dir, config.FileName))
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

func noEnv(string) (string, bool) { return "", false }

func TestInUseCountsOnlyAgentsThatCallTools(t *testing.T) {
	if got := InUse(example(t, "mock")); got == nil || len(got) != 0 {
		t.Errorf("mock agents: InUse = %#v, want an empty, non-nil list", got)
	}
	want := []string{"bird", "current_position", "memory_append", "memory_search", "technical_indicators", "web_fetch", "web_search"}
	if diff := cmp.Diff(want, InUse(example(t, "openai"))); diff != "" {
		t.Errorf("openai agents (-want +got):\n%s", diff)
	}
}

// TestProgramsOfTools: a tool that runs a program names it, as its
// settings give it; the others name none.
func TestProgramsOfTools(t *testing.T) {
	cfg := example(t, "openai")
	custom := *cfg.Tools["bird"]
	custom.Name = "bird_custom"
	custom.Settings = &bird.Settings{Binary: "/opt/bird/bin/bird"}
	cfg.Tools["bird_custom"] = &custom
	install := "npm install -g @steipete/bird@0.8.0"
	cases := []struct {
		tool string
		want []Program
	}{
		{"bird", []Program{{Name: "bird", Install: install}}},
		{"bird_custom", []Program{{Name: "/opt/bird/bin/bird", Install: install}}},
		{"web_search", nil},
		{"no_such_tool", nil},
	}
	for _, tc := range cases {
		if diff := cmp.Diff(tc.want, Programs(cfg, nil, tc.tool)); diff != "" {
			t.Errorf("Programs(%s) (-want +got):\n%s", tc.tool, diff)
		}
	}
}

func TestBuildNamesWhatIsMissing(t *testing.T) {
	cfg := example(t, "openai")
	cfg.Tools["web_fetch"].Kind = "web_scraper"
	_, err := Build(context.Background(), cfg, []string{"web_search", "current_position"}, Deps{LookupEnv: noEnv, Now: time.Now})
	var ps config.Problems
	if !errors.As(err, &ps) {
		t.Fatalf("err = %v, want Problems", err)
	}
	text := ps.Error()
	for _, want := range []string{
		`tools.web_fetch.kind: no implementation of kind "web_scraper" (built-in kinds: bird, capsule_bulk_delete, `,
		`, technical_indicators, todo_list_read, todo_list_write, web_fetch, web_search)`,
		"tools.web_search: ", "BRAVE_API_KEY",
		"tools.current_position: current_position reads the Execution Service: set execution_service.url",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("problems lack %q:\n%s", want, text)
		}
	}
	if strings.Contains(text, "tools.bird") || strings.Contains(text, "tools.technical_indicators") {
		t.Errorf("a tool not in use was built:\n%s", text)
	}
}

func TestBuildAppliesTheConfiguration(t *testing.T) {
	cfg := example(t, "mock")
	ti := cfg.Tools["technical_indicators"]
	set := ti.Settings.(*indicators.Settings)
	set.Provider, set.DataDir = "csv", "market-data" // relative: to the configuration file
	// Values unlike the implementation's defaults, so the test sees where
	// each one comes from.
	four := 4
	ti.Description = "Indicators, as configured."
	ti.Timeout = config.Duration(7 * time.Second)
	ti.Retries = &config.Retries{Max: &four, Backoff: []config.Duration{config.Duration(3 * time.Second)}}
	ti.Breaker = config.Breaker{Failures: 2, OpenFor: config.Duration(90 * time.Second)}
	// A second declaration of the kind under another key, built in code
	// without the name configuration loading fills in.
	ta := *ti
	ta.Name = ""
	cfg.Tools["ta"] = &ta
	if err := os.Mkdir(filepath.Join(cfg.Dir, "market-data"), 0o755); err != nil {
		t.Fatal(err)
	}
	box, err := Build(context.Background(), cfg, []string{"technical_indicators", "ta"}, Deps{LookupEnv: noEnv, Now: time.Now})
	if err != nil {
		t.Fatal(err)
	}
	defer box.Close()
	for _, name := range []string{"technical_indicators", "ta"} {
		spec, ok := box.Registry.Spec(name)
		if !ok {
			t.Fatalf("%s is not registered", name)
		}
		if !strings.Contains(string(spec.Parameters), `"timeframe"`) {
			t.Errorf("%s: spec does not carry the built-in schema: %s", name, spec.Parameters)
		}
		spec.Parameters = nil
		want := tool.Spec{Name: name, Description: "Indicators, as configured.", Timeout: 7 * time.Second, Retries: 4, Backoff: 3 * time.Second,
			BreakerFailures: 2, BreakerOpenFor: 90 * time.Second}
		if diff := cmp.Diff(want, spec); diff != "" {
			t.Errorf("%s: spec (-want +got):\n%s", name, diff)
		}
	}
	if len(box.Registry.Specs()) != 2 {
		t.Errorf("%d tools built, want only the two asked for", len(box.Registry.Specs()))
	}
}

func TestBuildReportsABadOverride(t *testing.T) {
	cfg := example(t, "mock")
	cfg.Tools["technical_indicators"].Timeout = config.Duration(-time.Second)
	_, err := Build(context.Background(), cfg, []string{"technical_indicators"}, Deps{LookupEnv: noEnv, Now: time.Now})
	want := `tools.technical_indicators: tool "technical_indicators": timeout must be positive, got -1s`
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("err = %v, want one containing %q", err, want)
	}
}

func TestBuildChecksSchemasOfToolsNotBuilt(t *testing.T) {
	cfg := example(t, "mock")
	cfg.Tools["bird"].Parameters = config.JSON(`{"type":"object","properties":{"limit":{"type":"integer","minimum":"one"}}}`)
	_, err := Build(context.Background(), cfg, []string{}, Deps{LookupEnv: noEnv, Now: time.Now})
	if err == nil || !strings.Contains(err.Error(), "tools.bird.parameters") {
		t.Fatalf("err = %v, want a problem with the schema of bird", err)
	}
}

func TestDescribeReportsEachTool(t *testing.T) {
	cfg := example(t, "mock")
	infos := Describe(context.Background(), cfg, Deps{LookupEnv: noEnv, Now: time.Now})
	byName := map[string]Info{}
	for _, in := range infos {
		byName[in.Name] = in
	}
	if len(byName) != 7 {
		t.Fatalf("%d tools described, want the 7 declared", len(byName))
	}
	if byName["web_search"].Err == nil || !strings.Contains(byName["web_search"].Err.Error(), "BRAVE_API_KEY") {
		t.Errorf("web_search without a key: %v", byName["web_search"].Err)
	}
	if in := byName["technical_indicators"]; in.Err != nil || in.Spec.Timeout != 10*time.Second {
		t.Errorf("technical_indicators: %+v", in)
	}
	if diff := cmp.Diff([]string{"analysis", "plan", "research"}, byName["technical_indicators"].Agents); diff != "" {
		t.Errorf("agents of technical_indicators (-want +got):\n%s", diff)
	}
}
