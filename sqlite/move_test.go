package sqlite

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/agentrunner/agentrunner"
)

// walFrames is the number of pages in the write-ahead log at path.
func walFrames(t *testing.T, path string) int64 {
	t.Helper()
	info, err := os.Stat(path + "-wal")
	if err != nil || info.Size() < 32 {
		return 0
	}
	return (info.Size() - 32) / (4096 + 24)
}

// TestARunMovingBetweenStepsWritesOnlyItsRow: a running serial run whose
// step changes, and nothing else of it, is recorded by the narrow update,
// which rewrites its row and none of the runs' indexes (all on columns it
// leaves alone): one page in the write-ahead log, where the upsert wrote
// one per index.
func TestARunMovingBetweenStepsWritesOnlyItsRow(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "state.db")
	s, err := Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	run := &agentrunner.Run{ID: "20261122_140000", Pipeline: "loop", Status: agentrunner.RunRunning, Step: "plan", Dir: "/srv/cycles/x", StartedAt: time.Date(2026, 11, 22, 14, 0, 0, 0, time.UTC), Serial: true}
	if err := s.Apply(ctx, &agentrunner.Change{Runs: []*agentrunner.Run{run}}); err != nil {
		t.Fatal(err)
	}
	s.w.mu.Lock()
	_, err = s.w.conn.ExecContext(ctx, "PRAGMA wal_checkpoint(TRUNCATE)")
	s.w.mu.Unlock()
	if err != nil {
		t.Fatal(err)
	}
	moved := *run
	moved.Step, moved.LastCompletedStep = "research", "plan"
	if err := s.Apply(ctx, &agentrunner.Change{Runs: []*agentrunner.Run{&moved}}); err != nil {
		t.Fatal(err)
	}
	if n := walFrames(t, path); n != 1 {
		t.Errorf("the move wrote %d pages, want 1 (the run's row)", n)
	}
	got, err := s.Runs(ctx, agentrunner.RunFilter{})
	if err != nil || len(got) != 1 || got[0].Step != "research" || got[0].LastCompletedStep != "plan" || got[0].Status != agentrunner.RunRunning {
		t.Fatalf("runs after the move: %v %+v", err, got)
	}
}
