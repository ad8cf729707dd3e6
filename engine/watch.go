package engine

import (
	"context"
	"time"
)

// storeTimeout is how long a store operation may take before the engine
// counts as stalled (with the watchdog's grace on top).
const storeTimeout = time.Minute

// busy records that the engine's current operation should be over within
// d (plus a minute of slack for the bookkeeping around it).
func (e *Engine) busy(d time.Duration) {
	e.busyUntil.Store(e.clock.Now().Add(d + time.Minute).UnixNano())
}

// Stalled reports how far past its deadline the engine's current
// operation is, or 0. An engine loop stuck on something that ignores its
// deadline (a hung store, an agent runtime that does not stop) stalls.
func (e *Engine) Stalled() time.Duration {
	until := e.busyUntil.Load()
	if until == 0 {
		return 0
	}
	return max(0, e.clock.Now().Sub(time.Unix(0, until)))
}

// Watchdog calls onStall once the engine has stalled for more than grace,
// checking every interval on the engine's clock, until ctx ends. In serve
// and run, onStall logs and exits non-zero, so a supervisor restarts the
// runner, which resumes where it was (FR-055's internal watchdog).
func Watchdog(ctx context.Context, e *Engine, grace, interval time.Duration, onStall func(late time.Duration)) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-e.clock.After(interval):
		}
		if late := e.Stalled(); late > grace {
			onStall(late)
			return
		}
	}
}

// CheckStrategy runs the strategy watcher (execution.Watcher.CheckStrategy)
// with the engine's current configuration. It runs beside the loop, which
// may reload, so it holds the configuration for the whole check.
func (e *Engine) CheckStrategy(ctx context.Context) (time.Time, error) {
	e.cfgMu.RLock()
	defer e.cfgMu.RUnlock()
	return e.watcher.CheckStrategy(ctx, e.cfg)
}
