package scheduler

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/agentrunner/agentrunner"
	"github.com/agentrunner/agentrunner/mailbox"
	"github.com/agentrunner/agentrunner/sqlite"
)

var t0 = time.Date(2026, 11, 22, 14, 0, 0, 0, time.UTC)

// sent is the result of an attempt of run that sent one message to
// agent, with its mailbox.delivered event.
func sent(run, agent, id, line string) *agentrunner.StepResult {
	return &agentrunner.StepResult{
		Mail: []*agentrunner.MailDeposit{{Agent: agent, ID: id, Line: []byte(line), Keep: 5}},
		Events: []*agentrunner.Event{{Timestamp: t0, Type: agentrunner.EventMailboxDelivered, CycleID: run,
			Details: map[string]any{"to": agent, "id": id}}},
	}
}

// TestOneBatchDeliversEveryBranchAndNoFailure: parallel branches of a run
// whose attempts end together commit in one batch, as one unit (their
// changes merged); each one's message to the same mailbox is kept, and
// the mailbox's file, written once after the commit, holds both. A failed attempt in the same batch delivers
// nothing, and records no delivery.
func TestOneBatchDeliversEveryBranchAndNoFailure(t *testing.T) {
	ctx := context.Background()
	store, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "state.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	boxes, err := mailbox.New(t.TempDir(), 5)
	if err != nil {
		t.Fatal(err)
	}
	s, err := New(Options{Store: store, Mailboxes: boxes,
		RunDir: func(p, id string) string { return t.TempDir() }, AttemptDir: func(string, string, int) string { return t.TempDir() }})
	if err != nil {
		t.Fatal(err)
	}
	s.batch = newBatch()
	var failed *agentrunner.Change
	for _, r := range []struct {
		res *agentrunner.StepResult
		ok  bool
	}{
		{sent("r1", "judge", "r1/left/forward/judge", "left"), true},
		{sent("r1", "judge", "r1/right/forward/judge", "right"), true},
		{sent("r2", "judge", "r2/left/forward/judge", "a failed attempt's"), false},
	} {
		ch := s.batch.change()
		ch.Events = append(ch.Events, r.res.Events...)
		s.keepMail(ch, r.res, r.ok)
		if !r.ok {
			failed = ch
		}
	}
	if err := s.commit(ctx); err != nil {
		t.Fatal(err)
	}
	lines, err := store.Mailbox(ctx, "judge")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"left", "right"}, texts(lines)); diff != "" {
		t.Errorf("the stored mailbox (-want +got):\n%s", diff)
	}
	data, err := os.ReadFile(boxes.Path("judge"))
	if err != nil || string(data) != "left\nright\n" {
		t.Errorf("the mailbox's file: %q, %v; want both messages", data, err)
	}
	if len(failed.Mail) != 0 || len(failed.Events) != 0 {
		t.Errorf("the failed attempt's change delivers %d messages with %d events, want none", len(failed.Mail), len(failed.Events))
	}
}

func texts(lines [][]byte) []string {
	var out []string
	for _, l := range lines {
		out = append(out, string(l))
	}
	return out
}
