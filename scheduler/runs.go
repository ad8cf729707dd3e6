package scheduler

import (
	"context"
	"fmt"
	"maps"
	"os"
	"slices"

	"github.com/agentrunner/agentrunner"
)

// finish takes a run that will run no more steps out of the scheduler and
// starts the oldest queued run of its pipeline in its place.
func (s *Scheduler) finish(ch *agentrunner.Change, rs *runState) {
	if s.halted[rs.run.ID] == rs {
		delete(s.halted, rs.run.ID) // it gave its place up when it halted
		s.unfreeze(rs)
		return
	}
	if rs.run.Status == agentrunner.RunHalted {
		s.halted[rs.run.ID] = rs // until an operator resumes or aborts it
	} else {
		s.unfreeze(rs)
	}
	delete(s.runs, rs.run.ID)
	p := rs.run.Pipeline
	s.active[p]--
	if q := s.queued[p]; len(q) > 0 && s.room(q[0].pipeline) {
		s.queued[p] = q[1:]
		s.begin(ch, q[0])
	}
}

// startRun creates a run of pipeline p with its inputs: running at once,
// or queued behind max_concurrent_runs. It returns the run's id.
func (s *Scheduler) startRun(ctx context.Context, ch *agentrunner.Change, p *agentrunner.Pipeline, inputs map[string]any, parent string) (string, error) {
	return s.newRun(ctx, ch, p, inputs, parent, s.full(p))
}

// full reports whether p runs as many runs as max_concurrent_runs lets it.
func (s *Scheduler) full(p *agentrunner.Pipeline) bool {
	return p.MaxConcurrentRuns > 0 && s.active[p.Name] >= p.MaxConcurrentRuns
}

// room reports whether a queued run of p may begin: below
// max_concurrent_runs or, without one (the runs a schedule's overlap:
// queue holds), when none runs.
func (s *Scheduler) room(p *agentrunner.Pipeline) bool {
	if p.MaxConcurrentRuns > 0 {
		return s.active[p.Name] < p.MaxConcurrentRuns
	}
	return s.active[p.Name] == 0
}

// newRun creates a run of p, queued when queue is set, else running.
func (s *Scheduler) newRun(ctx context.Context, ch *agentrunner.Change, p *agentrunner.Pipeline, inputs map[string]any, parent string, queue bool) (string, error) {
	id, err := s.ids.next(ctx, p, func(id string) []string {
		paths := []string{s.opts.RunDir(p.Name, id)}
		if s.opts.ArchivePath != nil {
			paths = append(paths, s.opts.ArchivePath(p.Name, id))
		}
		return paths
	})
	if err != nil {
		return "", err
	}
	r := &agentrunner.Run{
		ID: id, Pipeline: p.Name, Status: agentrunner.RunQueued, Dir: s.opts.RunDir(p.Name, id),
		StartedAt: s.clock.Now(), Inputs: inputs, Parent: parent, Serial: p.Serial,
	}
	rs := newRunState(r, p)
	if p.Serial {
		if rs.state, err = s.before(ctx, p); err != nil {
			return "", err
		}
	}
	s.runs[id] = rs
	if queue {
		s.putRun(ch, rs)
		s.queued[p.Name] = append(s.queued[p.Name], rs)
		s.event(ch, rs, "", runEvent(p, "queued"), agentrunner.LevelInfo, map[string]any{"pipeline": p.Name, "ahead": len(s.queued[p.Name]) - 1})
		return id, nil
	}
	s.begin(ch, rs)
	return id, nil
}

// begin starts a run: its directory, its status running, its start step.
func (s *Scheduler) begin(ch *agentrunner.Change, rs *runState) {
	r := *rs.run
	// A run that waited in the queue starts now: its time bound and the
	// schedule count from here, not from when it was queued.
	r.Status, r.StartedAt = agentrunner.RunRunning, s.clock.Now()
	rs.run = &r
	s.active[r.Pipeline]++
	s.started[r.Pipeline] = r.StartedAt
	s.bound(rs)
	if rs.pipeline.Views != agentrunner.ViewsOnRead {
		// With views on read, whatever first writes in the directory
		// makes it (a view about to be read, a file agent's attempt
		// folder): a run nobody reads from costs no directory.
		s.batch.begun[r.ID] = r.Dir
	}
	s.putRun(ch, rs)
	s.event(ch, rs, "", runEvent(rs.pipeline, "started"), agentrunner.LevelInfo, map[string]any{"pipeline": r.Pipeline, "dir": r.Dir, "inputs": r.Inputs})
	s.open(ch, rs, rs.pipeline.Start, nil, 0)
	s.settle(ch, rs)
}

// makeDirs makes the directories of the runs the committed units began.
// A directory is a view of its run, not its record: it is made after the
// commit, so a crash before it leaves no directory of a run the store
// never had (which would make the id allocator pass its id over), without
// an fsync, and a step kind makes it again if a crash lost it. It is made
// in the background, as the views are (the first of which it precedes):
// on a busy file system a directory costs as much as a step's commit. An
// agent that works with files settles it before it starts.
func (s *Scheduler) makeDirs(us []*unit, errs []error) {
	for i, u := range us {
		for _, id := range u.runs {
			dir, ok := s.batch.begun[id]
			if !ok || errs[i] != nil {
				continue
			}
			s.opts.Views.Add(dir, func() {
				if err := os.MkdirAll(dir, 0o755); err != nil {
					// The step kinds make it when they publish into it; a
					// failure that lasts fails their attempts, with the reason.
					s.log.Warn("creating a run's directory", "run", id, "dir", dir, "error", err)
				}
			})
		}
	}
}

// recover reads the unfinished runs back from the store. Attempts that
// were running when the runner stopped are recorded as interrupted and
// run again; pending ones wait out their backoff; waiting gates wait on.
// Halted runs are read back as they are, for an operator to resume.
func (s *Scheduler) recover(ctx context.Context) error {
	s.batch = newBatch()
	if err := s.loadControl(ctx); err != nil {
		return err
	}
	runs, err := s.store.Runs(ctx, agentrunner.RunFilter{Unfinished: true})
	if err != nil {
		return err
	}
	if err := s.checkStartViews(ctx, runs); err != nil {
		return err
	}
	slices.Reverse(runs) // oldest first, so the queue keeps its order
	for _, r := range runs {
		p := s.opts.Pipelines[r.Pipeline]
		if p == nil {
			continue // another engine's
		}
		if err := s.load(ctx, r, p); err != nil {
			return fmt.Errorf("resume run %s: %w", r.ID, err)
		}
	}
	if err := s.commit(ctx); err != nil {
		return err
	}
	return s.followNewest(ctx)
}

// load rebuilds the state of one unfinished run.
func (s *Scheduler) load(ctx context.Context, r *agentrunner.Run, p *agentrunner.Pipeline) error {
	rs := newRunState(r, p)
	if r.Status == agentrunner.RunQueued {
		s.runs[r.ID] = rs
		s.queued[p.Name] = append(s.queued[p.Name], rs)
		return nil
	}
	if err := s.read(ctx, rs); err != nil {
		return err
	}
	if r.Status == agentrunner.RunHalted {
		s.halted[r.ID] = rs // waiting for an operator: nothing of it goes on
		return nil
	}
	s.runs[r.ID] = rs
	s.active[p.Name]++
	ch := s.batch.change()
	s.resumeBound(ch, rs) // an overdue run is forced before anything runs again
	for _, key := range slices.Sorted(maps.Keys(rs.steps)) {
		s.resumeStepRun(ch, rs, rs.steps[key])
	}
	s.settle(ch, rs)
	return nil
}

// read reads a run's step runs and their attempts back from the store.
func (s *Scheduler) read(ctx context.Context, rs *runState) error {
	r := rs.run
	srs, err := s.store.StepRuns(ctx, agentrunner.StepRunFilter{RunID: r.ID})
	if err != nil {
		return err
	}
	for _, sr := range srs {
		rs.steps[sr.Key()] = &stepState{sr: sr}
		rs.visits[sr.Step] = max(rs.visits[sr.Step], sr.Visit)
	}
	atts, err := s.store.Attempts(ctx, r.ID)
	if err != nil {
		return err
	}
	for _, a := range atts {
		rs.attempts[a.Step] = max(rs.attempts[a.Step], a.Number)
		ss := rs.steps[agentrunner.StepRunKey(a.Step, a.Visit)]
		if ss == nil {
			continue
		}
		if a.ErrorClass == agentrunner.ClassInterrupted {
			ss.interruptions++
		}
		if ss.att == nil || a.Number > ss.att.Number {
			ss.att = a
		}
	}
	for _, ss := range rs.steps {
		if ss.att != nil && ss.att.Status == agentrunner.AttemptRunning {
			ss.lastAlive = s.lastAlive(ctx, ss.att)
		}
	}
	return nil
}

// resumeStepRun puts an unfinished step run back to work.
func (s *Scheduler) resumeStepRun(ch *agentrunner.Change, rs *runState, ss *stepState) {
	st := rs.pipeline.Steps[ss.sr.Step]
	switch {
	case st == nil && ss.sr.Status.Finished():
		// The configuration lost a step the run is past: its record stays.
	case st == nil:
		// The configuration lost the step the run is at: it cannot go on.
		if rs.run.Status == agentrunner.RunRunning {
			s.endRun(ch, rs, agentrunner.RunFailed, fmt.Sprintf("step %s is no longer in pipeline %s", ss.sr.Step, rs.pipeline.Name))
		}
	case ss.sr.Status == agentrunner.StepRunWaiting:
		if st.Gate != nil && st.Gate.Timeout > 0 {
			ss.deadline = ss.sr.OpenedAt.Add(st.Gate.Timeout)
			s.timed[ss] = rs
		}
	case ss.sr.Status != agentrunner.StepRunOpen:
	case ss.att == nil:
		s.firstAttempt(ch, rs, ss)
	case ss.att.Status == agentrunner.AttemptRunning:
		// It ended when the runner was last known alive (read), not
		// now: its duration does not count the time the runner was down.
		s.failAttemptAt(ch, rs, ss, agentrunner.Fail(agentrunner.ClassInterrupted, "the runner stopped during this attempt"), nil, ss.lastAlive)
	case ss.att.Status == agentrunner.AttemptPending:
		t := &task{rs: rs, ss: ss, att: ss.att}
		if ss.att.NotBefore.After(s.clock.Now()) {
			s.batch.delay = append(s.batch.delay, t)
		} else {
			s.batch.start = append(s.batch.start, t)
		}
	}
}

// startRequest asks the loop for a run of a pipeline (Start); reply gets
// its id once the run is committed.
type startRequest struct {
	pipeline string
	inputs   map[string]any
	parent   string
	id       string
	reply    chan string
}

// Start starts a run of the named pipeline with inputs (checked against
// its schema by the caller), and returns its id once it is committed (queued behind max_concurrent_runs, or
// running). It is for the runner itself (run --once); operators start
// runs with a command, which the audit log keeps. It fails when ctx ends
// or the scheduler stops first.
func (s *Scheduler) Start(ctx context.Context, pipeline string, inputs map[string]any) (string, error) {
	return s.StartChild(ctx, pipeline, inputs, "")
}

// StartChild is Start for a run that another run starts (a lead agent's
// sub-agent): the new run records parent, the id of the run that started
// it, by which it is found again (RunFilter.Parent). An empty parent is
// Start.
func (s *Scheduler) StartChild(ctx context.Context, pipeline string, inputs map[string]any, parent string) (string, error) {
	if s.Pipelines()[pipeline] == nil {
		return "", agentrunner.Errorf(agentrunner.ENOTFOUND, "no pipeline %q", pipeline)
	}
	req := &startRequest{pipeline: pipeline, inputs: inputs, parent: parent, reply: make(chan string, 1)}
	select {
	case s.starts <- req:
	case <-ctx.Done():
		return "", ctx.Err()
	}
	select {
	case id := <-req.reply:
		if id == "" { // a reload removed the pipeline meanwhile
			return "", agentrunner.Errorf(agentrunner.ENOTFOUND, "no pipeline %q", pipeline)
		}
		return id, nil
	case <-ctx.Done():
		return "", ctx.Err()
	}
}

// start starts the run a Start asked for, in the current batch.
func (s *Scheduler) start(ctx context.Context, req *startRequest) error {
	p := s.opts.Pipelines[req.pipeline]
	if p == nil {
		return nil
	}
	id, err := s.startRun(ctx, s.batch.change(), p, req.inputs, req.parent)
	req.id = id
	return err
}
