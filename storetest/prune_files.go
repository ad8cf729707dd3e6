package storetest

import (
	"context"
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

	// Only the kinds asked: the prompts go, the report stays.
	if n, err := s.PruneFiles(ctx, recent.Add(time.Hour), agentrunner.FilePrompt); err != nil || n != 1 {
		t.Fatalf("PruneFiles of prompts: %d, %v; want the one left", n, err)
	}
	want = []string{"r1/artifact/review.md", "r2/validation/validation.txt", "r2/artifact/review.md"}
	if diff := cmp.Diff(want, fileNames(t, s, "r1", "r2")); diff != "" {
		t.Errorf("after pruning prompts (-want +got):\n%s", diff)
	}
}
