package document_test

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentrunner/agentrunner"
	"github.com/agentrunner/agentrunner/document"
	"github.com/google/go-cmp/cmp"
)

// store is a run's step runs and stored files, as the store gives them.
type store struct {
	stepRuns []*agentrunner.StepRun
	files    []*agentrunner.StoredFile
	err      error
}

func (s *store) StepRuns(_ context.Context, f agentrunner.StepRunFilter) ([]*agentrunner.StepRun, error) {
	var out []*agentrunner.StepRun
	for _, sr := range s.stepRuns {
		if sr.RunID == f.RunID && (f.Status == "" || sr.Status == f.Status) {
			out = append(out, sr)
		}
	}
	return out, s.err
}

func (s *store) Files(_ context.Context, f agentrunner.FileFilter) ([]*agentrunner.StoredFile, error) {
	var out []*agentrunner.StoredFile
	for _, x := range s.files {
		if x.RunID == f.RunID && (f.Kind == "" || x.Kind == f.Kind) {
			out = append(out, x)
		}
	}
	return out, s.err
}

// section adds a step run of run and, when it succeeded, its artifact
// (attempt n's; a failed attempt commits no artifact).
func (s *store) section(run, step string, visit int, status agentrunner.StepRunStatus, text string) {
	s.stepRuns = append(s.stepRuns, &agentrunner.StepRun{RunID: run, Step: step, Visit: visit, Status: status, OpenedAt: time.Unix(int64(len(s.stepRuns)), 0)})
	if status == agentrunner.StepRunSucceeded {
		s.files = append(s.files, &agentrunner.StoredFile{RunID: run, Step: step, Visit: visit, Kind: agentrunner.FileArtifact, Name: step + ".md", Data: []byte(text)})
	}
}

func newDocument(t *testing.T, st *store) (*document.Document, string, string) {
	t.Helper()
	dir := t.TempDir()
	live, archive := filepath.Join(dir, "docs", "context", "current_cycle.md"), filepath.Join(dir, "docs", "context", "archive")
	d, err := document.New(agentrunner.DocumentSpec{File: live, Archive: archive, Iteration: "orchestrator"}, st)
	if err != nil {
		t.Fatal(err)
	}
	return d, live, archive
}

func run(id string, status agentrunner.RunStatus, inputs map[string]any) *agentrunner.Run {
	return &agentrunner.Run{ID: id, Pipeline: "signal-flow", Status: status, Inputs: inputs}
}

func read(t *testing.T, path string) string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

func TestTheDocumentHasTheHeaderThenEachCommittedSectionUnderItsIteration(t *testing.T) {
	st := &store{}
	st.section("2026-11-27-001", "orchestrator", 1, agentrunner.StepRunSucceeded, "Route.\n\nSIGNAL BLOCK\nAgent=orchestrator | Next=verifier\n")
	st.section("2026-11-27-001", "verifier", 1, agentrunner.StepRunSucceeded, "\nNot yet.\nSIGNAL BLOCK\nAgent=verifier | Next=orchestrator")
	st.section("2026-11-27-001", "orchestrator", 2, agentrunner.StepRunSucceeded, "Again.")
	st.section("2026-11-27-001", "verifier", 2, agentrunner.StepRunOpen, "")
	st.section("2026-11-27-002", "orchestrator", 1, agentrunner.StepRunSucceeded, "Another cycle's.")
	d, live, _ := newDocument(t, st)
	r := run("2026-11-27-001", agentrunner.RunRunning, map[string]any{
		"goal": "  Make the import fast. ", "state": "The import takes 25 minutes.\n- It runs nightly", "docs": []any{"docs/agent_docs/AGENTS.md"},
	})
	if err := d.Follow(context.Background(), r); err != nil {
		t.Fatal(err)
	}
	want := `# Cycle: 2026-11-27-001

## Goal
Make the import fast.

## Current State
- The import takes 25 minutes.
- It runs nightly

## Context Docs
- docs/agent_docs/AGENTS.md

---

## Iteration 1

### Orchestrator Output

Route.

SIGNAL BLOCK
Agent=orchestrator | Next=verifier

---

### Verifier Output

Not yet.
SIGNAL BLOCK
Agent=verifier | Next=orchestrator

---

## Iteration 2

### Orchestrator Output

Again.

---

`
	if diff := cmp.Diff(want, read(t, live)); diff != "" {
		t.Errorf("the document (-want +got):\n%s", diff)
	}
}

func TestAHeaderWithoutInputsSaysWhatIsMissing(t *testing.T) {
	d, live, _ := newDocument(t, &store{})
	if err := d.Follow(context.Background(), run("2026-11-27-001", agentrunner.RunRunning, nil)); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"# Cycle: 2026-11-27-001\n", "## Goal\n(no goal was given)\n", "## Current State\n- (not described)\n", "## Context Docs\n- (none)\n"} {
		if !strings.Contains(read(t, live), want) {
			t.Errorf("the document lacks %q:\n%s", want, read(t, live))
		}
	}
}

func TestArchiveNamesFollowTheOutcome(t *testing.T) {
	for _, tc := range []struct {
		status agentrunner.RunStatus
		want   string
	}{
		{agentrunner.RunCompleted, "2026-11-27_cycle-001.md"},
		{agentrunner.RunIncomplete, "2026-11-27_cycle-001_incomplete.md"},
		{agentrunner.RunFailed, "2026-11-27_cycle-001_failed.md"},
		{agentrunner.RunAborted, "2026-11-27_cycle-001_failed.md"},
	} {
		if got := document.ArchiveName(run("2026-11-27-001", tc.status, nil)); got != tc.want {
			t.Errorf("%s: %s, want %s", tc.status, got, tc.want)
		}
	}
}

// The end of a cycle, and every crash inside it: the archive is written
// whole under its one name, then the live document goes; following the
// ended run again, whatever a crash left, ends in the same state.
func TestAnEndedRunIsArchivedOnceWhateverACrashLeft(t *testing.T) {
	st := &store{}
	st.section("2026-11-27-001", "orchestrator", 1, agentrunner.StepRunSucceeded, "Done.")
	ended := run("2026-11-27-001", agentrunner.RunIncomplete, map[string]any{"goal": "g"})
	for _, tc := range []struct {
		name  string
		crash func(t *testing.T, live, archived string)
	}{
		{"nothing done", func(*testing.T, string, string) {}},
		{"archived, live left", func(t *testing.T, live, archived string) {
			copyFile(t, live, archived)
		}},
		{"a half-written archive", func(t *testing.T, live, archived string) {
			data := read(t, live)
			writeFile(t, archived, data[:len(data)/2])
		}},
		{"the live document gone before its archive", func(t *testing.T, live, _ string) {
			os.Remove(live)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d, live, archive := newDocument(t, st)
			ctx := context.Background()
			running := *ended
			running.Status = agentrunner.RunRunning
			if err := d.Follow(ctx, &running); err != nil {
				t.Fatal(err)
			}
			doc := read(t, live)
			archived := filepath.Join(archive, "2026-11-27_cycle-001_incomplete.md")
			os.MkdirAll(archive, 0o755)
			tc.crash(t, live, archived)
			for range 2 {
				if err := d.Follow(ctx, ended); err != nil {
					t.Fatal(err)
				}
			}
			if got := read(t, archived); got != doc {
				t.Errorf("the archive:\n%s\nwant the run's document:\n%s", got, doc)
			}
			if _, err := os.Stat(live); !errors.Is(err, fs.ErrNotExist) {
				t.Errorf("the live document is still there: %v", err)
			}
			if names := list(t, archive); !cmp.Equal(names, []string{"2026-11-27_cycle-001_incomplete.md"}) {
				t.Errorf("archive holds %v, want the one document", names)
			}
		})
	}
}

func TestTheEndOfARunLeavesTheNextRunsDocument(t *testing.T) {
	st := &store{}
	d, live, archive := newDocument(t, st)
	ctx := context.Background()
	// A crash left the ended run's archive unwritten; the next run has
	// begun. Its start is followed first, then the end (the start's order
	// after a restart is by id; any order gives the same files).
	if err := d.Follow(ctx, run("2026-11-27-002", agentrunner.RunRunning, nil)); err != nil {
		t.Fatal(err)
	}
	if err := d.Follow(ctx, run("2026-11-27-001", agentrunner.RunCompleted, nil)); err != nil {
		t.Fatal(err)
	}
	if got := document.LiveCycle([]byte(read(t, live))); got != "2026-11-27-002" {
		t.Errorf("the live document is of cycle %q, want 2026-11-27-002", got)
	}
	if names := list(t, archive); !cmp.Equal(names, []string{"2026-11-27_cycle-001.md"}) {
		t.Errorf("archive holds %v", names)
	}
}

func TestAQueuedRunHasNoDocumentYet(t *testing.T) {
	d, live, _ := newDocument(t, &store{})
	if err := d.Follow(context.Background(), run("2026-11-27-001", agentrunner.RunQueued, nil)); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(live); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("a queued run has a document: %v", err)
	}
}

func TestAStoreErrorLeavesTheDocumentAsItWas(t *testing.T) {
	st := &store{}
	d, live, _ := newDocument(t, st)
	r := run("2026-11-27-001", agentrunner.RunRunning, nil)
	if err := d.Follow(context.Background(), r); err != nil {
		t.Fatal(err)
	}
	before := read(t, live)
	st.section("2026-11-27-001", "orchestrator", 1, agentrunner.StepRunSucceeded, "Done.")
	st.err = errors.New("disk I/O error")
	if err := d.Follow(context.Background(), r); err == nil || !strings.Contains(err.Error(), "2026-11-27-001") {
		t.Errorf("Follow with a failing store: %v, want an error naming the run", err)
	}
	if read(t, live) != before {
		t.Error("a failed Follow changed the document")
	}
}

func copyFile(t *testing.T, from, to string) { writeFile(t, to, read(t, from)) }

func writeFile(t *testing.T, path, data string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
}

func list(t *testing.T, dir string) []string {
	t.Helper()
	es, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range es {
		names = append(names, e.Name())
	}
	return names
}
