package storetest

import (
	"context"
	"testing"

	"github.com/agentrunner/agentrunner"
	"github.com/agentrunner/agentrunner/artifact"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

// file is a stored file of run r with data.
func file(r, step string, visit, attempt int, kind agentrunner.FileKind, name, data string) *agentrunner.StoredFile {
	return &agentrunner.StoredFile{RunID: r, Step: step, Visit: visit, Attempt: attempt, Kind: kind, Name: name,
		Data: []byte(data), SHA256: artifact.Hash([]byte(data)), CreatedAt: t0}
}

func testFiles(t *testing.T, s agentrunner.Store) {
	ctx := context.Background()
	r := run("r1", agentrunner.RunRunning)
	v1 := file("r1", "review", 1, 1, agentrunner.FileArtifact, "review.md", "# first\n")
	p1 := file("r1", "review", 1, 1, agentrunner.FilePrompt, "prompt.md", "write a review")
	bad := file("r1", "review", 2, 1, agentrunner.FileValidation, "validation.txt", "missing section")
	v2 := file("r1", "review", 2, 2, agentrunner.FileArtifact, "review.md", "# second\n")
	other := file("r2", "review", 1, 1, agentrunner.FileArtifact, "review.md", "# other run\n")
	empty := file("r1", "fix", 1, 1, agentrunner.FileArtifact, "fix.md", "")
	mustApply(t, s, &agentrunner.Change{Runs: []*agentrunner.Run{r, run("r2", agentrunner.RunRunning)}, Files: []*agentrunner.StoredFile{v1, p1}})
	mustApply(t, s, &agentrunner.Change{Files: []*agentrunner.StoredFile{bad, v2, other, empty}})
	if v1.ID == 0 || v2.ID <= v1.ID {
		t.Fatalf("ids %d then %d, want growing ids", v1.ID, v2.ID)
	}
	ignoreID := cmpopts.IgnoreFields(agentrunner.StoredFile{}, "ID")
	tests := []struct {
		name string
		f    agentrunner.FileFilter
		want []*agentrunner.StoredFile
	}{
		{"every file of the run", agentrunner.FileFilter{RunID: "r1"}, []*agentrunner.StoredFile{v1, p1, bad, v2, empty}},
		{"its artifacts", agentrunner.FileFilter{RunID: "r1", Kind: agentrunner.FileArtifact}, []*agentrunner.StoredFile{v1, v2, empty}},
		{"the newest of each", agentrunner.FileFilter{RunID: "r1", Kind: agentrunner.FileArtifact, Latest: true}, []*agentrunner.StoredFile{v2, empty}},
		{"one name", agentrunner.FileFilter{RunID: "r1", Name: "review.md", Latest: true}, []*agentrunner.StoredFile{v2}},
		{"another run", agentrunner.FileFilter{RunID: "r2"}, []*agentrunner.StoredFile{other}},
		{"one step", agentrunner.FileFilter{RunID: "r1", Step: "fix"}, []*agentrunner.StoredFile{empty}},
		{"one attempt", agentrunner.FileFilter{RunID: "r1", Step: "review", Attempt: 1}, []*agentrunner.StoredFile{v1, p1, bad}},
		{"one attempt's prompt", agentrunner.FileFilter{RunID: "r1", Step: "review", Attempt: 1, Kind: agentrunner.FilePrompt}, []*agentrunner.StoredFile{p1}},
		{"no such run", agentrunner.FileFilter{RunID: "r9"}, nil},
	}
	for _, tt := range tests {
		got, err := s.Files(ctx, tt.f)
		if err != nil {
			t.Fatalf("%s: %v", tt.name, err)
		}
		if diff := cmp.Diff(tt.want, got, ignoreID, cmpopts.EquateEmpty()); diff != "" {
			t.Errorf("%s (-want +got):\n%s", tt.name, diff)
		}
	}
	listed, err := s.Files(ctx, agentrunner.FileFilter{RunID: "r1", Kind: agentrunner.FilePrompt, NoData: true})
	if err != nil || len(listed) != 1 || listed[0].Data != nil || listed[0].SHA256 != p1.SHA256 || listed[0].Size != int64(len(p1.Data)) {
		t.Errorf("a listing without data: %+v, %v; want the prompt's row with its hash and size and no data", listed, err)
	}
	if _, err := s.Files(ctx, agentrunner.FileFilter{}); agentrunner.ErrorCode(err) != agentrunner.EINVALID {
		t.Errorf("files of no run: %v, want EINVALID", err)
	}
}

func testFilesAtomic(t *testing.T, s agentrunner.Store) {
	ctx := context.Background()
	mustApply(t, s, &agentrunner.Change{Runs: []*agentrunner.Run{run("r1", agentrunner.RunRunning)}})
	f := file("r1", "review", 1, 1, agentrunner.FileArtifact, "review.md", "# kept?\n")
	// The second change fails (a run id taken by another pipeline's run),
	// so the first one's file must not be written either.
	clash := run("r1", agentrunner.RunRunning)
	clash.Pipeline = "other"
	err := s.ApplyAll(ctx, &agentrunner.Change{Files: []*agentrunner.StoredFile{f}}, &agentrunner.Change{Runs: []*agentrunner.Run{clash}})
	if err == nil {
		t.Fatal("ApplyAll with a clashing run succeeded")
	}
	if got, _ := s.Files(ctx, agentrunner.FileFilter{RunID: "r1"}); len(got) != 0 {
		t.Errorf("a failed change left %d stored files", len(got))
	}
	bad := file("r1", "review", 1, 1, agentrunner.FileArtifact, "", "nameless")
	if err := s.Apply(ctx, &agentrunner.Change{Files: []*agentrunner.StoredFile{bad}}); agentrunner.ErrorCode(err) != agentrunner.EINVALID {
		t.Errorf("a file without a name: %v, want EINVALID", err)
	}
}
