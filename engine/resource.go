package engine

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"time"

	"github.com/agentrunner/agentrunner"
	"github.com/agentrunner/agentrunner/internal/fileop"
	"github.com/agentrunner/agentrunner/step/agent"
)

// The engine's own operations during a step, by the names that the
// resource.exhausted event and the fault hook (Options.Faults) give them.
// An agent step's operations are named by the agent step kind.
const (
	opCycleDir      = "create cycle directory"
	opAttemptFolder = "create attempt folder"
	opMemory        = agent.OpMemory
	opPrompt        = agent.OpPrompt
	opReadArtifact  = agent.OpReadArtifact
	opPublish       = agent.OpPublish
	opDeliver       = agent.OpDeliver
	opFallback      = "publish fallback"
	opCommit        = "commit state change"
	opStep          = "run step"
)

// Waits before trying again after the runner ran out of a resource: short
// at first, for a flood of connections or a burst of memory passes in
// seconds; doubling, so a full disk is not hammered; capped, so the loop
// goes on soon after an operator frees space.
const (
	resourceWaitMin = time.Second
	resourceWaitMax = time.Minute
)

// resourceWait is the wait after the nth failure in a row for want of a
// resource: 1s, 2s, 4s … 1m.
func resourceWait(n int) time.Duration {
	return min(resourceWaitMin<<min(max(n-1, 0), 16), resourceWaitMax)
}

// fileOp does one of the engine's own file operations of a step, named
// op, unless the fault hook (Options.Faults) fails it first.
func (e *Engine) fileOp(op string, fn func() error) error {
	return fileop.Do(e.faults, op, fn)
}

// operation names what ran out of a resource in err: the engine's own
// operation when it is one, else the system call, else fallback.
func operation(err error, fallback string) string {
	if op, ok := fileop.Name(err); ok {
		return op
	}
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Op + " " + pe.Path
	}
	var se *os.SyscallError
	if errors.As(err, &se) {
		return se.Syscall
	}
	return fallback
}

// exhausted returns the details of a resource.exhausted event: the
// resource err says ran out, the operation that hit it, and the wait
// before the next try.
func exhausted(err error, op string, wait time.Duration) map[string]any {
	return map[string]any{
		"resource": string(agentrunner.ExhaustedResource(err)), "operation": operation(err, op),
		"error": err.Error(), "wait": wait.String(),
	}
}

// retryResource schedules a step's next attempt after a failure for want
// of a resource, in the change that records the failure: after a wait that
// grows with each such failure in a row, and with the retry base moved up
// by one, so the attempt is not one of the step's retries. However often it
// happens, the step neither runs out of retries nor escalates.
func (e *Engine) retryResource(ctx context.Context, c *agentrunner.Cycle, att *agentrunner.Attempt, cause error, ch *agentrunner.Change) (*agentrunner.Cycle, *agentrunner.Attempt, error) {
	e.resourceFailures++
	wait := resourceWait(e.resourceFailures)
	now := e.clock.Now()
	next := e.newAttempt(c, att.Step, att.Number+1, now, now.Add(wait))
	next.RetryBase = att.RetryBase + 1
	ch.Attempts = append(ch.Attempts, next)
	details := exhausted(cause, opStep, wait)
	details["attempt"] = att.Number
	e.event(ch, c, att.Step, agentrunner.EventResourceExhausted, agentrunner.LevelWarn, details)
	e.event(ch, c, att.Step, agentrunner.EventRetryScheduled, agentrunner.LevelInfo, map[string]any{
		"attempt": next.Number, "wait": wait.String(), "not_before": next.NotBefore.Format(time.RFC3339), "counted": false,
	})
	return c, next, e.commit(ctx, ch)
}

// untilResourced runs fn, one of the engine's own operations outside an
// attempt (a commit, the cycle's directory), until it does not fail for
// want of a resource, waiting a little longer after each such failure;
// any other result is returned. It may run beside the loop (a commit of
// CheckStrategy), so it waits on the clock alone.
func (e *Engine) untilResourced(ctx context.Context, cycleID, step, op string, fn func() error) error {
	for n := 1; ; n++ {
		err := fn()
		if agentrunner.ExhaustedResource(err) == "" {
			return err
		}
		wait := resourceWait(n)
		e.reportExhausted(&agentrunner.Event{
			Timestamp: e.clock.Now(), Type: agentrunner.EventResourceExhausted, CycleID: cycleID, Step: step,
			Level: agentrunner.LevelWarn, Details: exhausted(err, op, wait),
		})
		e.busyAtLeast(wait)
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-e.clock.After(wait):
		}
	}
}

// reportExhausted records a resource.exhausted event on its own, logs it
// and hands it to OnEvent. Recording it may fail for the same want (a
// full disk): the log line and the metric still tell.
func (e *Engine) reportExhausted(ev *agentrunner.Event) {
	EventRecorder(e.store, e.log)(ev)
	if e.onEvent != nil {
		e.onEvent(ev)
	}
}

// busyAtLeast moves the deadline of the engine's current operation to at
// least d from now, for a wait inside it; it never shortens a deadline,
// nor sets one while the loop waits for a person (no deadline).
func (e *Engine) busyAtLeast(d time.Duration) {
	until := e.clock.Now().Add(d + time.Minute).UnixNano()
	for {
		cur := e.busyUntil.Load()
		if cur == 0 || cur >= until || e.busyUntil.CompareAndSwap(cur, until) {
			return
		}
	}
}
