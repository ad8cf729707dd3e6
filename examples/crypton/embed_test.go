package crypton_test

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/agentrunner/agentrunner"
	"github.com/agentrunner/agentrunner/config"
	"github.com/agentrunner/agentrunner/examples/crypton"
	"github.com/agentrunner/agentrunner/workspace"
	"github.com/google/go-cmp/cmp"
)

// load writes the example with opts and loads it as `agentrunner
// validate` does: the configuration, then the files it names.
func load(t *testing.T, opts ...crypton.Option) (string, *config.Config) {
	t.Helper()
	dir := t.TempDir()
	if _, err := crypton.Write(dir, true, "", opts...); err != nil {
		t.Fatal(err)
	}
	c, err := config.Load(filepath.Join(dir, config.FileName))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := workspace.Load(c); err != nil {
		t.Fatal(err)
	}
	return dir, c
}

// TestWriteParallel: with Parallel, the example is written in its parallel
// shape (FR-168/169) and is valid: research and analyze branch off plan,
// synthesize joins them, the analysis reads this cycle's plan and the last
// cycle's research, the synthesis this cycle's research, and the prompts
// say so.
func TestWriteParallel(t *testing.T) {
	dir, c := load(t, crypton.Parallel)
	loop := c.Loop()
	if got := loop.Steps["plan"].Then; !slices.Equal(got, []string{"research", "analyze"}) {
		t.Errorf("plan's then = %v, want [research analyze]", got)
	}
	if loop.Steps["synthesize"].Join != agentrunner.JoinAll || loop.Steps["research"].Next != "synthesize" || loop.Steps["analyze"].Next != "synthesize" {
		t.Errorf("research %+v, analyze %+v, synthesize %+v", loop.Steps["research"], loop.Steps["analyze"], loop.Steps["synthesize"])
	}
	want := []string{"plan.md", "research.md (history: last 1)", "memory analysis"}
	if diff := cmp.Diff(want, inputs(c.Agents["analysis"])); diff != "" {
		t.Errorf("analysis inputs (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"analysis.md", "research.md"}, inputs(c.Agents["synthesis"])); diff != "" {
		t.Errorf("synthesis inputs (-want +got):\n%s", diff)
	}
	for file, text := range map[string]string{
		"agent_prompts/analysis_agent.md":  "this cycle's research is not written yet",
		"agent_prompts/synthesis_agent.md": "which the analysis has not seen",
		"agent_prompts/research_agent.md":  "it reads this handoff in the next cycle",
	} {
		if data, _ := os.ReadFile(filepath.Join(dir, file)); !strings.Contains(string(data), text) {
			t.Errorf("%s does not say %q", file, text)
		}
	}
}

// TestWriteDefault: without options the example is written as embedded
// (the chain), but for the provider line.
func TestWriteDefault(t *testing.T) {
	dir, c := load(t)
	if diff := cmp.Diff([]string{"plan", "research", "analyze", "synthesize", "execute", "evaluate"}, c.LoopSteps()); diff != "" {
		t.Errorf("steps (-want +got):\n%s", diff)
	}
	err := fs.WalkDir(crypton.Files, ".", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		want, _ := fs.ReadFile(crypton.Files, path)
		got, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(path)))
		if err == nil && string(got) != string(want) {
			t.Errorf("%s differs from the embedded file", path)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}

// inputs names an agent's inputs.
func inputs(a *config.Agent) []string {
	var out []string
	for _, in := range a.Inputs {
		switch {
		case in.Memory != "":
			out = append(out, "memory "+in.Memory)
		case in.History != nil:
			out = append(out, fmt.Sprintf("%s (history: last %d)", in.Artifact, in.History.Last))
		default:
			out = append(out, in.Artifact)
		}
	}
	return out
}
