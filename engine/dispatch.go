package engine

import (
	"context"
	"errors"
	"fmt"
	"github.com/agentrunner/agentrunner/internal/eventlog"
	"log/slog"
	"time"

	"github.com/agentrunner/agentrunner"
	"github.com/agentrunner/agentrunner/step/execution"
	"github.com/agentrunner/agentrunner/webhook"
)

// Deliver sends one outbox message to its receiver and returns the
// receiver's answer. A failure that a retry can help is one of agentrunner's
// retryable classes, or a *webhook.DeliveryError saying so.
type Deliver func(ctx context.Context, m *agentrunner.OutboxMessage, now time.Time) ([]byte, error)

// Dispatcher delivers the outbox's messages other than strategies (which
// the execution step delivers itself): operator webhooks and safe-mode
// orders. Each is sent with its key as idempotency key, retried with
// exponential backoff until it is acknowledged, so an outage of the
// receiver loses nothing and, once it is back, each message arrives.
type Dispatcher struct {
	Store   agentrunner.Store
	Clock   agentrunner.Clock
	Log     *slog.Logger
	Deliver map[string]Deliver
	// OnEvent is called with the events the dispatcher records.
	OnEvent func(*agentrunner.Event)
}

// Backoff of failed deliveries: the first retry after retryBase, doubling
// up to retryCap; a message the receiver refuses for good is tried again
// after rejectedRetry (an operator may fix the receiver).
const (
	retryBase     = 10 * time.Second
	retryCap      = time.Hour
	rejectedRetry = 24 * time.Hour
)

// DeliverDue tries every message that is due and returns how many were
// delivered.
func (d *Dispatcher) DeliverDue(ctx context.Context) (int, error) {
	now := d.Clock.Now()
	due, err := d.Store.Outbox(ctx, agentrunner.OutboxFilter{Due: now})
	if err != nil {
		return 0, err
	}
	delivered := 0
	for _, m := range due {
		if m.Kind == execution.OutboxStrategy {
			continue
		}
		deliver := d.Deliver[m.Kind]
		if deliver == nil {
			d.failed(ctx, m, now, fmt.Errorf("no receiver is configured for %s messages", m.Kind), false, 0)
			continue
		}
		resp, err := deliver(ctx, m, now)
		if ctx.Err() != nil {
			return delivered, ctx.Err()
		}
		if err != nil {
			retry, after := retryable(err)
			d.failed(ctx, m, now, err, retry, after)
			continue
		}
		ch := &agentrunner.Change{
			Delivered: []*agentrunner.OutboxMessage{{Key: m.Key, DeliveredAt: now, Response: resp}},
			Events:    []*agentrunner.Event{d.event(m, "outbox.delivered", agentrunner.LevelInfo, map[string]any{"key": m.Key, "kind": m.Kind, "tries": m.Attempts + 1})},
		}
		if err := d.Store.Apply(ctx, ch); err != nil {
			return delivered, err
		}
		d.report(ch.Events)
		delivered++
	}
	return delivered, nil
}

// retryable says whether a failed delivery is worth trying again, and
// the wait the receiver asked for.
func retryable(err error) (bool, time.Duration) {
	var de *webhook.DeliveryError
	if errors.As(err, &de) {
		return de.Retryable, de.RetryAfter
	}
	return agentrunner.ClassOf(err).Retryable(), 0
}

func (d *Dispatcher) failed(ctx context.Context, m *agentrunner.OutboxMessage, now time.Time, cause error, retry bool, after time.Duration) {
	wait := rejectedRetry
	if retry {
		wait = retryBase << min(m.Attempts, 20)
		wait = max(min(wait, retryCap), after)
	}
	next := now.Add(wait)
	if err := d.Store.RecordOutboxFailure(ctx, m.Key, cause.Error(), next); err != nil {
		d.Log.Error("recording a failed delivery", "key", m.Key, "error", err)
		return
	}
	level := agentrunner.LevelWarn
	if !retry {
		level = agentrunner.LevelError
	}
	ev := d.event(m, "outbox.failed", level, map[string]any{
		"key": m.Key, "kind": m.Kind, "error": cause.Error(), "tries": m.Attempts + 1, "retryable": retry, "next_attempt_at": next.Format(time.RFC3339),
	})
	if err := d.Store.Apply(ctx, &agentrunner.Change{Events: []*agentrunner.Event{ev}}); err != nil {
		d.Log.Error("recording a failed delivery", "key", m.Key, "error", err)
		return
	}
	d.report([]*agentrunner.Event{ev})
}

func (d *Dispatcher) event(m *agentrunner.OutboxMessage, typ string, level agentrunner.Level, details map[string]any) *agentrunner.Event {
	return &agentrunner.Event{Timestamp: d.Clock.Now(), Type: typ, CycleID: m.CycleID, Level: level, Details: details}
}

func (d *Dispatcher) report(evs []*agentrunner.Event) {
	for _, ev := range evs {
		eventlog.Write(d.Log, ev)
		if d.OnEvent != nil {
			d.OnEvent(ev)
		}
	}
}

// Run delivers due messages every interval until ctx ends.
func (d *Dispatcher) Run(ctx context.Context, interval time.Duration) error {
	for {
		if _, err := d.DeliverDue(ctx); err != nil && ctx.Err() == nil {
			d.Log.Error("delivering the outbox", "error", err)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-d.Clock.After(interval):
		}
	}
}
