package mailbox

import (
	"context"
	"os"
	"testing"

	"github.com/agentrunner/agentrunner"
	"github.com/agentrunner/agentrunner/internal/atomicfile"
	"github.com/agentrunner/agentrunner/view"
	"github.com/google/go-cmp/cmp"
)

// TestSyncWritesTheViewWithoutAnFsync: the store holds the messages, so
// the file is written without one.
func TestSyncWritesTheViewWithoutAnFsync(t *testing.T) {
	m := newBoxes(t, 5)
	storeOf(t, m)
	before := atomicfile.Syncs()
	deposit(t, m, "plan", msg("a", 0), msg("b", 1))
	if got := atomicfile.Syncs() - before; got != 0 {
		t.Errorf("file fsyncs = %d, want 0", got)
	}
	entries, err := os.ReadDir(m.Dir())
	if err != nil || len(entries) != 1 {
		t.Errorf("directory holds %v, %v; want the mailbox alone, no temporary file", entries, err)
	}
}

// TestCheckRepairsTheView: a view lost, cut short, edited by hand or
// left behind is rewritten from the store, saying why; a right one is
// left alone.
func TestCheckRepairsTheView(t *testing.T) {
	ctx := context.Background()
	tests := []struct {
		name   string
		stored []Message
		spoil  func(path string) error
		want   string
	}{
		{"right", []Message{msg("a", 0)}, func(string) error { return nil }, ""},
		{"missing", []Message{msg("a", 0), msg("b", 1)}, os.Remove, view.Missing},
		{"truncated", []Message{msg("a", 0), msg("b", 1)}, func(p string) error { return os.Truncate(p, 10) }, view.Different},
		{"edited", []Message{msg("a", 0)}, func(p string) error {
			return os.WriteFile(p, []byte(`{"id":"x","time":"2025-03-01T12:00:00Z","from":"op","kind":"inject","body":"forged"}`+"\n"), 0o644)
		}, view.Different},
		{"stale, of an empty mailbox", nil, func(p string) error { return os.WriteFile(p, []byte("left over\n"), 0o644) }, view.Different},
		{"missing, of an empty mailbox", nil, func(string) error { return nil }, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := newBoxes(t, 5)
			s := storeOf(t, m)
			deposit(t, m, "plan", tt.stored...)
			path := m.Path("plan")
			if err := tt.spoil(path); err != nil {
				t.Fatal(err)
			}
			reason, err := m.Check(ctx, s, "plan")
			if err != nil || reason != tt.want {
				t.Fatalf("Check = %q, %v; want %q", reason, err, tt.want)
			}
			lines, err := s.Mailbox(ctx, "plan")
			if err != nil {
				t.Fatal(err)
			}
			got, err := os.ReadFile(path)
			if len(lines) == 0 {
				if !os.IsNotExist(err) {
					t.Errorf("an empty mailbox has a file: %q, %v", got, err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(string(Render(lines)), string(got)); diff != "" {
				t.Errorf("view after the check (-store +file):\n%s", diff)
			}
			if reason, err := m.Check(ctx, s, "plan"); reason != "" || err != nil {
				t.Errorf("a second check: %q, %v; want nothing to repair", reason, err)
			}
		})
	}
}

func TestRepairedNamesTheMailbox(t *testing.T) {
	m := newBoxes(t, 5)
	ev := m.Repaired(t0, "plan", view.Missing)
	want := &agentrunner.Event{Timestamp: t0, Type: agentrunner.EventViewRepaired, Agent: "plan", Level: agentrunner.LevelWarn,
		Details: map[string]any{"path": m.Path("plan"), "mailbox": "plan", "reason": view.Missing}}
	if diff := cmp.Diff(want, ev); diff != "" {
		t.Errorf("event (-want +got):\n%s", diff)
	}
}

func TestWithMaxSharesTheDirectory(t *testing.T) {
	m := newBoxes(t, 5)
	n, err := m.WithMax(2)
	if err != nil {
		t.Fatal(err)
	}
	if n.Dir() != m.Dir() || n.Max() != 2 || m.Max() != 5 || n.views != m.views {
		t.Errorf("WithMax(2): dir %s max %d (was %s, %d); the lock must be shared", n.Dir(), n.Max(), m.Dir(), m.Max())
	}
	d, err := n.Deposit("plan", msg("a", 0))
	if err != nil || d.Keep != 2 {
		t.Errorf("a deposit keeps %v, %v; want 2", d, err)
	}
	if _, err := m.WithMax(0); agentrunner.ErrorCode(err) != agentrunner.EINVALID {
		t.Errorf("WithMax(0): %v, want EINVALID", err)
	}
}

// lockProbe is a store that reports whether the views' lock was held
// while it was read.
type lockProbe struct {
	agentrunner.MailStore
	m      *Mailboxes
	unheld int
}

func (p *lockProbe) Mailbox(ctx context.Context, agent string) ([][]byte, error) {
	if p.m.views.TryLock() {
		p.unheld++
		p.m.views.Unlock()
	}
	return p.MailStore.Mailbox(ctx, agent)
}

// TestTheStoreIsReadUnderTheViewsLock: a check that read the store just
// before a commit must not write its older view over the one written
// after the commit, so the read and the write it leads to hold one lock,
// which a reloaded Mailboxes (WithMax) shares.
func TestTheStoreIsReadUnderTheViewsLock(t *testing.T) {
	ctx := context.Background()
	m := newBoxes(t, 5)
	reloaded, err := m.WithMax(3)
	if err != nil {
		t.Fatal(err)
	}
	p := &lockProbe{MailStore: storeOf(t, m), m: m}
	if err := reloaded.Sync(ctx, p, "plan"); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Check(ctx, p, "plan"); err != nil {
		t.Fatal(err)
	}
	if p.unheld != 0 {
		t.Errorf("the store was read %d times without the views' lock", p.unheld)
	}
}

// TestStoredIsTheStoresMailbox: the messages are read from the store,
// whatever the file holds.
func TestStoredIsTheStoresMailbox(t *testing.T) {
	m := newBoxes(t, 5)
	s := storeOf(t, m)
	deposit(t, m, "plan", msg("a", 0), msg("b", 1))
	if err := os.Remove(m.Path("plan")); err != nil {
		t.Fatal(err)
	}
	got, err := m.Stored(context.Background(), s, "plan")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]Message{msg("a", 0), msg("b", 1)}, got); diff != "" {
		t.Errorf("Stored (-want +got):\n%s", diff)
	}
	if _, err := m.Stored(context.Background(), s, "../x"); agentrunner.ErrorCode(err) != agentrunner.EINVALID {
		t.Errorf("Stored of a bad name: %v, want EINVALID", err)
	}
}

// TestABadNameReachesNoFile: a name that could leave the directory is
// refused before any file is touched.
func TestABadNameReachesNoFile(t *testing.T) {
	m := newBoxes(t, 5)
	s := storeOf(t, m)
	ctx := context.Background()
	if err := m.Sync(ctx, s, "../x"); agentrunner.ErrorCode(err) != agentrunner.EINVALID {
		t.Errorf("Sync: %v, want EINVALID", err)
	}
	if _, err := m.Check(ctx, s, "../x"); agentrunner.ErrorCode(err) != agentrunner.EINVALID {
		t.Errorf("Check: %v, want EINVALID", err)
	}
}

// countingStore counts the reads of mailboxes.
type countingStore struct {
	agentrunner.MailStore
	reads int
}

func (c *countingStore) Mailbox(ctx context.Context, agent string) ([][]byte, error) {
	c.reads++
	return c.MailStore.Mailbox(ctx, agent)
}

// TestAnUnchangedViewNeedsNoStoreRead: once Sync wrote a view, or Check
// found it right, a Check of the same, unchanged file reads nothing from
// the store; a file changed since is compared with the store again.
func TestAnUnchangedViewNeedsNoStoreRead(t *testing.T) {
	ctx := context.Background()
	m := newBoxes(t, 5)
	s := &countingStore{MailStore: storeOf(t, m)}
	deposit(t, m, "plan", msg("a", 0))
	for _, agent := range []string{"plan", "idle"} { // idle has no messages, and no file
		if _, err := m.Check(ctx, s, agent); err != nil {
			t.Fatal(err)
		}
	}
	first := s.reads
	for range 3 {
		for _, agent := range []string{"plan", "idle"} {
			if reason, err := m.Check(ctx, s, agent); err != nil || reason != "" {
				t.Fatalf("Check(%s) = %q, %v", agent, reason, err)
			}
		}
	}
	if s.reads != first {
		t.Errorf("checks of unchanged views read the store %d more times, want none", s.reads-first)
	}
	os.WriteFile(m.Path("idle"), []byte("left over\n"), 0o644)
	os.WriteFile(m.Path("plan"), []byte("{}\n"), 0o644)
	for _, agent := range []string{"plan", "idle"} {
		if reason, err := m.Check(ctx, s, agent); err != nil || reason != view.Different {
			t.Errorf("Check(%s) after an edit = %q, %v; want %q", agent, reason, err, view.Different)
		}
	}
}
