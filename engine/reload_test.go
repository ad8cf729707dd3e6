package engine

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
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
	if evs := f.eventsOf(EventReloaded); len(evs) != 1 || evs[0].Details["kept"] != nil || evs[0].Details["changed"] != nil {
		t.Errorf("config.reloaded events %v, want one that changes no graph and keeps no cycle on its own", evs)
	}
}

// TestReloadTakesAContract: a reload given while plan runs changes
// research's output template; research's attempt is invoked with the new
// contract, which an artifact of the old template breaks, and its
// artifact follows the new one.
func TestReloadTakesAContract(t *testing.T) {
	f := newFixture(t, execsvc.MockOptions{}, nil)
	e, reloaded := f.engineTellingReload()
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
		{"a graph with a step that nothing reaches", config.FileName, "      next: evaluate\n      deliver:\n        - {kind: status",
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

// executeStep is the example loop's execute step.
const executeStep = `    execute:
      kind: execution
      artifact: strategy.json
      validity: {from: /validity/valid_from, until: /validity/valid_until}
      next: evaluate
      deliver:
        - {kind: status, to: [evaluation]}
`

// TestReloadChangesTheLoopsGraphFromTheNextCycle: a reload given while
// plan runs takes the execute step out of the loop. The cycle in flight
// finishes on its graph, execute included; the next cycle goes from
// synthesize to evaluate. The reload's event says the loop changed and
// that the cycle kept its graph.
func TestReloadChangesTheLoopsGraphFromTheNextCycle(t *testing.T) {
	f := newFixture(t, execsvc.MockOptions{}, nil)
	e := f.engine()
	var cycle string
	f.onRun = func(inv *agentrunner.Invocation) {
		if inv.Step == "plan" && cycle == "" {
			cycle = inv.CycleID
			f.edit(config.FileName, "      next: execute\n", "      next: evaluate\n")
			f.edit(config.FileName, executeStep, "")
			f.command(e, agentrunner.CommandReload, "root", nil)
			waitFor(t, "the reload", func() bool { return len(f.eventsOf(EventReloaded)) == 1 })
		}
	}
	first := f.runOnce(e)
	if first.Status != agentrunner.CycleCompleted {
		t.Fatalf("cycle %s (%s)", first.Status, first.Error)
	}
	if got := f.audit(); len(got) != 1 || got[0] != "reload:reloaded "+filepath.Join(f.dir, config.FileName) {
		t.Fatalf("audit %q, want the reload applied", got)
	}
	if !slices.Contains(f.attempts(first.ID), "execute#1:succeeded") {
		t.Errorf("the cycle in flight at the reload skipped execute: %q", f.attempts(first.ID))
	}
	ev := f.eventsOf(EventReloaded)[0]
	if diff := cmp.Diff(map[string]any{"changed": []string{"crypton"}, "kept": []string{first.ID}}, map[string]any{"changed": ev.Details["changed"], "kept": ev.Details["kept"]}); diff != "" {
		t.Errorf("config.reloaded details (-want +got):\n%s", diff)
	}
	f.toNextCycle()
	second := f.runOnce(e)
	if second.Status != agentrunner.CycleCompleted {
		t.Fatalf("second cycle %s (%s)", second.Status, second.Error)
	}
	for _, a := range f.attempts(second.ID) {
		if strings.HasPrefix(a, "execute#") {
			t.Errorf("the cycle after the reload ran execute: %q", f.attempts(second.ID))
		}
	}
}

// TestReloadRefusesAChangedDocument: the scheduler refuses a reload that
// moves a pipeline's document, and the engine keeps the configuration it
// had: nothing of a refused reload is applied.
func TestReloadRefusesAChangedDocument(t *testing.T) {
	f := newFixture(t, execsvc.MockOptions{}, nil)
	f.edit(config.FileName, "\npipeline:\n", "\npipelines:\n  notes:\n    start: note\n    run_id: date-seq\n    max_concurrent_runs: 1\n    document: {file: docs/notes.md, archive: docs/notes}\n"+
		"    steps:\n      note: {agent: plan, next: end}\n\npipeline:\n")
	var err error
	if f.ws, err = f.reload(); err != nil {
		t.Fatal(err)
	}
	e := f.engine()
	before := e.Config()
	f.edit(config.FileName, "docs/notes.md", "docs/other.md")
	f.command(e, agentrunner.CommandReload, "root", nil)
	if c := f.runOnce(e); c.Status != agentrunner.CycleCompleted {
		t.Fatalf("cycle %s (%s)", c.Status, c.Error)
	}
	if got, want := f.audit(), []string{"reload:ignored: the document of pipeline notes changed: that needs a restart"}; !slices.Equal(got, want) {
		t.Errorf("audit %q, want %q", got, want)
	}
	if e.Config() != before {
		t.Error("a reload the scheduler refused replaced the engine's configuration")
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

// taggedRuntime runs the fixture's mock agent and records, as each run
// ends, the step it ran and the runtime's tag: which runtime an attempt
// finished on.
type taggedRuntime struct {
	tag  string
	rt   agentrunner.Runtime
	runs *[]string
	mu   *sync.Mutex
}

func (r taggedRuntime) Run(ctx context.Context, inv *agentrunner.Invocation) (*agentrunner.RunResult, error) {
	res, err := r.rt.Run(ctx, inv)
	r.mu.Lock()
	*r.runs = append(*r.runs, inv.Step+":"+r.tag)
	r.mu.Unlock()
	return res, err
}

// ReturnsOutput keeps the mock's in-memory artifacts.
func (r taggedRuntime) ReturnsOutput() {}

// tagged wraps each runtime of a set under tag.
func tagged(tag string, rts map[string]agentrunner.Runtime, runs *[]string, mu *sync.Mutex) map[string]agentrunner.Runtime {
	out := map[string]agentrunner.Runtime{}
	for name, rt := range rts {
		out[name] = taggedRuntime{tag: tag + "-" + name, rt: rt, runs: runs, mu: mu}
	}
	return out
}

// reloadable engine: a fixture with a second mock provider, other, and
// an engine that builds tagged runtimes ("old-", then "new-") for each
// configuration, or fails with build's error.
func reloadableEngine(t *testing.T, build func(*config.Config) error) (*fixture, *Engine, func() []string) {
	f := newFixture(t, execsvc.MockOptions{}, nil)
	f.edit(config.FileName, "  mock: {kind: mock}", "  mock: {kind: mock}\n  other: {kind: mock}")
	var err error
	if f.ws, err = f.reload(); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var runs []string
	e := f.engineWith(func(o *Options) {
		rt := o.Runtimes["mock"]
		base := map[string]agentrunner.Runtime{"mock": rt, "other": rt}
		o.Runtimes = tagged("old", base, &runs, &mu)
		o.BuildRuntimes = func(cfg *config.Config) (map[string]agentrunner.Runtime, error) {
			if err := build(cfg); err != nil {
				return nil, err
			}
			return tagged("new", base, &runs, &mu), nil
		}
	})
	return f, e, func() []string {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(runs)
	}
}

// TestReloadMovesAgentsToAnotherProvider: a reload given while plan runs
// moves every agent (defaults.provider) from mock to other; plan finishes
// on the runtime it started with, and the next steps run on the runtime
// built for the new configuration.
func TestReloadMovesAgentsToAnotherProvider(t *testing.T) {
	var builds int
	f, e, runs := reloadableEngine(t, func(cfg *config.Config) error {
		builds++
		if got := cfg.Agents["research"].Provider; got != "other" {
			t.Errorf("runtimes built for research on %q, want other", got)
		}
		return nil
	})
	f.onRun = func(inv *agentrunner.Invocation) {
		if inv.Step == "plan" {
			f.edit(config.FileName, "  provider: mock ", "  provider: other ")
			f.command(e, agentrunner.CommandReload, "root", nil)
			waitFor(t, "the reload", func() bool { return len(f.eventsOf(EventReloaded)) == 1 })
		}
	}
	c := f.runOnce(e)
	if c.Status != agentrunner.CycleCompleted {
		t.Fatalf("cycle %s (%s)", c.Status, c.Error)
	}
	got := runs()
	if len(got) < 2 || got[0] != "plan:old-mock" || got[1] != "research:new-other" {
		t.Errorf("runs %q, want plan on old-mock, then research on new-other", got)
	}
	if builds != 1 {
		t.Errorf("runtimes built %d times, want 1", builds)
	}
	if got := e.Config().Agents["research"].Provider; got != "other" {
		t.Errorf("research's provider %q after the reload, want other", got)
	}
}

// TestReloadRefusesRuntimesThatCannotBeBuilt: when the runtimes of the
// new configuration cannot be built (a provider's key missing), the
// reload is refused with the problem, and the agents keep their
// provider and runtime.
func TestReloadRefusesRuntimesThatCannotBeBuilt(t *testing.T) {
	f, e, runs := reloadableEngine(t, func(*config.Config) error {
		return config.Problems{{Key: "providers.other.api_key_env", Message: "environment variable OTHER_KEY is not set"}}
	})
	before := e.Config()
	f.edit(config.FileName, "  provider: mock ", "  provider: other ")
	f.command(e, agentrunner.CommandReload, "root", nil)
	if c := f.runOnce(e); c.Status != agentrunner.CycleCompleted {
		t.Fatalf("cycle %s (%s)", c.Status, c.Error)
	}
	got := f.audit()
	if len(got) != 1 || !strings.HasPrefix(got[0], "reload:ignored: the agents' runtimes cannot be built: ") || !strings.Contains(got[0], "OTHER_KEY") {
		t.Errorf("audit %q, want the reload refused for OTHER_KEY", got)
	}
	if e.Config() != before {
		t.Error("a refused reload replaced the configuration")
	}
	for _, run := range runs() {
		if !strings.HasSuffix(run, ":old-mock") {
			t.Errorf("run %s after a refused reload, want every step on old-mock", run)
		}
	}
}

// TestReloadStillRefusesAddedAgents: with runtimes that can be rebuilt,
// an agent added still needs a restart (the scheduler keeps a mailbox per
// agent it started with).
func TestReloadStillRefusesAddedAgents(t *testing.T) {
	f, e, _ := reloadableEngine(t, func(*config.Config) error { return nil })
	f.edit(config.FileName, "agents:\n", "agents:\n  extra:\n    identity: agent_prompts/plan_agent.md\n    output: {file: extra.md, template: output_templates/plan.md}\n")
	f.command(e, agentrunner.CommandReload, "root", nil)
	if c := f.runOnce(e); c.Status != agentrunner.CycleCompleted {
		t.Fatalf("cycle %s (%s)", c.Status, c.Error)
	}
	if got := f.audit(); len(got) != 1 || got[0] != "reload:ignored: these changes need a restart: "+agentNames {
		t.Errorf("audit %q", got)
	}
}

// TestARunOnceThatReloadsStartsNoScheduledRun: the scheduler of a run
// --once has no schedules, and a reload keeps it so: the pipelines it
// takes have none either, and no other cycle starts.
func TestARunOnceThatReloadsStartsNoScheduledRun(t *testing.T) {
	f := newFixture(t, execsvc.MockOptions{}, nil)
	e, reloaded := f.engineTellingReload()
	var scheduled []string
	f.onRun = func(inv *agentrunner.Invocation) {
		if inv.Step != "plan" {
			return
		}
		f.edit(config.FileName, "  every: 6h", "  every: 1m")
		f.command(e, agentrunner.CommandReload, "root", nil)
		select {
		case <-reloaded:
		case <-time.After(10 * time.Second):
			t.Error("the reload was not applied while plan ran")
		}
		for name, p := range e.active.Load().Pipelines() {
			if p.Scheduled() {
				scheduled = append(scheduled, name)
			}
		}
		f.clock.Advance(time.Hour) // a fire of every 1m is due
	}
	if c := f.runOnce(e); c.Status != agentrunner.CycleCompleted {
		t.Fatalf("cycle %s (%s)", c.Status, c.Error)
	}
	if len(scheduled) != 0 {
		t.Errorf("pipelines with a schedule after the reload of a run --once: %v", scheduled)
	}
	if runs, err := f.store.Runs(context.Background(), agentrunner.RunFilter{}); err != nil || len(runs) != 1 {
		t.Errorf("%d runs (%v), want the one cycle", len(runs), err)
	}
}

// engineTellingReload is f's engine and a channel closed once a reload
// was applied.
func (f *fixture) engineTellingReload() (*Engine, <-chan struct{}) {
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
	return e, reloaded
}
