package agent

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/agentrunner/agentrunner"
	"github.com/agentrunner/agentrunner/artifact"
)

// storeArtifact commits a copy of one of the run's artifacts to the store,
// as the scheduler does with a step's outcome.
func (e *env) storeArtifact(t *testing.T, name, data string) {
	t.Helper()
	f := &agentrunner.StoredFile{RunID: e.run.ID, Step: "plan", Visit: 1, Attempt: 1, Kind: agentrunner.FileArtifact,
		Name: name, Data: []byte(data), SHA256: artifact.Hash([]byte(data)), CreatedAt: t0}
	if err := e.store.Apply(context.Background(), &agentrunner.Change{Files: []*agentrunner.StoredFile{f}}); err != nil {
		t.Fatal(err)
	}
}

// TestInputIsServedFromTheStore: the research step reads the run's
// plan.md. Whatever the file in the run directory holds (stale, edited,
// truncated, missing), the agent reads the store's copy, and a rewritten
// file is recorded in a view.repaired event; a file whose step's outcome
// the store does not have is no input at all.
func TestInputIsServedFromTheStore(t *testing.T) {
	const stored = "# Plan\n\nThe committed plan.\n"
	tests := []struct {
		name    string
		store   map[string]string // the run's stored artifacts
		file    *string           // plan.md on disk; nil: missing
		read    string            // what the agent reads; "" when it does not run
		repair  string            // the view.repaired reason, if any
		failure agentrunner.ErrorClass
	}{
		{name: "the file is right", store: map[string]string{"plan.md": stored}, file: ptr(stored), read: stored},
		{name: "the file is stale", store: map[string]string{"plan.md": stored}, file: ptr("# Plan\n\nAn older plan.\n"), read: stored, repair: "different"},
		{name: "the file is truncated", store: map[string]string{"plan.md": stored}, file: ptr("# Pl"), read: stored, repair: "different"},
		{name: "the file is missing", store: map[string]string{"plan.md": stored}, read: stored, repair: "missing"},
		{name: "the store has no plan.md", store: map[string]string{"other.md": "x"}, file: ptr("# Plan\n\nNever committed.\n"), failure: agentrunner.ClassInternal},
		{name: "a run from before the store kept artifacts", file: ptr("# Plan\n\nOld.\n"), read: "# Plan\n\nOld.\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t)
			path := filepath.Join(e.run.Dir, "plan.md")
			os.Remove(path)
			if tt.file != nil {
				os.WriteFile(path, []byte(*tt.file), 0o644)
			}
			for name, data := range tt.store {
				e.storeArtifact(t, name, data)
			}
			read := ""
			rt := agentFunc(func(ctx context.Context, inv *agentrunner.Invocation) (*agentrunner.RunResult, error) {
				data, _ := os.ReadFile(inv.Inputs[0].Path)
				read = string(data)
				return e.mock.Run(ctx, inv)
			})
			res, err := e.kind(t, rt, nil).Run(context.Background(), e.attempt(t))
			if (tt.failure == "" && err != nil) || (tt.failure != "" && agentrunner.ClassOf(err) != tt.failure) {
				t.Fatalf("error %v (class %q), want class %q", err, agentrunner.ClassOf(err), tt.failure)
			}
			if read != tt.read {
				t.Errorf("the agent read %q, want %q", read, tt.read)
			}
			repairs := []string{}
			for _, ev := range res.Events {
				if ev.Type == agentrunner.EventViewRepaired {
					repairs = append(repairs, ev.Details["reason"].(string))
				}
			}
			want := []string{}
			if tt.repair != "" {
				want = append(want, tt.repair)
			}
			if !slices.Equal(repairs, want) {
				t.Errorf("repairs %v, want %q", repairs, tt.repair)
			}
		})
	}
}

func ptr(s string) *string { return &s }
