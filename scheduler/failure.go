package scheduler

import (
	"context"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/agentrunner/agentrunner"
	"github.com/agentrunner/agentrunner/graph"
	"github.com/agentrunner/agentrunner/webhook"
)

// Event types of a step that failed for good, and of a halted run that an
// operator resumes (named with the pipeline's noun: run.resumed,
// cycle.resumed).
const (
	EventEscalation = "escalation"
	EventSkipped    = "step.skipped"
	EventRunResumed = "run.resumed"
)

// fallbackTimeout bounds how long a Fallbacker may look for a stand-in.
// It runs synchronously on the scheduler's loop: a kind's search reads a
// few files and publishes one (no agent runs), which is quick enough not
// to hold up the other runs for long, and this bound keeps a slow disk
// from holding them up for ever.
const fallbackTimeout = 10 * time.Second

// escalate applies the step's OnFailure to a step run that failed for good
// (its current attempt closed failed with cause): the run fails, halts
// until an operator resumes it, or goes on with a stand-in for the step's
// output. Each writes an escalation event and alerts the operators.
func (s *Scheduler) escalate(ch *agentrunner.Change, rs *runState, ss *stepState, cause error) {
	st := rs.pipeline.Steps[ss.sr.Step]
	att := ss.att
	policy := st.OnFailure
	if policy == "" {
		policy = agentrunner.FailRun
	}
	class, why := agentrunner.ClassOf(cause), reason(cause)
	details := map[string]any{"step": st.ID, "visit": ss.sr.Visit, "attempts": att.Number, "error_class": string(class), "error": why}
	alert := webhook.Event{
		Kind: webhook.KindEscalation, ID: fmt.Sprintf("escalation/%s/%s/%d", rs.run.ID, st.ID, att.Number),
		Time: s.clock.Now(), Pipeline: rs.run.Pipeline, CycleID: rs.run.ID, Step: st.ID, Agent: agentOf(st),
		Attempts: att.Number, ErrorClass: string(class), Error: why,
	}
	if l, ok := s.kindOf(rs, st.Kind).(agentrunner.InputLister); ok {
		alert.Inputs = l.Inputs(rs.run, st)
		details["inputs"] = alert.Inputs
	}
	if policy == agentrunner.SkipStep {
		fb, label, targets, none := s.fallback(rs, ss)
		if none == "" {
			details["policy"], details["fallback"], details["fallback_run"] = string(policy), fb.Path, s.runOfPath(rs, fb.Path)
			alert.Policy, alert.Fallback = string(policy), fb.Path
			s.event(ch, rs, st.ID, EventEscalation, agentrunner.LevelError, details)
			s.alert(ch, alert)
			ss.sr.Error = fmt.Sprintf("skipped after %d attempt(s): %s: %s", att.Number, class, why)
			s.skip(ch, rs, ss, fb, label, targets, details["fallback_run"])
			return
		}
		// With nothing to stand in for the step, skip is halt.
		policy, details["fallback"] = agentrunner.HaltRun, "none: "+none
	}
	details["policy"], alert.Policy = string(policy), string(policy)
	s.event(ch, rs, st.ID, EventEscalation, agentrunner.LevelError, details)
	s.alert(ch, alert)
	ss.sr.Status, ss.sr.EndedAt, ss.sr.Error = agentrunner.StepRunFailed, s.clock.Now(), why
	s.putStepRun(ch, ss)
	if policy == agentrunner.HaltRun {
		s.endRun(ch, rs, agentrunner.RunHalted, fmt.Sprintf("step %s (visit %d) failed after %d attempt(s): %s: %s; waiting for an operator to resume",
			st.ID, ss.sr.Visit, att.Number, class, why))
		return
	}
	s.endRun(ch, rs, agentrunner.RunFailed, fmt.Sprintf("step %s (visit %d) failed after %d attempt(s): %s: %s", st.ID, ss.sr.Visit, att.Number, class, why))
}

// fallback asks the step's kind for a stand-in for the failed step run and
// follows its edges with the label read from it; none says why there is no
// usable one (empty when there is).
func (s *Scheduler) fallback(rs *runState, ss *stepState) (fb *agentrunner.StepResult, label string, targets []string, none string) {
	st := rs.pipeline.Steps[ss.sr.Step]
	fk, ok := s.kindOf(rs, st.Kind).(agentrunner.Fallbacker)
	if !ok {
		return nil, "", nil, fmt.Sprintf("step kind %s keeps no earlier output to stand in for a step", st.Kind)
	}
	ctx, cancel := context.WithTimeout(context.Background(), fallbackTimeout)
	defer cancel()
	a := &agentrunner.StepAttempt{Run: rs.run, Step: st, StepRun: ss.sr, Attempt: ss.att, Dir: ss.att.Dir, RunDir: rs.run.Dir, Views: rs.pipeline.Views}
	fb, err := fk.Fallback(ctx, a)
	switch {
	case err != nil:
		return nil, "", nil, "looking for an earlier output: " + err.Error()
	case fb == nil:
		return nil, "", nil, fmt.Sprintf("no earlier run of pipeline %s has a good output of step %s", rs.pipeline.Name, st.ID)
	}
	label, err = s.label(rs, ss, fb)
	if err == nil {
		targets, err = graph.Successors(st, label)
	}
	if err != nil {
		return nil, "", nil, fmt.Sprintf("the earlier output %s cannot route the run: %v", fb.Path, err)
	}
	return fb, label, targets, ""
}

// skip closes a failed step run as succeeded with a fallback's output (its
// Error says what the fallback stands in for) and goes on along the
// step's edges.
func (s *Scheduler) skip(ch *agentrunner.Change, rs *runState, ss *stepState, fb *agentrunner.StepResult, label string, targets []string, fromRun any) {
	ch.Events = append(ch.Events, fb.Events...)
	ch.Outbox = append(ch.Outbox, fb.Outbox...)
	s.keepFiles(ch, rs, ss, fb, true)
	s.event(ch, rs, ss.sr.Step, EventSkipped, agentrunner.LevelWarn, map[string]any{
		"visit": ss.sr.Visit, "fallback": fb.Path, "fallback_run": fromRun, "label": label,
	})
	s.succeed(ch, rs, ss, label, fb.Path, targets)
}

// runOfPath names the run whose directory holds path (a fallback's), or
// "" when it is in none of the pipeline's run directories.
func (s *Scheduler) runOfPath(rs *runState, path string) string {
	for d := filepath.Dir(path); d != filepath.Dir(d); d = filepath.Dir(d) {
		if id := filepath.Base(d); filepath.Clean(s.opts.RunDir(rs.run.Pipeline, id)) == d {
			return id
		}
	}
	return ""
}

// alert adds an operators' notification to a change, when the scheduler
// is configured with a way to send one.
func (s *Scheduler) alert(ch *agentrunner.Change, ev webhook.Event) {
	if s.opts.Alert != nil {
		s.opts.Alert(ch, ev)
	}
}

// unhalt takes a halted run back among the runs the scheduler runs; it
// counts against max_concurrent_runs again (a halt gave its place up).
func (s *Scheduler) unhalt(rs *runState) {
	delete(s.halted, rs.run.ID)
	s.runs[rs.run.ID] = rs
	s.active[rs.run.Pipeline]++
}

// resumeCommand applies a run.resume command: a halted run runs again.
func (s *Scheduler) resumeCommand(ch *agentrunner.Change, cmd *agentrunner.Command) string {
	runID, _ := cmd.Args["run"].(string)
	rs := s.halted[runID]
	if rs == nil {
		if o := s.runs[runID]; o != nil {
			return fmt.Sprintf("ignored: run %s is %s, not halted", runID, o.run.Status)
		}
		return fmt.Sprintf("ignored: run %s is not halted (unknown, finished or not a run of this runner)", runID)
	}
	result, _ := s.resumeRun(ch, rs, cmd)
	return result
}

// resumeRun resumes a halted run on an operator's command and reports
// whether it did, with the command's result. The step runs the halt
// stopped run again: the one that failed for good, and the branches that
// were running beside it (so that a join waiting for them can open). Each
// gets a new attempt on the same step run, with a fresh round of retries
// (its RetryBase is its last attempt's number), as the loop's step runs
// again; a gate that was waiting waits again and a join that was gathering
// its branches gathers again. A run halted with no such step run (a
// max_visits cap) is refused: a gate or an abort decides it; so is one
// whose pipeline runs its max_concurrent_runs meanwhile, until one ends.
//
// It is the operators' generic resume: the run.resume command calls it,
// and so can another command that resumes a halted run.
func (s *Scheduler) resumeRun(ch *agentrunner.Change, rs *runState, cmd *agentrunner.Command) (string, bool) {
	stopped := s.stopped(rs)
	if len(stopped) == 0 {
		return fmt.Sprintf("ignored: run %s has no step run to run again (%s); abort it", rs.run.ID, rs.run.Error), false
	}
	// A halt gave the run's place up, and a queued run may have taken it:
	// resuming now would run one more than max_concurrent_runs.
	if p := rs.pipeline; p.MaxConcurrentRuns > 0 && s.active[p.Name] >= p.MaxConcurrentRuns {
		return fmt.Sprintf("ignored: pipeline %s is running its max_concurrent_runs (%d): resume run %s once one of them ends",
			p.Name, p.MaxConcurrentRuns, rs.run.ID), false
	}
	s.unhalt(rs)
	r := *rs.run
	r.Status, r.Error = agentrunner.RunRunning, ""
	rs.run = &r
	s.putRun(ch, rs)
	s.bound(rs) // its deadline runs on
	s.moveTo(ch, rs, agentrunner.State(stopped[0].sr.Step))
	var keys []string
	for _, ss := range stopped {
		keys = append(keys, ss.sr.Key())
	}
	s.event(ch, rs, stopped[0].sr.Step, runEvent(rs.pipeline, "resumed"), agentrunner.LevelInfo, map[string]any{
		"operator": cmd.Operator, "command": cmd.ID, "step_runs": keys,
	})
	for _, ss := range stopped {
		if rs.run.Status != agentrunner.RunRunning {
			break // a step the configuration lost since failed the run
		}
		s.reopen(ch, rs, ss)
	}
	first := stopped[0]
	n := 0
	if first.att != nil {
		n = first.att.Number
	}
	s.alert(ch, webhook.Event{
		Kind: webhook.KindResumed, ID: fmt.Sprintf("resumed/%s/%s/%d", r.ID, first.sr.Step, n), Time: s.clock.Now(),
		Pipeline: r.Pipeline, CycleID: r.ID, Step: first.sr.Step, Details: map[string]any{"operator": cmd.Operator, "step_runs": keys},
	})
	s.settle(ch, rs)
	return fmt.Sprintf("resumed %s %s at %s", noun(rs.pipeline), r.ID, strings.Join(keys, ", ")), true
}

// stopped lists the step runs of a halted run that the halt stopped, in
// key order: the one that failed for good and those it canceled. A halted
// run has no other failed or canceled step runs: a step run that fails
// for good otherwise ends its run.
func (s *Scheduler) stopped(rs *runState) []*stepState {
	var out []*stepState
	for _, key := range slices.Sorted(maps.Keys(rs.steps)) {
		ss := rs.steps[key]
		if ss.sr.Status == agentrunner.StepRunFailed || ss.sr.Status == agentrunner.StepRunCanceled {
			out = append(out, ss)
		}
	}
	return out
}

// reopen puts a step run the halt stopped back where it was: a gate
// waiting, a join gathering, any other step with a new attempt.
func (s *Scheduler) reopen(ch *agentrunner.Change, rs *runState, ss *stepState) {
	st := rs.pipeline.Steps[ss.sr.Step]
	ss.sr.EndedAt, ss.sr.Error, ss.interruptions = time.Time{}, "", 0
	switch {
	case st == nil:
		// The configuration lost the step since: the run cannot go on.
		ss.sr.Status = agentrunner.StepRunOpen
		s.resumeStepRun(ch, rs, ss)
	case ss.att == nil && st.Join == agentrunner.JoinAll && len(s.missing(rs, st, ss)) > 0:
		ss.sr.Status = agentrunner.StepRunJoining
		s.putStepRun(ch, ss)
	case ss.att == nil:
		s.startStepRun(ch, rs, ss)
	case ss.att.Status == agentrunner.AttemptSucceeded:
		// Its attempt succeeded but the step run had not: a waiting gate.
		ss.sr.Status = agentrunner.StepRunWaiting
		s.putStepRun(ch, ss)
		s.resumeStepRun(ch, rs, ss)
	default:
		ss.sr.Status = agentrunner.StepRunOpen
		s.putStepRun(ch, ss)
		s.newAttempt(ch, rs, ss, time.Time{}, ss.att.Number)
	}
}
