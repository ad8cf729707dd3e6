package scheduler

import (
	"context"
	"time"

	"github.com/agentrunner/agentrunner"
)

// Heartbeat keeps the time the runner was last known to be alive, where a
// crash cannot take it: the scheduler beats it while it runs, and a start
// after a crash closes the attempts the crash left running at the last
// beat, not at the restart, so an attempt's duration never counts the
// time the process was down.
type Heartbeat interface {
	// Beat records that the runner is alive at t.
	Beat(t time.Time) error
	// Last returns the time of the last beat; zero when there was none.
	Last() (time.Time, error)
}

// heartbeatEvery is how often the scheduler beats its Heartbeat: the most
// a crashed attempt's recorded duration can fall short of the truth.
const heartbeatEvery = 5 * time.Second

// beat records that the runner is alive, at most every heartbeatEvery. A
// failure is logged once: it costs only the precision of the durations
// of the attempts a crash cuts short.
func (s *Scheduler) beat() {
	now := s.clock.Now()
	if s.opts.Heartbeat == nil || !s.beaten.IsZero() && now.Sub(s.beaten) < heartbeatEvery {
		return
	}
	s.beaten = now
	if err := s.opts.Heartbeat.Beat(now); err != nil && !s.beatFailed {
		s.beatFailed = true
		s.log.Warn("recording that the runner is alive (the durations of attempts a crash cuts short may count the downtime)", "error", err)
	}
}

// lastAlive is when the runner that ran att was last known alive: its
// last heartbeat, or the newest event of att's run that an earlier
// process recorded (a tool call, the attempt's start), whichever is later,
// but never before att started nor after now. It is the end of an attempt
// a crash left running.
func (s *Scheduler) lastAlive(ctx context.Context, att *agentrunner.Attempt) time.Time {
	alive := s.heartbeatAt(att.StartedAt)
	evs, err := s.store.Events(ctx, agentrunner.EventFilter{CycleID: att.CycleID, Newest: true, Limit: 20})
	if err != nil {
		s.log.Warn("reading the newest events of a run to date the end of its interrupted attempt", "run", att.CycleID, "error", err)
	}
	for _, ev := range evs {
		if ev.Timestamp.Before(s.born) { // later ones are this process's
			alive = later(alive, ev.Timestamp)
			break
		}
	}
	if now := s.clock.Now(); alive.After(now) {
		return now
	}
	return alive
}

// heartbeatAt is the last heartbeat, or since when none is known.
func (s *Scheduler) heartbeatAt(since time.Time) time.Time {
	if s.opts.Heartbeat == nil {
		return since
	}
	last, err := s.opts.Heartbeat.Last()
	if err != nil {
		s.log.Warn("reading when the runner was last alive", "error", err)
	}
	return later(since, last)
}

// Hurry cuts the grace of a shutdown short (a second SIGINT): the running
// attempts are interrupted at once, and recorded as shut down.
func (s *Scheduler) Hurry() {
	s.hurryOnce.Do(func() { close(s.hurry) })
}

// grace is how long running attempts may finish in a shutdown.
func (s *Scheduler) grace() time.Duration {
	if s.opts.ShutdownGrace == nil {
		return 0
	}
	return max(s.opts.ShutdownGrace(), 0)
}

// shutdown stops the scheduler for a shutdown of the runner (Run's
// context ended with agentrunner.ErrShutdown). No attempt starts from here
// on; those that wait stay pending. The running ones have the grace to
// finish, and what they come to is committed as usual; those still
// running then are interrupted and recorded as shut down (shutDown). It
// returns once every attempt stopped and everything is committed.
func (s *Scheduler) shutdown(ctx context.Context, stopWork context.CancelCauseFunc) error {
	why := context.Cause(ctx).Error()
	ctx = context.WithoutCancel(ctx)
	s.draining = true
	grace := s.grace()
	s.log.Info("shutting down: no step starts; the running attempts may finish within the grace, then they are interrupted",
		"attempts", s.inflight, "grace", grace.String(), "cause", why)
	s.batch = newBatch()
	s.abandonStarting()
	var over <-chan time.Time
	if grace > 0 && s.inflight > 0 {
		over = s.clock.After(grace)
	} else {
		s.interruptWork(stopWork)
	}
	for {
		if err := s.commit(ctx); err != nil {
			return err
		}
		if s.inflight == 0 {
			return nil
		}
		s.batch = newBatch()
		select {
		case r := <-s.results:
			s.handle(r)
			s.drain()
		case q := <-s.slotRequests:
			s.slotRequest(q)
			s.resume()
		case <-over:
			s.interruptWork(stopWork)
		case <-s.hurry:
			s.interruptWork(stopWork)
		}
		s.beat()
	}
}

// interruptWork ends the grace: the running attempts' contexts end, with
// agentrunner.ErrShutdown as their cause.
func (s *Scheduler) interruptWork(stopWork context.CancelCauseFunc) {
	if !s.interrupted {
		s.interrupted = true
		stopWork(agentrunner.ErrShutdown)
	}
}

// abandonStarting records the attempts the last commit recorded running
// but that never started (their follower was behind) as shut down: the
// next start runs them at once.
func (s *Scheduler) abandonStarting() {
	for _, t := range s.starting {
		s.slots++
		if s.stale(t) || t.ss.att.Status != agentrunner.AttemptRunning {
			continue
		}
		ch := s.batch.change()
		guard(ch, &result{task: *t})
		s.shutDown(ch, t.rs, t.ss, nil)
	}
	s.starting = nil
}

// shutDown records the current attempt of a step run as interrupted by
// the runner's shutdown (ClassShutdown), and its next attempt pending,
// to start at once at the next start: no backoff, no retry spent (its
// RetryBase moves on with it), and no interruption counted.
func (s *Scheduler) shutDown(ch *agentrunner.Change, rs *runState, ss *stepState, res *agentrunner.StepResult) {
	att := ss.att
	cause := agentrunner.Fail(agentrunner.ClassShutdown, "the runner shut down during this attempt; it runs again at the next start")
	s.closeAttempt(ch, rs, ss, agentrunner.AttemptFailed, res, cause)
	s.newAttempt(ch, rs, ss, time.Time{}, att.RetryBase+1)
}
