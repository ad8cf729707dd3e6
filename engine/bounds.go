package engine

import (
	"context"
	"fmt"
	"time"

	"github.com/agentrunner/agentrunner"
)

// deadline is when a cycle runs out of time (schedule.max_cycle, FR-006).
func (e *Engine) deadline(c *agentrunner.Cycle) time.Time {
	return c.StartedAt.Add(e.cfg.Schedule.MaxCycle.D())
}

// overdue reports whether a cycle has outlived schedule.max_cycle.
func (e *Engine) overdue(c *agentrunner.Cycle) bool {
	return !e.clock.Now().Before(e.deadline(c))
}

// force ends an overdue cycle (FR-007): it jumps to the pipeline's final
// step (the evaluation), which judges what the cycle has; without a final
// step, or when the final step itself ran out, the cycle ends failed. ch
// holds the failed attempt of the step that was cut short.
func (e *Engine) force(ctx context.Context, c *agentrunner.Cycle, ch *agentrunner.Change) (*agentrunner.Cycle, *agentrunner.Attempt, error) {
	final := e.ws.Machine.Final()
	why := fmt.Sprintf("the cycle ran longer than schedule.max_cycle (%s)", e.cfg.Schedule.MaxCycle.D())
	if final == "" || c.Step == final {
		return e.end(ctx, c, ch, agentrunner.CycleFailed, why)
	}
	from, to := agentrunner.State(c.Step), agentrunner.State(final)
	if err := e.ws.Machine.Check(from, to); err != nil {
		return c, nil, err
	}
	now := e.clock.Now()
	forced := *c
	forced.Step = final
	ch.Cycle = &forced
	first := e.newAttempt(c, final, 1, now, time.Time{})
	ch.Attempts = append(ch.Attempts, first)
	e.event(ch, c, c.Step, EventForced, agentrunner.LevelWarn, map[string]any{"from": c.Step, "to": final, "why": why})
	e.transition(ch, c, from, to)
	e.attemptStarted(ch, c, first)
	if err := e.commit(ctx, ch); err != nil {
		return c, nil, err
	}
	return &forced, first, nil
}

// cutShort fails the current attempt of an overdue cycle before it runs,
// which forces the cycle to its end.
func (e *Engine) cutShort(ctx context.Context, c *agentrunner.Cycle, att *agentrunner.Attempt) (*agentrunner.Cycle, *agentrunner.Attempt, error) {
	return e.fail(ctx, c, att, agentrunner.Fail(agentrunner.ClassTimeout, "the cycle ran out of time before this attempt"), nil)
}
