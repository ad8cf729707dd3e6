package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/agentrunner/agentrunner"
)

// TestErrorsAreTranslatedByResultCode: each failure SQLite reports gets
// its code from SQLite's result code: a unique key taken is a conflict,
// another broken constraint invalid input, a database locked by another
// process past the busy timeout unavailable (a full disk is a resource
// failure: TestFullDatabaseIsAResourceFailure). SQLite's words without
// its code are none of these.
func TestErrorsAreTranslatedByResultCode(t *testing.T) {
	ctx := context.Background()
	t0 := time.Date(2026, 11, 22, 14, 0, 0, 0, time.UTC)
	gate := func() *agentrunner.Command {
		return &agentrunner.Command{Kind: agentrunner.CommandGateDecision, Operator: "alice", CreatedAt: t0, Target: "r1/approve#1"}
	}
	for _, tt := range []struct {
		name string
		// fail makes the store fail.
		fail func(t *testing.T, s *Store, path string) error
		want string
	}{
		{"a unique key taken", func(t *testing.T, s *Store, _ string) error {
			if err := s.AddCommand(ctx, gate()); err != nil {
				t.Fatal(err)
			}
			return s.AddCommand(ctx, gate())
		}, agentrunner.ECONFLICT},
		{"a second unfinished serial run", func(t *testing.T, s *Store, _ string) error {
			r := &agentrunner.Run{ID: "a", Pipeline: "p", Status: agentrunner.RunRunning, Dir: "/d", StartedAt: t0, Serial: true}
			if err := s.Apply(ctx, &agentrunner.Change{Runs: []*agentrunner.Run{r}}); err != nil {
				t.Fatal(err)
			}
			r2 := *r
			r2.ID = "b"
			return s.Apply(ctx, &agentrunner.Change{Runs: []*agentrunner.Run{&r2}})
		}, agentrunner.ECONFLICT},
		{"a CHECK broken", func(t *testing.T, s *Store, _ string) error {
			r := &agentrunner.Run{ID: "a", Pipeline: "p", Status: "bogus", Dir: "/d", StartedAt: t0}
			return s.Apply(ctx, &agentrunner.Change{Runs: []*agentrunner.Run{r}})
		}, agentrunner.EINVALID},
		{"a foreign key broken", func(t *testing.T, s *Store, _ string) error {
			a := &agentrunner.Attempt{CycleID: "no-such-run", Step: "x", Number: 1, Status: agentrunner.AttemptRunning}
			return s.Apply(ctx, &agentrunner.Change{Attempts: []*agentrunner.Attempt{a}})
		}, agentrunner.EINVALID},
		{"NOT NULL broken", func(t *testing.T, s *Store, _ string) error {
			return s.Apply(ctx, &agentrunner.Change{Events: []*agentrunner.Event{{Type: "x"}}})
		}, agentrunner.EINVALID},
		{"the database locked by another process", func(t *testing.T, s *Store, path string) error {
			if _, err := s.w.conn.ExecContext(ctx, "PRAGMA busy_timeout = 0"); err != nil {
				t.Fatal(err)
			}
			other, err := sql.Open("sqlite", dsn(path))
			if err != nil {
				t.Fatal(err)
			}
			defer other.Close()
			conn, err := other.Conn(ctx)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			if _, err := conn.ExecContext(ctx, "BEGIN IMMEDIATE"); err != nil {
				t.Fatal(err)
			}
			defer conn.ExecContext(ctx, "ROLLBACK")
			return s.Apply(ctx, &agentrunner.Change{Events: []*agentrunner.Event{{Type: "x", Timestamp: t0}}})
		}, agentrunner.EUNAVAILABLE},
	} {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "state.db")
			s, err := Open(ctx, path)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			err = tt.fail(t, s, path)
			if got := agentrunner.ErrorCode(err); got != tt.want {
				t.Errorf("error %v: code %q, want %q", err, got, tt.want)
			}
			if err := s.Apply(ctx, &agentrunner.Change{Events: []*agentrunner.Event{{Type: "y", Timestamp: t0}}}); err != nil {
				t.Errorf("a change after the failure: %v", err)
			}
		})
	}
	for _, words := range []string{"UNIQUE constraint failed: commands.kind, commands.target", "CHECK constraint failed: status",
		"database is locked", "database or disk is full"} {
		err := translate(errors.New(words), "x", "taken")
		if code := agentrunner.ErrorCode(err); code != agentrunner.EINTERNAL || agentrunner.ExhaustedResource(err) != "" {
			t.Errorf("the words %q without SQLite's code: code %s, resource %q; want internal, none", words, code, agentrunner.ExhaustedResource(err))
		}
	}
}
