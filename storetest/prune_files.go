package storetest

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/agentrunner/agentrunner"
	"github.com/google/go-cmp/cmp"
)

// fileAt is a stored file of run r made at t.
func fileAt(r string, kind agentrunner.FileKind, name string, t time.Time) *agentrunner.StoredFile {
	f := file(r, "review", 1, 1, kind, name, name+" of "+r)
	f.CreatedAt = t
	return f
}

// fileNames lists the stored files of the runs as "run/kind/name".
func fileNames(t *testing.T, s agentrunner.Store, runs ...string) []string {
	t.Helper()
	var out []string
	for _, r := range runs {
		fs, err := s.Files(context.Background(), agentrunner.FileFilter{RunID: r, NoData: true})
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range fs {
			out = append(out, r+"/"+string(f.Kind)+"/"+f.Name)
		}
	}
	return out
}

// testPruneFiles: PruneFiles deletes the prompts and validation reports
// of the kinds asked that are older than the bound, in every run, and
// never a stored artifact, however old; asking for artifacts, an unknown
// kind or none deletes nothing.
func testPruneFiles(t *testing.T, s agentrunner.Store) {
	ctx := context.Background()
	old, bound, recent := t0, t0.Add(time.Hour), t0.Add(2*time.Hour)
	mustApply(t, s, &agentrunner.Change{Runs: []*agentrunner.Run{run("r1", agentrunner.RunCompleted), run("r2", agentrunner.RunRunning)}})
	mustApply(t, s, &agentrunner.Change{Files: []*agentrunner.StoredFile{
		fileAt("r1", agentrunner.FileArtifact, "review.md", old),
		fileAt("r1", agentrunner.FilePrompt, "prompt.md", old),
		fileAt("r1", agentrunner.FileValidation, "validation.txt", old),
		fileAt("r2", agentrunner.FilePrompt, "prompt.md", old),
		fileAt("r2", agentrunner.FileValidation, "validation.txt", bound), // not older than the bound
		fileAt("r2", agentrunner.FileArtifact, "review.md", recent),
		fileAt("r2", agentrunner.FilePrompt, "prompt.md", recent),
	}})
	all := fileNames(t, s, "r1", "r2")
	for _, kinds := range [][]agentrunner.FileKind{
		nil,
		{agentrunner.FileArtifact},
		{agentrunner.FilePrompt, agentrunner.FileArtifact},
		{agentrunner.FilePrompt, "log"},
	} {
		if n, err := s.PruneFiles(ctx, recent.Add(time.Hour), kinds...); agentrunner.ErrorCode(err) != agentrunner.EINVALID || n != 0 {
			t.Errorf("PruneFiles of kinds %q: %d, %v; want EINVALID", kinds, n, err)
		}
	}
	if diff := cmp.Diff(all, fileNames(t, s, "r1", "r2")); diff != "" {
		t.Errorf("a refused prune deleted files (-want +got):\n%s", diff)
	}

	if n, err := s.PruneFiles(ctx, bound, agentrunner.FilePrompt, agentrunner.FileValidation); err != nil || n != 3 {
		t.Fatalf("PruneFiles before %s: %d, %v; want the 3 older prompts and reports", bound, n, err)
	}
	want := []string{"r1/artifact/review.md", "r2/validation/validation.txt", "r2/artifact/review.md", "r2/prompt/prompt.md"}
	if diff := cmp.Diff(want, fileNames(t, s, "r1", "r2")); diff != "" {
		t.Errorf("after the prune (-want +got):\n%s", diff)
	}
	if n, err := s.PruneFiles(ctx, bound, agentrunner.FilePrompt, agentrunner.FileValidation); err != nil || n != 0 {
		t.Errorf("the same prune again: %d, %v; want nothing left to delete", n, err)
	}

	// Only the kinds asked: the prompts go, the report stays. The newest
	// stored file is never pruned (its id would be given again).
	newest := fileAt("r2", agentrunner.FileArtifact, "newer.md", recent.Add(2*time.Hour))
	mustApply(t, s, &agentrunner.Change{Files: []*agentrunner.StoredFile{newest}})
	if n, err := s.PruneFiles(ctx, recent.Add(time.Hour), agentrunner.FilePrompt); err != nil || n != 1 {
		t.Fatalf("PruneFiles of prompts: %d, %v; want the one left", n, err)
	}
	want = []string{"r1/artifact/review.md", "r2/validation/validation.txt", "r2/artifact/review.md", "r2/artifact/newer.md"}
	if diff := cmp.Diff(want, fileNames(t, s, "r1", "r2")); diff != "" {
		t.Errorf("after pruning prompts (-want +got):\n%s", diff)
	}
}

// testPruneFilesInPasses: prunes an hour apart, as the runner makes them,
// each delete the prompts and reports made before their bound and no
// other, pass after pass, while steps keep adding files. A prune stops at
// the first file made at or after its bound, in the order of commits: one
// stamped out of order (earlier than a file committed before it) goes at
// the first pass that gets past that file.
func testPruneFilesInPasses(t *testing.T, s agentrunner.Store) {
	ctx := context.Background()
	mustApply(t, s, &agentrunner.Change{Runs: []*agentrunner.Run{run("r1", agentrunner.RunRunning)}})
	var files []*agentrunner.StoredFile
	for h := 0; h < 6; h++ {
		at := t0.Add(time.Duration(h) * time.Hour)
		batch := []*agentrunner.StoredFile{
			fileAt("r1", agentrunner.FileArtifact, fmt.Sprintf("a%d.md", h), at),
			fileAt("r1", agentrunner.FilePrompt, fmt.Sprintf("p%d.md", h), at.Add(time.Minute)),
			fileAt("r1", agentrunner.FileValidation, fmt.Sprintf("v%d.txt", h), at.Add(2*time.Minute)),
		}
		if h == 3 {
			batch[2].CreatedAt = at.Add(-30 * time.Minute) // behind the prompt committed ahead of it
		}
		mustApply(t, s, &agentrunner.Change{Files: batch})
		files = append(files, batch...)
	}
	for h := 1; h <= 6; h++ {
		before := t0.Add(time.Duration(h)*time.Hour + 30*time.Second)
		if _, err := s.PruneFiles(ctx, before, agentrunner.FilePrompt, agentrunner.FileValidation); err != nil {
			t.Fatal(err)
		}
		var want []string
		stop := slices.IndexFunc(files, func(f *agentrunner.StoredFile) bool { return !f.CreatedAt.Before(before) })
		if stop < 0 {
			stop = len(files) - 1 // the newest is never pruned
		}
		for i, f := range files {
			if f.Kind == agentrunner.FileArtifact || !f.CreatedAt.Before(before) || i >= stop {
				want = append(want, "r1/"+string(f.Kind)+"/"+f.Name)
			}
		}
		got := fileNames(t, s, "r1")
		slices.Sort(want)
		slices.Sort(got)
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("after the prune before %s (-want +got):\n%s", before.Format(time.TimeOnly), diff)
		}
	}
}

// testPruneEventsSince: after a prune, the filter by time still finds
// every event kept at or after its time, one stamped out of order
// included, and nothing before it.
func testPruneEventsSince(t *testing.T, s agentrunner.Store) {
	ctx := context.Background()
	var evs []*agentrunner.Event
	for m := 0; m < 30; m++ {
		e := &agentrunner.Event{Timestamp: t0.Add(time.Duration(m) * time.Minute), Type: "a", Level: agentrunner.LevelInfo}
		if m == 20 {
			e.Timestamp = t0.Add(12*time.Minute + 30*time.Second) // committed after later ones
		}
		evs = append(evs, e)
		mustApply(t, s, &agentrunner.Change{Events: []*agentrunner.Event{e}})
	}
	if _, err := s.PruneEvents(ctx, t0.Add(10*time.Minute)); err != nil {
		t.Fatal(err)
	}
	for _, since := range []time.Duration{0, 5 * time.Minute, 10 * time.Minute, 12 * time.Minute, 13 * time.Minute, 29 * time.Minute, time.Hour} {
		at := t0.Add(since)
		var want, got []int64
		for _, e := range evs {
			if e.ID >= evs[10].ID && !e.Timestamp.Before(at) {
				want = append(want, e.ID)
			}
		}
		page, err := s.Events(ctx, agentrunner.EventFilter{Since: at})
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range page {
			got = append(got, e.ID)
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("events since %s after the prune (-want +got):\n%s", at.Format(time.TimeOnly), diff)
		}
	}
}
