package toolbox

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentrunner/agentrunner"
	"github.com/agentrunner/agentrunner/config"
	"github.com/agentrunner/agentrunner/subagent"
	"github.com/agentrunner/agentrunner/tool"
)

const subagentWorkspace = `version: 1
name: leads
providers:
  mock: {kind: mock}
defaults: {provider: mock}
tools:
  subagent_run: {kind: subagent_run, pipeline: %PIPELINE%, max_parallel: 2}
agents:
  lead: {identity: agent.md, tools: [subagent_run], output: {file: answer.md, template: note.md}}
  researcher: {identity: agent.md, output: {file: result.md, template: note.md}}
pipelines:
  research:
    start: lead
    steps: {lead: {agent: lead, next: end}}
  research-task:
    start: research
    steps: {research: {agent: researcher, next: end}}
`

func subagentConfig(t *testing.T, pipeline string) string {
	t.Helper()
	dir := t.TempDir()
	for name, body := range map[string]string{
		config.FileName: strings.ReplaceAll(subagentWorkspace, "%PIPELINE%", pipeline),
		"agent.md":      "# Agent\n",
		"note.md":       "# Note\n\n## Body\n<!-- x -->\n",
	} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return filepath.Join(dir, config.FileName)
}

// TestSubagentRunNamesAPipeline: the pipeline of subagent_run is checked
// when the configuration is read, and the tool built without a launcher
// (agentrunner mcp, validate) says that sub-agents do not run there.
func TestSubagentRunNamesAPipeline(t *testing.T) {
	_, err := Builtin().Load(subagentConfig(t, "nope"))
	if err == nil || !strings.Contains(err.Error(), `tools.subagent_run.pipeline: no pipeline "nope" under pipelines: (there are research, research-task)`) {
		t.Errorf("a pipeline that is not there: %v", err)
	}
	cfg, err := Builtin().Load(subagentConfig(t, "research-task"))
	if err != nil {
		t.Fatal(err)
	}
	if s, ok := cfg.Tools["subagent_run"].Settings.(*subagent.Settings); !ok || s.Pipeline != "research-task" || s.Parallel() != 2 {
		t.Errorf("settings %#v", cfg.Tools["subagent_run"].Settings)
	}
	box, err := Build(context.Background(), cfg, nil, Deps{})
	if err != nil {
		t.Fatal(err)
	}
	defer box.Close()
	spec, ok := box.Registry.Spec("subagent_run")
	if !ok || spec.Timeout != subagent.DefaultTimeout {
		t.Errorf("spec %+v", spec)
	}
	scope := tool.NewExecutor(box.Registry, tool.Options{}).Scope([]string{"subagent_run"})
	res := scope.Execute(context.Background(), agentrunner.ToolCall{ID: "1", Name: "subagent_run", CycleID: "research-000001", Step: "lead",
		Arguments: json.RawMessage(`{"task": {"task_name": "a", "prompt": "p", "description": "d", "tool_budget": 1}}`)})
	if !res.IsError || !strings.Contains(res.Message, "agentrunner mcp cannot start them") {
		t.Errorf("a call without a launcher: %+v", res)
	}
}
