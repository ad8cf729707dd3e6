package agent

import (
	"context"
	"path/filepath"

	"github.com/agentrunner/agentrunner"
	"github.com/agentrunner/agentrunner/archive"
	"github.com/agentrunner/agentrunner/view"
)

// serve makes the view of a run's artifact right before an agent reads it
// (view.Read): the file in dir is rewritten from the store's copy when it
// is missing or differs, with an EventViewRepaired. It reports whether the
// run has the artifact.
func (at *attempt) serve(ctx context.Context, runID, dir, name string) (bool, error) {
	data, err := at.committed(ctx, runID, dir, name)
	if err != nil {
		return false, agentrunner.Fail(agentrunner.ClassInternal, "input %s of run %s: %w", name, runID, err)
	}
	return data != nil, nil
}

// committed returns a run's artifact as the store committed it, after
// making its view in dir right (view.Read), and keeps the event of a
// repair for the attempt's result; nil: the run has no such artifact.
func (at *attempt) committed(ctx context.Context, runID, dir, name string) ([]byte, error) {
	onRead := at.sa.Views == agentrunner.ViewsOnRead || at.archivedDir(dir)
	data, repaired, err := view.Read(ctx, at.k.opts.Store, at.k.opts.Views, onRead, runID, dir, name, at.k.clock.Now())
	if repaired != nil {
		at.res.Events = append(at.res.Events, repaired)
	}
	return data, err
}

// archivedDirName is the folder of an attempt that holds the views of the
// artifacts it reads from archived runs, one folder per run.
const archivedDirName = "archived"

// priorDir is the directory in which an agent reads an earlier run's
// artifact: the run's own, or, once the run was archived (its directory
// removed), a folder of this attempt, where the view is written from the
// store: reading an archived run's artifact never brings its directory
// back.
func (at *attempt) priorDir(prev *agentrunner.Run) string {
	if archive.Archived(at.k.ws.Layout.History(), prev) {
		return filepath.Join(at.sa.Dir, archivedDirName, prev.ID)
	}
	return prev.Dir
}

// archivedDir reports whether dir is one of priorDir's folders of this
// attempt, whose views are written when read, not repaired.
func (at *attempt) archivedDir(dir string) bool {
	return at.sa.Dir != "" && filepath.Dir(dir) == filepath.Join(at.sa.Dir, archivedDirName)
}
