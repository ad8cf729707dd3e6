package sqlite

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/agentrunner/agentrunner"
)

// TestFullDatabaseIsAResourceFailure: a commit that SQLite refuses because
// the database is full (its size capped at what it holds, as a full disk
// does) is a disk-space failure the engine waits out, with SQLite's own
// message; once there is room, the same change commits. Other failures are
// not taken for one.
func TestFullDatabaseIsAResourceFailure(t *testing.T) {
	ctx := context.Background()
	s := open(t)
	defer s.Close()
	big := func() *agentrunner.Change {
		return &agentrunner.Change{Events: []*agentrunner.Event{{
			Type: "x", Timestamp: time.Now(), Details: map[string]any{"text": strings.Repeat("x", 1<<20)},
		}}}
	}
	var pages int
	if err := s.w.conn.QueryRowContext(ctx, "PRAGMA page_count").Scan(&pages); err != nil {
		t.Fatal(err)
	}
	if _, err := s.w.conn.ExecContext(ctx, fmt.Sprintf("PRAGMA max_page_count = %d", pages)); err != nil {
		t.Fatal(err)
	}
	err := s.Apply(ctx, big())
	if got := agentrunner.ExhaustedResource(err); got != agentrunner.ResourceDiskSpace {
		t.Fatalf("Apply on a full database: %v, resource %q; want disk space", err, got)
	}
	if agentrunner.ClassOf(err) != agentrunner.ClassResource || !strings.Contains(err.Error(), "full") {
		t.Errorf("error %q: class %s, want resource with SQLite's message", err, agentrunner.ClassOf(err))
	}
	if _, err := s.w.conn.ExecContext(ctx, "PRAGMA max_page_count = 1073741823"); err != nil {
		t.Fatal(err)
	}
	if err := s.Apply(ctx, big()); err != nil {
		t.Fatalf("Apply once there is room: %v", err)
	}
	bad := &agentrunner.Change{Events: []*agentrunner.Event{{Type: "x"}}} // no timestamp: NOT NULL fails
	if err := s.Apply(ctx, bad); err == nil || agentrunner.ExhaustedResource(err) != "" {
		t.Errorf("a constraint failure: %v, resource %q; want an error that is no resource's", err, agentrunner.ExhaustedResource(err))
	}
	if err := exhausted(errors.New("database or disk is full")); agentrunner.ExhaustedResource(err) != "" {
		t.Errorf("the words without SQLite's code were taken for a full disk")
	}
}
