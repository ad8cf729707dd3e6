package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentrunner/agentrunner"
	"github.com/agentrunner/agentrunner/config"
	"github.com/agentrunner/agentrunner/sqlite"
)

// TestInitWithAProviderAndItsKeys: init --provider puts every agent on it,
// and validate names every variable and program the agents then need
// (FR-139).
func TestInitWithAProviderAndItsKeys(t *testing.T) {
	for _, tt := range []struct{ provider, keyEnv, kind string }{
		{"openai", "OPENAI_API_KEY", config.ProviderOpenAI},
		{"anthropic", "ANTHROPIC_API_KEY", config.ProviderAnthropic},
	} {
		t.Run(tt.provider, func(t *testing.T) {
			t.Setenv(tt.keyEnv, "")
			t.Setenv("BRAVE_API_KEY", "")
			dir := filepath.Join(t.TempDir(), "ws")
			code, stdout, stderr := cliRun(t, "init", "--provider", tt.provider, dir)
			if code != exitOK || !strings.Contains(stdout, tt.keyEnv) {
				t.Fatalf("init: exit %d\n%s%s", code, stdout, stderr)
			}
			cfg, err := config.Load(cliConfigPath(dir))
			if err != nil {
				t.Fatal(err)
			}
			for name, a := range cfg.Agents {
				if cfg.Providers[a.Provider].Kind != tt.kind || a.Model == "" {
					t.Errorf("agent %s: provider %s, model %q", name, a.Provider, a.Model)
				}
			}
			code, _, stderr = cliRun(t, "validate", "-c", cliConfigPath(dir))
			if code != exitFailure {
				t.Errorf("validate without keys: exit %d, want %d", code, exitFailure)
			}
			for _, want := range []string{"environment variable " + tt.keyEnv + " is not set", "BRAVE_API_KEY", "bird"} {
				if !strings.Contains(stderr, want) {
					t.Errorf("validate does not name %q:\n%s", want, stderr)
				}
			}
		})
	}
	code, _, stderr := cliRun(t, "init", "--provider", "gemini", t.TempDir())
	if code != exitUsage || !strings.Contains(stderr, "choose mock, openai, anthropic or process") {
		t.Errorf("unknown provider: exit %d\n%s", code, stderr)
	}
}

// cliCandles writes daily BTC candles for the csv market-data provider.
func cliCandles(t *testing.T, dir string) {
	var b strings.Builder
	b.WriteString("open_time,open,high,low,close,volume\n")
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for i := 0; i < 120; i++ {
		p := 50000 + float64(i%17)*150
		fmt.Fprintf(&b, "%s,%.1f,%.1f,%.1f,%.1f,%d\n", start.AddDate(0, 0, i).Format(time.RFC3339), p, p+300, p-300, p+50, 100+i)
	}
	os.MkdirAll(dir, 0o755)
	if err := os.WriteFile(filepath.Join(dir, "BTC_1d.csv"), []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestToolsListAndCall(t *testing.T) {
	t.Setenv("BRAVE_API_KEY", "")
	dir := cliExample(t)
	cfg := cliConfigPath(dir)
	cliEdit(t, cfg, "    provider: binance\n", "    provider: csv\n    data_dir: market-data\n")
	cliCandles(t, filepath.Join(dir, "market-data"))

	code, stdout, stderr := cliRun(t, "tools", "list", "-c", cfg)
	if code != exitOK {
		t.Fatalf("tools list: exit %d\n%s", code, stderr)
	}
	for _, want := range []string{"technical_indicators", "10s", "analysis,plan,research", "web_search", "unavailable", "BRAVE_API_KEY"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("tools list lacks %q:\n%s", want, stdout)
		}
	}
	code, stdout, _ = cliRun(t, "tools", "list", "--json", "-c", cfg)
	var rows []struct {
		Name       string          `json:"name"`
		Parameters json.RawMessage `json:"parameters"`
		Error      string          `json:"error"`
	}
	if code != exitOK || json.Unmarshal([]byte(stdout), &rows) != nil || len(rows) != 7 { // the five domain tools, memory_append and memory_search
		t.Fatalf("tools list --json: exit %d\n%s", code, stdout)
	}

	code, stdout, stderr = cliRun(t, "tools", "call", "-c", cfg, "technical_indicators", `{"asset":"BTC","timeframe":"1d","indicators":["rsi"]}`)
	var res agentrunner.ToolResult
	if code != exitOK || json.Unmarshal([]byte(stdout), &res) != nil || res.IsError || !strings.Contains(res.Message, "rsi") {
		t.Fatalf("tools call: exit %d\n%s%s", code, stdout, stderr)
	}
	code, stdout, _ = cliRun(t, "tools", "call", "-c", cfg, "technical_indicators", `{"asset":"BTC","timeframe":"2d"}`)
	if code != exitFailure || !strings.Contains(stdout, `"isError": true`) || !strings.Contains(stdout, "/timeframe") {
		t.Errorf("a call with bad arguments: exit %d\n%s", code, stdout)
	}
	code, _, stderr = cliRun(t, "tools", "call", "-c", cfg, "web_search", `{"query":"btc"}`)
	if code != exitFailure || !strings.Contains(stderr, "BRAVE_API_KEY") {
		t.Errorf("a tool without its key: exit %d\n%s", code, stderr)
	}

	store, err := sqlite.Open(context.Background(), filepath.Join(dir, "artifacts", "state.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	evs, _ := store.Events(context.Background(), agentrunner.EventFilter{})
	var calls int
	for _, e := range evs {
		if e.Type == "tool.call" && e.Agent == "operator" {
			calls++
		}
	}
	if calls != 2 {
		t.Errorf("%d tool.call events recorded for the operator, want 2", calls)
	}
}

// TestProcessAgentIsPassedTheKeysOfItsTools: a process agent's tools run in
// its environment, so validate refuses a tool whose key the agent's env
// does not pass, and accepts it once passed.
func TestProcessAgentIsPassedTheKeysOfItsTools(t *testing.T) {
	t.Setenv("BRAVE_API_KEY", "brave-key-of-the-runner")
	dir := filepath.Join(t.TempDir(), "ws")
	if code, stdout, stderr := cliRun(t, "init", dir); code != exitOK {
		t.Fatalf("init: exit %d\n%s%s", code, stdout, stderr)
	}
	raw, err := os.ReadFile(cliConfigPath(dir))
	if err != nil {
		t.Fatal(err)
	}
	withCLI := strings.Replace(string(raw), "  mock: {kind: mock}", "  mock: {kind: mock}\n  agentcli: {kind: process, command: [sh, -c, exit]}", 1)
	if err := os.WriteFile(cliConfigPath(dir), []byte(withCLI), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv("AGENTRUNNER_AGENTS_RESEARCH_PROVIDER", "agentcli")
	t.Setenv("AGENTRUNNER_AGENTS_RESEARCH_TOOLS", "web_fetch,web_search")
	code, _, stderr := cliRun(t, "validate", "-c", cliConfigPath(dir))
	want := "agents.research.tools[1]: web_search needs BRAVE_API_KEY, which this process agent's env does not pass"
	if code != exitFailure || !strings.Contains(stderr, want) {
		t.Errorf("validate: exit %d, want %d and %q:\n%s", code, exitFailure, want, stderr)
	}

	t.Setenv("AGENTRUNNER_AGENTS_RESEARCH_ENV_PASS", "BRAVE_API_KEY")
	if code, stdout, stderr := cliRun(t, "validate", "-c", cliConfigPath(dir)); code != exitOK {
		t.Errorf("validate with the key passed: exit %d\n%s%s", code, stdout, stderr)
	}
}
