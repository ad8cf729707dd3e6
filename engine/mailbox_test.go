package engine

import (
	"context"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/agentrunner/agentrunner"
	"github.com/agentrunner/agentrunner/execsvc"
	"github.com/agentrunner/agentrunner/mailbox"
	"github.com/agentrunner/agentrunner/scheduler"
	"github.com/agentrunner/agentrunner/view"
)

// start starts e as a restarted runner does and stops it once the
// scheduler has read the store back: the start's checks are done.
func (f *fixture) start(e *Engine) {
	f.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- e.Run(ctx) }()
	select {
	case <-e.Scheduler().Ready():
	case err := <-done:
		cancel()
		f.t.Fatalf("the engine stopped before it was ready: %v", err)
	case <-time.After(30 * time.Second):
		f.t.Fatal("the engine was not ready")
	}
	cancel()
	if err := <-done; err != nil {
		f.t.Fatalf("Run: %v", err)
	}
}

// mailboxAsStored checks that agent's mailbox file is the view of the
// store's messages.
func (f *fixture) mailboxAsStored(boxes *mailbox.Mailboxes, agent string) {
	f.t.Helper()
	lines, err := f.store.Mailbox(context.Background(), agent)
	if err != nil || len(lines) == 0 {
		f.t.Fatalf("the stored mailbox of %s: %d messages, %v", agent, len(lines), err)
	}
	data, err := os.ReadFile(boxes.Path(agent))
	if err != nil {
		f.t.Fatalf("the mailbox file of %s: %v", agent, err)
	}
	if diff := cmp.Diff(string(mailbox.Render(lines)), string(data)); diff != "" {
		f.t.Errorf("the mailbox file of %s (-store +file):\n%s", agent, diff)
	}
}

// repairedMailboxes are "agent:reason" of the view.repaired events of
// mailboxes the start made (they name no run).
func (f *fixture) repairedMailboxes() []string {
	var out []string
	for _, ev := range f.eventsOf(agentrunner.EventViewRepaired) {
		if box, ok := ev.Details["mailbox"].(string); ok && ev.CycleID == "" {
			out = append(out, box+":"+ev.Details["reason"].(string))
		}
	}
	slices.Sort(out)
	return out
}

// TestMailboxFilesAreRewrittenAtStart: a cycle's messages are committed
// and their mailbox files written after the commit. A kill between the
// commit and the file write (the file deleted after the run), and files
// cut short or edited by hand, are found at the next start and rewritten
// from the store, each with a view.repaired event.
func TestMailboxFilesAreRewrittenAtStart(t *testing.T) {
	f := newFixture(t, execsvc.MockOptions{}, nil)
	e := f.engine()
	if c := f.runOnce(e); c.Status != agentrunner.CycleCompleted {
		t.Fatalf("cycle %s: %s", c.Status, c.Error)
	}
	agents := []string{"analysis", "evaluation", "plan", "research", "synthesis"}
	for _, agent := range agents {
		f.mailboxAsStored(e.boxes, agent)
	}
	if err := os.Remove(e.boxes.Path("analysis")); err != nil { // killed before the write
		t.Fatal(err)
	}
	if err := os.Truncate(e.boxes.Path("plan"), 20); err != nil {
		t.Fatal(err)
	}
	forged := `{"id":"x","time":"2026-11-22T14:00:00Z","from":"plan","kind":"forward","body":"forged"}` + "\n"
	if err := os.WriteFile(e.boxes.Path("research"), []byte(forged), 0o644); err != nil {
		t.Fatal(err)
	}
	if got := f.repairedMailboxes(); len(got) != 0 {
		t.Fatalf("repairs before the restart: %v", got)
	}

	restarted := f.engine()
	f.start(restarted)
	want := []string{"analysis:" + view.Missing, "plan:" + view.Different, "research:" + view.Different}
	if diff := cmp.Diff(want, f.repairedMailboxes()); diff != "" {
		t.Errorf("mailboxes repaired at start (-want +got):\n%s", diff)
	}
	for _, agent := range agents {
		f.mailboxAsStored(restarted.boxes, agent)
	}
}

// TestMailboxFilesFromBeforeAreImported: a workspace whose mailboxes were
// only files (written before the store kept them) has their messages
// imported into the store at start, with an event, so none is lost; the
// next cycle's messages are added to them.
func TestMailboxFilesFromBeforeAreImported(t *testing.T) {
	f := newFixture(t, execsvc.MockOptions{}, nil)
	legacy := `{"id":"20261121_140000/analysis/backward/research","time":"2026-11-21T14:30:00Z","from":"analysis","kind":"backward","cycle_id":"20261121_140000","body":"dig into funding"}` + "\n" +
		`{"id":"inject-7","time":"2026-11-21T15:00:00+01:00","from":"operator:alice","kind":"inject","body":"skip SOL"}` + "\n"
	e := f.engine()
	if err := os.WriteFile(e.boxes.Path("research"), []byte(legacy), 0o644); err != nil {
		t.Fatal(err)
	}
	f.start(e)
	msgs, err := e.boxes.Read("research", 0)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, m := range msgs {
		ids = append(ids, m.ID)
	}
	// The start may also begin the cycle that is due, whose plan step,
	// let finish by the stop, adds its message after the imported ones.
	want := []string{"20261121_140000/analysis/backward/research", "inject-7"}
	if diff := cmp.Diff(want, ids[:min(len(ids), len(want))]); diff != "" {
		t.Errorf("the research mailbox after the start (-want +got):\n%s", diff)
	}
	f.mailboxAsStored(e.boxes, "research")
	imported := f.eventsOf(scheduler.EventMailboxImported)
	if len(imported) != 1 || imported[0].Agent != "research" || imported[0].Details["messages"] != 2 {
		t.Errorf("mailbox.imported events: %+v", imported)
	}

	// The messages are the store's now: a cycle adds to them, and a
	// second start imports nothing again.
	f.toNextCycle()
	if c := f.runOnce(f.engine()); c.Status != agentrunner.CycleCompleted {
		t.Fatalf("cycle %s: %s", c.Status, c.Error)
	}
	lines, err := f.store.Mailbox(context.Background(), "research")
	if err != nil || len(lines) < 3 || !slices.ContainsFunc(lines, func(l []byte) bool {
		return string(l) == `{"id":"inject-7","time":"2026-11-21T14:00:00Z","from":"operator:alice","kind":"inject","body":"skip SOL"}`
	}) {
		t.Errorf("the stored research mailbox after a cycle: %q, %v", lines, err)
	}
	f.start(f.engine())
	if n := len(f.eventsOf(scheduler.EventMailboxImported)); n != 1 {
		t.Errorf("%d mailbox.imported events after a second start, want 1", n)
	}
}
