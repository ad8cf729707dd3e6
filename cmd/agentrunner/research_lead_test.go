package main

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/agentrunner/agentrunner/artifact"
)

// TestDemoOfTheResearchLead: the demo runs the lead and three sub-agents
// on the scripted model; its output shows each sub-agent's start and end
// with its usage, the to-do list's two versions and answer.md's path, and
// answer.md satisfies the example's template.
func TestDemoOfTheResearchLead(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "research")
	code, stdout, stderr := cliRun(t, "demo", "--example", "research-lead", "--dir", dir)
	if code != exitOK {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	var started, ended []string
	for _, m := range regexp.MustCompile(`(?m)^  sub-agent (research-task-\d+) started: (\w+) \(tool budget 6\)$`).FindAllStringSubmatch(stdout, -1) {
		started = append(started, m[2])
	}
	for _, m := range regexp.MustCompile(`(?m)^  sub-agent (research-task-\d+) completed: (\w+), 1 attempt\(s\), 2300/640 tokens in/out, 1 tool call\(s\)$`).FindAllStringSubmatch(stdout, -1) {
		ended = append(ended, m[2])
	}
	want := []string{"benchmarks", "candidates", "operations"}
	slices.Sort(started)
	slices.Sort(ended)
	if !slices.Equal(started, want) || !slices.Equal(ended, want) {
		t.Errorf("sub-agents started %v, ended %v; want %v each\n%s", started, ended, want, stdout)
	}
	for _, line := range []string{
		"  | run research-000001, to-do list version 1, ",
		"  | [pending] t1  Which open-source vector databases claim billion-vector scale?",
		"  | run research-000001, to-do list version 2, ",
		"  | [done] t3  What does running one at that scale take?",
		"  |     answered: memory/operations.md",
		"run research-000001 completed",
	} {
		if !strings.Contains(stdout, "\n"+line) {
			t.Errorf("the output has no line %q:\n%s", line, stdout)
		}
	}
	// The first version is printed before any sub-agent starts, the
	// second after they all ended.
	if v1, first, last, v2 := strings.Index(stdout, "version 1,"), strings.Index(stdout, "started: "), strings.LastIndex(stdout, "completed: "), strings.Index(stdout, "version 2,"); !(v1 < first && last < v2) {
		t.Errorf("the to-do versions are not printed around the sub-agents:\n%s", stdout)
	}
	m := regexp.MustCompile(`(?m)^answer: +(\S+)$`).FindStringSubmatch(stdout)
	if m == nil || filepath.Base(m[1]) != "answer.md" {
		t.Fatalf("the output names no answer.md:\n%s", stdout)
	}
	answer, err := os.ReadFile(m[1])
	if err != nil {
		t.Fatal(err)
	}
	contract, err := artifact.Load(filepath.Join(dir, "output_templates", "answer.md"), "")
	if err != nil {
		t.Fatal(err)
	}
	if err := artifact.Check(contract, "answer.md", answer); err != nil {
		t.Errorf("answer.md: %v\n%s", err, answer)
	}
	// The lead read the three reports its sub-agents wrote into its run.
	for _, name := range want {
		if _, err := os.Stat(filepath.Join(filepath.Dir(m[1]), "memory", name+".md")); err != nil {
			t.Errorf("report %s: %v", name, err)
		}
	}
	if !strings.Contains(string(answer), "The lead read 3 report(s)") {
		t.Errorf("the answer does not come from the three reports:\n%s", answer)
	}
}

// TestInitOfTheResearchLead: init writes the example with its agents on
// openai (the default) or anthropic, and it validates once the keys are
// set; another provider is refused.
func TestInitOfTheResearchLead(t *testing.T) {
	t.Setenv("OPENAI_API_KEY", "sk-test")
	t.Setenv("ANTHROPIC_API_KEY", "sk-ant-test")
	t.Setenv("BRAVE_API_KEY", "brave-test")
	for _, tc := range []struct {
		args     []string
		provider string
	}{
		{nil, "openai"},
		{[]string{"--provider", "openai"}, "openai"},
		{[]string{"--provider", "anthropic"}, "anthropic"},
	} {
		dir := filepath.Join(t.TempDir(), "rl")
		code, stdout, stderr := cliRun(t, append([]string{"init", dir, "--example", "research-lead"}, tc.args...)...)
		if code != exitOK || !strings.Contains(stdout, "model agents on the "+tc.provider+" provider") || !strings.Contains(stdout, "agent_prompts/lead.md") {
			t.Fatalf("init %v: exit %d\n%s%s", tc.args, code, stdout, stderr)
		}
		data, err := os.ReadFile(cliConfigPath(dir))
		if err != nil || !strings.Contains(string(data), "\n  provider: "+tc.provider+" ") {
			t.Errorf("init %v: the defaults do not name %s: %v", tc.args, tc.provider, err)
		}
		code, stdout, stderr = cliRun(t, "validate", "-c", cliConfigPath(dir))
		if code != exitOK || !strings.Contains(stdout, "pipeline research (1 steps, from lead), pipeline research-task (1 steps, from research)") {
			t.Errorf("validate after init %v: exit %d\n%s%s", tc.args, code, stdout, stderr)
		}
	}
	code, _, stderr := cliRun(t, "init", filepath.Join(t.TempDir(), "rl"), "--example", "research-lead", "--provider", "mock")
	if code == exitOK || !strings.Contains(stderr, "openai (the default) or anthropic") {
		t.Errorf("init --provider mock: exit %d, %s", code, stderr)
	}
}
