package engine

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/agentrunner/agentrunner"
	"github.com/agentrunner/agentrunner/config"
	"github.com/agentrunner/agentrunner/mailbox"
	"github.com/agentrunner/agentrunner/step/execution"
	"github.com/agentrunner/agentrunner/webhook"
)

// Events of operators' overrides (FR-162..167). Each consumed command also
// keeps its result in the audit log (Store.Commands).
const (
	EventPaused   = "loop.paused"
	EventUnpaused = "loop.resumed"
	EventInjected = "mailbox.injected"
	// EventCommandIgnored: a command that had nothing to act on (an abort
	// with no cycle, a resume of a loop that is neither paused nor halted).
	EventCommandIgnored = "command.ignored"
)

// commandPoll is how often the engine looks for commands written by other
// processes (the CLI); commands given through the API wake it at once.
const commandPoll = time.Second

// errAborted is the cause of a step's context cancelled by an abort.
var errAborted = errors.New("aborted by an operator")

// overrides is what the pending commands leave for the loop to act on.
type overrides struct {
	paused bool
	// force is a pending force-cycle command: the next cycle starts now.
	force *agentrunner.Command
}

// checkpoint applies the pending operator commands that can be applied
// where the loop is: between steps, or while it waits. c is the unfinished
// cycle (nil: none) and att its current attempt; both come back as the
// commands left them (an abort ends the cycle: nil, a resume of a halted
// cycle gives it an attempt). A force-cycle stays pending until a cycle
// starts for it.
func (e *Engine) checkpoint(ctx context.Context, c *agentrunner.Cycle, att *agentrunner.Attempt) (*agentrunner.Cycle, *agentrunner.Attempt, overrides, error) {
	if e.control == nil {
		ctl, err := e.store.Control(ctx)
		if err != nil {
			return c, att, overrides{}, err
		}
		e.control = ctl // the engine is its only writer: kept in memory from here on
	}
	// The store is read only when a command may have arrived: most steps
	// pass a checkpoint without a query.
	if !e.commandsDirty.Swap(false) {
		return c, att, overrides{paused: e.control.Paused, force: e.forceCmd}, nil
	}
	cmds, err := e.store.PendingCommands(ctx)
	if err != nil {
		e.commandsDirty.Store(true)
		return c, att, overrides{}, err
	}
	e.forceCmd = nil
	for _, cmd := range cmds {
		switch cmd.Kind {
		case agentrunner.CommandPause:
			c, att, err = e.pause(ctx, c, att, e.control, cmd)
		case agentrunner.CommandResume:
			c, att, err = e.resumeLoop(ctx, c, att, e.control, cmd)
		case agentrunner.CommandAbort:
			c, att, err = e.abort(ctx, c, att, cmd)
		case agentrunner.CommandInject:
			err = e.inject(ctx, c, cmd)
		case agentrunner.CommandForceCycle:
			if e.forceCmd == nil {
				e.forceCmd = cmd
			}
		case agentrunner.CommandReload:
			err = e.reload(ctx, c, cmd)
		case execution.CommandExecutionStatus:
			// The execute step consumes the callbacks about its strategy.
			// Anywhere else one is late (the step ended on a poll or its
			// timeout) or about no strategy of ours: it must not wait
			// forever.
			if !e.atExecution(c) {
				err = e.ignore(ctx, c, cmd, fmt.Sprintf("no strategy is being followed (callback about %v)", cmd.Args["strategy_id"]))
			}
		}
		if err != nil {
			e.commandsDirty.Store(true) // look again: the rest is still pending
			return c, att, overrides{}, err
		}
	}
	return c, att, overrides{paused: e.control.Paused, force: e.forceCmd}, nil
}

// atExecution reports whether the unfinished cycle c is at an execution
// step.
func (e *Engine) atExecution(c *agentrunner.Cycle) bool {
	if c == nil || c.Status != agentrunner.CycleRunning {
		return false
	}
	step := e.cfg.Pipeline.Steps[c.Step]
	return step != nil && step.Kind == config.StepExecution
}

// consume returns cmd marked consumed now with its result.
func (e *Engine) consume(cmd *agentrunner.Command, result string) *agentrunner.Command {
	done := *cmd
	done.ConsumedAt, done.Result = e.clock.Now(), result
	return &done
}

// commandDetails are the details of an event caused by cmd: who, which
// command, with what.
func commandDetails(cmd *agentrunner.Command, more map[string]any) map[string]any {
	d := map[string]any{"operator": cmd.Operator, "command": cmd.ID}
	if len(cmd.Args) > 0 {
		d["args"] = cmd.Args
	}
	for k, v := range more {
		d[k] = v
	}
	return d
}

// ignore consumes a command that has nothing to act on.
func (e *Engine) ignore(ctx context.Context, c *agentrunner.Cycle, cmd *agentrunner.Command, why string) error {
	ch := &agentrunner.Change{Consumed: []*agentrunner.Command{e.consume(cmd, "ignored: "+why)}}
	e.event(ch, orNone(c), "", EventCommandIgnored, agentrunner.LevelInfo, commandDetails(cmd, map[string]any{"kind": cmd.Kind, "reason": why}))
	return e.commit(ctx, ch)
}

// orNone is c, or an empty cycle for events of no cycle.
func orNone(c *agentrunner.Cycle) *agentrunner.Cycle {
	if c == nil {
		return &agentrunner.Cycle{}
	}
	return c
}

// pause stops new steps from starting. An attempt committed as running but
// not started yet goes back to pending, so its time starts when it runs.
func (e *Engine) pause(ctx context.Context, c *agentrunner.Cycle, att *agentrunner.Attempt, ctl *agentrunner.Control, cmd *agentrunner.Command) (*agentrunner.Cycle, *agentrunner.Attempt, error) {
	if ctl.Paused {
		return c, att, e.ignore(ctx, c, cmd, fmt.Sprintf("the loop is already paused (by %s)", ctl.PausedBy))
	}
	now := e.clock.Now()
	next := agentrunner.Control{Paused: true, PausedBy: cmd.Operator, PausedAt: now}
	ch := &agentrunner.Change{Control: &next, Consumed: []*agentrunner.Command{e.consume(cmd, "paused")}}
	if c != nil && c.Status == agentrunner.CycleRunning && att != nil && att.Status == agentrunner.AttemptRunning {
		deferred := *att
		deferred.Status, deferred.StartedAt = agentrunner.AttemptPending, time.Time{}
		ch.From, ch.Attempts = agentrunner.State(c.Step), []*agentrunner.Attempt{&deferred}
		att = &deferred
	}
	e.event(ch, orNone(c), "", EventPaused, agentrunner.LevelWarn, commandDetails(cmd, nil))
	if err := e.commit(ctx, ch); err != nil {
		return c, att, err
	}
	*ctl = next
	return c, att, nil
}

// resumeLoop lifts a pause and resumes a halted cycle: its step gets a new
// attempt and a new round of retries. One resume does both.
func (e *Engine) resumeLoop(ctx context.Context, c *agentrunner.Cycle, att *agentrunner.Attempt, ctl *agentrunner.Control, cmd *agentrunner.Command) (*agentrunner.Cycle, *agentrunner.Attempt, error) {
	halted := c != nil && c.Status == agentrunner.CycleHalted
	if !halted && !ctl.Paused {
		return c, att, e.ignore(ctx, c, cmd, "the loop is neither paused nor halted")
	}
	now := e.clock.Now()
	ch := &agentrunner.Change{}
	var results []string
	if ctl.Paused {
		ch.Control = &agentrunner.Control{}
		e.event(ch, orNone(c), "", EventUnpaused, agentrunner.LevelInfo, commandDetails(cmd, map[string]any{"paused_by": ctl.PausedBy}))
		results = append(results, "lifted the pause")
	}
	var resumed *agentrunner.Cycle
	var next *agentrunner.Attempt
	if halted {
		last, err := e.currentAttempt(ctx, c)
		if err != nil {
			return c, att, err
		}
		if err := e.ws.Machine.Check(agentrunner.StateHalted, agentrunner.State(c.Step)); err != nil {
			return c, att, err
		}
		r := *c
		r.Status, r.Error = agentrunner.CycleRunning, ""
		resumed = &r
		next = e.newAttempt(c, c.Step, last.Number+1, now, time.Time{})
		next.RetryBase = last.Number
		ch.From, ch.Cycle, ch.Attempts = agentrunner.StateHalted, resumed, []*agentrunner.Attempt{next}
		e.event(ch, c, c.Step, EventResumed, agentrunner.LevelInfo, commandDetails(cmd, nil))
		e.transition(ch, c, agentrunner.StateHalted, agentrunner.State(c.Step))
		e.attemptStarted(ch, c, next)
		e.alert(ch, webhook.Event{Kind: webhook.KindResumed, ID: fmt.Sprintf("resumed/%s/%s/%d", c.ID, c.Step, next.Number),
			Time: now, Pipeline: e.cfg.Name, CycleID: c.ID, Step: c.Step, Details: map[string]any{"operator": cmd.Operator}})
		results = append(results, fmt.Sprintf("resumed cycle %s at step %s (attempt %d)", c.ID, c.Step, next.Number))
	}
	ch.Consumed = []*agentrunner.Command{e.consume(cmd, strings.Join(results, "; "))}
	if err := e.commit(ctx, ch); err != nil {
		return c, att, err
	}
	*ctl = agentrunner.Control{}
	if resumed == nil {
		return c, att, nil
	}
	return resumed, next, nil
}

// abort ends the unfinished cycle as aborted; its current attempt, if it
// was running or waiting, fails with class aborted.
func (e *Engine) abort(ctx context.Context, c *agentrunner.Cycle, att *agentrunner.Attempt, cmd *agentrunner.Command) (*agentrunner.Cycle, *agentrunner.Attempt, error) {
	if c == nil {
		return nil, nil, e.ignore(ctx, c, cmd, "no cycle is running")
	}
	why := fmt.Sprintf("aborted by %s", cmd.Operator)
	if note, _ := cmd.Args["reason"].(string); note != "" {
		why += ": " + note
	}
	ch := &agentrunner.Change{From: c.State(), Consumed: []*agentrunner.Command{e.consume(cmd, "aborted cycle "+c.ID)}}
	if att != nil && (att.Status == agentrunner.AttemptRunning || att.Status == agentrunner.AttemptPending) {
		failed := *att
		failed.Status, failed.EndedAt, failed.ErrorClass, failed.Error = agentrunner.AttemptFailed, e.clock.Now(), agentrunner.ClassAborted, why
		ch.Attempts = []*agentrunner.Attempt{&failed}
	}
	if _, _, err := e.end(ctx, c, ch, agentrunner.CycleAborted, why); err != nil {
		return c, att, err
	}
	return nil, nil, nil
}

// inject puts an operator's message into an agent's mailbox: the agent
// reads it on its next run, or at its next turn if it is a model agent
// running now. The message's id is the command's, so a crash between the
// file write and the commit replaces the message instead of doubling it.
func (e *Engine) inject(ctx context.Context, c *agentrunner.Cycle, cmd *agentrunner.Command) error {
	agent, _ := cmd.Args["agent"].(string)
	body, _ := cmd.Args["message"].(string)
	if e.cfg.Agents[agent] == nil {
		return e.ignore(ctx, c, cmd, fmt.Sprintf("no agent %q", agent))
	}
	msg := mailbox.Message{
		ID: fmt.Sprintf("inject-%d", cmd.ID), Time: cmd.CreatedAt, From: "operator:" + cmd.Operator,
		Kind: mailbox.Inject, CycleID: orNone(c).ID, Body: body,
	}
	if _, err := e.boxes.Deposit(agent, msg); err != nil {
		if agentrunner.ErrorCode(err) == agentrunner.EINVALID {
			return e.ignore(ctx, c, cmd, err.Error())
		}
		return err
	}
	ch := &agentrunner.Change{Consumed: []*agentrunner.Command{e.consume(cmd, "delivered to the mailbox of "+agent)}}
	ev := commandDetails(cmd, map[string]any{"to": agent, "message_id": msg.ID, "bytes": len(body)})
	delete(ev, "args") // the message is in the mailbox and the audit log
	e.event(ch, orNone(c), "", EventInjected, agentrunner.LevelInfo, ev)
	ch.Events[len(ch.Events)-1].Agent = agent
	return e.commit(ctx, ch)
}

// waitForOperator waits, without a deadline, until something wakes the
// engine (a command, see watchCommands) or ctx ends.
func (e *Engine) waitForOperator(ctx context.Context) error {
	e.busyUntil.Store(0) // waiting for a person is not a stall
	select {
	case <-ctx.Done():
	case <-e.wake:
	}
	return ctx.Err()
}

// watchCommands looks for new commands every commandPoll, and at once when
// Wake is called, until ctx ends. A new command wakes the loop; a pending
// abort also cancels the running step.
func (e *Engine) watchCommands(ctx context.Context) {
	tick := time.NewTicker(commandPoll) // real time: the CLI writes from another process
	defer tick.Stop()
	var seen int64
	for {
		// The loop looks at the commands when it starts (Run and RunOnce
		// mark them dirty): the first look here is a poll later.
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		case <-e.poke:
		}
		cmds, err := e.store.PendingCommands(ctx)
		if err != nil && ctx.Err() == nil {
			e.log.Warn("looking for operator commands", "error", err)
		}
		for _, cmd := range cmds {
			if cmd.ID > seen {
				seen = cmd.ID
				e.commandsDirty.Store(true)
				e.wakeLoop()
			}
			if cmd.Kind == agentrunner.CommandAbort {
				e.cancelStep()
			}
		}
	}
}

// cancelStep cancels the running step, if any, with errAborted.
func (e *Engine) cancelStep() {
	e.stepMu.Lock()
	defer e.stepMu.Unlock()
	if e.stepCancel != nil {
		e.stepCancel(errAborted)
	}
}

// stepContext returns the context a step runs in: cancelled by an abort.
func (e *Engine) stepContext(ctx context.Context) (context.Context, func()) {
	stepCtx, cancel := context.WithCancelCause(ctx)
	e.stepMu.Lock()
	e.stepCancel = cancel
	e.stepMu.Unlock()
	return stepCtx, func() {
		e.stepMu.Lock()
		e.stepCancel = nil
		e.stepMu.Unlock()
		cancel(nil)
	}
}

// IsOverride reports whether kind is an operator's override.
func IsOverride(kind string) bool { return slices.Contains(agentrunner.OverrideKinds, kind) }
