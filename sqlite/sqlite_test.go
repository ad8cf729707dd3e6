package sqlite

import (
	"context"
	"database/sql"
	"io/fs"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/agentrunner/agentrunner"
	"github.com/agentrunner/agentrunner/storetest"
	"github.com/google/go-cmp/cmp"
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
	if names, _ := fs.Glob(migrations, "migrations/*.sql"); version != len(names) || version < 4 {
		t.Errorf("user_version = %d, want the number of migrations (%d)", version, len(names))
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

// TestMigrationKeepsData: a database of an older version, with cycles and
// the attempts that reference them, is migrated without losing a row or a
// reference (the cycles table is rebuilt in migration 3).
func TestMigrationKeepsData(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "state.db")
	db, err := sql.Open("sqlite", dsn(path, "foreign_keys(1)"))
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"migrations/0001_init.sql", "migrations/0002_attempt_usage.sql"} {
		body, _ := migrations.ReadFile(name)
		if _, err := db.ExecContext(ctx, string(body)); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
	}
	stmts := []string{
		`PRAGMA user_version = 2`,
		`INSERT INTO cycles (id, pipeline, status, step, dir, started_at) VALUES ('20261101_000000', 'p', 'completed', '', '/d', '2026-11-01T00:00:00.000000000Z')`,
		`INSERT INTO cycles (id, pipeline, status, step, dir, started_at) VALUES ('20261102_000000', 'p', 'running', 'plan', '/d', '2026-11-02T00:00:00.000000000Z')`,
		`INSERT INTO attempts (cycle_id, step, number, status, input_tokens) VALUES ('20261101_000000', 'plan', 1, 'succeeded', 42)`,
		`INSERT INTO attempts (cycle_id, step, number, status) VALUES ('20261102_000000', 'plan', 1, 'running')`,
		// Attempts are listed in the order they were made (rowid), not by key.
		`INSERT INTO attempts (cycle_id, step, number, status) VALUES ('20261101_000000', 'analyze', 1, 'succeeded')`,
		`INSERT INTO events (id, timestamp, event_type, cycle_id, level, details) VALUES (7, '2026-11-01T00:00:00.000000000Z', 'cycle.started', '20261101_000000', 'warn', '{"a":1}')`,
		// Tool calls recorded before the summary existed: migration 6
		// backfills it from them.
		`INSERT INTO events (id, timestamp, event_type, level, details) VALUES (8, '2026-11-01T00:05:00.000000000Z', 'tool.call', 'info', '{"tool":"web_search","is_error":false,"duration_ms":120}')`,
		`INSERT INTO events (id, timestamp, event_type, level, details) VALUES (9, '2026-11-01T01:10:00.000000000Z', 'tool.call', 'warn', '{"tool":"web_search","is_error":true,"duration_ms":80.7}')`,
		`INSERT INTO events (id, timestamp, event_type, level, details) VALUES (10, '2026-11-01T01:20:00.000000000Z', 'tool.call', 'info', '{"tool":7}')`,
	}
	for _, q := range stmts {
		if _, err := db.ExecContext(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	db.Close()

	s, err := Open(ctx, path)
	if err != nil {
		t.Fatalf("migrate: %v", err)
	}
	defer s.Close()
	c, err := s.UnfinishedCycle(ctx, "p")
	if err != nil || c.ID != "20261102_000000" || c.Step != "plan" {
		t.Fatalf("unfinished cycle after the migration: %+v, %v", c, err)
	}
	atts, _ := s.Attempts(ctx, "20261101_000000")
	if len(atts) != 2 || atts[0].Usage.InputTokens != 42 || atts[1].Step != "analyze" {
		t.Errorf("attempts after the migration: %+v", atts)
	}
	evs, err := s.Events(ctx, agentrunner.EventFilter{CycleID: "20261101_000000", MinLevel: agentrunner.LevelWarn})
	if err != nil || len(evs) != 1 || evs[0].ID != 7 || evs[0].Details["a"] != float64(1) {
		t.Errorf("events after the migration: %+v, %v", evs, err)
	}
	calls, err := s.Events(ctx, agentrunner.EventFilter{Type: "tool.call", Since: time.Date(2026, 11, 1, 0, 1, 0, 0, time.UTC)})
	if err != nil || len(calls) != 3 || calls[0].ID != 8 {
		t.Errorf("tool.call events after the migration: %+v, %v", calls, err)
	}
	first := time.Date(2026, 11, 1, 0, 5, 0, 0, time.UTC)
	usage, err := s.ToolUsage(ctx, time.Time{})
	want := []*agentrunner.ToolUsage{{Tool: "web_search", Calls: 2, Errors: 1, Duration: 200 * time.Millisecond, LastCall: first.Add(65 * time.Minute)}}
	if diff := cmp.Diff(want, usage); err != nil || diff != "" {
		t.Errorf("tool usage backfilled by the migration (%v) (-want +got):\n%s", err, diff)
	}
	if hour, _ := s.ToolUsage(ctx, first.Add(time.Hour)); len(hour) != 1 || hour[0].Calls != 1 || hour[0].Errors != 1 {
		t.Errorf("tool usage of the hour 01:00 after the migration: %+v", hour)
	}
	next := &agentrunner.Event{Timestamp: first.Add(2 * time.Hour), Type: agentrunner.EventToolCall, Level: agentrunner.LevelInfo,
		Details: map[string]any{"tool": "web_search", "is_error": false, "duration_ms": 100}}
	if err := s.Apply(ctx, &agentrunner.Change{Events: []*agentrunner.Event{next}}); err != nil {
		t.Fatal(err)
	}
	if usage, _ := s.ToolUsage(ctx, time.Time{}); len(usage) != 1 || usage[0].Calls != 3 || usage[0].Duration != 300*time.Millisecond {
		t.Errorf("a call after the migration does not add to the backfilled summary: %+v", usage)
	}
	bogus := *c
	bogus.Status = "bogus"
	if err := s.Apply(ctx, &agentrunner.Change{Cycle: &bogus}); err == nil {
		t.Error("a cycle status outside the list was accepted: the CHECK is gone")
	}
	if err := s.Apply(ctx, &agentrunner.Change{Events: []*agentrunner.Event{{Type: "x", Level: "loud"}}}); err == nil {
		t.Error("an event level outside the list was accepted: the CHECK is gone")
	}
	var fkOn int
	s.w.conn.QueryRowContext(ctx, "PRAGMA foreign_keys").Scan(&fkOn)
	if fkOn != 1 {
		t.Error("foreign keys are off after the migration")
	}
	bad := &agentrunner.Attempt{CycleID: "no-such", Step: "x", Number: 1, Status: agentrunner.AttemptRunning}
	if err := s.Apply(ctx, &agentrunner.Change{Attempts: []*agentrunner.Attempt{bad}}); err == nil {
		t.Error("the attempts' foreign key to cycles is gone")
	}
	halted := *c
	halted.Status = agentrunner.CycleHalted
	if err := s.Apply(ctx, &agentrunner.Change{From: "plan", Cycle: &halted}); err != nil {
		t.Errorf("halting a cycle after the migration: %v", err)
	}
}

// TestApplyAllIsOneTransaction: changes applied together are committed
// together, or not at all when one of them fails.
func TestApplyAllIsOneTransaction(t *testing.T) {
	ctx := context.Background()
	s := open(t)
	defer s.Close()
	t0 := time.Date(2026, 11, 22, 14, 0, 0, 0, time.UTC)
	call := &agentrunner.Change{Events: []*agentrunner.Event{{Timestamp: t0, Type: agentrunner.EventToolCall, Level: agentrunner.LevelInfo,
		Details: map[string]any{"tool": "web_search", "duration_ms": 5}}}}
	bad := &agentrunner.Change{Attempts: []*agentrunner.Attempt{{CycleID: "no-such", Step: "x", Number: 1, Status: agentrunner.AttemptRunning}}}
	before := s.Commits()
	if err := s.ApplyAll(ctx, call, bad); err == nil {
		t.Fatal("ApplyAll with a failing change succeeded")
	}
	if evs, _ := s.Events(ctx, agentrunner.EventFilter{}); len(evs) != 0 {
		t.Errorf("a failed ApplyAll wrote %d events", len(evs))
	}
	if u, _ := s.ToolUsage(ctx, time.Time{}); len(u) != 0 {
		t.Errorf("a failed ApplyAll wrote tool usage %+v", u)
	}
	second := &agentrunner.Change{Events: []*agentrunner.Event{{Timestamp: t0.Add(time.Minute), Type: "x", Level: agentrunner.LevelInfo}}}
	if err := s.ApplyAll(ctx, call, second); err != nil {
		t.Fatal(err)
	}
	if evs, _ := s.Events(ctx, agentrunner.EventFilter{}); len(evs) != 2 || s.Commits() != before+1 {
		t.Errorf("ApplyAll of two changes: %d events in %d commits, want 2 in 1", len(evs), s.Commits()-before)
	}
	if u, _ := s.ToolUsage(ctx, time.Time{}); len(u) != 1 || u[0].Calls != 1 {
		t.Errorf("tool usage after ApplyAll: %+v", u)
	}
}
