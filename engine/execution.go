package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/agentrunner/agentrunner"
	"github.com/agentrunner/agentrunner/artifact"
	"github.com/agentrunner/agentrunner/config"
	"github.com/agentrunner/agentrunner/execsvc"
)

// runExecution hands the step's artifact to the Execution Service and
// follows its status until it completes, fails, or the step's time runs out
// (FR-079..085). Whichever happens, the pipeline goes on to its next step
// (the evaluation) with the outcome recorded; only a strategy that cannot
// be handed over at all fails the step.
func (e *Engine) runExecution(ctx context.Context, c *agentrunner.Cycle, step *config.Step, att *agentrunner.Attempt) (*outcome, error) {
	out := &outcome{}
	path := filepath.Join(c.Dir, step.Artifact)
	data, err := os.ReadFile(path)
	if err != nil {
		return out, agentrunner.Fail(agentrunner.ClassInternal, "read %s: %v", step.Artifact, err)
	}
	// Validate again right before the handoff (FR-080): the file is what
	// gets traded, whatever happened to it since it was published.
	if producer := e.ws.Producer(step.Artifact); producer != nil && producer.Contract != nil {
		if err := artifact.Check(producer.Contract, step.Artifact, data); err != nil {
			return out, agentrunner.Fail(agentrunner.ClassInvalidOutput, "%v", err)
		}
	}
	until, err := checkValidity(data, step.Validity)
	if err != nil {
		return out, err
	}
	sub, err := execsvc.NewSubmission(c.ID, data)
	if err != nil {
		return out, agentrunner.Fail(agentrunner.ClassInvalidOutput, "%s: %v", step.Artifact, err)
	}
	sub.ValidUntil = until
	key := fmt.Sprintf("%s/%s/%s", c.ID, step.ID, sub.SHA256)
	receipt, err := e.notify(ctx, c, step, key, sub)
	if err != nil {
		return out, err
	}

	started, err := e.stepStart(ctx, c, step.ID)
	if err != nil {
		return out, err
	}
	deadline := started.Add(e.cfg.StepTimeout(step))
	if step.ID != e.ws.Machine.Final() && e.deadline(c).Before(deadline) {
		deadline = e.deadline(c)
	}
	status, detail := e.follow(ctx, c, step, receipt, deadline)
	if ctx.Err() != nil {
		return out, ctx.Err()
	}
	level := agentrunner.LevelInfo
	if status != execsvc.StatusCompleted {
		level = agentrunner.LevelError
	}
	note := fmt.Sprintf("Execution of %s from cycle %s (strategy %s): %s", step.Artifact, c.ID, receipt.StrategyID, status)
	if detail != "" {
		note += ": " + detail
	}
	out.add(e, c, step.ID, agentrunner.EventExecutionStatus, level, map[string]any{
		"strategy_id": receipt.StrategyID, "status": string(status), "final": true, "detail": detail,
	})
	return out, e.deliver(c, step, nil, note, out)
}

// notify submits the strategy once: through the outbox, keyed by cycle,
// step and content hash, so a crash or a retry never sends it twice.
//
// The message is committed before its first POST, so an undelivered one is
// a hand-off that may have happened: the runner stopped before it could
// record the answer. It is sent again with the same key even when the
// strategy has expired since; the service answers a key it knows with its
// first receipt and refuses an expired strategy it does not have, so only
// the service's refusal means the strategy was not handed over.
func (e *Engine) notify(ctx context.Context, c *agentrunner.Cycle, step *config.Step, key string, sub execsvc.Submission) (*execsvc.Receipt, error) {
	msg, err := e.store.OutboxMessage(ctx, key)
	if agentrunner.ErrorCode(err) == agentrunner.ENOTFOUND {
		if err := checkExpiry(sub.ValidUntil, e.clock.Now()); err != nil {
			return nil, err // never sent: nothing to ask the service
		}
		body, berr := sub.Body()
		if berr != nil {
			return nil, agentrunner.Fail(agentrunner.ClassInvalidOutput, "%v", berr)
		}
		msg = &agentrunner.OutboxMessage{Key: key, Kind: agentrunner.OutboxStrategy, CycleID: c.ID, Payload: body, CreatedAt: e.clock.Now()}
		err = e.commit(ctx, &agentrunner.Change{Outbox: []*agentrunner.OutboxMessage{msg}})
	}
	if err != nil {
		return nil, err
	}
	if !msg.DeliveredAt.IsZero() {
		var r execsvc.Receipt
		if err := json.Unmarshal(msg.Response, &r); err != nil {
			return nil, agentrunner.Fail(agentrunner.ClassInternal, "stored receipt of %s: %v", key, err)
		}
		return &r, nil
	}
	stored, err := execsvc.ParseSubmission(msg.Payload)
	if err != nil {
		return nil, agentrunner.Fail(agentrunner.ClassInternal, "stored submission %s: %v", key, err)
	}
	if stored.ValidUntil.IsZero() {
		// Stored without its window: the service must still learn it, or
		// a resend after the window could hand over an expired strategy.
		stored.ValidUntil = sub.ValidUntil
	}
	r, err := e.exec.Submit(ctx, key, stored)
	if err != nil {
		if ctx.Err() == nil {
			if rerr := e.store.RecordOutboxFailure(ctx, key, err.Error(), time.Time{}); rerr != nil {
				e.log.Error("recording an outbox failure", "key", key, "error", rerr)
			}
		}
		return nil, e.refused(err, stored.ValidUntil)
	}
	resp, _ := json.Marshal(r)
	ch := &agentrunner.Change{Delivered: []*agentrunner.OutboxMessage{{Key: key, DeliveredAt: e.clock.Now(), Response: resp}}}
	e.event(ch, c, step.ID, agentrunner.EventExecutionNotified, agentrunner.LevelInfo, map[string]any{
		"key": key, "strategy_id": r.StrategyID, "status": string(r.Status), "sha256": sub.SHA256, "replayed": r.Replayed,
	})
	return r, e.commit(ctx, ch)
}

// refused turns the service's refusal of a strategy whose window is over
// into the expiry failure: the strategy was not handed over. Other errors
// are returned as they are; an unreachable service in particular says
// nothing about whether it has the strategy, so the step retries.
func (e *Engine) refused(err error, until time.Time) error {
	expired := !until.IsZero() && !until.After(e.clock.Now())
	switch {
	case execsvc.IsExpired(err):
	case expired && (execsvc.IsSafeMode(err) || agentrunner.ClassOf(err) == agentrunner.ClassInvalidOutput):
	default:
		return err
	}
	cause := err
	if se := (*agentrunner.StepError)(nil); errors.As(err, &se) {
		cause = se.Err
	}
	return agentrunner.Fail(agentrunner.ClassInvalidOutput, "strategy expired at %s, before it could be handed over: the Execution Service does not have it (%v)",
		until.UTC().Format(time.RFC3339), cause)
}

// follow follows the strategy's status until it is terminal or the
// deadline passes, recording each change of status as an event: by the
// Execution Service's callbacks as soon as they arrive, and by polling with
// backoff. Transient polling errors are logged and polling goes on.
func (e *Engine) follow(ctx context.Context, c *agentrunner.Cycle, step *config.Step, r *execsvc.Receipt, deadline time.Time) (execsvc.Status, string) {
	status, detail := r.Status, r.Error
	interval := e.cfg.ExecutionService.PollInterval.D()
	for !status.Terminal() {
		now := e.clock.Now()
		if !now.Before(deadline) {
			return status, fmt.Sprintf("timed out after %s while %s", e.cfg.StepTimeout(step), status)
		}
		if e.sleep(ctx, min(interval, deadline.Sub(now))) != nil {
			return status, ""
		}
		got, source, err := e.callbackStatus(ctx, c, step, r.StrategyID)
		if err == nil && got == nil {
			interval = min(interval*2, 10*e.cfg.ExecutionService.PollInterval.D())
			e.busy(e.cfg.ExecutionService.RequestTimeout.D())
			source = "poll"
			got, err = e.exec.Status(ctx, r.StrategyID)
		}
		if err != nil {
			e.log.Warn("following the strategy", "cycle_id", c.ID, "strategy_id", r.StrategyID, "error", err)
			continue
		}
		if got.Status != status {
			status, detail = got.Status, got.Error
			if !status.Terminal() {
				ch := &agentrunner.Change{}
				e.event(ch, c, step.ID, agentrunner.EventExecutionStatus, agentrunner.LevelInfo, map[string]any{
					"strategy_id": r.StrategyID, "status": string(status), "source": source,
				})
				if err := e.commit(ctx, ch); err != nil {
					e.log.Error("recording execution status", "error", err)
				}
			}
		}
	}
	return status, detail
}

// callbackStatus consumes the Execution Service's status callbacks about
// a strategy (commands written by the API) and returns the newest status
// they report, nil if there is none.
func (e *Engine) callbackStatus(ctx context.Context, c *agentrunner.Cycle, step *config.Step, strategyID string) (*execsvc.Receipt, string, error) {
	cmds, err := e.store.PendingCommands(ctx)
	if err != nil {
		return nil, "", err
	}
	var got *execsvc.Receipt
	ch := &agentrunner.Change{}
	for _, cmd := range cmds {
		if cmd.Kind != agentrunner.CommandExecutionStatus || cmd.Args["strategy_id"] != strategyID {
			continue
		}
		st, _ := cmd.Args["status"].(string)
		msg, _ := cmd.Args["error"].(string)
		done := *cmd
		done.ConsumedAt = e.clock.Now()
		if status := execsvc.Status(st); status.Valid() {
			got = &execsvc.Receipt{StrategyID: strategyID, Status: status, Error: msg}
			done.Result = "status " + st
		} else {
			done.Result = fmt.Sprintf("ignored: unknown status %q", st)
		}
		ch.Consumed = append(ch.Consumed, &done)
	}
	if len(ch.Consumed) == 0 {
		return nil, "", nil
	}
	return got, "callback", e.commit(ctx, ch)
}

// checkValidity reads the strategy's validity window and refuses one that
// is malformed (FR-052). It returns the end of the window, zero when none
// is configured; whether it is over is the hand-off's to judge.
func checkValidity(data []byte, v config.Validity) (time.Time, error) {
	if v.Until == "" && v.From == "" {
		return time.Time{}, nil
	}
	var doc any
	if err := json.Unmarshal(data, &doc); err != nil {
		return time.Time{}, agentrunner.Fail(agentrunner.ClassInvalidOutput, "strategy is not JSON: %v", err)
	}
	at := func(ptr string) (time.Time, error) {
		raw, ok := artifact.Lookup(doc, ptr)
		s, isString := raw.(string)
		if !ok || !isString {
			return time.Time{}, agentrunner.Fail(agentrunner.ClassInvalidOutput, "validity field %s is missing or not a string", ptr)
		}
		t, err := time.Parse(time.RFC3339, s)
		if err != nil {
			return time.Time{}, agentrunner.Fail(agentrunner.ClassInvalidOutput, "validity field %s: %q is not an RFC 3339 time", ptr, s)
		}
		return t, nil
	}
	var from, until time.Time
	var err error
	if v.From != "" {
		if from, err = at(v.From); err != nil {
			return time.Time{}, err
		}
	}
	if v.Until != "" {
		if until, err = at(v.Until); err != nil {
			return time.Time{}, err
		}
		if !from.IsZero() && !until.After(from) {
			return time.Time{}, agentrunner.Fail(agentrunner.ClassInvalidOutput, "validity window ends (%s) before it begins (%s)", until.Format(time.RFC3339), from.Format(time.RFC3339))
		}
	}
	return until, nil
}

// checkExpiry refuses to hand over a strategy whose validity window is
// over (FR-052).
func checkExpiry(until, now time.Time) error {
	if until.IsZero() || until.After(now) {
		return nil
	}
	return agentrunner.Fail(agentrunner.ClassInvalidOutput, "strategy expired at %s, before it could be handed over", until.UTC().Format(time.RFC3339))
}
