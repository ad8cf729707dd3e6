package engine

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentrunner/agentrunner"
	"github.com/agentrunner/agentrunner/config"
	"github.com/agentrunner/agentrunner/execsvc"
	"github.com/agentrunner/agentrunner/runtime/mock"
	"github.com/google/go-cmp/cmp"
)

// edit changes a file of the fixture's workspace.
func (f *fixture) edit(name, old, new string) {
	f.t.Helper()
	path := filepath.Join(f.dir, name)
	data, err := os.ReadFile(path)
	if err != nil {
		f.t.Fatal(err)
	}
	if !strings.Contains(string(data), old) {
		f.t.Fatalf("%s has no %q", name, old)
	}
	if err := os.WriteFile(path, []byte(strings.Replace(string(data), old, new, 1)), 0o644); err != nil {
		f.t.Fatal(err)
	}
}

// TestReloadTakesPromptsAndSchedule: a reload given while plan runs takes
// effect at the next step: research gets its new identity, and the schedule
// and timeouts change; the loop goes on.
func TestReloadTakesPromptsAndSchedule(t *testing.T) {
	f := newFixture(t, execsvc.MockOptions{}, nil)
	e := f.engine()
	var researchPrompt string
	f.onRun = func(inv *agentrunner.Invocation) {
		switch inv.Step {
		case "plan":
			f.edit("agent_prompts/research_agent.md", "# ", "# Reloaded: mind the funding rates.\n\n# ")
			f.edit(config.FileName, "  every: 6h", "  every: 8h")
			f.edit(config.FileName, "    timeout: 45m", "    timeout: 50m")
			f.command(e, agentrunner.CommandReload, "root", nil)
		case "research":
			researchPrompt = inv.Prompt
		}
	}
	c := f.runOnce(e)
	if c.Status != agentrunner.CycleCompleted {
		t.Fatalf("cycle %s (%s)", c.Status, c.Error)
	}
	if !strings.Contains(researchPrompt, "Reloaded: mind the funding rates.") {
		t.Error("research ran with its old identity after the reload")
	}
	if got := e.Config().Schedule.Every.D(); got != 8*time.Hour {
		t.Errorf("schedule.every %s after the reload, want 8h", got)
	}
	if got := e.Config().Agents["research"].Timeout.D(); got != 50*time.Minute {
		t.Errorf("research timeout %s, want 50m", got)
	}
	if diff := cmp.Diff([]string{"reload:reloaded " + filepath.Join(f.dir, config.FileName)}, f.audit()); diff != "" {
		t.Errorf("audit (-want +got):\n%s", diff)
	}
	if len(f.eventsOf(EventReloaded)) != 1 {
		t.Error("no config.reloaded event")
	}
}

// TestReloadTakesAContract: a reload given while plan runs changes
// research's output template; research's attempt is invoked with the new
// contract, which an artifact of the old template breaks, and its
// artifact follows the new one.
func TestReloadTakesAContract(t *testing.T) {
	f := newFixture(t, execsvc.MockOptions{}, nil)
	reloaded := make(chan struct{})
	e := f.engineWith(func(o *Options) {
		record := o.OnEvent
		o.OnEvent = func(ev *agentrunner.Event) {
			record(ev)
			if ev.Type == EventReloaded {
				close(reloaded)
			}
		}
	})
	old, err := os.ReadFile(filepath.Join(f.dir, "output_templates/research.md"))
	if err != nil {
		t.Fatal(err)
	}
	var research *agentrunner.Invocation
	f.onRun = func(inv *agentrunner.Invocation) {
		switch inv.Step {
		case "plan":
			f.edit("output_templates/research.md", "## ", "## Risks\n\n{{risks}}\n\n## ")
			f.command(e, agentrunner.CommandReload, "root", nil)
			// The plan's agent is still running: the reload applies
			// between two passes of the scheduler, before research opens.
			select {
			case <-reloaded:
			case <-time.After(10 * time.Second):
				t.Error("the reload was not applied while plan ran")
			}
		case "research":
			research = inv
		}
	}
	c := f.runOnce(e)
	if c.Status != agentrunner.CycleCompleted {
		t.Fatalf("cycle %s (%s)", c.Status, c.Error)
	}
	if diff := cmp.Diff([]string{"reload:reloaded " + filepath.Join(f.dir, config.FileName)}, f.audit()); diff != "" {
		t.Errorf("audit (-want +got):\n%s", diff)
	}
	stale := mock.Generate(old, ".md", c.ID, "research", t0)
	if ps := research.Output.Problems(stale); !strings.Contains(strings.Join(ps, "\n"), "Risks") {
		t.Errorf("research's contract after the reload takes an artifact of the old template: problems %q", ps)
	}
	if data, _ := os.ReadFile(filepath.Join(c.Dir, "research.md")); !strings.Contains(string(data), "## Risks") {
		t.Error("research.md does not follow the reloaded template")
	}
}

// TestReloadRefusesWhatNeedsARestart: changes built into the running
// process, or an invalid file, leave everything as it was and say why.
func TestReloadRefusesWhatNeedsARestart(t *testing.T) {
	tests := []struct {
		name       string
		file, old  string
		new        string
		wantResult string
	}{
		{"an agent's tools", config.FileName, "    tools: [current_position]\n    inputs:\n      - {artifact: analysis.md",
			"    tools: [current_position, web_search]\n    inputs:\n      - {artifact: analysis.md",
			"ignored: these changes need a restart: agents"},
		{"the server's address", config.FileName, "server:\n  listen: 127.0.0.1:8080", "server:\n  listen: 127.0.0.1:9999",
			"ignored: these changes need a restart: server"},
		{"a provider's model", config.FileName, "    model: gpt-4.1", "    model: gpt-5",
			"ignored: these changes need a restart: providers"},
		{"the graph", config.FileName, "      next: evaluate\n      deliver:\n        - {kind: status",
			"      next: end\n      deliver:\n        - {kind: status",
			"ignored: the configuration is not valid: "},
		{"a broken prompt file name", config.FileName, "identity: agent_prompts/plan_agent.md", "identity: agent_prompts/planner.md",
			"ignored: the configuration is not valid: "},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, execsvc.MockOptions{}, nil)
			e := f.engine()
			before := e.Config()
			f.edit(tt.file, tt.old, tt.new)
			f.command(e, agentrunner.CommandReload, "root", nil)
			if c := f.runOnce(e); c.Status != agentrunner.CycleCompleted {
				t.Fatalf("cycle %s (%s)", c.Status, c.Error)
			}
			got := f.audit()
			if len(got) != 1 || !strings.HasPrefix(got[0], "reload:"+tt.wantResult) {
				t.Errorf("audit %q, want a result starting %q", got, tt.wantResult)
			}
			if e.Config() != before {
				t.Error("a refused reload replaced the configuration")
			}
		})
	}
}

// TestReloadWithoutALoader: an engine that cannot reload says so.
func TestReloadWithoutALoader(t *testing.T) {
	f := newFixture(t, execsvc.MockOptions{}, nil)
	e := f.engineWith(func(o *Options) { o.Reload = nil })
	f.command(nil, agentrunner.CommandReload, "root", nil)
	f.runOnce(e)
	if got := f.audit(); len(got) != 1 || got[0] != "reload:ignored: this runner cannot reload its configuration" {
		t.Errorf("audit %q", got)
	}
}
