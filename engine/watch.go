package engine

import (
	"context"
	"time"

	"github.com/agentrunner/agentrunner/scheduler"
)

// CheckStrategy runs the strategy watcher (execution.Watcher.CheckStrategy)
// with the engine's current configuration.
func (e *Engine) CheckStrategy(ctx context.Context) (time.Time, error) {
	return e.watcher.CheckStrategy(ctx, e.Config())
}

// Stalled reports how far past its deadline the running scheduler's
// current work is, or 0 (scheduler.Scheduler.Stalled).
func (e *Engine) Stalled() time.Duration {
	if s := e.active.Load(); s != nil {
		return s.Stalled()
	}
	return 0
}

// Watchdog calls onStall once the engine has stalled for more than grace,
// checking every interval, until ctx ends. In serve and run, onStall logs
// and exits non-zero, so a supervisor restarts the runner, which resumes
// where it was (FR-055's internal watchdog).
func Watchdog(ctx context.Context, e *Engine, grace, interval time.Duration, onStall func(late time.Duration)) {
	scheduler.Watchdog(ctx, e.clock, e, grace, interval, onStall)
}
