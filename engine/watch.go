package engine

import (
	"context"
	"log/slog"
	"time"

	"github.com/agentrunner/agentrunner"
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

// HeartbeatSender is the Execution Service as the dead man's switch sees it.
type HeartbeatSender interface {
	Heartbeat(ctx context.Context, runner string, interval time.Duration) (safeMode bool, err error)
}

// Heartbeats tells the Execution Service the runner is alive every
// interval until ctx ends (FR-055/056): if the beats stop, the service
// enters safe mode by itself. A failed beat is logged and the next one
// goes out on time; the service's safe mode is logged when it changes.
func Heartbeats(ctx context.Context, s HeartbeatSender, runner string, interval time.Duration, clock agentrunner.Clock, log *slog.Logger) {
	safe := false
	for {
		on, err := s.Heartbeat(ctx, runner, interval)
		switch {
		case ctx.Err() != nil:
			return
		case err != nil:
			log.Warn("heartbeat to the Execution Service failed", "error", err)
		case on != safe:
			safe = on
			if on {
				log.Error("the Execution Service is in safe mode", "runner", runner)
			} else {
				log.Info("the Execution Service left safe mode", "runner", runner)
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-clock.After(interval):
		}
	}
}
