package scheduler

import (
	"context"
	"maps"
	"slices"

	"github.com/agentrunner/agentrunner"
)

// followAtStart is how many of a followed pipeline's newest runs the
// start hands to its follower: the run in flight, and the ended ones
// whose end a crash may have cut off from what follows it (runs end one
// at a time under a document's max_concurrent_runs of 1).
const followAtStart = 10

// follow hands each run that the committed units changed to its
// pipeline's follower (RunFollower), before any attempt the commit
// opened starts. A follower that fails is logged, and the run's attempts
// wait (dispatch holds them) until a later call succeeds: its agents
// read what the follower keeps (the document), which must not be behind.
func (s *Scheduler) follow(ctx context.Context, us []*unit, errs []error) {
	if len(s.opts.Followers) == 0 {
		return
	}
	changed := map[string]*agentrunner.Run{}
	for i, u := range us {
		if errs[i] != nil {
			continue
		}
		for _, id := range u.runs {
			if rs := s.runs[id]; rs != nil {
				changed[id] = rs.run
			} else if rs := s.halted[id]; rs != nil {
				changed[id] = rs.run
			}
		}
		for _, r := range u.ch.Runs {
			changed[r.ID] = r // an ended run is no longer among s.runs
		}
	}
	for _, id := range slices.Sorted(maps.Keys(changed)) { // ids in start order: an end before a start
		s.followRun(ctx, changed[id])
	}
}

// followRun calls the follower of run's pipeline, if it has one, and
// records whether the run is behind (its attempts wait) or caught up.
func (s *Scheduler) followRun(ctx context.Context, run *agentrunner.Run) {
	f := s.opts.Followers[run.Pipeline]
	if f == nil {
		return
	}
	r := *run
	if err := f.Follow(ctx, &r); err != nil {
		s.log.Error("follow a run; its attempts wait until it is followed", "pipeline", run.Pipeline, "run", run.ID, "status", string(run.Status), "err", err)
		s.behind[run.ID] = true
		return
	}
	delete(s.behind, run.ID)
}

// catchUp calls the followers of the runs that are behind again; a run
// that is no longer in flight needs it no more.
func (s *Scheduler) catchUp(ctx context.Context) {
	for _, id := range slices.Sorted(maps.Keys(s.behind)) {
		if rs := s.runs[id]; rs != nil {
			s.followRun(ctx, rs.run)
		} else {
			delete(s.behind, id)
		}
	}
}

// followNewest hands the newest runs of each followed pipeline to its
// follower, oldest first, at the start: what a crash left half done
// after a commit (an archive not written, a document not removed or not
// rewritten) is done now.
func (s *Scheduler) followNewest(ctx context.Context) error {
	for _, name := range slices.Sorted(maps.Keys(s.opts.Followers)) {
		runs, err := s.store.Runs(ctx, agentrunner.RunFilter{Pipeline: name, Limit: followAtStart})
		if err != nil {
			return err
		}
		slices.Reverse(runs)
		for _, r := range runs {
			s.followRun(ctx, r)
		}
	}
	return nil
}
