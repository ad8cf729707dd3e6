package scheduler

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"time"

	"github.com/agentrunner/agentrunner"
	"github.com/agentrunner/agentrunner/artifact"
	"github.com/agentrunner/agentrunner/internal/atomicfile"
	"github.com/agentrunner/agentrunner/view"
)

// viewWindow is how long before the newest run's end the runs are that
// the start checks besides the unfinished ones: a view is written after
// its commit without an fsync, so a crash, or a power loss before the
// page cache reached the disk, can lose the views of the runs that ended
// in the last moments. Older runs' views are checked when an agent reads
// them.
const viewWindow = 5 * time.Minute

// pendingView is a view to write once its change is committed.
type pendingView struct {
	path string
	file *agentrunner.StoredFile
}

// keepFiles adds the files an attempt wrote to its change, completed with
// their run, step, visit, attempt, hash and time: its prompt and
// validation report always, its artifact only when the attempt succeeded,
// with the view to write into the run's directory once committed; and its
// messages (keepMail).
func (s *Scheduler) keepFiles(ch *agentrunner.Change, rs *runState, ss *stepState, res *agentrunner.StepResult, succeeded bool) {
	if res == nil {
		return
	}
	s.keepMail(ch, res, succeeded)
	for _, f := range res.Files {
		if f.Kind == agentrunner.FileArtifact && !succeeded {
			continue
		}
		f.RunID, f.Step, f.Visit, f.Attempt = rs.run.ID, ss.sr.Step, ss.sr.Visit, ss.att.Number
		f.SHA256, f.CreatedAt = artifact.Hash(f.Data), s.clock.Now()
		ch.Files = append(ch.Files, f)
		if f.Kind != agentrunner.FileArtifact || rs.pipeline.Views == agentrunner.ViewsOnRead {
			continue // written for the agent to read, or when one reads it
		}
		path, err := view.Path(rs.run.Dir, "", f)
		if err != nil {
			s.log.Error("an artifact's view", "run", f.RunID, "step", f.Step, "error", err)
			continue
		}
		s.batch.views = append(s.batch.views, pendingView{path: path, file: f})
	}
}

// writeViews writes the views of a committed batch's artifacts, in the
// background when Options.Views is set; those of a unit the store
// refused have no id, and no view. A failure loses nothing (the store
// has the bytes): it is logged, and the view is rewritten when an agent
// reads it or at the next start.
func (s *Scheduler) writeViews(views []pendingView) {
	if len(views) > 0 && s.opts.BeforeViews != nil {
		s.opts.BeforeViews()
	}
	for _, v := range views {
		if v.file.ID == 0 {
			continue
		}
		s.opts.Views.Add(v.path, func() {
			if err := view.Write(v.path, v.file); err != nil {
				s.log.Warn("writing an artifact's view", "run", v.file.RunID, "path", v.path, "error", err)
			}
		})
	}
}

// checkStartViews checks, at the first start of a process
// (Options.ViewsChecked), the mailbox files and the artifacts' views of
// the unfinished runs and of those that ended last. Later schedulers of
// the process skip it: nothing crashed in between.
func (s *Scheduler) checkStartViews(ctx context.Context, unfinished []*agentrunner.Run) error {
	done := s.opts.ViewsChecked
	if done != nil && done.Load() {
		return nil
	}
	if err := s.checkMailboxes(ctx); err != nil {
		return fmt.Errorf("check the mailbox files: %w", err)
	}
	if err := s.checkViews(ctx, unfinished); err != nil {
		return fmt.Errorf("check the files that are views of the store: %w", err)
	}
	if done != nil {
		done.Store(true)
	}
	return nil
}

// checkViews compares the artifact views of the unfinished runs and of
// the runs that ended within viewWindow of the newest one with the
// store's copies, rewrites those missing or different, and records each
// repair in an EventViewRepaired.
func (s *Scheduler) checkViews(ctx context.Context, unfinished []*agentrunner.Run) error {
	ended, err := s.endedLast(ctx)
	if err != nil {
		return err
	}
	var repairs []*agentrunner.Event
	for _, r := range slices.Concat(unfinished, ended) {
		p := s.opts.Pipelines[r.Pipeline]
		onRead := p != nil && p.Views == agentrunner.ViewsOnRead
		files, err := s.store.Files(ctx, agentrunner.FileFilter{RunID: r.ID, Kind: agentrunner.FileArtifact, Latest: true, NoData: true})
		if err != nil {
			return err
		}
		for _, f := range files {
			ev, err := s.checkView(ctx, r, f, onRead)
			if err != nil {
				return err
			}
			if ev != nil {
				repairs = append(repairs, ev)
			}
		}
		s.removeTemps(r, files)
	}
	if len(repairs) > 0 {
		s.batch.change().Events = repairs
	}
	return nil
}

// checkView compares one artifact's view with its stored hash and, when
// the view is missing or differs, rewrites it from the stored bytes (read
// only then); a repair gives its event. A view of a pipeline whose views
// are written on read (onRead) is only missing until then: only one that
// differs is rewritten. A view it cannot check or write is logged: the
// agent kind checks it again before an agent reads it.
func (s *Scheduler) checkView(ctx context.Context, r *agentrunner.Run, listed *agentrunner.StoredFile, onRead bool) (*agentrunner.Event, error) {
	path, err := view.Path(r.Dir, "", listed)
	if err != nil {
		s.log.Error("an artifact's view", "run", r.ID, "error", err)
		return nil, nil
	}
	if reason, err := view.Compare(path, listed); err != nil || reason == "" || onRead && reason == view.Missing {
		if err != nil {
			s.log.Warn("checking an artifact's view", "run", r.ID, "path", path, "error", err)
		}
		return nil, nil
	}
	files, err := s.store.Files(ctx, agentrunner.FileFilter{RunID: r.ID, Kind: agentrunner.FileArtifact, Name: listed.Name, Latest: true})
	if err != nil || len(files) == 0 {
		return nil, err
	}
	reason, err := view.Check(path, files[0])
	if err != nil {
		s.log.Warn("rewriting an artifact's view", "run", r.ID, "path", path, "error", err)
	}
	if reason == "" {
		return nil, nil
	}
	return view.Repaired(s.clock.Now(), files[0], path, reason), nil
}

// endedLast are the runs that ended within viewWindow of the last commit
// (the newest event): those whose views a crash may have lost.
func (s *Scheduler) endedLast(ctx context.Context) ([]*agentrunner.Run, error) {
	last, err := s.store.Events(ctx, agentrunner.EventFilter{Newest: true, Limit: 1})
	if err != nil || len(last) == 0 {
		return nil, err
	}
	return s.store.Runs(ctx, agentrunner.RunFilter{EndedAfter: last[0].Timestamp.Add(-viewWindow)})
}

// removeTemps removes what writes of the run's views that a crash cut
// short left beside them: one listing per folder that holds a view.
func (s *Scheduler) removeTemps(r *agentrunner.Run, files []*agentrunner.StoredFile) {
	dirs := map[string]bool{}
	for _, f := range files {
		if path, err := view.Path(r.Dir, "", f); err == nil {
			dirs[filepath.Dir(path)] = true
		}
	}
	for dir := range dirs {
		if err := atomicfile.RemoveDirTemps(dir); err != nil {
			s.log.Warn("removing what cut-short writes of a run's views left", "run", r.ID, "dir", dir, "error", err)
		}
	}
}
