package engine

import (
	"cmp"
	"context"
	"errors"
	"sync"

	"github.com/agentrunner/agentrunner"
	"github.com/agentrunner/agentrunner/scheduler"
)

// RunOnce runs one cycle of the learning loop to its end: the unfinished
// one if there is one, else a new one started now, whatever the schedule
// says. It returns the finished cycle; an error means the cycle could not
// be driven to its end (the context ended, or the store failed). The
// operators' pending commands apply first: a halted cycle is returned as
// it is, unless a resume is pending; an aborted one makes way for a new
// cycle. Runs of other pipelines that are in flight make progress
// meanwhile; no schedule starts a run.
func (e *Engine) RunOnce(ctx context.Context) (*agentrunner.Cycle, error) {
	cfg := e.Config()
	if !cfg.HasLoop() {
		return nil, agentrunner.Errorf(agentrunner.EINVALID, "the workspace has no learning loop (pipeline:) to run a cycle of: start a run of one of its pipelines instead")
	}
	return e.once(ctx, cfg.Name, nil)
}

// RunPipelineOnce is RunOnce for any pipeline of the workspace: it runs
// the pipeline's unfinished run (running or halted) to its end, else a
// new one started now with inputs, which its inputs_schema must accept.
func (e *Engine) RunPipelineOnce(ctx context.Context, pipeline string, inputs map[string]any) (*agentrunner.Run, error) {
	cfg := e.Config()
	if cfg.Graphs()[pipeline] == nil {
		return nil, agentrunner.Errorf(agentrunner.ENOTFOUND, "no pipeline %q in the workspace", pipeline)
	}
	if err := cfg.CheckInputs(pipeline, inputs); err != nil {
		return nil, err
	}
	return e.once(ctx, pipeline, inputs)
}

// once runs one run of the pipeline to its end (RunOnce).
func (e *Engine) once(ctx context.Context, pipeline string, inputs map[string]any) (*agentrunner.Run, error) {
	sched, err := e.unscheduled()
	if err != nil {
		return nil, err
	}
	// The unfinished run, read before the scheduler resumes it: it may
	// end before the scheduler is ready, and then it is the one to return,
	// not a reason to start another.
	before, err := e.unfinished(ctx, pipeline)
	if err != nil && agentrunner.ErrorCode(err) != agentrunner.ENOTFOUND {
		return nil, err
	}
	ends := newEnds()
	e.setEnded(ends.observe)
	defer e.setEnded(nil)
	ctx, stop := context.WithCancel(ctx)
	defer stop()
	var runErr error
	stopped := make(chan struct{})
	e.active.Store(sched)
	go func() {
		runErr = sched.Run(ctx)
		close(stopped)
	}()
	c, err := e.cycleOnce(ctx, sched, pipeline, inputs, before, stopped)
	if err == nil && c.Status != agentrunner.CycleHalted {
		err = ends.wait(ctx, c.ID, stopped)
	}
	stop()
	<-stopped
	if err = cmp.Or(runErr, err); err != nil {
		return nil, err
	}
	return e.store.Cycle(context.WithoutCancel(ctx), c.ID)
}

// unscheduled is a scheduler of the workspace's pipelines without their
// schedules, and so are the pipelines a reload gives it: a run --once
// told to reload does not start the runs their schedules say are due.
func (e *Engine) unscheduled() (*scheduler.Scheduler, error) {
	return e.schedulerWith(withoutSchedules(e.Config().Graphs()), func() (*scheduler.Reloaded, error) {
		r, err := e.reload()
		if err == nil {
			r.Pipelines = withoutSchedules(r.Pipelines)
		}
		return r, err
	})
}

// withoutSchedules returns copies of pipelines without their schedules.
func withoutSchedules(pipelines map[string]*agentrunner.Pipeline) map[string]*agentrunner.Pipeline {
	out := make(map[string]*agentrunner.Pipeline, len(pipelines))
	for name, p := range pipelines {
		unscheduled := *p
		unscheduled.Every, unscheduled.Cron = 0, nil
		out[name] = &unscheduled
	}
	return out
}

// cycleOnce waits until sched has applied the pending commands, then
// returns the cycle RunOnce drives: the running or halted one, or the one
// that was unfinished before (before, if not nil) and has ended since
// unless an operator aborted it, else the oldest one queued (a
// force-cycle given while a cycle ran), else a new one it starts.
func (e *Engine) cycleOnce(ctx context.Context, sched *scheduler.Scheduler, loop string, inputs map[string]any, before *agentrunner.Cycle, stopped <-chan struct{}) (*agentrunner.Cycle, error) {
	select {
	case <-sched.Ready():
	case <-stopped:
		return nil, cmp.Or(ctx.Err(), errors.New("the scheduler stopped before it was ready"))
	}
	c, err := e.unfinished(ctx, loop)
	if agentrunner.ErrorCode(err) != agentrunner.ENOTFOUND {
		return c, err
	}
	if before != nil {
		if c, err := e.store.Cycle(ctx, before.ID); err != nil || c.Status != agentrunner.CycleAborted {
			return c, err
		}
	}
	queued, err := e.store.Runs(ctx, agentrunner.RunFilter{Pipeline: loop, Status: agentrunner.RunQueued})
	if err != nil {
		return nil, err
	}
	if len(queued) > 0 {
		return queued[len(queued)-1], nil
	}
	id, err := sched.Start(ctx, loop, inputs)
	if err != nil {
		return nil, err
	}
	return &agentrunner.Cycle{ID: id}, nil
}

// unfinished is the pipeline's oldest run that is running or halted, or
// ENOTFOUND.
func (e *Engine) unfinished(ctx context.Context, pipeline string) (*agentrunner.Run, error) {
	runs, err := e.store.Runs(ctx, agentrunner.RunFilter{Pipeline: pipeline, Unfinished: true})
	if err != nil {
		return nil, err
	}
	for i := len(runs) - 1; i >= 0; i-- {
		if runs[i].Status != agentrunner.RunQueued {
			return runs[i], nil
		}
	}
	return nil, agentrunner.Errorf(agentrunner.ENOTFOUND, "no unfinished run of pipeline %q", pipeline)
}

// setEnded sets the function told of every committed event (nil: none).
func (e *Engine) setEnded(fn func(*agentrunner.Event)) {
	e.endedMu.Lock()
	e.ended = fn
	e.endedMu.Unlock()
}

// ends collects the runs that ended or halted, for RunOnce to wait on.
type ends struct {
	mu    sync.Mutex
	ended map[string]bool
	news  chan struct{}
}

func newEnds() *ends { return &ends{ended: map[string]bool{}, news: make(chan struct{}, 1)} }

// endEvents are the events that end (or halt) a run, under the nouns of
// the learning loop's cycles and of other pipelines' runs.
var endEvents = map[string]bool{
	agentrunner.EventCycleCompleted: true, agentrunner.EventCycleFailed: true,
	agentrunner.EventCycleAborted: true, agentrunner.EventCycleHalted: true, "cycle.incomplete": true,
	scheduler.EventRunCompleted: true, scheduler.EventRunFailed: true, scheduler.EventRunAborted: true,
	scheduler.EventRunHalted: true, scheduler.EventRunIncomplete: true,
}

func (w *ends) observe(ev *agentrunner.Event) {
	if !endEvents[ev.Type] {
		return
	}
	w.mu.Lock()
	w.ended[ev.CycleID] = true
	w.mu.Unlock()
	select {
	case w.news <- struct{}{}:
	default:
	}
}

// wait waits until run id ended, or the scheduler stopped, or ctx ended.
func (w *ends) wait(ctx context.Context, id string, stopped <-chan struct{}) error {
	for {
		w.mu.Lock()
		ended := w.ended[id]
		w.mu.Unlock()
		if ended {
			return nil
		}
		select {
		case <-w.news:
		case <-stopped:
			return cmp.Or(ctx.Err(), errors.New("the scheduler stopped before the cycle ended"))
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// StartChild starts a run of pipeline that the run parent started (a lead
// agent's sub-agent), on the scheduler running now: Run's, or RunOnce's.
// The inputs must satisfy the pipeline's inputs_schema. It fails when no
// scheduler of the engine runs.
func (e *Engine) StartChild(ctx context.Context, pipeline string, inputs map[string]any, parent string) (string, error) {
	if err := e.Config().CheckInputs(pipeline, inputs); err != nil {
		return "", err
	}
	s := e.active.Load()
	if s == nil {
		return "", errors.New("the engine is not running")
	}
	return s.StartChild(ctx, pipeline, inputs, parent)
}
