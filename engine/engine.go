// Package engine runs a pipeline: it starts cycles on schedule, runs each
// step's attempt, validates and publishes its artifact, delivers mailbox
// messages, and records every state change as one transaction in the store.
// On start it resumes the unfinished cycle where it stopped (FR-002/003).
//
// The engine is the only writer of pipeline state. Every transition is
// checked against the pipeline's state machine before it is written; the
// store's From guard makes a change that raced with another writer fail
// without writing anything.
package engine

import (
	"context"
	"errors"
	"fmt"
	"github.com/agentrunner/agentrunner/internal/eventlog"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/agentrunner/agentrunner"
	"github.com/agentrunner/agentrunner/config"
	"github.com/agentrunner/agentrunner/internal/atomicfile"
	"github.com/agentrunner/agentrunner/mailbox"
	"github.com/agentrunner/agentrunner/step/execution"
	"github.com/agentrunner/agentrunner/workspace"
)

// ExecutionService is what the engine's execution steps need of the
// Execution Service.
type ExecutionService = execution.Service

// Options wires an engine.
type Options struct {
	Workspace *workspace.Workspace
	Store     agentrunner.Store
	// Runtimes runs agents, by provider name.
	Runtimes map[string]agentrunner.Runtime
	// Exec is the Execution Service; required when the pipeline has an
	// execution step.
	Exec ExecutionService
	// Clock defaults to the system clock.
	Clock agentrunner.Clock
	// Logger receives every event as a structured log line; default discards.
	Logger *slog.Logger
	// OnEvent, if set, is called with each event once it is committed.
	OnEvent func(*agentrunner.Event)
	// MCPCommand is the agentrunner executable that process agents start
	// as their MCP server (`agentrunner mcp`); empty: no MCP for them.
	MCPCommand string
	// Reload reads the workspace again, for an operator's reload; nil:
	// reloads are refused.
	Reload func() (*workspace.Workspace, error)
	// Faults, if set, is asked before each of the engine's own file
	// operations of a step with the operation's name ("write prompt",
	// "publish artifact" …); an error it returns is that operation's error,
	// as if the system had returned it. It is for tests, to cause failures
	// such as EMFILE that are hard to cause for real.
	Faults func(op string) error
}

// Engine runs one pipeline of one workspace.
type Engine struct {
	ws       *workspace.Workspace
	cfg      *config.Config
	store    agentrunner.Store
	runtimes map[string]agentrunner.Runtime
	exec     ExecutionService
	clock    agentrunner.Clock
	log      *slog.Logger
	onEvent  func(*agentrunner.Event)
	boxes    *mailbox.Mailboxes
	// mcpCommand starts the MCP server of process agents' tools.
	mcpCommand string
	// wake interrupts a wait of the loop; poke makes watchCommands look
	// at once (see Wake).
	wake, poke chan struct{}
	// stepCancel cancels the running step (an abort); guarded by stepMu.
	stepMu     sync.Mutex
	stepCancel context.CancelCauseFunc
	// reloadFn reads the workspace again (Options.Reload). A reload swaps
	// ws, cfg and boxes under cfgMu: the loop's goroutine is the only
	// writer, other goroutines (CheckStrategy, Config) read under it.
	reloadFn func() (*workspace.Workspace, error)
	cfgMu    sync.RWMutex
	// commandsDirty says commands may be pending: set at start, by Wake and
	// by watchCommands, cleared by the checkpoint that reads them.
	commandsDirty atomic.Bool
	// control is the loop's control state, read once and then kept here;
	// forceCmd is the pending force-cycle command. The loop's goroutine only.
	control  *agentrunner.Control
	forceCmd *agentrunner.Command
	// busyUntil is when the current operation must be over (unix nanos);
	// the watchdog exits the process when it is long past.
	busyUntil atomic.Int64
	// faults is Options.Faults.
	faults func(op string) error
	// resourceFailures counts the attempts in a row that failed for want
	// of a resource, for their growing wait. The loop's goroutine only.
	resourceFailures int
	// watcher watches the validity of the strategy handed over.
	watcher *execution.Watcher
}

// New checks the options and returns an engine.
func New(opts Options) (*Engine, error) {
	if opts.Workspace == nil || opts.Store == nil {
		return nil, errors.New("engine: a workspace and a store are required")
	}
	cfg := opts.Workspace.Config
	for name, a := range cfg.Agents {
		if opts.Runtimes[a.Provider] == nil {
			return nil, fmt.Errorf("engine: agent %q uses provider %q, which has no runtime", name, a.Provider)
		}
	}
	for id, s := range cfg.Pipeline.Steps {
		if s.Kind == config.StepExecution && opts.Exec == nil {
			return nil, fmt.Errorf("engine: step %q needs the Execution Service, which is not configured", id)
		}
	}
	boxes, err := mailbox.New(opts.Workspace.Layout.Mailboxes(), cfg.Mailbox.MaxMessages)
	if err != nil {
		return nil, err
	}
	e := &Engine{
		ws: opts.Workspace, cfg: cfg, store: opts.Store, runtimes: opts.Runtimes, exec: opts.Exec,
		clock: opts.Clock, log: opts.Logger, onEvent: opts.OnEvent, boxes: boxes, mcpCommand: opts.MCPCommand, reloadFn: opts.Reload,
		faults: opts.Faults, wake: make(chan struct{}, 1), poke: make(chan struct{}, 1),
	}
	if e.clock == nil {
		e.clock = agentrunner.SystemClock{}
	}
	if e.log == nil {
		e.log = slog.New(slog.DiscardHandler)
	}
	e.watcher = execution.NewWatcher(execution.WatcherOptions{Store: e.store, Clock: e.clock, Logger: e.log, Commit: e.commit, Alert: e.alert})
	return e, nil
}

// RunOnce runs one cycle to its end: the unfinished one if there is one,
// else a new one started now, whatever the schedule says. It returns the
// finished cycle; an error means the cycle could not be driven to its end
// (the context ended, or the store failed). A halted cycle is returned as
// it is unless an operator's resume is pending.
func (e *Engine) RunOnce(ctx context.Context) (*agentrunner.Cycle, error) {
	ctx, stop := context.WithCancel(ctx)
	defer stop()
	e.commandsDirty.Store(true)
	go e.watchCommands(ctx)
	c, att, err := e.resume(ctx)
	if err != nil {
		return nil, err
	}
	c, att, o, err := e.checkpoint(ctx, c, att)
	if err != nil || (c != nil && c.Status == agentrunner.CycleHalted) {
		return c, err
	}
	if c == nil {
		if c, att, err = e.startCycle(ctx, o.force); err != nil {
			return nil, err
		}
	}
	return e.runCycle(ctx, c, att)
}

// Run runs cycles on schedule until ctx ends; then it returns nil, leaving
// a running step to be resumed by the next start. Any other error means the
// engine cannot go on (the store failed) and the process should exit so a
// supervisor restarts it.
func (e *Engine) Run(ctx context.Context) error {
	ctx, stop := context.WithCancel(ctx)
	defer stop()
	e.commandsDirty.Store(true)
	go e.watchCommands(ctx)
	for {
		c, att, err := e.resume(ctx)
		if err == nil && c != nil && c.Status == agentrunner.CycleHalted {
			c, att, err = e.waitForResume(ctx, c)
		}
		if err == nil && c == nil {
			var force *agentrunner.Command
			if force, err = e.waitForSchedule(ctx); err == nil {
				c, att, err = e.startCycle(ctx, force)
			}
		}
		if err == nil && c != nil {
			_, err = e.runCycle(ctx, c, att)
		}
		if ctx.Err() != nil {
			return nil
		}
		if err != nil {
			return err
		}
	}
}

// waitForResume waits until an operator resumes a halted cycle (which it
// returns, running) or aborts it (nil).
func (e *Engine) waitForResume(ctx context.Context, c *agentrunner.Cycle) (*agentrunner.Cycle, *agentrunner.Attempt, error) {
	e.log.Warn("the loop is halted: waiting for an operator (agentrunner resume)", "cycle_id", c.ID, "step", c.Step)
	for {
		c, att, _, err := e.checkpoint(ctx, c, nil)
		if err != nil || c == nil || c.Status != agentrunner.CycleHalted {
			return c, att, err
		}
		if err := e.waitForOperator(ctx); err != nil {
			return c, nil, err
		}
	}
}

// waitForSchedule waits until the next cycle is due, or an operator forces
// one (returned, to be consumed as the cycle starts). A paused loop starts
// no cycle.
func (e *Engine) waitForSchedule(ctx context.Context) (*agentrunner.Command, error) {
	logged := false
	for {
		_, _, o, err := e.checkpoint(ctx, nil, nil)
		if err != nil {
			return nil, err
		}
		if o.paused {
			if err := e.waitForOperator(ctx); err != nil {
				return nil, err
			}
			continue
		}
		if o.force != nil {
			return o.force, nil
		}
		last, err := e.latestCycle(ctx)
		if err != nil {
			return nil, err
		}
		now := e.clock.Now()
		next := NextStart(e.cfg.Schedule, last, now)
		if !now.Before(next) {
			return nil, nil
		}
		if !logged {
			e.log.Info("waiting for the next cycle", "next_scheduled_time", next.Format(time.RFC3339))
			logged = true
		}
		// The strategy may expire while the loop waits: wake up for it.
		wake := next
		if expires, err := e.CheckStrategy(ctx); err != nil {
			e.log.Error("checking the strategy's validity", "error", err)
		} else if !expires.IsZero() && expires.Before(wake) {
			wake = expires
		}
		if err := e.sleep(ctx, wake.Sub(now)); err != nil {
			return nil, err
		}
	}
}

// sleep waits d on the engine's clock, or until Wake; it fails if ctx
// ends first (or during the wait, so a fake clock's instant wait is still
// interruptible). Callers look again at what they wait for.
func (e *Engine) sleep(ctx context.Context, d time.Duration) error {
	e.busy(d)
	select {
	case <-ctx.Done():
	case <-e.clock.After(d):
	case <-e.wake:
	}
	return ctx.Err()
}

// Wake makes the engine look at new commands at once (an operator's
// override, an Execution Service callback) instead of at its next poll:
// the API calls it after writing a command.
func (e *Engine) Wake() {
	e.commandsDirty.Store(true)
	select {
	case e.poke <- struct{}{}:
	default:
	}
	e.wakeLoop()
}

// wakeLoop interrupts the loop's current wait.
func (e *Engine) wakeLoop() {
	select {
	case e.wake <- struct{}{}:
	default:
	}
}

// NextStart is when the cycle after last is due: schedule.every after its
// start, and never sooner than schedule.min_cycle after it (FR-005). With
// no cycle yet, it is now.
func NextStart(s config.Schedule, last *agentrunner.Cycle, now time.Time) time.Time {
	if last == nil {
		return now
	}
	return last.StartedAt.Add(max(s.Every.D(), s.MinCycle.D()))
}

func (e *Engine) latestCycle(ctx context.Context) (*agentrunner.Cycle, error) {
	cs, err := e.store.Cycles(ctx, agentrunner.CycleFilter{Pipeline: e.cfg.Name, Limit: 1})
	if err != nil || len(cs) == 0 {
		return nil, err
	}
	return cs[0], nil
}

// dirExists reports whether path names anything: a cycle id whose
// directory is there is taken, whatever the store says.
func dirExists(path string) bool {
	_, err := os.Lstat(path)
	return err == nil
}

// cycleIDLayout names cycles and their directories (FR-157).
const cycleIDLayout = "20060102_150405"

// startCycle creates the cycle's directory and commits the cycle with the
// first attempt of its first step, which it returns. force, when set, is
// the operator's force-cycle command the cycle consumes.
func (e *Engine) startCycle(ctx context.Context, force *agentrunner.Command) (*agentrunner.Cycle, *agentrunner.Attempt, error) {
	last, err := e.latestCycle(ctx)
	if err != nil {
		return nil, nil, err
	}
	now := e.clock.Now().UTC()
	from := agentrunner.StateIdle
	start := now
	if last != nil {
		from = agentrunner.StateWaiting
		// Cycle ids are start times to the second; two cycles in one second
		// (a forced cycle) take the next free second.
		if prev, err := time.Parse(cycleIDLayout, last.ID); err == nil && !start.Truncate(time.Second).After(prev) {
			start = prev.Add(time.Second)
		}
	}
	to := e.ws.Machine.Start()
	if err := e.ws.Machine.Check(from, to); err != nil {
		return nil, nil, err
	}
	// A directory the store does not know (a cycle lost when an older
	// backup was restored) is never reused: its files are not this cycle's.
	for dirExists(e.ws.Layout.Cycle(start.Format(cycleIDLayout))) {
		start = start.Add(time.Second)
	}
	id := start.Format(cycleIDLayout)
	c := &agentrunner.Cycle{
		ID: id, Pipeline: e.cfg.Name, Status: agentrunner.CycleRunning, Step: string(to),
		Dir: e.ws.Layout.Cycle(id), StartedAt: now, Serial: true,
	}
	err = e.untilResourced(ctx, id, "", opCycleDir, func() error {
		return e.fileOp(opCycleDir, func() error { return atomicfile.MkdirAll(c.Dir, 0o755) })
	})
	if err != nil {
		return nil, nil, fmt.Errorf("create cycle directory: %w", err)
	}
	first := e.newAttempt(c, string(to), 1, now, time.Time{})
	ch := &agentrunner.Change{From: from, Cycle: c, Attempts: []*agentrunner.Attempt{first}}
	details := map[string]any{"dir": c.Dir}
	if force != nil {
		e.forceCmd = nil
		ch.Consumed = []*agentrunner.Command{e.consume(force, "started cycle "+id)}
		details["forced_by"], details["command"] = force.Operator, force.ID
	}
	e.event(ch, c, "", agentrunner.EventCycleStarted, agentrunner.LevelInfo, details)
	e.transition(ch, c, from, to)
	e.attemptStarted(ch, c, first)
	if err := e.commit(ctx, ch); err != nil {
		return nil, nil, err
	}
	return c, first, nil
}

// newAttempt makes attempt n of a step: running now, or pending until
// notBefore when that is set.
func (e *Engine) newAttempt(c *agentrunner.Cycle, step string, n int, now, notBefore time.Time) *agentrunner.Attempt {
	a := &agentrunner.Attempt{
		CycleID: c.ID, Step: step, Number: n, Agent: e.cfg.Pipeline.Steps[step].Agent,
		Status: agentrunner.AttemptRunning, StartedAt: now, Dir: e.ws.Layout.Attempt(c.ID, step, n),
	}
	if !notBefore.IsZero() {
		a.Status, a.StartedAt, a.NotBefore = agentrunner.AttemptPending, time.Time{}, notBefore
	}
	return a
}

// resume returns the unfinished cycle and its current attempt, nil if
// there is none. An attempt that was running when the runner stopped is
// recorded as interrupted and the step is attempted again, with the attempt
// counted.
func (e *Engine) resume(ctx context.Context) (*agentrunner.Cycle, *agentrunner.Attempt, error) {
	c, err := e.store.UnfinishedCycle(ctx, e.cfg.Name)
	if agentrunner.ErrorCode(err) == agentrunner.ENOTFOUND {
		return nil, nil, nil
	}
	if err != nil {
		return nil, nil, err
	}
	att, err := e.currentAttempt(ctx, c)
	if err != nil {
		return nil, nil, err
	}
	if c.Status == agentrunner.CycleHalted {
		return c, nil, nil
	}
	if att.Status == agentrunner.AttemptRunning {
		return e.fail(ctx, c, att, agentrunner.Fail(agentrunner.ClassInterrupted, "the runner stopped during this attempt"), nil)
	}
	return c, att, nil
}

// currentAttempt returns the latest attempt of the cycle's current step.
func (e *Engine) currentAttempt(ctx context.Context, c *agentrunner.Cycle) (*agentrunner.Attempt, error) {
	atts, err := e.store.Attempts(ctx, c.ID)
	if err != nil {
		return nil, err
	}
	var cur *agentrunner.Attempt
	for _, a := range atts {
		if a.Step == c.Step && (cur == nil || a.Number > cur.Number) {
			cur = a
		}
	}
	if cur == nil {
		return nil, fmt.Errorf("cycle %s is at step %s, which has no attempt: the state database is inconsistent", c.ID, c.Step)
	}
	return cur, nil
}

// runCycle runs steps, starting with att, until the cycle is finished or
// halted. Before each step it applies operators' commands: a pause holds
// the next step (the running one has finished), an abort ends the cycle.
func (e *Engine) runCycle(ctx context.Context, c *agentrunner.Cycle, att *agentrunner.Attempt) (*agentrunner.Cycle, error) {
	for c.Status == agentrunner.CycleRunning {
		e.busy(storeTimeout)
		cur, next, o, err := e.checkpoint(ctx, c, att)
		if err != nil {
			return c, err
		}
		if cur == nil { // aborted
			return e.store.Cycle(ctx, c.ID)
		}
		c, att = cur, next
		if o.paused {
			if err := e.waitForOperator(ctx); err != nil {
				return c, err
			}
			continue
		}
		if e.overdue(c) && c.Step != e.ws.Machine.Final() {
			if c, att, err = e.cutShort(ctx, c, att); err != nil {
				return c, err
			}
			continue
		}
		switch att.Status {
		case agentrunner.AttemptPending:
			// A retry's backoff is durable: its end is stored, so a restart
			// neither resets nor skips it. A wake (a command) ends the
			// wait early, to look at the commands, then it goes on.
			if wait := att.NotBefore.Sub(e.clock.Now()); wait > 0 {
				if err := e.sleep(ctx, wait); err != nil {
					return c, err
				}
				continue
			}
			if att, err = e.startPending(ctx, c, att); err != nil {
				return c, err
			}
		case agentrunner.AttemptRunning:
		default:
			return c, fmt.Errorf("cycle %s: attempt %d of %s is %s but the cycle is still at that step: the state database is inconsistent", c.ID, att.Number, att.Step, att.Status)
		}
		stepCtx, done := e.stepContext(ctx)
		out, runErr := e.runStep(stepCtx, c, att)
		aborted := errors.Is(context.Cause(stepCtx), errAborted)
		done()
		if ctx.Err() != nil {
			return c, ctx.Err() // stopping: the attempt stays running and is resumed next start
		}
		if aborted {
			continue // the checkpoint applies the abort
		}
		if runErr != nil {
			c, att, err = e.fail(ctx, c, att, runErr, out)
		} else {
			c, att, err = e.succeed(ctx, c, att, out)
		}
		if err != nil {
			return c, err
		}
	}
	return c, nil
}

// startPending marks a pending attempt, whose backoff is over, running.
func (e *Engine) startPending(ctx context.Context, c *agentrunner.Cycle, att *agentrunner.Attempt) (*agentrunner.Attempt, error) {
	started := *att
	started.Status, started.StartedAt = agentrunner.AttemptRunning, e.clock.Now()
	ch := &agentrunner.Change{From: agentrunner.State(c.Step), Attempts: []*agentrunner.Attempt{&started}}
	e.attemptStarted(ch, c, &started)
	return &started, e.commit(ctx, ch)
}

// succeed commits a successful attempt together with the transition to the
// next step and that step's first attempt, which it returns (nil when the
// cycle is over): one transaction per step.
func (e *Engine) succeed(ctx context.Context, c *agentrunner.Cycle, att *agentrunner.Attempt, out *outcome) (*agentrunner.Cycle, *agentrunner.Attempt, error) {
	e.resourceFailures = 0
	now := e.clock.Now()
	done := *att
	done.Status, done.EndedAt, done.OutputPath, done.ExitCode, done.Usage = agentrunner.AttemptSucceeded, now, out.outputPath, out.exitCode, out.usage
	ch := &agentrunner.Change{From: agentrunner.State(c.Step), Attempts: []*agentrunner.Attempt{&done}, Events: out.events}
	e.event(ch, c, att.Step, agentrunner.EventAttemptSucceeded, agentrunner.LevelInfo, e.withUsage(map[string]any{
		"attempt": att.Number, "duration_ms": now.Sub(att.StartedAt).Milliseconds(), "output": out.outputPath,
	}, att, out))
	return e.advance(ctx, c, ch)
}

// advance moves the cycle past its current step (done or skipped) in the
// same change: to the next step with its first attempt, or to its end.
func (e *Engine) advance(ctx context.Context, c *agentrunner.Cycle, ch *agentrunner.Change) (*agentrunner.Cycle, *agentrunner.Attempt, error) {
	from := agentrunner.State(c.Step)
	to, err := e.ws.Machine.AfterSuccess(from)
	if err != nil {
		return c, nil, err
	}
	if err := e.ws.Machine.Check(from, to); err != nil {
		return c, nil, err
	}
	now := e.clock.Now()
	next := *c
	next.LastCompletedStep = c.Step
	ch.Cycle = &next
	e.transition(ch, c, from, to)
	var first *agentrunner.Attempt
	if to == agentrunner.StateWaiting {
		next.Status, next.Step, next.EndedAt = agentrunner.CycleCompleted, "", now
		e.event(ch, c, "", agentrunner.EventCycleCompleted, agentrunner.LevelInfo, map[string]any{
			"duration_ms": now.Sub(c.StartedAt).Milliseconds(),
		})
	} else {
		next.Step = string(to)
		first = e.newAttempt(c, next.Step, 1, now, time.Time{})
		ch.Attempts = append(ch.Attempts, first)
		e.attemptStarted(ch, c, first)
	}
	if err := e.commit(ctx, ch); err != nil {
		return c, nil, err
	}
	return &next, first, nil
}

// fail commits a failed attempt: a retry when the failure is retryable and
// the policy allows one (the retry's attempt is returned), else the end of
// the cycle.
func (e *Engine) fail(ctx context.Context, c *agentrunner.Cycle, att *agentrunner.Attempt, cause error, out *outcome) (*agentrunner.Cycle, *agentrunner.Attempt, error) {
	step := e.cfg.Pipeline.Steps[att.Step]
	policy := e.cfg.StepPolicy(step)
	class := agentrunner.ClassOf(cause)
	reason := cause.Error()
	if se := (*agentrunner.StepError)(nil); errors.As(cause, &se) {
		reason = se.Err.Error() // the class is recorded on its own
	}
	now := e.clock.Now()
	failed := *att
	failed.Status, failed.EndedAt, failed.ErrorClass, failed.Error = agentrunner.AttemptFailed, now, class, reason
	from := agentrunner.State(c.Step)
	ch := &agentrunner.Change{From: from, Attempts: []*agentrunner.Attempt{&failed}}
	if out != nil {
		failed.ExitCode, failed.Usage = out.exitCode, out.usage
		ch.Events = out.events
	}
	retry := class.Retryable() && att.Number-att.RetryBase <= policy.Max
	eventType := agentrunner.EventAttemptFailed
	if class == agentrunner.ClassInterrupted {
		eventType = agentrunner.EventAttemptInterrupted
	}
	e.event(ch, c, att.Step, eventType, agentrunner.LevelWarn, e.withUsage(map[string]any{
		"attempt": att.Number, "error_class": string(class), "error": reason,
		"retryable": class.Retryable(), "retries_left": max(0, policy.Max-(att.Number-att.RetryBase)+1),
		"duration_ms": now.Sub(att.StartedAt).Milliseconds(),
	}, att, out))
	if e.overdue(c) && att.Step != e.ws.Machine.Final() {
		return e.force(ctx, c, ch)
	}
	if class == agentrunner.ClassResource {
		return e.retryResource(ctx, c, att, cause, ch)
	}
	e.resourceFailures = 0
	if retry {
		var notBefore time.Time
		wait := policy.Wait(att.Number - att.RetryBase)
		if class != agentrunner.ClassInterrupted && wait > 0 {
			notBefore = now.Add(wait) // an interruption is not the agent's fault: no backoff
		}
		next := e.newAttempt(c, att.Step, att.Number+1, now, notBefore)
		next.RetryBase = att.RetryBase
		ch.Attempts = append(ch.Attempts, next)
		details := map[string]any{"attempt": next.Number, "wait": "0s", "schedule": durations(policy.Backoff)}
		if !notBefore.IsZero() {
			details["wait"], details["not_before"] = wait.String(), notBefore.Format(time.RFC3339)
		}
		e.event(ch, c, att.Step, agentrunner.EventRetryScheduled, agentrunner.LevelInfo, details)
		if next.Status == agentrunner.AttemptRunning {
			e.attemptStarted(ch, c, next)
		}
		return c, next, e.commit(ctx, ch)
	}
	return e.escalate(ctx, c, &failed, ch)
}

// withUsage adds the tokens an attempt used, and its model, to the details
// of its event (for metrics and cost tracking).
func (e *Engine) withUsage(details map[string]any, att *agentrunner.Attempt, out *outcome) map[string]any {
	if out == nil || out.usage.InputTokens+out.usage.OutputTokens == 0 {
		return details
	}
	details["input_tokens"], details["output_tokens"] = out.usage.InputTokens, out.usage.OutputTokens
	if a := e.cfg.Agents[att.Agent]; a != nil && a.Model != "" {
		details["model"] = a.Model
	}
	return details
}

func durations(ds []time.Duration) []string {
	out := make([]string, len(ds))
	for i, d := range ds {
		out[i] = d.String()
	}
	return out
}

// event appends an event to a change.
func (e *Engine) event(ch *agentrunner.Change, c *agentrunner.Cycle, step, typ string, level agentrunner.Level, details map[string]any) {
	ev := &agentrunner.Event{Timestamp: e.clock.Now(), Type: typ, Step: step, CycleID: c.ID, Level: level, Details: details}
	if s := e.cfg.Pipeline.Steps[step]; s != nil {
		ev.Agent = s.Agent
	}
	ch.Events = append(ch.Events, ev)
}

func (e *Engine) transition(ch *agentrunner.Change, c *agentrunner.Cycle, from, to agentrunner.State) {
	e.event(ch, c, "", agentrunner.EventTransition, agentrunner.LevelInfo, map[string]any{"from": string(from), "to": string(to)})
}

func (e *Engine) attemptStarted(ch *agentrunner.Change, c *agentrunner.Cycle, a *agentrunner.Attempt) {
	e.event(ch, c, a.Step, agentrunner.EventAttemptStarted, agentrunner.LevelInfo, map[string]any{"attempt": a.Number, "dir": a.Dir})
}

// commit applies a change, then logs and reports its events. A store
// that runs out of disk space or memory is waited for: the change was not
// applied, and is applied once it can be.
func (e *Engine) commit(ctx context.Context, ch *agentrunner.Change) error {
	cycleID, step := changeOf(ch)
	err := e.untilResourced(ctx, cycleID, step, opCommit, func() error { return e.store.Apply(ctx, ch) })
	if err != nil {
		return fmt.Errorf("commit state change: %w", err)
	}
	for _, ev := range ch.Events {
		e.logEvent(ev)
		if e.onEvent != nil {
			e.onEvent(ev)
		}
	}
	return nil
}

func (e *Engine) logEvent(ev *agentrunner.Event) { eventlog.Write(e.log, ev) }

// changeOf names the cycle and step a change is about, from its events.
func changeOf(ch *agentrunner.Change) (cycleID, step string) {
	for _, ev := range ch.Events {
		if ev.CycleID != "" {
			return ev.CycleID, ev.Step
		}
	}
	if ch.Cycle != nil {
		return ch.Cycle.ID, ch.Cycle.Step
	}
	return "", ""
}

// EventRecorder returns a function that commits an event on its own and
// logs it: for events that happen while an attempt runs, outside its
// transaction, such as tool calls. A store that fails is logged, not
// fatal: the call itself already happened.
func EventRecorder(store agentrunner.Store, log *slog.Logger) func(*agentrunner.Event) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return func(ev *agentrunner.Event) {
		if err := store.Apply(context.Background(), &agentrunner.Change{Events: []*agentrunner.Event{ev}}); err != nil {
			log.Error("recording an event", "event_type", ev.Type, "error", err)
		}
		eventlog.Write(log, ev)
	}
}
