package sqlite

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/agentrunner/agentrunner"
	"github.com/agentrunner/agentrunner/storetest"
)

func open(t *testing.T) *Store {
	t.Helper()
	s, err := Open(context.Background(), filepath.Join(t.TempDir(), "state.db"))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) agentrunner.Store { return open(t) })
}

func TestPragmasAndReopen(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "sub", "state.db")
	s, err := Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	for pragma, want := range map[string]string{"journal_mode": "wal", "foreign_keys": "1", "synchronous": "2", "busy_timeout": "10000"} {
		var got string
		if err := s.write.QueryRowContext(ctx, "PRAGMA "+pragma).Scan(&got); err != nil || got != want {
			t.Errorf("PRAGMA %s = %q (%v), want %q", pragma, got, err, want)
		}
	}
	var version int
	s.write.QueryRowContext(ctx, "PRAGMA user_version").Scan(&version)
	if version != 1 {
		t.Errorf("user_version = %d, want 1", version)
	}
	if _, err := s.read.ExecContext(ctx, "DELETE FROM cycles"); err == nil {
		t.Error("the read pool accepted a write")
	}
	before := s.Commits()
	if err := s.Apply(ctx, &agentrunner.Change{Events: []*agentrunner.Event{{Type: "x", Timestamp: time.Now()}}}); err != nil {
		t.Fatal(err)
	}
	if s.Commits() != before+1 {
		t.Errorf("Commits = %d, want %d", s.Commits(), before+1)
	}
	s.Close()
	s, err = Open(ctx, path)
	if err != nil {
		t.Fatalf("reopen: %v", err)
	}
	defer s.Close()
	if evs, _ := s.Events(ctx, agentrunner.EventFilter{}); len(evs) != 1 {
		t.Errorf("after reopen: %d events, want 1", len(evs))
	}
}

func TestRefusesNewerSchema(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "state.db")
	s, err := Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	s.write.ExecContext(ctx, "PRAGMA user_version = 99")
	s.Close()
	if _, err := Open(ctx, path); err == nil {
		t.Fatal("want an error for a schema newer than this binary")
	}
}
