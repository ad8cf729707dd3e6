package sqlite

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentrunner/agentrunner"
	"github.com/agentrunner/agentrunner/internal/dbtest"
	"github.com/google/go-cmp/cmp"
)

// TestPruneFilesWalksFromItsMarks: the prune of stored prompts and
// validation reports reads the files by id from the marks its last pass
// left, never the whole table, whose artifacts may be megabytes each, and
// no index of the files' times (which every step's commit would write).
func TestPruneFilesWalksFromItsMarks(t *testing.T) {
	s := open(t)
	defer s.Close()
	for _, q := range []struct {
		name, sql string
		args      []any
	}{
		{"cut", sqlPruneCut, []any{10, encodeTime(time.Now())}},
		{"delete", sqlPruneKind, []any{"prompt", 10, 20, encodeTime(time.Now())}},
		{"mark", sqlPruneMark, []any{"prompt", 10, 20}},
	} {
		plan := strings.Join(queryPlan(t, s, q.sql, q.args...), "\n")
		if !strings.Contains(plan, "SEARCH files USING INTEGER PRIMARY KEY (rowid>?") || strings.Contains(plan, "SCAN files") {
			t.Errorf("%s: the prune does not walk the files by id:\n%s", q.name, plan)
		}
	}
}

// TestPrunedPagesAreReused: the pages a prune of events and stored
// prompts frees go on the free list, and the cycles after it fill them
// before the file grows: a retention keeps the file from growing by what
// it prunes.
func TestPrunedPagesAreReused(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "state.db")
	s, err := Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for i := 0; i < 20; i++ {
		growthCycle(t, s, i, growthStart.Add(time.Duration(i)*time.Hour), true)
	}
	full := dbtest.Measure(t, path)
	growthPrune(t, s, growthStart.Add(100*time.Hour), false)
	pruned := dbtest.Measure(t, path)
	if pruned.Bytes != full.Bytes || pruned.FreePages*pruned.PageSize < 20*growthSteps*growthPrompt {
		t.Fatalf("after the prune: %d bytes, %d free pages; want the file's %d bytes, with at least the prompts' pages free", pruned.Bytes, pruned.FreePages, full.Bytes)
	}
	for i := 20; i < 25; i++ {
		growthCycle(t, s, i, growthStart.Add(time.Duration(i)*time.Hour), true)
	}
	if after := dbtest.Measure(t, path); after.Bytes != full.Bytes || after.FreePages >= pruned.FreePages {
		t.Errorf("5 cycles after the prune: %d bytes, %d free pages; want the same %d bytes, fewer than %d free pages", after.Bytes, after.FreePages, full.Bytes, pruned.FreePages)
	}
}

// TestPruneFilesMovesItsMarks: after a prune, each kind's mark is the id
// the next prune starts from: past every file the prune looked at.
func TestPruneFilesMovesItsMarks(t *testing.T) {
	ctx := context.Background()
	s := open(t)
	defer s.Close()
	for i := 0; i < 4; i++ {
		growthCycle(t, s, i, growthStart.Add(time.Duration(i)*time.Hour), true)
	}
	before := growthStart.Add(2 * time.Hour)
	if _, err := s.PruneFiles(ctx, before, agentrunner.FilePrompt, agentrunner.FileValidation); err != nil {
		t.Fatal(err)
	}
	var first int64
	if err := s.read.QueryRowContext(ctx, `SELECT MIN(id) FROM files WHERE created_at >= ?`, encodeTime(before)).Scan(&first); err != nil {
		t.Fatal(err)
	}
	rows, err := s.read.QueryContext(ctx, `SELECT kind, next_id FROM file_prune_marks ORDER BY kind`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var marks []string
	for rows.Next() {
		var kind string
		var next int64
		rows.Scan(&kind, &next)
		marks = append(marks, fmt.Sprintf("%s@%d", kind, next))
	}
	want := []string{fmt.Sprintf("prompt@%d", first), fmt.Sprintf("validation@%d", first)}
	if diff := cmp.Diff(want, marks); diff != "" {
		t.Errorf("marks after the prune (-want +got):\n%s", diff)
	}
}
