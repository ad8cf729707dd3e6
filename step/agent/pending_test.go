package agent

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/agentrunner/agentrunner"
	"github.com/agentrunner/agentrunner/artifact"
	"github.com/agentrunner/agentrunner/mailbox"
	"github.com/agentrunner/agentrunner/view"
	"github.com/google/go-cmp/cmp"
)

// TestPendingViewsAreWrittenBeforeTheAgentReadsThem: the scheduler
// writes views in the background, so an agent can start while the view
// of its input and its mailbox file are still waiting to be written. The
// kind settles them first: the agent reads what the store has, and that
// is no repair.
func TestPendingViewsAreWrittenBeforeTheAgentReadsThem(t *testing.T) {
	e := newEnv(t)
	views := view.NewWriter()
	release := views.Hold() // the background is behind
	defer release()

	const plan = "# Plan\n\nThe committed plan.\n"
	e.storeArtifact(t, "plan.md", plan)
	planPath := filepath.Join(e.run.Dir, "plan.md")
	os.Remove(planPath)
	stored := &agentrunner.StoredFile{Kind: agentrunner.FileArtifact, Name: "plan.md", Data: []byte(plan), SHA256: artifact.Hash([]byte(plan))}
	views.Add(planPath, func() { view.Write(planPath, stored) })

	ctx := context.Background()
	for i, body := range []string{"first", "second"} {
		d, err := e.boxes.Deposit("research", mailbox.Message{ID: body, Time: t0, From: "plan", Kind: mailbox.Forward, Body: body})
		if err != nil {
			t.Fatal(err)
		}
		if err := e.store.Apply(ctx, &agentrunner.Change{Mail: []*agentrunner.MailDeposit{d}}); err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			e.boxes.Sync(ctx, e.store, "research") // written; the second is pending
		}
	}
	views.Add(e.boxes.Path("research"), func() { e.boxes.Sync(ctx, e.store, "research") })

	var input string
	var mail []string
	rt := agentFunc(func(ctx context.Context, inv *agentrunner.Invocation) (*agentrunner.RunResult, error) {
		data, _ := os.ReadFile(inv.Inputs[0].Path)
		input = string(data)
		msgs, _ := mailbox.ReadFile(inv.MailboxPath)
		for _, m := range msgs {
			mail = append(mail, m.Body)
		}
		return e.mock.Run(ctx, inv)
	})
	k, err := New(Options{Workspace: e.ws, Mailboxes: e.boxes, Store: e.store, Clock: e.clock, Views: views,
		Runtimes: map[string]agentrunner.Runtime{"mock": rt}})
	if err != nil {
		t.Fatal(err)
	}
	res, err := k.Run(ctx, e.attempt(t))
	if err != nil {
		t.Fatal(err)
	}
	if input != plan {
		t.Errorf("the agent read plan.md as %q, want the stored %q", input, plan)
	}
	if diff := cmp.Diff([]string{"first", "second"}, mail); diff != "" {
		t.Errorf("the mailbox the agent read (-want +got):\n%s", diff)
	}
	for _, ev := range res.Events {
		if ev.Type == agentrunner.EventViewRepaired {
			t.Errorf("a pending view was repaired, not settled: %+v", ev.Details)
		}
	}
	if n := views.Pending(); n != 0 {
		t.Errorf("%d views still pending, want both settled", n)
	}
}

// TestAFileAgentFindsItsRunDirectory: the scheduler makes a run's
// directory in the background; an agent that works with files (it may
// write in its run's directory) starts only once the directory is there,
// even while the background is behind.
func TestAFileAgentFindsItsRunDirectory(t *testing.T) {
	e := newEnv(t)
	views := view.NewWriter()
	release := views.Hold()
	defer release()
	if err := os.RemoveAll(e.run.Dir); err != nil {
		t.Fatal(err)
	}
	views.Add(e.run.Dir, func() { os.MkdirAll(e.run.Dir, 0o755) })
	var found error
	rt := agentFunc(func(ctx context.Context, inv *agentrunner.Invocation) (*agentrunner.RunResult, error) {
		_, found = os.Stat(inv.CycleDir)
		return e.mock.Run(ctx, inv)
	})
	k, err := New(Options{Workspace: e.ws, Mailboxes: e.boxes, Store: e.store, Clock: e.clock, Views: views,
		Runtimes: map[string]agentrunner.Runtime{"mock": rt}})
	if err != nil {
		t.Fatal(err)
	}
	a := e.attempt(t)
	s := e.ws.Config.Pipeline.Steps["plan"] // no input from its run: nothing read makes the directory
	a.Step = &agentrunner.Step{ID: s.ID, Kind: agentrunner.KindAgent, Config: s}
	a.StepRun.Step, a.Attempt.Step, a.Attempt.Agent = s.ID, s.ID, s.Agent
	if _, err := k.Run(context.Background(), a); err != nil {
		t.Fatal(err)
	}
	if found != nil {
		t.Errorf("the agent's run directory, while its making was pending: %v", found)
	}
}
