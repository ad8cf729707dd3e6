package execution

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/agentrunner/agentrunner"
	"github.com/agentrunner/agentrunner/config"
	"github.com/agentrunner/agentrunner/execsvc"
)

// notify submits the strategy once: through the outbox, keyed by run,
// step and content hash, so a crash or a retry never sends it twice.
//
// The message is committed before its first POST, so an undelivered one is
// a hand-off that may have happened: the runner stopped before it could
// record the answer. It is sent again with the same key even when the
// strategy has expired since; the service answers a key it knows with its
// first receipt and refuses an expired strategy it does not have, so only
// the service's refusal means the strategy was not handed over.
func (k *Kind) notify(ctx context.Context, run *agentrunner.Run, step *config.Step, key string, sub execsvc.Submission) (*execsvc.Receipt, error) {
	msg, err := k.opts.Store.OutboxMessage(ctx, key)
	if agentrunner.ErrorCode(err) == agentrunner.ENOTFOUND {
		if err := checkExpiry(sub.ValidUntil, k.clock.Now()); err != nil {
			return nil, err // never sent: nothing to ask the service
		}
		body, berr := sub.Body()
		if berr != nil {
			return nil, agentrunner.Fail(agentrunner.ClassInvalidOutput, "%v", berr)
		}
		msg = &agentrunner.OutboxMessage{Key: key, Kind: OutboxStrategy, CycleID: run.ID, Payload: body, CreatedAt: k.clock.Now()}
		err = k.commit(ctx, &agentrunner.Change{Outbox: []*agentrunner.OutboxMessage{msg}})
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
	return k.send(ctx, run, step, msg, sub)
}

// send delivers the stored hand-off msg and records the receipt.
func (k *Kind) send(ctx context.Context, run *agentrunner.Run, step *config.Step, msg *agentrunner.OutboxMessage, sub execsvc.Submission) (*execsvc.Receipt, error) {
	key := msg.Key
	stored, err := execsvc.ParseSubmission(msg.Payload)
	if err != nil {
		return nil, agentrunner.Fail(agentrunner.ClassInternal, "stored submission %s: %v", key, err)
	}
	if stored.ValidUntil.IsZero() {
		// Stored without its window: the service must still learn it, or
		// a resend after the window could hand over an expired strategy.
		stored.ValidUntil = sub.ValidUntil
	}
	r, err := k.opts.Service.Submit(ctx, key, stored)
	if err != nil {
		if ctx.Err() == nil {
			if rerr := k.opts.Store.RecordOutboxFailure(ctx, key, err.Error(), time.Time{}); rerr != nil {
				k.log.Error("recording an outbox failure", "key", key, "error", rerr)
			}
		}
		return nil, k.refused(err, stored.ValidUntil)
	}
	resp, _ := json.Marshal(r)
	ch := &agentrunner.Change{Delivered: []*agentrunner.OutboxMessage{{Key: key, DeliveredAt: k.clock.Now(), Response: resp}}}
	ch.Events = append(ch.Events, k.event(run, step, EventExecutionNotified, agentrunner.LevelInfo, map[string]any{
		"key": key, "strategy_id": r.StrategyID, "status": string(r.Status), "sha256": sub.SHA256, "replayed": r.Replayed,
	}))
	return r, k.commit(ctx, ch)
}

// refused turns the service's refusal of a strategy whose window is over
// into the expiry failure: the strategy was not handed over. Other errors
// are returned as they are; an unreachable service in particular says
// nothing about whether it has the strategy, so the step retries.
func (k *Kind) refused(err error, until time.Time) error {
	expired := !until.IsZero() && !until.After(k.clock.Now())
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
//
// The first look is at once, not after a poll interval: a service that
// finishes quickly (or the mock) ends the step without a wait, and a
// resumed attempt learns at once what happened while the runner was down.
func (k *Kind) follow(ctx context.Context, run *agentrunner.Run, step *config.Step, r *execsvc.Receipt, deadline time.Time) (execsvc.Status, string) {
	status, detail := r.Status, r.Error
	interval := k.cfg.ExecutionService.PollInterval.D()
	for first := true; !status.Terminal(); first = false {
		now := k.clock.Now()
		if !now.Before(deadline) {
			return status, fmt.Sprintf("timed out after %s while %s", k.cfg.StepTimeout(step), status)
		}
		if !first && k.sleep(ctx, min(interval, deadline.Sub(now))) != nil {
			return status, ""
		}
		got, source, err := k.look(ctx, r.StrategyID)
		if source == "poll" && !first {
			interval = min(interval*2, 10*k.cfg.ExecutionService.PollInterval.D())
		}
		if err != nil && ctx.Err() != nil {
			return status, ""
		}
		if err != nil {
			k.log.Warn("following the strategy", "cycle_id", run.ID, "strategy_id", r.StrategyID, "error", err)
			continue
		}
		if got.Status != status {
			status, detail = got.Status, got.Error
			if !status.Terminal() {
				k.recordStatus(ctx, run, step, r.StrategyID, status, source)
			}
		}
	}
	return status, detail
}

// look returns the strategy's newest status from the callbacks that
// arrived, or else from a poll, with its source.
func (k *Kind) look(ctx context.Context, strategyID string) (*execsvc.Receipt, string, error) {
	got, source, err := k.callbackStatus(ctx, strategyID)
	if err != nil || got != nil {
		return got, source, err
	}
	if k.opts.Busy != nil {
		k.opts.Busy(k.cfg.ExecutionService.RequestTimeout.D())
	}
	got, err = k.opts.Service.Status(ctx, strategyID)
	return got, "poll", err
}

// recordStatus commits an event for a status on the way.
func (k *Kind) recordStatus(ctx context.Context, run *agentrunner.Run, step *config.Step, strategyID string, status execsvc.Status, source string) {
	ch := &agentrunner.Change{Events: []*agentrunner.Event{k.event(run, step, EventExecutionStatus, agentrunner.LevelInfo, map[string]any{
		"strategy_id": strategyID, "status": string(status), "source": source,
	})}}
	if err := k.commit(ctx, ch); err != nil && ctx.Err() == nil {
		// Not when the attempt was stopped (a shutdown): the status is
		// polled again at the next start.
		k.log.Error("recording execution status", "error", err)
	}
}

// callbackStatus consumes the Execution Service's status callbacks about
// a strategy (commands written by the API) and returns the newest status
// they report, nil if there is none.
func (k *Kind) callbackStatus(ctx context.Context, strategyID string) (*execsvc.Receipt, string, error) {
	cmds, err := k.opts.Store.PendingCommands(ctx)
	if err != nil {
		return nil, "", err
	}
	var got *execsvc.Receipt
	ch := &agentrunner.Change{}
	for _, cmd := range cmds {
		if cmd.Kind != CommandExecutionStatus || cmd.Args["strategy_id"] != strategyID {
			continue
		}
		st, _ := cmd.Args["status"].(string)
		msg, _ := cmd.Args["error"].(string)
		done := *cmd
		done.ConsumedAt = k.clock.Now()
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
	return got, "callback", k.commit(ctx, ch)
}
