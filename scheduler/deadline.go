package scheduler

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/agentrunner/agentrunner"
)

// A pipeline's MaxDuration bounds each of its runs (FR-005..007). While a
// run has time left, each attempt's timeout is cut to it; once the run is
// overdue, its unfinished step runs are cut short and the run is forced to
// the pipeline's Final step, which always gets its own full time to judge
// what the run has. With no Final step, or when the Final step itself
// fails after the deadline, the run fails.

// EventRunForced is the event of a run forced to its final step; a
// pipeline whose runs are cycles (Noun) writes cycle.forced.
const EventRunForced = "run.forced"

// runDeadline is when a run is due to end; zero when its pipeline has no
// bound.
func runDeadline(rs *runState) time.Time {
	if rs.pipeline.MaxDuration <= 0 {
		return time.Time{}
	}
	return rs.run.StartedAt.Add(rs.pipeline.MaxDuration)
}

// overdue reports whether a run has outlived its pipeline's MaxDuration.
func overdue(rs *runState, now time.Time) bool {
	d := runDeadline(rs)
	return !d.IsZero() && !now.Before(d)
}

// overdueReason says why an overdue run is cut short, naming its bound.
func overdueReason(rs *runState) string {
	return fmt.Sprintf("the %s ran longer than its max duration (%s)", noun(rs.pipeline), rs.pipeline.MaxDuration)
}

// noun is what the pipeline calls its runs in event types.
func noun(p *agentrunner.Pipeline) string {
	return cmp.Or(p.Noun, "run")
}

// attemptBound is an attempt's time limit (0: none) and whether it is
// late: the step's timeout cut to what is left of the run, at least 1ms,
// except the final step's, which always gets its full timeout; an attempt
// of the final step of an overdue run is late.
func (s *Scheduler) attemptBound(t *task) (time.Duration, bool) {
	st := t.rs.pipeline.Steps[t.att.Step]
	now := s.clock.Now()
	d := runDeadline(t.rs)
	if st.ID == t.rs.pipeline.Final || d.IsZero() {
		return st.Timeout, overdue(t.rs, now) && st.ID == t.rs.pipeline.Final
	}
	left := max(d.Sub(now), time.Millisecond)
	if st.Timeout > 0 {
		left = min(left, st.Timeout)
	}
	return left, false
}

// bound keeps a running run that has a deadline, for the timer that cuts
// it short; a run that ended since is dropped when next looked at.
func (s *Scheduler) bound(rs *runState) {
	d := runDeadline(rs)
	if d.IsZero() {
		return
	}
	if s.bounds == nil {
		s.bounds = map[*runState]time.Time{}
	}
	s.bounds[rs] = d
}

// overdueRuns cuts short the kept runs whose deadline passed, oldest run
// first.
//
// While the workspace is paused nothing is cut short: a pause changes
// nothing, and a run that outlived its bound meanwhile is forced at the
// resume.
func (s *Scheduler) overdueRuns() {
	if s.control.Paused {
		return
	}
	now := s.clock.Now()
	var due []*runState
	for rs, d := range s.bounds {
		switch {
		case s.runs[rs.run.ID] != rs || rs.run.Status != agentrunner.RunRunning:
			delete(s.bounds, rs) // ended or halted
		case !now.Before(d):
			delete(s.bounds, rs)
			due = append(due, rs)
		}
	}
	slices.SortFunc(due, func(a, b *runState) int { return strings.Compare(a.run.ID, b.run.ID) })
	for _, rs := range due {
		s.overrun(s.batch.change(), rs)
	}
}

// resumeBound keeps a run read back on start; one that became overdue
// while the runner was stopped is forced at once, so its cut steps do not
// run again.
//
// A run whose final step opened at or after its deadline was forced to it
// before the stop (forced is not stored: the step run says so).
func (s *Scheduler) resumeBound(ch *agentrunner.Change, rs *runState) {
	if d, ss := runDeadline(rs), rs.latest(rs.pipeline.Final); !d.IsZero() && ss != nil && !ss.sr.OpenedAt.Before(d) {
		rs.forced = true
	}
	if overdue(rs, s.clock.Now()) {
		s.overrun(ch, rs)
		return
	}
	s.bound(rs)
}

// overrun cuts short an overdue run and forces it to its final step,
// unless the final step already runs.
func (s *Scheduler) overrun(ch *agentrunner.Change, rs *runState) {
	why := overdueReason(rs)
	from, finalLive := s.cutShort(ch, rs, why)
	if !finalLive {
		s.force(ch, rs, from, why)
	}
}

// cutShort cancels every unfinished step run of a run but the final
// step's, failing its running or pending attempt as a timeout. It returns
// the steps it cut and whether a step run of the final step goes on (a
// join of the final step still waiting for branches does not: it is
// forced open).
func (s *Scheduler) cutShort(ch *agentrunner.Change, rs *runState, why string) (from []string, finalLive bool) {
	now := s.clock.Now()
	for _, key := range slices.Sorted(maps.Keys(rs.steps)) {
		ss := rs.steps[key]
		switch {
		case ss.sr.Status.Finished():
			continue
		case ss.sr.Step == rs.pipeline.Final:
			finalLive = finalLive || ss.sr.Status != agentrunner.StepRunJoining
			continue
		}
		if ss.cancel != nil {
			ss.cancel() // its result, when it comes, is dropped: the step run is no longer open
		}
		if a := ss.att; ss.sr.Status == agentrunner.StepRunOpen && a != nil && (a.Status == agentrunner.AttemptRunning || a.Status == agentrunner.AttemptPending) {
			s.closeAttempt(ch, rs, ss, agentrunner.AttemptFailed, nil, agentrunner.Fail(agentrunner.ClassTimeout, "%s", why))
		}
		ss.sr.Status, ss.sr.EndedAt, ss.sr.Error, ss.deadline = agentrunner.StepRunCanceled, now, why, time.Time{}
		s.putStepRun(ch, ss)
		if !slices.Contains(from, ss.sr.Step) {
			from = append(from, ss.sr.Step)
		}
	}
	return from, finalLive
}

// force opens the final step of an overdue run (its first attempt late),
// recording where the run was forced from; with no final step, or when it
// was forced once already, the run fails.
func (s *Scheduler) force(ch *agentrunner.Change, rs *runState, from []string, why string) {
	p := rs.pipeline
	st := p.Steps[p.Final]
	if st == nil || rs.forced {
		s.endRun(ch, rs, agentrunner.RunFailed, why)
		return
	}
	ss := rs.latest(st.ID)
	if ss == nil || ss.sr.Status != agentrunner.StepRunJoining {
		if st.MaxVisits > 0 && rs.visits[st.ID] >= st.MaxVisits {
			s.endRun(ch, rs, agentrunner.RunFailed, fmt.Sprintf("%s, and its final step %s already ran its max_visits (%d)", why, st.ID, st.MaxVisits))
			return
		}
		rs.visits[st.ID]++
		ss = &stepState{sr: &agentrunner.StepRun{
			RunID: rs.run.ID, Step: st.ID, Visit: rs.visits[st.ID], Status: agentrunner.StepRunOpen, OpenedAt: s.clock.Now(),
		}}
		rs.steps[ss.sr.Key()] = ss
	}
	rs.forced = true
	step := ""
	if len(from) == 1 {
		step = from[0]
	}
	s.event(ch, rs, step, runEvent(p, "forced"), agentrunner.LevelWarn, map[string]any{"from": strings.Join(from, ","), "to": st.ID, "why": why})
	s.batch.transition(ch)
	s.startStepRun(ch, rs, ss)
}

// lateFailure takes over an attempt that failed after its run's deadline,
// reporting whether it did: such a step run is not retried. Another
// step's forces the run to its final step; the final step's fails the
// run, unless the runner's stopping interrupted it (not its fault: it
// runs again).
func (s *Scheduler) lateFailure(ch *agentrunner.Change, rs *runState, ss *stepState, cause error, res *agentrunner.StepResult) bool {
	final := ss.sr.Step == rs.pipeline.Final
	if rs.run.Status != agentrunner.RunRunning || !overdue(rs, s.clock.Now()) || final && agentrunner.ClassOf(cause) == agentrunner.ClassInterrupted {
		return false
	}
	why := overdueReason(rs)
	s.closeAttempt(ch, rs, ss, agentrunner.AttemptFailed, res, cause)
	ss.sr.Status, ss.sr.EndedAt, ss.sr.Error = agentrunner.StepRunFailed, s.clock.Now(), reason(cause)
	s.putStepRun(ch, ss)
	delete(s.bounds, rs)
	if final {
		s.endRun(ch, rs, agentrunner.RunFailed, fmt.Sprintf("%s: its final step %s (visit %d) failed after it: %s", why, ss.sr.Step, ss.sr.Visit, reason(cause)))
		return true
	}
	from, finalLive := s.cutShort(ch, rs, why)
	if !finalLive {
		s.force(ch, rs, append([]string{ss.sr.Step}, slices.DeleteFunc(from, func(f string) bool { return f == ss.sr.Step })...), why)
	}
	return true
}
