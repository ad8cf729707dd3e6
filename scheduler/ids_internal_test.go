package scheduler

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/agentrunner/agentrunner"
	"github.com/agentrunner/agentrunner/internal/clocktest"
	"github.com/agentrunner/agentrunner/sqlite"
)

// TestRunIDsFollowOnAcrossRestarts: ids of each format follow on from the
// newest run in the store, so a restart (a new allocator) neither repeats
// nor skips one: date-seq ids number each UTC day from 001, timestamp ids
// take the next second when two runs start in the same one, seq ids count
// up. An id whose directory is already there (left by a run the store
// lost, when an older backup was restored) is passed over, so the new
// run never writes into another's files.
func TestRunIDsFollowOnAcrossRestarts(t *testing.T) {
	ctx := context.Background()
	store, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "state.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	clock := clocktest.New(time.Date(2026, 11, 24, 23, 59, 30, 0, time.UTC))
	dirs := t.TempDir()
	dir := func(id string) string { return filepath.Join(dirs, id) }
	archived := func(id string) string { return filepath.Join(dirs, "history", id+".tar.gz") }
	next := func(a *idAllocator, p *agentrunner.Pipeline) string {
		t.Helper()
		id, err := a.next(ctx, p, func(id string) []string { return []string{dir(id), archived(id)} })
		if err != nil {
			t.Fatal(err)
		}
		r := &agentrunner.Run{ID: id, Pipeline: p.Name, Status: agentrunner.RunCompleted, Dir: dir(id), StartedAt: clock.Now(), EndedAt: clock.Now()}
		if err := store.Apply(ctx, &agentrunner.Change{Runs: []*agentrunner.Run{r}}); err != nil {
			t.Fatal(err)
		}
		return id
	}
	flow := &agentrunner.Pipeline{Name: "flow", RunID: agentrunner.RunIDDateSeq}
	loop := &agentrunner.Pipeline{Name: "loop", RunID: agentrunner.RunIDTimestamp}
	review := &agentrunner.Pipeline{Name: "review", RunID: agentrunner.RunIDSeq}

	var got []string
	a := newIDAllocator(store, clock)
	got = append(got, next(a, flow), next(a, flow), next(a, loop), next(a, loop), next(a, review))
	a = newIDAllocator(store, clock) // a restart
	got = append(got, next(a, flow), next(a, loop), next(a, review))
	clock.Advance(time.Minute) // the next UTC day
	got = append(got, next(a, flow))
	if err := os.Mkdir(dir("2026-11-25-002"), 0o755); err != nil {
		t.Fatal(err)
	}
	a = newIDAllocator(store, clock)
	got = append(got, next(a, flow), next(a, flow))
	// A run archived, then lost with the store's restore: its archive
	// keeps its id.
	os.MkdirAll(filepath.Dir(archived("review-000003")), 0o755)
	if err := os.WriteFile(archived("review-000003"), []byte("archive"), 0o644); err != nil {
		t.Fatal(err)
	}
	got = append(got, next(a, review))
	want := []string{
		"2026-11-24-001", "2026-11-24-002", "20261124_235930", "20261124_235931", "review-000001",
		"2026-11-24-003", "20261124_235932", "review-000002",
		"2026-11-25-001",
		"2026-11-25-003", "2026-11-25-004",
		"review-000004",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("run ids (-want +got):\n%s", diff)
	}
}
