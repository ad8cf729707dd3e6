//go:build unix

package engine

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/agentrunner/agentrunner"
	"github.com/agentrunner/agentrunner/config"
	"github.com/agentrunner/agentrunner/mailbox"
)

// mailboxCrashDir names the workspace of
// TestKilledBeforeTheMailboxIsWritten's child process.
const mailboxCrashDir = "AGENTRUNNER_TEST_MAILBOX_CRASH_DIR"

// mailboxWorkspace is the views workspace whose first step sends the
// second agent a message.
func mailboxWorkspace(t *testing.T, dir string) {
	t.Helper()
	viewWorkspace(t, dir)
	cfg := strings.Replace(viewConfig, "one: {agent: first, next: two}", "one: {agent: first, next: two, deliver: [{kind: forward, to: [second]}]}", 1)
	if err := os.WriteFile(filepath.Join(dir, config.FileName), []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestKilledBeforeTheMailboxIsWritten: the runner is killed (SIGKILL)
// right after the first step's outcome, with its message to the second
// agent, is committed, and before the mailbox file is written. The store
// has the message and the file does not. On restart the file is written
// from the store, with a view.repaired event, before the second agent
// reads it, and the cycle completes with each step run once.
func TestKilledBeforeTheMailboxIsWritten(t *testing.T) {
	if dir := os.Getenv(mailboxCrashDir); dir != "" {
		killedAtTheFirstView(t, dir)
		return
	}
	dir := t.TempDir()
	mailboxWorkspace(t, dir)
	runKilledChild(t, "TestKilledBeforeTheMailboxIsWritten", mailboxCrashDir, dir)

	agent := newNoteAgent()
	e, store := viewEngine(t, dir, agent, nil)
	ctx := context.Background()
	lines, err := store.Mailbox(ctx, "second")
	if err != nil || len(lines) != 1 {
		t.Fatalf("the stored mailbox of second after the kill: %q, %v; want the first step's message", lines, err)
	}
	path := e.boxes.Path("second")
	if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the mailbox file of second exists (%v): the kill came after it was written", err)
	}

	c, err := e.RunOnce(ctx)
	if err != nil || c.Status != agentrunner.CycleCompleted {
		t.Fatalf("the resumed cycle: %v %+v", err, c)
	}
	if got := agent.inputs["two mailbox"]; got != string(mailbox.Render(lines)) {
		t.Errorf("the second agent read its mailbox as %q, want the stored %q", got, mailbox.Render(lines))
	}
	if diff := cmp.Diff(map[string]int{"two": 1}, agent.runs); diff != "" {
		t.Errorf("agents run after the restart (-want +got):\n%s", diff)
	}
	evs, err := store.Events(ctx, agentrunner.EventFilter{Type: agentrunner.EventViewRepaired})
	if err != nil {
		t.Fatal(err)
	}
	var repaired []string
	for _, ev := range evs {
		if box, ok := ev.Details["mailbox"].(string); ok {
			repaired = append(repaired, box+" "+ev.Details["reason"].(string))
		}
	}
	if diff := cmp.Diff([]string{"second missing"}, repaired); diff != "" {
		t.Errorf("mailboxes repaired (-want +got):\n%s", diff)
	}
}
