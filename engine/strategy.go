package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/agentrunner/agentrunner"
	"github.com/agentrunner/agentrunner/artifact"
	"github.com/agentrunner/agentrunner/config"
	"github.com/agentrunner/agentrunner/execsvc"
	"github.com/agentrunner/agentrunner/webhook"
)

// EventStrategyExpired flags a strategy whose validity window ended with
// no newer strategy (FR-053).
const EventStrategyExpired = "strategy.expired"

// CheckStrategy watches the validity window of the strategy the Execution
// Service trades: the newest one handed over (FR-052). When the window has
// ended, it flags the strategy once, with an event, a webhook and a
// safe-mode order to the Execution Service (FR-053/054), all through the
// outbox so each happens exactly once. It returns when the current strategy
// expires, zero when there is nothing left to watch.
func (e *Engine) CheckStrategy(ctx context.Context) (time.Time, error) {
	e.cfgMu.RLock() // it runs beside the loop, which may reload
	defer e.cfgMu.RUnlock()
	latest, err := e.store.Outbox(ctx, agentrunner.OutboxFilter{Kind: agentrunner.OutboxStrategy, Delivered: true, Limit: 1})
	if err != nil || len(latest) == 0 {
		return time.Time{}, err
	}
	m := latest[0]
	sub, err := execsvc.ParseSubmission(m.Payload)
	if err != nil {
		return time.Time{}, fmt.Errorf("stored strategy %s: %w", m.Key, err)
	}
	parts := strings.SplitN(m.Key, "/", 3)
	step := e.cfg.Pipeline.Steps[parts[min(1, len(parts)-1)]]
	if step == nil || step.Validity.Until == "" {
		return time.Time{}, nil // no validity window configured: nothing expires
	}
	until, err := validUntil(sub.Strategy, step.Validity)
	if err != nil {
		return time.Time{}, fmt.Errorf("stored strategy %s: %w", m.Key, err)
	}
	now := e.clock.Now()
	if now.Before(until) {
		return until, nil
	}
	key := "safe-mode/" + execsvc.ReasonStrategyExpired + "/" + sub.SHA256
	if _, err := e.store.OutboxMessage(ctx, key); err == nil {
		return time.Time{}, nil // already flagged
	} else if agentrunner.ErrorCode(err) != agentrunner.ENOTFOUND {
		return time.Time{}, err
	}
	order, err := execsvc.SafeModeRequest{
		Reason: execsvc.ReasonStrategyExpired, StrategySHA256: sub.SHA256, ExpiredAt: until,
		Detail: fmt.Sprintf("the strategy of cycle %s was valid until %s and no newer strategy was handed over", sub.CycleID, until.Format(time.RFC3339)),
	}.Body()
	if err != nil {
		return time.Time{}, err
	}
	c := &agentrunner.Cycle{ID: sub.CycleID}
	ch := &agentrunner.Change{Outbox: []*agentrunner.OutboxMessage{{Key: key, Kind: agentrunner.OutboxSafeMode, CycleID: sub.CycleID, Payload: order, CreatedAt: now}}}
	e.event(ch, c, step.ID, EventStrategyExpired, agentrunner.LevelError, map[string]any{
		"strategy_sha256": sub.SHA256, "valid_until": until.Format(time.RFC3339), "safe_mode": true,
	})
	e.alert(ch, webhook.Event{Kind: webhook.KindStrategyExpired, ID: "strategy_expired/" + sub.SHA256, Time: now, Pipeline: e.cfg.Name,
		CycleID: sub.CycleID, Step: step.ID, Details: map[string]any{"valid_until": until.Format(time.RFC3339), "strategy_sha256": sub.SHA256}})
	return time.Time{}, e.commit(ctx, ch)
}

// validUntil reads the end of a strategy's validity window.
func validUntil(strategy []byte, v config.Validity) (time.Time, error) {
	var doc any
	if err := json.Unmarshal(strategy, &doc); err != nil {
		return time.Time{}, err
	}
	raw, ok := artifact.Lookup(doc, v.Until)
	s, isString := raw.(string)
	if !ok || !isString {
		return time.Time{}, fmt.Errorf("validity field %s is missing or not a string", v.Until)
	}
	return time.Parse(time.RFC3339, s)
}
