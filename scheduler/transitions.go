package scheduler

import (
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/agentrunner/agentrunner"
	"github.com/agentrunner/agentrunner/graph"
	"github.com/agentrunner/agentrunner/webhook"
)

// Event types the scheduler writes about runs, besides the attempt events
// of the root package.
const (
	EventRunQueued    = "run.queued"
	EventRunStarted   = "run.started"
	EventRunCompleted = "run.completed"
	EventRunFailed    = "run.failed"
	EventRunHalted    = "run.halted"
	EventRunAborted   = "run.aborted"
	// EventRunIncomplete: a loop reached its cap with on_cap end.
	EventRunIncomplete = "run.incomplete"
	EventJoinArrived   = "join.arrived"
	EventLoopCapped    = "loop.capped"
	EventGateOpened    = "gate.opened"
	EventGateDecided   = "gate.decided"
)

// handle turns a worker's result into the batch's changes. A result about
// a step run that is no longer open (the run failed or was aborted while
// the attempt ran) is dropped: its outcome no longer matters.
func (s *Scheduler) handle(r *result) {
	s.ended(r.ss)
	s.inflight--
	if r.ss.cancel != nil {
		r.ss.cancel()
		r.ss.cancel = nil
	}
	if s.runs[r.rs.run.ID] != r.rs || r.ss.sr.Status != agentrunner.StepRunOpen || r.ss.att.Number != r.att.Number {
		return
	}
	ch := s.batch.change()
	guard(ch, r)
	if r.res != nil {
		ch.Events = append(ch.Events, r.res.Events...)
		ch.Outbox = append(ch.Outbox, r.res.Outbox...)
	}
	err := r.err
	var label string
	var targets []string
	if err == nil && !r.res.Wait {
		label, targets, err = s.route(r)
	}
	// A step that waits for a person keeps its artifact: it is what the
	// person judges, and what the steps after an approval read.
	s.keepFiles(ch, r.rs, r.ss, r.res, err == nil)
	switch {
	case r.err != nil && s.interrupted:
		s.shutDown(ch, r.rs, r.ss, r.res) // stopped by the shutdown
	case err != nil:
		s.failAttempt(ch, r.rs, r.ss, err, r.res)
	case r.res.Wait:
		s.wait(ch, r.rs, r.ss, r.res)
	default:
		s.closeAttempt(ch, r.rs, r.ss, agentrunner.AttemptSucceeded, r.res, nil)
		s.succeed(ch, r.rs, r.ss, label, r.res.Path, targets)
	}
}

// route finds where a succeeded attempt leads: its label and the steps
// its edges open.
func (s *Scheduler) route(r *result) (string, []string, error) {
	label, err := s.label(r.rs, r.ss, r.res)
	if err != nil {
		return "", nil, err
	}
	targets, err := graph.Successors(r.rs.pipeline.Steps[r.ss.sr.Step], label)
	if err != nil {
		return "", nil, stepError(r.rs, r.ss, err)
	}
	return label, targets, nil
}

// label reads the routing label of a succeeded attempt: the kind's own,
// or what the step's label source finds in the output.
func (s *Scheduler) label(rs *runState, ss *stepState, res *agentrunner.StepResult) (string, error) {
	if res.Label != "" {
		return res.Label, nil
	}
	x := s.labels[rs.pipeline.Steps[ss.sr.Step]]
	if x == nil {
		return "", nil
	}
	label, err := x.Label(res.Output)
	if err != nil {
		return "", stepError(rs, ss, fmt.Errorf("reading the routing label from %s: %w", x, err))
	}
	return label, nil
}

// stepError names the run and the step in a routing error, keeping its
// class (a routing error is the output's fault: not retried).
func stepError(rs *runState, ss *stepState, err error) error {
	return agentrunner.Fail(agentrunner.ClassInvalidOutput, "run %s, step %s (visit %d): %v", rs.run.ID, ss.sr.Step, ss.sr.Visit, err)
}

// succeed closes a step run with its label and opens its successors.
func (s *Scheduler) succeed(ch *agentrunner.Change, rs *runState, ss *stepState, label, output string, targets []string) {
	now := s.clock.Now()
	ss.sr.Status, ss.sr.Label, ss.sr.Output, ss.sr.EndedAt = agentrunner.StepRunSucceeded, label, output, now
	ss.deadline = time.Time{}
	s.putStepRun(ch, ss)
	s.completed(ch, rs, ss.sr.Step)
	for _, to := range targets {
		if rs.run.Status != agentrunner.RunRunning {
			break // a cap halted the run
		}
		s.open(ch, rs, to, ss, 0)
	}
	s.settle(ch, rs)
}

// open follows one edge into step to: a new step run of to (with its
// first attempt), an arrival at a join, or the cap's action.
func (s *Scheduler) open(ch *agentrunner.Change, rs *runState, to string, from *stepState, depth int) {
	if to == agentrunner.EndStep {
		return
	}
	st := rs.pipeline.Steps[to]
	if st.Join != "" && s.arrive(ch, rs, st, from) {
		return
	}
	if st.MaxVisits > 0 && rs.visits[to] >= st.MaxVisits {
		s.capped(ch, rs, st, from, depth)
		return
	}
	rs.visits[to]++
	ss := &stepState{sr: &agentrunner.StepRun{
		RunID: rs.run.ID, Step: to, Visit: rs.visits[to], Status: agentrunner.StepRunOpen, OpenedAt: s.clock.Now(),
	}}
	if from != nil {
		ss.sr.From = from.sr.Key()
	}
	rs.steps[ss.sr.Key()] = ss
	s.moveTo(ch, rs, agentrunner.State(to))
	if st.Join != "" {
		ss.sr.Arrived = []string{fromStep(from)}
		if st.Join == agentrunner.JoinAll && len(graph.Incoming(rs.pipeline, to)) > 1 {
			ss.sr.Status = agentrunner.StepRunJoining
			s.putStepRun(ch, ss)
			s.event(ch, rs, to, EventJoinArrived, agentrunner.LevelInfo, map[string]any{"visit": ss.sr.Visit, "from": fromStep(from), "waiting_for": s.missing(rs, st, ss)})
			return
		}
	}
	s.startStepRun(ch, rs, ss)
}

func fromStep(from *stepState) string {
	if from == nil {
		return ""
	}
	return from.sr.Step
}

// arrive adds a branch to the join step run it belongs to, reporting
// false when none is waiting for it (the branch opens a new visit). A join
// all opens when every incoming branch arrived; a join any runs on the
// first, and later branches of the same round are absorbed.
func (s *Scheduler) arrive(ch *agentrunner.Change, rs *runState, st *agentrunner.Step, from *stepState) bool {
	cur := rs.latest(st.ID)
	step := fromStep(from)
	if cur == nil || slices.Contains(cur.sr.Arrived, step) {
		return false
	}
	if cur.sr.Status != agentrunner.StepRunJoining && st.Join != agentrunner.JoinAny {
		return false
	}
	cur.sr.Arrived = append(cur.sr.Arrived, step)
	s.putStepRun(ch, cur)
	s.event(ch, rs, st.ID, EventJoinArrived, agentrunner.LevelInfo, map[string]any{"visit": cur.sr.Visit, "from": step, "waiting_for": s.missing(rs, st, cur)})
	if cur.sr.Status == agentrunner.StepRunJoining && len(s.missing(rs, st, cur)) == 0 {
		s.startStepRun(ch, rs, cur)
	}
	return true
}

// missing lists the incoming branches a join still waits for.
func (s *Scheduler) missing(rs *runState, st *agentrunner.Step, ss *stepState) []string {
	var out []string
	for _, in := range graph.Incoming(rs.pipeline, st.ID) {
		if !slices.Contains(ss.sr.Arrived, in) {
			out = append(out, in)
		}
	}
	return out
}

// capped applies a step's on_cap: go to its target (usually a gate, which
// hands the run to a person with its state kept), or halt the run.
func (s *Scheduler) capped(ch *agentrunner.Change, rs *runState, st *agentrunner.Step, from *stepState, depth int) {
	details := map[string]any{"visits": rs.visits[st.ID], "max_visits": st.MaxVisits, "from": fromStep(from)}
	if st.OnCap.To != "" && depth < len(rs.pipeline.Steps) {
		details["to"] = st.OnCap.To
		s.event(ch, rs, st.ID, EventLoopCapped, agentrunner.LevelWarn, details)
		s.open(ch, rs, st.OnCap.To, from, depth+1)
		return
	}
	if st.OnCap.End {
		s.endIncomplete(ch, rs, st, details)
		return
	}
	details["action"] = "halt"
	s.event(ch, rs, st.ID, EventLoopCapped, agentrunner.LevelWarn, details)
	s.endRun(ch, rs, agentrunner.RunHalted, fmt.Sprintf("step %s reached its max_visits (%d): the run is halted for an operator", st.ID, st.MaxVisits))
}

// endIncomplete ends a run whose loop reached its cap with on_cap end:
// the loop gave up before the run reached its end, which the escalation
// event and the operators' notification say, as a failed step's do.
func (s *Scheduler) endIncomplete(ch *agentrunner.Change, rs *runState, st *agentrunner.Step, details map[string]any) {
	why := fmt.Sprintf("step %s reached its max_visits (%d) before the run reached its end: the run is incomplete", st.ID, st.MaxVisits)
	details["action"] = "end"
	s.event(ch, rs, st.ID, EventLoopCapped, agentrunner.LevelWarn, details)
	s.event(ch, rs, st.ID, EventEscalation, agentrunner.LevelError, map[string]any{
		"step": st.ID, "visits": rs.visits[st.ID], "max_visits": st.MaxVisits, "policy": webhook.PolicyEnd, "error": why,
	})
	s.alert(ch, webhook.Event{
		Kind: webhook.KindEscalation, ID: fmt.Sprintf("escalation/%s/%s/cap", rs.run.ID, st.ID),
		Time: s.clock.Now(), Pipeline: rs.run.Pipeline, CycleID: rs.run.ID, Step: st.ID, Agent: agentOf(st),
		Policy: webhook.PolicyEnd, Error: why, Details: map[string]any{"max_visits": st.MaxVisits},
	})
	s.endRun(ch, rs, agentrunner.RunIncomplete, why)
}

// startStepRun opens a step run with its first attempt, started after the
// commit.
func (s *Scheduler) startStepRun(ch *agentrunner.Change, rs *runState, ss *stepState) {
	ss.sr.Status = agentrunner.StepRunOpen
	s.putStepRun(ch, ss)
	s.firstAttempt(ch, rs, ss)
}

// firstAttempt adds a step run's first attempt. Attempt numbers count
// across a step's visits, so its retries are counted from the attempts
// of the step before it: each visit has its own retries.
func (s *Scheduler) firstAttempt(ch *agentrunner.Change, rs *runState, ss *stepState) {
	s.newAttempt(ch, rs, ss, time.Time{}, rs.attempts[ss.sr.Step])
}

// newAttempt adds the step run's next attempt: running now when a slot
// is free and no attempt waits for one, else pending until notBefore or
// until assign gives it a slot. Only an attempt that runs is recorded
// running, so a restart counts as interrupted only attempts that ran.
func (s *Scheduler) newAttempt(ch *agentrunner.Change, rs *runState, ss *stepState, notBefore time.Time, retryBase int) {
	st := rs.pipeline.Steps[ss.sr.Step]
	rs.attempts[st.ID]++
	n := rs.attempts[st.ID]
	now := s.clock.Now()
	att := &agentrunner.Attempt{
		CycleID: rs.run.ID, Step: st.ID, Number: n, Visit: ss.sr.Visit, Agent: agentOf(st),
		Status: agentrunner.AttemptRunning, StartedAt: now, RetryBase: retryBase,
		Dir: s.opts.AttemptDir(rs.run.ID, st.ID, n),
	}
	t := &task{rs: rs, ss: ss, att: att}
	ss.att = att
	switch {
	case notBefore.After(now):
		att.Status, att.StartedAt, att.NotBefore = agentrunner.AttemptPending, time.Time{}, notBefore
		s.batch.delay = append(s.batch.delay, t)
	case s.mayStart() && len(s.ready) == 0 && len(s.batch.start) == 0 && len(s.resuming) == 0:
		s.slots--
		s.batch.run = append(s.batch.run, t)
		s.startedEvent(ch, t)
	default:
		att.Status, att.StartedAt = agentrunner.AttemptPending, time.Time{}
		s.batch.start = append(s.batch.start, t)
	}
	ch.Attempts = append(ch.Attempts, att)
	s.batch.transition(ch)
}

// startedEvent records that the task's attempt starts.
func (s *Scheduler) startedEvent(ch *agentrunner.Change, t *task) {
	s.event(ch, t.rs, t.att.Step, agentrunner.EventAttemptStarted, agentrunner.LevelInfo, map[string]any{"attempt": t.att.Number, "visit": t.ss.sr.Visit, "from": t.ss.sr.From})
}

// agentOf names the agent of an agent step, for events and attempts.
func agentOf(st *agentrunner.Step) string {
	if a, ok := st.Config.(interface{ AgentName() string }); ok {
		return a.AgentName()
	}
	return ""
}

// closeAttempt records the end of the current attempt, now.
func (s *Scheduler) closeAttempt(ch *agentrunner.Change, rs *runState, ss *stepState, status agentrunner.AttemptStatus, res *agentrunner.StepResult, cause error) {
	s.closeAttemptAt(ch, rs, ss, status, res, cause, s.clock.Now())
}

// closeAttemptAt records the end of the current attempt at now: the
// present, or when the runner was last alive for an attempt a crash cut
// short.
func (s *Scheduler) closeAttemptAt(ch *agentrunner.Change, rs *runState, ss *stepState, status agentrunner.AttemptStatus, res *agentrunner.StepResult, cause error, now time.Time) {
	done := *ss.att
	done.Status, done.EndedAt = status, now
	if done.StartedAt.IsZero() {
		done.StartedAt = now
	}
	if res != nil {
		done.ExitCode, done.Usage, done.OutputPath = res.ExitCode, res.Usage, res.Path
	}
	details := map[string]any{"attempt": done.Number, "visit": done.Visit, "duration_ms": now.Sub(done.StartedAt).Milliseconds()}
	typ, level := agentrunner.EventAttemptSucceeded, agentrunner.LevelInfo
	if cause != nil {
		done.ErrorClass, done.Error = agentrunner.ClassOf(cause), reason(cause)
		details["error_class"], details["error"] = string(done.ErrorClass), done.Error
		typ, level = agentrunner.EventAttemptFailed, agentrunner.LevelWarn
		switch done.ErrorClass {
		case agentrunner.ClassInterrupted:
			typ = agentrunner.EventAttemptInterrupted
		case agentrunner.ClassShutdown:
			// Asked for, not a problem: logged as information.
			typ, level = agentrunner.EventAttemptInterrupted, agentrunner.LevelInfo
		}
	}
	ss.att = &done
	ch.Attempts = append(ch.Attempts, &done)
	s.event(ch, rs, ss.sr.Step, typ, level, details)
	s.batch.transition(ch)
}

// reason is a failure's message without its class, which is recorded on
// its own.
func reason(err error) string {
	if se := (*agentrunner.StepError)(nil); errors.As(err, &se) {
		return se.Err.Error()
	}
	return err.Error()
}

// failAttempt records a failed attempt, then retries the step run when
// its class and policy allow, or escalates it as its step's OnFailure says.
func (s *Scheduler) failAttempt(ch *agentrunner.Change, rs *runState, ss *stepState, cause error, res *agentrunner.StepResult) {
	s.failAttemptAt(ch, rs, ss, cause, res, s.clock.Now())
}

// failAttemptAt is failAttempt for an attempt that ended at end.
func (s *Scheduler) failAttemptAt(ch *agentrunner.Change, rs *runState, ss *stepState, cause error, res *agentrunner.StepResult, end time.Time) {
	if s.lateFailure(ch, rs, ss, cause, res) {
		return // the run is out of time: no retry (deadline.go)
	}
	st := rs.pipeline.Steps[ss.sr.Step]
	att := ss.att
	s.closeAttemptAt(ch, rs, ss, agentrunner.AttemptFailed, res, cause, end)
	if s.retryExhausted(ch, rs, ss, att, cause) {
		return // the machine's state, not the step's fault (resource.go)
	}
	class := agentrunner.ClassOf(cause)
	base := att.RetryBase
	if class == agentrunner.ClassInterrupted {
		// Not the step's fault: no backoff, and no retry spent.
		ss.interruptions++
		if ss.interruptions <= s.opts.MaxInterruptions {
			s.newAttempt(ch, rs, ss, time.Time{}, base+1)
			return
		}
		cause = agentrunner.Fail(agentrunner.ClassInterrupted, "the runner stopped during %d attempts of this step run", ss.interruptions)
	}
	retries := att.Number - base // retries spent so far, counting this failure
	if st.Retry.Retries(class) && retries <= st.Retry.Max {
		wait := st.Retry.Wait(retries)
		notBefore := s.clock.Now().Add(wait)
		s.event(ch, rs, st.ID, agentrunner.EventRetryScheduled, agentrunner.LevelInfo, map[string]any{
			"attempt": att.Number + 1, "visit": ss.sr.Visit, "wait": wait.String(),
		})
		s.newAttempt(ch, rs, ss, notBefore, base)
		return
	}
	s.escalate(ch, rs, ss, cause)
}

// wait puts a gate's step run in wait for a decision.
func (s *Scheduler) wait(ch *agentrunner.Change, rs *runState, ss *stepState, res *agentrunner.StepResult) {
	st := rs.pipeline.Steps[ss.sr.Step]
	s.closeAttempt(ch, rs, ss, agentrunner.AttemptSucceeded, res, nil)
	ss.sr.Status = agentrunner.StepRunWaiting
	details := map[string]any{"visit": ss.sr.Visit, "from": ss.sr.From}
	if st.Gate != nil && st.Gate.Timeout > 0 {
		ss.deadline = ss.sr.OpenedAt.Add(st.Gate.Timeout)
		s.timed[ss] = rs
		details["timeout_at"], details["default"] = ss.deadline.Format(time.RFC3339), string(st.Gate.Default)
	}
	s.putStepRun(ch, ss)
	s.event(ch, rs, st.ID, EventGateOpened, agentrunner.LevelWarn, details)
}

// settle ends a run that has nothing left to do: completed when every
// branch ended, failed when only joins remain that can never open.
func (s *Scheduler) settle(ch *agentrunner.Change, rs *runState) {
	if rs.run.Status != agentrunner.RunRunning {
		return
	}
	var stuck []string
	for _, ss := range rs.steps {
		switch ss.sr.Status {
		case agentrunner.StepRunOpen, agentrunner.StepRunWaiting:
			return
		case agentrunner.StepRunJoining:
			stuck = append(stuck, fmt.Sprintf("%s (waiting for %v)", ss.sr.Key(), s.missing(rs, rs.pipeline.Steps[ss.sr.Step], ss)))
		}
	}
	if len(stuck) > 0 {
		slices.Sort(stuck)
		s.endRun(ch, rs, agentrunner.RunFailed, fmt.Sprintf("the joins %v wait for branches that can no longer arrive", stuck))
		return
	}
	s.endRun(ch, rs, agentrunner.RunCompleted, "")
}

// endRun finishes a run (completed, failed, aborted) or halts it; its
// unfinished step runs are canceled and their attempts stopped.
func (s *Scheduler) endRun(ch *agentrunner.Change, rs *runState, status agentrunner.RunStatus, why string) {
	now := s.clock.Now()
	at := rs.run.Step // a serial run's step, where it ends
	r := *rs.run
	r.Status, r.Error = status, why
	if status != agentrunner.RunHalted {
		r.EndedAt = now
	}
	// A halted run keeps its step runs' record; none of them goes on.
	for _, ss := range rs.steps {
		if ss.sr.Status.Finished() {
			continue
		}
		if ss.cancel != nil {
			ss.cancel()
		}
		if a := ss.att; a != nil && (a.Status == agentrunner.AttemptRunning || a.Status == agentrunner.AttemptPending) {
			s.closeAttempt(ch, rs, ss, agentrunner.AttemptFailed, nil, agentrunner.Fail(agentrunner.ClassAborted, "the run ended (%s) before this attempt did", status))
		}
		ss.sr.Status, ss.sr.EndedAt, ss.deadline = agentrunner.StepRunCanceled, now, time.Time{}
		s.putStepRun(ch, ss)
	}
	rs.run = &r
	s.putRun(ch, rs)
	to := agentrunner.StateWaiting
	if status == agentrunner.RunHalted {
		to = agentrunner.StateHalted
	}
	s.moveTo(ch, rs, to)
	typ, level := runEvent(rs.pipeline, map[agentrunner.RunStatus]string{
		agentrunner.RunCompleted: "completed", agentrunner.RunFailed: "failed",
		agentrunner.RunHalted: "halted", agentrunner.RunAborted: "aborted", agentrunner.RunIncomplete: "incomplete",
	}[status]), agentrunner.LevelInfo
	details := map[string]any{"pipeline": r.Pipeline, "status": string(status), "duration_ms": now.Sub(r.StartedAt).Milliseconds()}
	if why != "" {
		details["error"], level = why, agentrunner.LevelWarn
	}
	s.event(ch, rs, at, typ, level, details)
	s.finish(ch, rs)
}

// putStepRun adds the step run's current state to the change.
func (s *Scheduler) putStepRun(ch *agentrunner.Change, ss *stepState) {
	sr := *ss.sr
	sr.Arrived = slices.Clone(ss.sr.Arrived)
	for i, old := range ch.StepRuns {
		if old.Step == sr.Step && old.Visit == sr.Visit && old.RunID == sr.RunID {
			ch.StepRuns[i] = &sr
			return
		}
	}
	ch.StepRuns = append(ch.StepRuns, &sr)
}

// event appends an event about a run to a change. Its details name the
// run's pipeline, which the metrics of runs, attempts and gates are
// labelled with.
func (s *Scheduler) event(ch *agentrunner.Change, rs *runState, step, typ string, level agentrunner.Level, details map[string]any) {
	details["pipeline"] = rs.run.Pipeline
	ev := &agentrunner.Event{Timestamp: s.clock.Now(), Type: typ, Step: step, CycleID: rs.run.ID, Level: level, Details: details}
	if st := rs.pipeline.Steps[step]; st != nil {
		ev.Agent = agentOf(st)
	}
	ch.Events = append(ch.Events, ev)
}
