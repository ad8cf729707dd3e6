package workspace_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/agentrunner/agentrunner/config"
	"github.com/agentrunner/agentrunner/examples/crypton"
	"github.com/agentrunner/agentrunner/workspace"
)

// writeExample writes the shipped example workspace into a fresh directory
// and returns the path of its agentrunner.yaml.
func writeExample(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	if _, err := crypton.Write(dir, true, ""); err != nil {
		t.Fatalf("write example workspace: %v", err)
	}
	return filepath.Join(dir, config.FileName)
}

func loadConfig(t *testing.T, path string) *config.Config {
	t.Helper()
	cfg, err := config.Load(path)
	if err != nil {
		t.Fatalf("config.Load(%s): %v", path, err)
	}
	return cfg
}

// edit rewrites a file of the example, failing the test if old is not in it,
// so a change to the example cannot silently turn a case into a no-op.
func edit(t *testing.T, path, old, new string) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(data), old) {
		t.Fatalf("%s does not contain %q", path, old)
	}
	if err := os.WriteFile(path, []byte(strings.Replace(string(data), old, new, 1)), 0o644); err != nil {
		t.Fatal(err)
	}
}

func remove(t *testing.T, path string) {
	t.Helper()
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
}

func TestLoadShippedExample(t *testing.T) {
	path := writeExample(t)
	dir := filepath.Dir(path)
	ws, err := workspace.Load(loadConfig(t, path))
	if err != nil {
		t.Fatalf("the shipped example does not load: %v", err)
	}

	type agentSummary struct {
		IdentityStart string
		TemplatePath  string
		SchemaPath    string
		HasTemplate   bool
		HasContract   bool
	}
	got := map[string]agentSummary{}
	for name, a := range ws.Agents {
		if a.Name != name {
			t.Errorf("agent under key %q is named %q", name, a.Name)
		}
		first, _, _ := strings.Cut(a.Identity, "\n")
		got[name] = agentSummary{
			IdentityStart: first,
			TemplatePath:  a.TemplatePath,
			SchemaPath:    a.SchemaPath,
			HasTemplate:   len(a.Template) > 0,
			HasContract:   a.Contract != nil,
		}
	}
	tmpl := func(f string) string { return filepath.Join(dir, "output_templates", f) }
	want := map[string]agentSummary{
		"plan":       {"# Plan Agent", tmpl("plan.md"), "", true, true},
		"research":   {"# Research Agent", tmpl("research.md"), "", true, true},
		"analysis":   {"# Analysis Agent", tmpl("analysis.md"), "", true, true},
		"synthesis":  {"# Synthesis Agent", tmpl("strategy.json"), tmpl("strategy.schema.json"), true, true},
		"evaluation": {"# Evaluation Agent", tmpl("evaluation.md"), "", true, true},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("agents (-want +got):\n%s", diff)
	}

	var tools []string
	for name, section := range ws.Tools {
		tools = append(tools, name)
		if !strings.HasPrefix(section, "## "+name+"\n") {
			t.Errorf("section of tool %s does not start with its heading: %.40q", name, section)
		}
		if strings.Contains(section, "\n## ") {
			t.Errorf("section of tool %s runs into the next section", name)
		}
	}
	slices.Sort(tools)
	if diff := cmp.Diff([]string{"bird", "current_position", "memory_append", "memory_search", "technical_indicators", "web_fetch", "web_search"}, tools); diff != "" {
		t.Errorf("tool sections (-want +got):\n%s", diff)
	}

	if !strings.HasPrefix(string(ws.MemoryTemplate), "# Memory — {{agent}}") {
		t.Errorf("memory template starts with %.40q, want the example's memory.md", ws.MemoryTemplate)
	}
	if want := filepath.Join(dir, "artifacts"); ws.Layout.Root != want {
		t.Errorf("Layout.Root = %s, want %s", ws.Layout.Root, want)
	}
	if diff := cmp.Diff([]string{"plan", "research", "analyze", "synthesize", "execute", "evaluate"}, ws.Config.LoopSteps()); diff != "" {
		t.Errorf("step order (-want +got):\n%s", diff)
	}
	if p := ws.Producer("strategy.json"); p == nil || p.Name != "synthesis" {
		t.Errorf("Producer(strategy.json) = %v, want the synthesis agent", p)
	}
	if p := ws.Producer("nothing.md"); p != nil {
		t.Errorf("Producer(nothing.md) = %s, want nil", p.Name)
	}
}

// TestLoadReportsEveryProblemWithItsLine breaks the example in six ways at
// once and expects one Load to name all of them, each at the line of the
// agentrunner.yaml key that refers to the broken file.
func TestLoadReportsEveryProblemWithItsLine(t *testing.T) {
	path := writeExample(t)
	dir := filepath.Dir(path)
	in := func(f string) string { return filepath.Join(dir, filepath.FromSlash(f)) }

	remove(t, in("agent_prompts/research_agent.md"))
	remove(t, in("output_templates/evaluation.md"))
	// bird is a tool of plan and research: both must be reported.
	edit(t, in("tools.md"), "## bird\n", "## bird_removed\n")
	edit(t, path, `section: "Handoff to Synthesis"`, `section: "Handoff to Nowhere"`)
	edit(t, in("output_templates/strategy.schema.json"), `"minLength": 20,
      "maxLength": 2000
    },
    "market_view"`, `"minLength": 500,
      "maxLength": 2000
    },
    "market_view"`)
	edit(t, path, "\n  evaluation:\n", `
  cycles:
    identity: agent_prompts/plan_agent.md
    output: {file: spare.md, template: output_templates/plan.md}

  evaluation:
`)

	_, err := workspace.Load(loadConfig(t, path))
	var problems config.Problems
	if !errors.As(err, &problems) {
		t.Fatalf("Load returned %v, want config.Problems", err)
	}
	got := slices.Clone(problems) // messages are blanked below; err keeps them for the report
	at := func(line, col int) string { return fmt.Sprintf("%s:%d:%d", path, line, col) }
	// The example grows: each problem's line is found, not pinned.
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	nowhere := lineOf(t, data, "Handoff to Nowhere")
	research := lineOf(t, data, "identity: agent_prompts/research_agent.md")
	want := config.Problems{
		{Where: at(research, 5), Key: "agents.research.identity", Message: "file agent_prompts/research_agent.md does not exist"},
		{Where: at(lineOf(t, data, "output: {file: evaluation.md"), 35), Key: "agents.evaluation.output.template", Message: "file output_templates/evaluation.md does not exist"},
		{Where: at(lineOf(t, data, "identity: agent_prompts/plan_agent.md")+2, 36), Key: "agents.plan.tools[2]", Message: `tool "bird" has no "## bird" section in tools.md`},
		{Where: at(research+2, 36), Key: "agents.research.tools[2]", Message: `tool "bird" has no "## bird" section in tools.md`},
		{Where: at(nowhere, 44), Key: "pipeline.steps.analyze.deliver[0].section", Message: `output_templates/analysis.md has no section "Handoff to Nowhere"`},
		{Where: at(lineOf(t, data, "template: output_templates/strategy.json"), 7), Key: "agents.synthesis.output.template"},
		{Where: at(lineOf(t, data, "\n  cycles:\n")+1, 3), Key: "agents.cycles", Message: `"cycles" is reserved for a folder of the artifacts dir; choose another agent name`},
	}
	// The schema problem quotes the artifact package's wording, so it is
	// checked for what it must say rather than pinned whole.
	mustSay := map[string][]string{
		"agents.synthesis.output.template": {"output_templates/strategy.json", "output_templates/strategy.schema.json", "/summary", "500"},
	}
	for i := range got {
		if words, ok := mustSay[got[i].Key]; ok {
			for _, w := range words {
				if !strings.Contains(got[i].Message, w) {
					t.Errorf("problem %s: message %q does not say %q", got[i].Key, got[i].Message, w)
				}
			}
			got[i].Message = ""
		}
	}
	byKey := cmpopts.SortSlices(func(a, b config.Problem) bool { return a.Key < b.Key })
	if diff := cmp.Diff(want, got, byKey); diff != "" {
		t.Errorf("problems (-want +got):\n%s\nall problems:\n%v", diff, err)
	}
}

// TestLoadNoToolsNeedsNoToolsFile checks that a workspace whose agents use
// no tools does not need tools.md, and that one without memory agents does
// not need the memory template.
func TestLoadNoToolsNeedsNoToolsFile(t *testing.T) {
	dir := t.TempDir()
	files := map[string]string{
		"agentrunner.yaml": `version: 1
name: tiny
providers: {mock: {kind: mock}}
defaults: {provider: mock}
agents:
  writer:
    identity: writer.md
    output: {file: note.md, template: note.md}
pipeline:
  start: write
  steps:
    write: {agent: writer, next: end}
`,
		"writer.md": "# Writer\n\nWrite a note.\n",
		"note.md":   "# Note\n\n## Body\n\n{{body}}\n",
	}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	ws, err := workspace.Load(loadConfig(t, filepath.Join(dir, "agentrunner.yaml")))
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	if len(ws.Tools) != 0 || ws.MemoryTemplate != nil {
		t.Errorf("Tools = %v, MemoryTemplate = %q; want none of either", ws.Tools, ws.MemoryTemplate)
	}
	if ws.Agents["writer"].Contract == nil {
		t.Error("writer has no contract")
	}
}

func TestLoadEmptyIdentityIsAProblem(t *testing.T) {
	path := writeExample(t)
	if err := os.WriteFile(filepath.Join(filepath.Dir(path), "agent_prompts", "plan_agent.md"), []byte(" \n\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := workspace.Load(loadConfig(t, path))
	var got config.Problems
	if !errors.As(err, &got) {
		t.Fatalf("Load returned %v, want config.Problems", err)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	line := lineOf(t, data, "identity: agent_prompts/plan_agent.md")
	want := config.Problems{{Where: fmt.Sprintf("%s:%d:5", path, line), Key: "agents.plan.identity", Message: "file agent_prompts/plan_agent.md is empty"}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("problems (-want +got):\n%s", diff)
	}
}

// lineOf returns the line, counted from 1, where needle first starts in data.
func lineOf(t *testing.T, data []byte, needle string) int {
	t.Helper()
	i := strings.Index(string(data), needle)
	if i < 0 {
		t.Fatalf("the example has no %q", needle)
	}
	return 1 + strings.Count(string(data[:i]), "\n")
}
