package main

import (
	"bytes"
	"context"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentrunner/agentrunner"
	"github.com/agentrunner/agentrunner/artifact"
	"github.com/agentrunner/agentrunner/sqlite"
	"github.com/google/go-cmp/cmp"
)

// TestPruneHistory: a pass of events.retention deletes the old events
// and the old stored prompts and validation reports, and keeps every
// stored artifact and what is recent.
func TestPruneHistory(t *testing.T) {
	ctx := context.Background()
	store, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "state.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	old := time.Date(2026, 10, 1, 9, 0, 0, 0, time.UTC)
	recent := old.Add(40 * 24 * time.Hour)
	stored := func(kind agentrunner.FileKind, name string, at time.Time) *agentrunner.StoredFile {
		data := []byte(name + " at " + at.String())
		return &agentrunner.StoredFile{RunID: "review-000001", Step: "review", Kind: kind, Name: name, Data: data,
			SHA256: artifact.Hash(data), CreatedAt: at}
	}
	run := &agentrunner.Run{ID: "review-000001", Pipeline: "review", Status: agentrunner.RunRunning, Dir: "/srv/runs/review-000001", StartedAt: old}
	err = store.Apply(ctx, &agentrunner.Change{Runs: []*agentrunner.Run{run},
		Events: []*agentrunner.Event{
			{Timestamp: old, Type: agentrunner.EventAttemptStarted, CycleID: run.ID, Level: agentrunner.LevelInfo},
			{Timestamp: recent, Type: agentrunner.EventAttemptStarted, CycleID: run.ID, Level: agentrunner.LevelInfo},
		},
		Files: []*agentrunner.StoredFile{
			stored(agentrunner.FileArtifact, "review.md", old), stored(agentrunner.FilePrompt, "prompt.md", old),
			stored(agentrunner.FileValidation, "validation.txt", old), stored(agentrunner.FilePrompt, "prompt.md", recent),
		}})
	if err != nil {
		t.Fatal(err)
	}
	var log bytes.Buffer
	r := &runner{store: store, log: slog.New(slog.NewTextHandler(&log, nil))}
	keep := 30 * 24 * time.Hour
	r.prune(ctx, recent.Add(-keep), keep)

	files, err := store.Files(ctx, agentrunner.FileFilter{RunID: run.ID, NoData: true})
	if err != nil {
		t.Fatal(err)
	}
	var kept []string
	for _, f := range files {
		kept = append(kept, string(f.Kind)+" "+f.Name+" "+f.CreatedAt.Format(time.DateOnly))
	}
	if diff := cmp.Diff([]string{"artifact review.md 2026-10-01", "prompt prompt.md 2026-11-10"}, kept); diff != "" {
		t.Errorf("stored files kept (-want +got):\n%s", diff)
	}
	if evs, _ := store.Events(ctx, agentrunner.EventFilter{}); len(evs) != 1 || !evs[0].Timestamp.Equal(recent) {
		t.Errorf("events kept: %+v, want the recent one", evs)
	}
	for _, want := range []string{`msg="pruned old events" deleted=1 retention=720h0m0s`, `msg="pruned old stored prompts and validation reports" deleted=2 retention=720h0m0s`} {
		if !strings.Contains(log.String(), want) {
			t.Errorf("the log does not say %s:\n%s", want, log.String())
		}
	}
	if strings.Contains(log.String(), "level=ERROR") {
		t.Errorf("the prune logged an error:\n%s", log.String())
	}
}
