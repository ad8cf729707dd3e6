package scheduler

import (
	"context"
	"time"

	"github.com/agentrunner/agentrunner"
	"github.com/agentrunner/agentrunner/internal/eventlog"
	"github.com/agentrunner/agentrunner/internal/fileop"
)

// The scheduler's operations, by the names the resource.exhausted event
// gives them when no more precise one is known.
const (
	opStep   = "run step"
	opCommit = "commit state change"
)

// Waits before trying again after the runner ran out of a resource: short
// at first, for a flood of connections or a burst of memory passes in
// seconds; doubling, so a full disk is not hammered; capped, so the work
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

// exhaustedDetails are the details of a resource.exhausted event: the
// resource err says ran out, the operation that hit it, and the wait
// before the next try.
func exhaustedDetails(err error, op string, wait time.Duration) map[string]any {
	return map[string]any{
		"resource": string(agentrunner.ExhaustedResource(err)), "operation": fileop.Operation(err, op),
		"error": err.Error(), "wait": wait.String(),
	}
}

// retryExhausted schedules the next attempt of a step run whose attempt
// failed for want of a resource, and reports whether it did (false: the
// failure is of another class). That is the machine's state, not the
// step's fault: the attempt is tried again after a wait that grows with
// each such failure of the step run in a row, with its retry base moved
// up by one, so it spends no retry however often it happens.
func (s *Scheduler) retryExhausted(ch *agentrunner.Change, rs *runState, ss *stepState, att *agentrunner.Attempt, cause error) bool {
	if agentrunner.ClassOf(cause) != agentrunner.ClassResource {
		ss.exhausted = 0
		return false
	}
	ss.exhausted++
	wait := resourceWait(ss.exhausted)
	details := exhaustedDetails(cause, opStep, wait)
	details["attempt"], details["visit"] = att.Number, ss.sr.Visit
	s.event(ch, rs, att.Step, agentrunner.EventResourceExhausted, agentrunner.LevelWarn, details)
	notBefore := s.clock.Now().Add(wait)
	s.event(ch, rs, att.Step, agentrunner.EventRetryScheduled, agentrunner.LevelInfo, map[string]any{
		"attempt": att.Number + 1, "visit": ss.sr.Visit, "wait": wait.String(), "not_before": notBefore.Format(time.RFC3339), "counted": false,
	})
	s.newAttempt(ch, rs, ss, notBefore, att.RetryBase+1)
	return true
}

// applyGroup commits a batch's units in one group commit, waiting and
// trying the same batch again while the store fails for want of a
// resource (a full disk): the loop stops rather than lose or split a
// batch, and goes on once there is room. Each such failure is logged at
// once and recorded as a resource.exhausted event after the batch
// commits. It returns the units' own errors (refused ones); any other
// error is returned as err.
func (s *Scheduler) applyGroup(ctx context.Context, us []*unit) ([]error, error) {
	chs := make([]*agentrunner.Change, len(us))
	for i, u := range us {
		chs[i] = u.ch
	}
	var exhausted []*agentrunner.Event
	for n := 1; ; n++ {
		errs, err := s.store.ApplyGroup(ctx, chs...)
		if agentrunner.ExhaustedResource(err) == "" {
			if err == nil {
				s.recordExhausted(ctx, exhausted)
			}
			return errs, err
		}
		wait := resourceWait(n)
		ev := &agentrunner.Event{Timestamp: s.clock.Now(), Type: agentrunner.EventResourceExhausted, Level: agentrunner.LevelWarn,
			CycleID: runOf(chs), Details: exhaustedDetails(err, opCommit, wait)}
		eventlog.Write(s.log, ev)
		exhausted = append(exhausted, ev)
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-s.clock.After(wait):
		}
	}
}

// runOf is the run every event of chs is about, "" when they are about
// several (a group commit) or none.
func runOf(chs []*agentrunner.Change) string {
	run := ""
	for _, ch := range chs {
		for _, ev := range ch.Events {
			if run != "" && ev.CycleID != run {
				return ""
			}
			run = ev.CycleID
		}
	}
	return run
}

// recordExhausted records the resource.exhausted events of a commit that
// had to wait, once it went through, and hands them to OnEvent. They were
// logged when they happened; a failure to record them is logged too.
func (s *Scheduler) recordExhausted(ctx context.Context, evs []*agentrunner.Event) {
	if len(evs) == 0 {
		return
	}
	if err := s.store.ApplyAll(ctx, &agentrunner.Change{Events: evs}); err != nil {
		s.log.Error("recording the resource.exhausted events of a commit", "events", len(evs), "error", err)
	}
	if s.opts.OnEvent != nil {
		for _, ev := range evs {
			s.opts.OnEvent(ev)
		}
	}
}
