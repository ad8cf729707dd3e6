package engine

import (
	"context"
	"os"
	"strings"
	"testing"

	"github.com/agentrunner/agentrunner"
	"github.com/agentrunner/agentrunner/config"
	"github.com/agentrunner/agentrunner/execsvc"
	capsulestep "github.com/agentrunner/agentrunner/step/capsule"
)

// TestCapsuleStepInAGraph: the engine registers the capsule step kind on
// its store, under the workspace's size cap: a graph's capsule step
// stores the plan as a capsule of the workspace, and publishes its text
// as the step's artifact.
func TestCapsuleStepInAGraph(t *testing.T) {
	const text = "## Objective\nTrade well.\n\n## Status\nPlanned in run {{run_id}}.\n\n## Decisions\n{{artifact:plan.md}}\n\n" +
		"## Next actions\n- research\n\n## Key locations\n- plan.md\n\n## Open questions\n- none\n"
	f := newFixture(t, execsvc.MockOptions{}, func(c *config.Config) {
		if err := os.WriteFile(c.Abs("checkpoint.md"), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		c.Pipelines = map[string]*config.Pipeline{"plans": {Name: "plans", Start: "plan", RunID: "seq", Steps: map[string]*config.Step{
			"plan": {ID: "plan", Kind: config.StepAgent, Agent: "plan", Next: "keep"},
			"keep": {ID: "keep", Kind: config.StepCapsule, Next: config.EndStep,
				Capsule: &config.CapsuleStep{Name: "plan-{run_id}", Phase: "checkpoint", Text: "checkpoint.md"}},
		}}}
	})
	e := f.engine()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- e.Run(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	}()
	id, err := e.Scheduler().Start(ctx, "plans", nil)
	if err != nil {
		t.Fatal(err)
	}
	var r *agentrunner.Run
	waitFor(t, "the run of plans to end", func() bool {
		r, err = f.store.Run(context.Background(), id)
		return err == nil && r.Status.Finished()
	})
	if r.Status != agentrunner.RunCompleted {
		t.Fatalf("run %s %s: %s", id, r.Status, r.Error)
	}
	c, err := f.store.CapsuleByName(context.Background(), f.ws.Config.Name, "plan-"+id)
	if err != nil || c.Version != 1 || c.Phase != "checkpoint" || !strings.Contains(c.Text, "Planned in run "+id) || !strings.Contains(c.Text, "# Plan") {
		t.Fatalf("the capsule %+v (%v), want version 1 of the plan", c, err)
	}
	files, err := f.store.Files(context.Background(), agentrunner.FileFilter{RunID: id, Step: "keep", Kind: agentrunner.FileArtifact})
	if err != nil || len(files) != 1 || files[0].Name != "keep.capsule.md" || string(files[0].Data) != c.Text {
		t.Errorf("the step's artifact %v (%v), want keep.capsule.md holding the capsule's text", files, err)
	}
	if evs := f.eventsOf(capsulestep.EventStored); len(evs) != 1 || evs[0].Details["changed"] != true {
		t.Errorf("%s events %v, want one that changed the capsule", capsulestep.EventStored, evs)
	}
}
