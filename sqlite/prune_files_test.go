package sqlite

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentrunner/agentrunner/internal/dbtest"
)

// TestPruneFilesUsesItsIndex: the prune of stored prompts and validation
// reports reads the partial index files_prunable from its start to the
// bound, never the table of stored files, whose artifacts may be
// megabytes each.
func TestPruneFilesUsesItsIndex(t *testing.T) {
	s := open(t)
	defer s.Close()
	q := fmt.Sprintf(sqlPruneFiles, "?, ?")
	plan := strings.Join(queryPlan(t, s, q, "prompt", "validation", encodeTime(time.Now())), "\n")
	if !strings.Contains(plan, "SEARCH files USING INDEX files_prunable (created_at<?)") || strings.Contains(plan, "SCAN") {
		t.Errorf("the prune does not search files_prunable:\n%s", plan)
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
