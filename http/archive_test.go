package http_test

import (
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/agentrunner/agentrunner"
	"github.com/agentrunner/agentrunner/archive"
	"github.com/agentrunner/agentrunner/artifact"
	arhttp "github.com/agentrunner/agentrunner/http"
	"github.com/agentrunner/agentrunner/internal/clocktest"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

// TestArchivedRunsArtifactsAreServed: once runs were archived (their
// directories removed), GET /api/cycles/{id}/artifacts/{name} and GET
// /api/runs/{run}/artifacts/{name} answer as before: a run's stored
// artifacts from the store, a run from before the store kept them from
// its archive; and the run's detail lists them.
func TestArchivedRunsArtifactsAreServed(t *testing.T) {
	f := newAPIFixture(t, nil)
	addr := serve(t, f.srv)
	dir := func(pipeline, id string) string { return filepath.Join(f.cfg.ArtifactsDir, "runs", pipeline, id) }
	ended := now.Add(-48 * time.Hour)
	stored := &agentrunner.Run{ID: "20260301_000000", Pipeline: "loop", Status: agentrunner.RunCompleted,
		Dir: filepath.Join(f.cfg.ArtifactsDir, "cycles", "20260301_000000"), StartedAt: ended.Add(-time.Hour), EndedAt: ended}
	legacy := &agentrunner.Run{ID: "review-000001", Pipeline: "review", Status: agentrunner.RunCompleted,
		Dir: dir("review", "review-000001"), StartedAt: ended.Add(-time.Hour), EndedAt: ended}
	newer := &agentrunner.Run{ID: "review-000002", Pipeline: "review", Status: agentrunner.RunCompleted,
		Dir: dir("review", "review-000002"), StartedAt: ended, EndedAt: ended.Add(time.Hour)}
	newerCycle := &agentrunner.Run{ID: "20260302_000000", Pipeline: "loop", Status: agentrunner.RunCompleted,
		Dir: filepath.Join(f.cfg.ArtifactsDir, "cycles", "20260302_000000"), StartedAt: ended, EndedAt: ended.Add(time.Hour)}
	plan := &agentrunner.StoredFile{RunID: stored.ID, Step: "plan", Visit: 1, Attempt: 1, Kind: agentrunner.FileArtifact, Name: "plan.md",
		Data: []byte("# Plan\n"), SHA256: artifact.Hash([]byte("# Plan\n")), CreatedAt: ended}
	ch := &agentrunner.Change{Runs: []*agentrunner.Run{stored, legacy, newer, newerCycle}, Files: []*agentrunner.StoredFile{plan}}
	if err := f.store.Apply(t.Context(), ch); err != nil {
		t.Fatal(err)
	}
	write := func(path, body string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(filepath.Join(stored.Dir, "plan.md"), "# Plan\n")
	write(filepath.Join(legacy.Dir, "draft.md"), "# Draft\n")
	write(filepath.Join(newer.Dir, "draft.md"), "# Draft 2\n")
	a := &archive.Archiver{Store: f.store, History: filepath.Join(f.cfg.ArtifactsDir, "cycles", "history"), Clock: clocktest.New(now)}
	rep, err := a.Pass(t.Context(), archive.Policy{Keep: 1}, false)
	if diff := cmp.Diff(&archive.Report{Archived: []string{stored.ID, legacy.ID}}, rep); err != nil || diff != "" {
		t.Fatalf("archive: %v (-want +got):\n%s", err, diff)
	}
	for _, d := range []string{stored.Dir, legacy.Dir} {
		if _, err := os.Stat(d); !errors.Is(err, fs.ErrNotExist) {
			t.Fatalf("%s is still there: %v", d, err)
		}
	}
	tests := []struct {
		path string
		want fileAnswer
	}{
		{"/api/cycles/" + stored.ID + "/artifacts/plan.md", fileAnswer{Status: 200, ContentType: "text/markdown; charset=utf-8", NoSniff: "nosniff", Body: "# Plan\n"}},
		{"/api/runs/" + legacy.ID + "/artifacts/draft.md", fileAnswer{Status: 200, ContentType: "text/markdown; charset=utf-8", NoSniff: "nosniff", Body: "# Draft\n"}},
		{"/api/runs/" + legacy.ID + "/artifacts/review.md", fileAnswer{Status: 404, Code: "not_found", Body: "cycle review-000001 has no artifact review.md"}},
	}
	for _, tt := range tests {
		if diff := cmp.Diff(tt.want, f.getFile(addr, tt.path, viewerKey)); diff != "" {
			t.Errorf("GET %s (-want +got):\n%s", tt.path, diff)
		}
	}
	d := f.getFile(addr, "/api/runs/"+legacy.ID, viewerKey)
	var detail arhttp.RunDetail
	if err := json.Unmarshal([]byte(d.Body), &detail); err != nil || d.Status != 200 {
		t.Fatalf("GET the run: %d %s", d.Status, d.Body)
	}
	want := []arhttp.Artifact{{Name: "draft.md", Size: 8, SHA256: artifact.Hash([]byte("# Draft\n"))}}
	if diff := cmp.Diff(want, detail.Artifacts, cmpopts.IgnoreFields(arhttp.Artifact{}, "Modified")); diff != "" {
		t.Errorf("the archived run's artifacts (-want +got):\n%s", diff)
	}
}
