package engine

import (
	"context"
	"testing"

	"github.com/agentrunner/agentrunner"
	"github.com/agentrunner/agentrunner/config"
	"github.com/agentrunner/agentrunner/execsvc"
	"github.com/google/go-cmp/cmp"
)

// TestExecutionStepInAGraph: a pipeline under pipelines: hands its
// strategy to the Execution Service through the same execution step kind
// as the learning loop, on the same scheduler, beside the loop's cycle
// that its schedule starts.
func TestExecutionStepInAGraph(t *testing.T) {
	f := newFixture(t, execsvc.MockOptions{CompletedAfter: 1}, func(c *config.Config) {
		steps := map[string]*config.Step{}
		for id, s := range c.Pipeline.Steps {
			cp := *s
			steps[id] = &cp
		}
		c.Pipelines = map[string]*config.Pipeline{"trade": {Name: "trade", Start: c.Pipeline.Start, RunID: "timestamp", Steps: steps}}
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
	id, err := e.Scheduler().Start(ctx, "trade", nil)
	if err != nil {
		t.Fatal(err)
	}
	var r *agentrunner.Run
	waitFor(t, "the run of trade to end", func() bool {
		r, err = f.store.Run(context.Background(), id)
		return err == nil && r.Status.Finished()
	})
	if r.Status != agentrunner.RunCompleted {
		t.Fatalf("run %s %s: %s", id, r.Status, r.Error)
	}
	steps, err := f.store.StepRuns(context.Background(), agentrunner.StepRunFilter{RunID: id})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, sr := range steps {
		got = append(got, sr.Key()+":"+string(sr.Status))
	}
	want := []string{"plan#1:succeeded", "research#1:succeeded", "analyze#1:succeeded", "synthesize#1:succeeded", "execute#1:succeeded", "evaluate#1:succeeded"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("step runs (-want +got):\n%s", diff)
	}
	var notified int
	for _, ev := range f.eventsOf("execution.notified") {
		if ev.CycleID == id {
			notified++
		}
	}
	if notified != 1 {
		t.Errorf("run %s handed %d strategies to the Execution Service, want 1", id, notified)
	}
}
