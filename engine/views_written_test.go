package engine

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"

	"github.com/agentrunner/agentrunner"
	"github.com/agentrunner/agentrunner/config"
	"github.com/agentrunner/agentrunner/execsvc"
	"github.com/google/go-cmp/cmp"
)

// TestViewsOnReadWriteOnlyWhatAnAgentReads: a pipeline whose views are
// written on read keeps every artifact in the store, writes into the run
// directory only the artifacts its agents read as inputs (as the store
// has them), and records no repair for the files it never wrote.
func TestViewsOnReadWriteOnlyWhatAnAgentReads(t *testing.T) {
	f := newFixture(t, execsvc.MockOptions{CompletedAfter: 1}, func(c *config.Config) { c.Pipeline.Views = string(agentrunner.ViewsOnRead) })
	var mu sync.Mutex
	var inputs []string // the paths agents were given to read
	f.onRun = func(inv *agentrunner.Invocation) {
		mu.Lock()
		defer mu.Unlock()
		for _, in := range inv.Inputs {
			inputs = append(inputs, in.Path)
		}
	}
	c := f.runOnce(f.engine())
	if c.Status != agentrunner.CycleCompleted {
		t.Fatalf("cycle %s: %s", c.Status, c.Error)
	}
	stored, err := f.store.Files(context.Background(), agentrunner.FileFilter{RunID: c.ID, Kind: agentrunner.FileArtifact, Latest: true})
	if err != nil {
		t.Fatal(err)
	}
	read := map[string]bool{} // the artifacts of this cycle its agents read
	for _, p := range inputs {
		if filepath.Dir(p) == c.Dir {
			read[filepath.Base(p)] = true
		}
	}
	var want, all []string
	for _, file := range stored {
		all = append(all, file.Name)
		if read[file.Name] {
			want = append(want, file.Name)
		}
		if data, err := os.ReadFile(filepath.Join(c.Dir, file.Name)); err == nil && string(data) != string(file.Data) {
			t.Errorf("%s in the cycle directory is not the store's copy", file.Name)
		}
	}
	slices.Sort(want)
	if len(want) == 0 || len(want) == len(all) {
		t.Fatalf("the example's inputs %v among its artifacts %v do not tell on_read from eager", want, all)
	}
	if diff := cmp.Diff(want, files(t, c.Dir)); diff != "" {
		t.Errorf("the cycle directory (-the artifacts agents read +got):\n%s", diff)
	}
	if evs := f.eventsOf(agentrunner.EventViewRepaired); len(evs) != 0 {
		t.Errorf("views written on read were recorded as repairs: %+v", evs[0].Details)
	}
}

// TestAStoppingSchedulerWritesThePendingViews: views wait in the
// background writer (held here, as if it were behind); when the
// scheduler stops, at the end of RunOnce, every pending view is written,
// so the cycle directory holds every artifact as the store has it.
func TestAStoppingSchedulerWritesThePendingViews(t *testing.T) {
	f := newFixture(t, execsvc.MockOptions{CompletedAfter: 1}, nil)
	e := f.engine()
	release := e.views.Hold()
	defer release()
	c := f.runOnce(e)
	if c.Status != agentrunner.CycleCompleted {
		t.Fatalf("cycle %s: %s", c.Status, c.Error)
	}
	if n := e.views.Pending(); n != 0 {
		t.Errorf("%d views still pending after RunOnce", n)
	}
	stored, err := f.store.Files(context.Background(), agentrunner.FileFilter{RunID: c.ID, Kind: agentrunner.FileArtifact, Latest: true})
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	for _, file := range stored {
		want = append(want, file.Name)
		if data, err := os.ReadFile(filepath.Join(c.Dir, file.Name)); err != nil || string(data) != string(file.Data) {
			t.Errorf("%s in the cycle directory: %v, not the store's copy", file.Name, err)
		}
	}
	slices.Sort(want)
	if diff := cmp.Diff(want, files(t, c.Dir)); diff != "" {
		t.Errorf("the cycle directory (-stored +got):\n%s", diff)
	}
}

// TestViewsOnReadMakeNoDirectoryNobodyReads: with views on read, a run
// whose agents read nothing from it makes no run directory (a step then
// creates no file at all); with eager views, the same run has its
// directory and its artifact there.
func TestViewsOnReadMakeNoDirectoryNobodyReads(t *testing.T) {
	for _, mode := range []agentrunner.ViewMode{agentrunner.ViewsOnRead, agentrunner.ViewsEager} {
		t.Run(string(mode), func(t *testing.T) {
			f := newFixture(t, execsvc.MockOptions{CompletedAfter: 1}, func(c *config.Config) {
				c.Pipeline.Views = string(mode)
				first := c.Pipeline.Steps[c.Pipeline.Start]
				first.Next = "end"
				c.Pipeline.Steps = map[string]*config.Step{c.Pipeline.Start: first}
			})
			c := f.runOnce(f.engine())
			if c.Status != agentrunner.CycleCompleted {
				t.Fatalf("cycle %s: %s", c.Status, c.Error)
			}
			_, err := os.Stat(c.Dir)
			switch {
			case mode == agentrunner.ViewsOnRead && err == nil:
				t.Errorf("the run directory %s was made, though nothing was read from it", c.Dir)
			case mode == agentrunner.ViewsEager && len(files(t, c.Dir)) != 1:
				t.Errorf("the run directory holds %v, want the step's artifact", files(t, c.Dir))
			}
		})
	}
}
