package e2e

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentrunner/agentrunner"
	"github.com/agentrunner/agentrunner/execsvc"
	"github.com/agentrunner/agentrunner/sqlite"
)

// TestProcessAgentUsesToolsOverMCP runs a cycle whose research agent is a
// child process standing in for a coding-agent CLI: it reads the MCP
// configuration the runner wrote for its attempt, starts `agentrunner mcp`,
// and calls a tool through it. The call runs through the runner's executor
// and is recorded as an event of that attempt.
func TestProcessAgentUsesToolsOverMCP(t *testing.T) {
	agent := filepath.Join(t.TempDir(), "mcpagent")
	build := exec.Command("go", "build", "-o", agent, "./testdata/mcpagent")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build the stand-in agent: %v\n%s", err, out)
	}
	dir := t.TempDir()
	if out, err := exec.Command(binary, "init", dir).CombinedOutput(); err != nil {
		t.Fatalf("init: %v\n%s", err, out)
	}
	data := filepath.Join(dir, "market-data")
	os.Mkdir(data, 0o755)
	writeCandles(t, data)
	cfgPath := filepath.Join(dir, "agentrunner.yaml")
	raw, _ := os.ReadFile(cfgPath)
	s := strings.Replace(string(raw), "  mock: {kind: mock}", "  mock: {kind: mock}\n  agentcli: {kind: process, command: ["+agent+"]}", 1)
	s = strings.Replace(s, "    provider: binance\n", "    provider: csv\n    data_dir: "+data+"\n", 1)
	os.WriteFile(cfgPath, []byte(s), 0o644)

	es := execsvc.NewMock(execsvc.MockOptions{CompletedAfter: 1, Token: "es-token-e2e-secret"})
	url, err := es.Start("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer es.Close()
	cmd := exec.Command(binary, "run", "--once", "-c", cfgPath)
	// The runner's secrets: none may reach the agent, its MCP configuration
	// or the runner's MCP server it starts, which still serves its tool.
	secrets := []string{"ES_TOKEN_E2E=es-token-e2e-secret", "OPENAI_API_KEY=sk-openai-e2e-secret", "BRAVE_API_KEY=brave-e2e-secret",
		"AGENTRUNNER_KEY_ALICE=alice-e2e-secret", "AGENTRUNNER_TEST_SECRET=test-e2e-secret"}
	cmd.Env = append(os.Environ(), "AGENTRUNNER_AGENTS_RESEARCH_PROVIDER=agentcli", "AGENTRUNNER_AGENTS_RESEARCH_TOOLS=technical_indicators",
		"AGENTRUNNER_EXECUTION_SERVICE_URL="+url, "AGENTRUNNER_EXECUTION_SERVICE_POLL_INTERVAL=20ms",
		"AGENTRUNNER_EXECUTION_SERVICE_TOKEN_ENV=ES_TOKEN_E2E")
	cmd.Env = append(cmd.Env, secrets...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("run --once: %v\n%s", err, out)
	}
	store, err := sqlite.Open(context.Background(), filepath.Join(dir, "artifacts", "state.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	cycles, _ := store.Cycles(context.Background(), agentrunner.CycleFilter{})
	if len(cycles) != 1 || cycles[0].Status != agentrunner.CycleCompleted {
		t.Fatalf("cycles %+v\n%s", cycles, out)
	}
	c := cycles[0]
	evs, _ := store.Events(context.Background(), agentrunner.EventFilter{CycleID: c.ID})
	var calls []*agentrunner.Event
	for _, e := range evs {
		if e.Type == "tool.call" {
			calls = append(calls, e)
		}
	}
	if len(calls) != 1 || calls[0].Details["tool"] != "technical_indicators" || calls[0].Agent != "research" ||
		calls[0].Step != "research" || calls[0].Details["is_error"] != false {
		t.Fatalf("tool.call events of the cycle: %+v", calls)
	}
	attemptDir := filepath.Join(dir, "artifacts", "attempts", c.ID, "research-1")
	if _, err := os.Stat(filepath.Join(attemptDir, "mcp.json")); err != nil {
		t.Errorf("no MCP configuration in the attempt folder: %v", err)
	}
	for _, file := range []string{"env.txt", "mcp.json"} {
		data, err := os.ReadFile(filepath.Join(attemptDir, file))
		if err != nil {
			t.Fatal(err)
		}
		for _, kv := range secrets {
			if name, value, _ := strings.Cut(kv, "="); strings.Contains(string(data), value) {
				t.Errorf("the runner's %s reached the agent's %s", name, file)
			}
		}
	}
	stdout, _ := os.ReadFile(filepath.Join(attemptDir, "stdout.log"))
	if !strings.Contains(string(stdout), "tools offered: technical_indicators") || !strings.Contains(string(stdout), `"asset":"BTC"`) {
		t.Errorf("the agent's view of the tools:\n%s", stdout)
	}
}
