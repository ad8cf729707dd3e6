package scheduler

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/agentrunner/agentrunner"
	"github.com/agentrunner/agentrunner/graph"
)

// commands applies the operators' pending commands of the kinds the
// scheduler owns; commands of other kinds (a step kind's) are left. Each is
// consumed in the transaction of the change it causes.
func (s *Scheduler) commands(ctx context.Context) error {
	cmds, err := s.store.PendingCommands(ctx)
	if err != nil {
		return err
	}
	for _, cmd := range cmds {
		var result string
		ch := s.batch.change()
		switch cmd.Kind {
		case agentrunner.CommandStartRun:
			result, err = s.startCommand(ctx, ch, cmd)
		case agentrunner.CommandGateDecision:
			result = s.decide(ch, cmd)
		case agentrunner.CommandAbortRun:
			result = s.abort(ch, cmd)
		case agentrunner.CommandAbort:
			s.abortSerial(ch, cmd)
			continue
		case agentrunner.CommandReload:
			s.reload(ch, cmd)
			continue
		case agentrunner.CommandResumeRun:
			result = s.resumeCommand(ch, cmd)
		default:
			if why := s.staleCommand(cmd); why != "" {
				s.ignore(ch, cmd, why)
				continue
			}
			if err := s.override(ctx, ch, cmd); err != nil {
				return err
			}
			continue
		}
		if err != nil {
			return err
		}
		s.consume(ch, cmd, result)
	}
	return nil
}

// consume marks a command applied with what came of it.
func (s *Scheduler) consume(ch *agentrunner.Change, cmd *agentrunner.Command, result string) {
	done := *cmd
	done.ConsumedAt, done.Result = s.clock.Now(), result
	ch.Consumed = append(ch.Consumed, &done)
}

// startCommand starts the run a run.start command asks for. A pipeline
// that is not (or no longer) configured is refused in the result; the API
// checked the inputs against the schema when it took the command.
func (s *Scheduler) startCommand(ctx context.Context, ch *agentrunner.Change, cmd *agentrunner.Command) (string, error) {
	name, _ := cmd.Args["pipeline"].(string)
	p := s.opts.Pipelines[name]
	if p == nil {
		return fmt.Sprintf("refused: pipeline %q is not configured", name), nil
	}
	inputs, _ := cmd.Args["inputs"].(map[string]any)
	parent, _ := cmd.Args["parent"].(string)
	id, err := s.startRun(ctx, ch, p, inputs, parent)
	if err != nil {
		return "", err
	}
	return "started run " + id, nil
}

// decide applies an operator's decision to the gate it names. The API
// refuses a decision on a gate that is not open; one that lost a race (the
// gate timed out first) is consumed with the reason.
func (s *Scheduler) decide(ch *agentrunner.Change, cmd *agentrunner.Command) string {
	runID, _ := cmd.Args["run"].(string)
	step, _ := cmd.Args["step"].(string)
	rs := s.runs[runID]
	if rs == nil {
		return fmt.Sprintf("refused: run %s is not running", runID)
	}
	ss := rs.latest(step)
	if v, ok := visitArg(cmd.Args["visit"]); ok && ss != nil && ss.sr.Visit != v {
		// The decision was about an earlier visit of the gate.
		return fmt.Sprintf("refused: gate %s of run %s is not open (its latest visit is %d)", agentrunner.StepRunKey(step, v), runID, ss.sr.Visit)
	}
	if ss == nil || ss.sr.Status != agentrunner.StepRunWaiting {
		return fmt.Sprintf("refused: step %s of run %s is not a waiting gate", step, runID)
	}
	action, _ := cmd.Args["action"].(string)
	to, _ := cmd.Args["to"].(string)
	comment, _ := cmd.Args["comment"].(string)
	d := &agentrunner.Decision{Action: agentrunner.DecisionAction(action), To: to, Comment: comment, Operator: cmd.Operator, DecidedAt: s.clock.Now()}
	if err := s.applyDecision(ch, rs, ss, d); err != nil {
		return "refused: " + err.Error()
	}
	return fmt.Sprintf("%s gate %s of run %s", action, ss.sr.Key(), runID)
}

// visitArg reads the visit a decision names: a JSON number once stored,
// an int when the command did not go through JSON.
func visitArg(v any) (int, bool) {
	switch n := v.(type) {
	case float64:
		return int(n), n >= 1
	case int:
		return n, n >= 1
	case int64:
		return int(n), n >= 1
	}
	return 0, false
}

// applyDecision closes a waiting gate with a decision and follows it:
// approve and reject are the gate's labels for its routes (or its next),
// route goes to the named step.
func (s *Scheduler) applyDecision(ch *agentrunner.Change, rs *runState, ss *stepState, d *agentrunner.Decision) error {
	st := rs.pipeline.Steps[ss.sr.Step]
	var targets []string
	switch d.Action {
	case agentrunner.DecisionApprove, agentrunner.DecisionReject:
		var err error
		if targets, err = graph.Successors(st, string(d.Action)); err != nil {
			return err
		}
	case agentrunner.DecisionRoute:
		if rs.pipeline.Steps[d.To] == nil && d.To != agentrunner.EndStep {
			return fmt.Errorf("route to %q: pipeline %s has no such step", d.To, rs.pipeline.Name)
		}
		targets = []string{d.To}
	default:
		return fmt.Errorf("decision %q: want approve, reject or route", d.Action)
	}
	ss.sr.Decision = d
	s.event(ch, rs, st.ID, EventGateDecided, agentrunner.LevelInfo, map[string]any{
		"visit": ss.sr.Visit, "action": string(d.Action), "to": d.To, "comment": d.Comment, "operator": d.Operator,
	})
	s.batch.transition(ch)
	if targets == nil { // a reject with no route of its own ends the run
		ss.sr.Status, ss.sr.Label, ss.sr.EndedAt, ss.deadline = agentrunner.StepRunSucceeded, string(d.Action), s.clock.Now(), time.Time{}
		s.putStepRun(ch, ss)
		s.endRun(ch, rs, agentrunner.RunFailed, fmt.Sprintf("gate %s rejected by %s: %s", ss.sr.Key(), d.Operator, d.Comment))
		return nil
	}
	s.succeed(ch, rs, ss, string(d.Action), "", targets)
	return nil
}

// abort ends a run on an operator's order, a halted one too.
func (s *Scheduler) abort(ch *agentrunner.Change, cmd *agentrunner.Command) string {
	runID, _ := cmd.Args["run"].(string)
	rs := s.runs[runID]
	if rs == nil {
		rs = s.halted[runID]
	}
	if rs == nil {
		return fmt.Sprintf("refused: run %s is not unfinished", runID)
	}
	if rs.run.Status == agentrunner.RunQueued {
		s.unqueue(rs)
	}
	why := "aborted by " + cmd.Operator
	if note, _ := cmd.Args["reason"].(string); note != "" {
		why += ": " + note
	}
	s.endRun(ch, rs, agentrunner.RunAborted, why)
	return fmt.Sprintf("aborted %s %s", noun(rs.pipeline), runID)
}

// unqueue takes a queued run out of its pipeline's queue; finish then
// counts it as if it had been active.
func (s *Scheduler) unqueue(rs *runState) {
	q := s.queued[rs.run.Pipeline]
	for i, o := range q {
		if o == rs {
			s.queued[rs.run.Pipeline] = append(q[:i:i], q[i+1:]...)
			break
		}
	}
	s.active[rs.run.Pipeline]++
}

// timers starts the attempts whose backoff is over and decides the gates
// whose timeout passed with their default.
func (s *Scheduler) timers() {
	now := s.clock.Now()
	kept := s.delayed[:0]
	for _, t := range s.delayed {
		if t.att.NotBefore.After(now) {
			kept = append(kept, t)
		} else {
			s.batch.start = append(s.batch.start, t)
		}
	}
	s.delayed = kept
	for ss, rs := range s.timed {
		if ss.deadline.IsZero() || ss.sr.Status != agentrunner.StepRunWaiting {
			delete(s.timed, ss) // decided, or its run ended
			continue
		}
		if ss.deadline.After(now) {
			continue
		}
		delete(s.timed, ss)
		st := rs.pipeline.Steps[ss.sr.Step]
		d := &agentrunner.Decision{Action: st.Gate.Default, Operator: "timeout", DecidedAt: now,
			Comment: fmt.Sprintf("no decision within %s", st.Gate.Timeout)}
		ch := s.batch.change()
		if err := s.applyDecision(ch, rs, ss, d); err != nil {
			s.endRun(ch, rs, agentrunner.RunFailed, fmt.Sprintf("gate %s timed out and its default decision failed: %v", ss.sr.Key(), err))
		}
	}
}

// assign gives the free slots to the attempts that wait for one, oldest
// first, and records them running in the batch: they start once it is
// committed, so an attempt recorded running is one that runs.
func (s *Scheduler) assign() {
	s.resume() // attempts that run already come first
	b := s.batch
	queue := append(s.ready, b.start...)
	s.ready, b.start = nil, nil
	chs := map[*runState]*agentrunner.Change{} // one per run: see units
	for len(queue) > 0 && s.mayStart() {
		t := queue[0]
		queue = queue[1:]
		if s.stale(t) {
			continue // the run ended while the attempt waited for a slot
		}
		started := *t.att
		started.Status, started.StartedAt = agentrunner.AttemptRunning, s.clock.Now()
		t.att, t.ss.att = &started, &started
		ch := chs[t.rs]
		if ch == nil {
			ch = b.change()
			chs[t.rs] = ch
		}
		ch.Attempts = append(ch.Attempts, &started)
		s.startedEvent(ch, t)
		b.transition(ch)
		s.slots--
		b.run = append(b.run, t)
	}
	if len(queue) > 0 {
		s.ready = queue
	}
}

// stale reports whether a task's attempt is no longer its step run's
// current one: the run ended, or the step run did.
func (s *Scheduler) stale(t *task) bool {
	return s.runs[t.rs.run.ID] != t.rs || t.ss.sr.Status != agentrunner.StepRunOpen || t.ss.att.Number != t.att.Number
}

// dispatch starts the attempts the last commit recorded running.
func (s *Scheduler) dispatch(ctx context.Context) {
	s.catchUp(context.WithoutCancel(ctx))
	var held []*task
	for _, t := range s.starting {
		switch {
		case s.stale(t) || t.ss.att.Status != agentrunner.AttemptRunning:
			s.slots++ // ended in the batch that started it
		case s.behind[t.rs.run.ID]:
			held = append(held, t) // its follower is behind: try at the next pass
		default:
			s.startWorker(ctx, t)
		}
	}
	s.starting = held
}

// recordSlack is how long past its time limit an attempt's context lasts:
// the kind holds its own work (an agent's run) to the limit, and has this
// long after it to record what came of it (publish the output, deliver
// messages). A kind that overruns it is stopped.
const recordSlack = time.Minute

// startWorker runs one attempt in its own goroutine, under the step's
// timeout, and sends the result back to the loop.
func (s *Scheduler) startWorker(ctx context.Context, t *task) {
	st := t.rs.pipeline.Steps[t.att.Step]
	ctx, cancel := context.WithCancel(ctx)
	t.ss.cancel = cancel
	ctx = agentrunner.WithWaiting(ctx, (&waiter{s: s, ss: t.ss, ctx: ctx}).wait)
	timeout, late := s.attemptBound(t) // cut to what is left of the run
	a := &agentrunner.StepAttempt{
		Run: t.rs.run, Step: st, StepRun: t.ss.sr, Attempt: t.att, Dir: t.att.Dir, RunDir: t.rs.run.Dir, Timeout: timeout, Late: late,
		Views: t.rs.pipeline.Views,
	}
	sr, run, att := *t.ss.sr, *t.rs.run, *t.att // the worker's own copies
	a.StepRun, a.Run, a.Attempt = &sr, &run, &att
	kind := s.kindOf(t.rs, st.Kind)
	s.workers.Add(1)
	s.inflight++
	go func() {
		defer s.workers.Done()
		if timeout > 0 {
			var stop context.CancelFunc
			ctx, stop = context.WithTimeout(ctx, timeout+recordSlack)
			defer stop()
			// For Stalled: a worker is late once its context has ended.
			defer s.track(a, timeout+recordSlack)()
		}
		res, err := kind.Run(ctx, a)
		if err == nil && res == nil {
			err = agentrunner.Fail(agentrunner.ClassInternal, "step kind %s returned no result", st.Kind)
		}
		if err != nil && ctx.Err() == context.DeadlineExceeded && agentrunner.ClassOf(err) != agentrunner.ClassTimeout {
			err = agentrunner.Fail(agentrunner.ClassTimeout, "attempt timed out after %s: %v", timeout, err)
		}
		// The loop takes results at every pass (see New).
		s.results <- &result{task: *t, res: res, err: err}
	}()
}

// commandResults keeps what recent commands came to, for callers that
// wait on one (the API's start of a run).
type commandResults struct {
	mu      sync.Mutex
	done    map[int64]string
	order   []int64
	waiters map[int64][]chan string
}

const keptResults = 4096

func newCommandResults() *commandResults {
	return &commandResults{done: map[int64]string{}, waiters: map[int64][]chan string{}}
}

func (c *commandResults) publish(cmds []*agentrunner.Command) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, cmd := range cmds {
		c.done[cmd.ID] = cmd.Result
		c.order = append(c.order, cmd.ID)
		for _, w := range c.waiters[cmd.ID] {
			w <- cmd.Result
		}
		delete(c.waiters, cmd.ID)
	}
	for len(c.order) > keptResults {
		delete(c.done, c.order[0])
		c.order = c.order[1:]
	}
}

// Await waits until the scheduler consumed command id and returns its
// result, or ctx's error.
func (s *Scheduler) Await(ctx context.Context, id int64) (string, error) {
	c := s.awaited
	c.mu.Lock()
	if r, ok := c.done[id]; ok {
		c.mu.Unlock()
		return r, nil
	}
	w := make(chan string, 1)
	c.waiters[id] = append(c.waiters[id], w)
	c.mu.Unlock()
	select {
	case r := <-w:
		return r, nil
	case <-ctx.Done():
		c.forget(id, w)
		return "", ctx.Err()
	}
}

// forget drops a waiter that gave up, so a command that is never
// consumed does not keep it.
func (c *commandResults) forget(id int64, w chan string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	ws := slices.DeleteFunc(c.waiters[id], func(x chan string) bool { return x == w })
	if len(ws) == 0 {
		delete(c.waiters, id)
		return
	}
	c.waiters[id] = ws
}

// staleCommand is why a command that a step kind takes (CommandTaker) has
// nothing to act on: no running run has a step of that kind open or still
// ahead of it (a callback may come before its step starts). Empty: the
// command is not one, or an attempt may still take it.
func (s *Scheduler) staleCommand(cmd *agentrunner.Command) string {
	for _, kinds := range s.kindSets() {
		for name, k := range kinds {
			taker, ok := k.(agentrunner.CommandTaker)
			if !ok || !taker.Takes(cmd.Kind) {
				continue
			}
			if s.kindAhead(name) {
				return ""
			}
			return taker.Stale(cmd)
		}
	}
	return ""
}

// kindAhead reports whether a running run has a step of kind whose
// latest step run is unfinished, or that it has not reached yet.
func (s *Scheduler) kindAhead(kind string) bool {
	for _, rs := range s.runs {
		if rs.run.Status != agentrunner.RunRunning {
			continue
		}
		for id, st := range rs.pipeline.Steps {
			if ss := rs.latest(id); st.Kind == kind && (ss == nil || !ss.sr.Status.Finished()) {
				return true
			}
		}
	}
	return false
}
