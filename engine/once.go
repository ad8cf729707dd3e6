package engine

import (
	"context"
	"errors"
	"slices"
	"sync"

	"github.com/agentrunner/agentrunner"
)

// RunOnce runs one cycle of the learning loop to its end: the unfinished
// one if there is one, else a new one started now, whatever the schedule
// says. It returns the finished cycle; an error means the cycle could not
// be driven to its end (the context ended, or the store failed). A halted
// cycle is returned as it is, unless an operator's resume is pending.
// Runs of other pipelines that are in flight make progress meanwhile; no
// schedule starts a run.
func (e *Engine) RunOnce(ctx context.Context) (*agentrunner.Cycle, error) {
	cfg := e.Config()
	if !cfg.HasLoop() {
		return nil, agentrunner.Errorf(agentrunner.EINVALID, "the workspace has no learning loop (pipeline:) to run a cycle of: start a run of one of its pipelines instead")
	}
	c, err := e.store.UnfinishedCycle(ctx, cfg.Name)
	switch {
	case agentrunner.ErrorCode(err) == agentrunner.ENOTFOUND:
		c = nil
	case err != nil:
		return nil, err
	}
	if c != nil && c.Status == agentrunner.CycleHalted {
		if resume, err := e.resumePending(ctx); err != nil || !resume {
			return c, err
		}
	}
	return e.drive(ctx, cfg.Name, c)
}

// resumePending reports whether an operator's resume waits to be applied.
func (e *Engine) resumePending(ctx context.Context) (bool, error) {
	cmds, err := e.store.PendingCommands(ctx)
	if err != nil {
		return false, err
	}
	return slices.ContainsFunc(cmds, func(c *agentrunner.Command) bool { return c.Kind == agentrunner.CommandResume }), nil
}

// drive runs an unscheduled scheduler until the cycle c (nil: a new one,
// started by a command) ends or halts, and returns it.
func (e *Engine) drive(ctx context.Context, loop string, c *agentrunner.Cycle) (*agentrunner.Cycle, error) {
	pipelines := e.Config().Graphs()
	for name, p := range pipelines {
		unscheduled := *p
		unscheduled.Every = 0
		pipelines[name] = &unscheduled
	}
	sched, err := e.scheduler(pipelines)
	if err != nil {
		return nil, err
	}
	ends := newEnds()
	e.setEnded(ends.observe)
	defer e.setEnded(nil)
	ctx, stop := context.WithCancel(ctx)
	defer stop()
	done := make(chan error, 1)
	e.active.Store(sched)
	go func() { done <- sched.Run(ctx) }()
	id := ""
	if c != nil {
		id = c.ID
	} else if id, err = sched.Start(ctx, loop); err != nil {
		stop()
		<-done
		return nil, err
	}
	if err := ends.wait(ctx, id, done); err != nil {
		return nil, err
	}
	stop()
	if err := <-done; err != nil {
		return nil, err
	}
	return e.store.Cycle(context.WithoutCancel(ctx), id)
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

// endEvents are the events that end (or halt) a cycle.
var endEvents = map[string]bool{
	agentrunner.EventCycleCompleted: true, agentrunner.EventCycleFailed: true,
	agentrunner.EventCycleAborted: true, agentrunner.EventCycleHalted: true,
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

// wait waits until run id ended, or the scheduler stopped (its error, or
// ctx's), or ctx ended.
func (w *ends) wait(ctx context.Context, id string, done <-chan error) error {
	for {
		w.mu.Lock()
		ended := w.ended[id]
		w.mu.Unlock()
		if ended {
			return nil
		}
		select {
		case <-w.news:
		case err := <-done:
			if err == nil {
				err = ctx.Err()
			}
			if err == nil {
				err = errors.New("the scheduler stopped before the cycle ended")
			}
			return err
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}
