package sqlite

import (
	"context"
	"path/filepath"
	"sync"
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
		if err := s.w.conn.QueryRowContext(ctx, "PRAGMA "+pragma).Scan(&got); err != nil || got != want {
			t.Errorf("PRAGMA %s = %q (%v), want %q", pragma, got, err, want)
		}
	}
	var version int
	s.w.conn.QueryRowContext(ctx, "PRAGMA user_version").Scan(&version)
	if version != 2 {
		t.Errorf("user_version = %d, want 2", version)
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
	s.w.conn.ExecContext(ctx, "PRAGMA user_version = 99")
	s.Close()
	if _, err := Open(ctx, path); err == nil {
		t.Fatal("want an error for a schema newer than this binary")
	}
}

func TestWritesAfterFailuresAndConcurrently(t *testing.T) {
	s := open(t)
	defer s.Close()
	ev := func() *agentrunner.Change {
		return &agentrunner.Change{Events: []*agentrunner.Event{{Type: "x", Timestamp: time.Now()}}}
	}
	canceled, cancel := context.WithCancel(context.Background())
	cancel()
	if err := s.Apply(canceled, ev()); err == nil {
		t.Fatal("Apply with a cancelled context succeeded")
	}
	// A change that fails inside the transaction is rolled back, and the
	// connection is usable afterwards.
	bad := &agentrunner.Change{Events: []*agentrunner.Event{{Type: "x"}}} // no timestamp: NOT NULL fails
	if err := s.Apply(context.Background(), bad); err == nil {
		t.Fatal("Apply of an invalid event succeeded")
	}
	var wg sync.WaitGroup
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := 0; j < 10; j++ {
				if err := s.Apply(context.Background(), ev()); err != nil {
					t.Error(err)
				}
			}
		}()
	}
	wg.Wait()
	evs, err := s.Events(context.Background(), agentrunner.EventFilter{})
	if err != nil || len(evs) != 80 {
		t.Fatalf("%d events, %v; want the 80 committed ones", len(evs), err)
	}
}
