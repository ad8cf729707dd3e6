package engine

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentrunner/agentrunner"
	"github.com/agentrunner/agentrunner/archive"
	"github.com/agentrunner/agentrunner/execsvc"
)

// TestHistoryInputsReadArchivedCycles: the plan agent reads the
// evaluations of the past week; one of those cycles was archived, its
// directory removed. Its evaluation is given from the store, in a folder
// of the attempt: the archived directory is not written again, and no
// view is reported repaired.
func TestHistoryInputsReadArchivedCycles(t *testing.T) {
	f := newFixture(t, execsvc.MockOptions{}, nil)
	e := f.engine()
	var ids []string
	for i := range 2 {
		if i > 0 {
			f.toNextCycle()
		}
		c := f.runOnce(e)
		if c.Status != agentrunner.CycleCompleted {
			t.Fatalf("cycle %d: %s", i, c.Error)
		}
		ids = append(ids, c.ID)
	}
	a := &archive.Archiver{Store: f.store, History: f.ws.Layout.History(), Clock: f.clock}
	rep, err := a.Pass(context.Background(), archive.Policy{Keep: 1}, false)
	if err != nil || len(rep.Archived) != 1 || rep.Archived[0] != ids[0] {
		t.Fatalf("archive: %+v %v", rep, err)
	}
	f.toNextCycle()
	c := f.runOnce(e)
	if c.Status != agentrunner.CycleCompleted {
		t.Fatalf("the cycle after the archive: %s", c.Error)
	}
	old := filepath.Join(f.ws.Layout.Cycle(ids[0]), "evaluation.md")
	if _, err := os.Stat(f.ws.Layout.Cycle(ids[0])); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("reading the archived cycle's evaluation wrote its directory again: %v", err)
	}
	atts, err := f.store.Attempts(context.Background(), c.ID)
	if err != nil {
		t.Fatal(err)
	}
	given := filepath.Join(atts[0].Dir, "archived", ids[0], "evaluation.md")
	plan := f.stored(c.ID, "plan", 1, agentrunner.FilePrompt)
	if !strings.Contains(plan, given) || strings.Contains(plan, old) {
		t.Errorf("the plan prompt does not give the archived evaluation at %s:\n%s", given, plan)
	}
	stored, err := f.store.Files(context.Background(), agentrunner.FileFilter{RunID: ids[0], Kind: agentrunner.FileArtifact, Name: "evaluation.md", Latest: true})
	if err != nil || len(stored) != 1 {
		t.Fatalf("the stored evaluation: %v", err)
	}
	if data, err := os.ReadFile(given); err != nil || string(data) != string(stored[0].Data) {
		t.Errorf("the evaluation given: %v, want the stored one", err)
	}
	if !strings.Contains(plan, filepath.Join(f.ws.Layout.Cycle(ids[1]), "evaluation.md")) {
		t.Error("the plan prompt lacks the evaluation of the cycle still in its directory")
	}
	for _, ev := range f.eventsOf(agentrunner.EventViewRepaired) {
		if ev.CycleID == ids[0] {
			t.Errorf("a view of the archived cycle was reported repaired: %+v", ev.Details)
		}
	}
}
