// Package gate is the step kind of a human gate: a step run that waits,
// durably, for an operator's decision (approve, reject, or route to a
// named step). The kind itself only opens the gate and, when operators
// have a webhook, notifies them through the outbox in the same
// transaction; the scheduler keeps the gate waiting across restarts and
// applies the decision, which is an audited command like every override.
package gate

import (
	"context"
	"time"

	"github.com/agentrunner/agentrunner"
	"github.com/agentrunner/agentrunner/webhook"
)

// Kind opens gates.
type Kind struct {
	// Notify: operators have a webhook; a gate_opened event is sent to it.
	Notify bool
	Clock  agentrunner.Clock
}

var _ agentrunner.StepKind = (*Kind)(nil)

// Run opens the gate of a step run: the result waits for a decision.
func (k *Kind) Run(_ context.Context, a *agentrunner.StepAttempt) (*agentrunner.StepResult, error) {
	res := &agentrunner.StepResult{Wait: true}
	if !k.Notify {
		return res, nil
	}
	now := k.now()
	details := map[string]any{"visit": a.StepRun.Visit}
	if g := a.Step.Gate; g != nil && g.Timeout > 0 {
		details["timeout_at"] = a.StepRun.OpenedAt.Add(g.Timeout).UTC().Format(time.RFC3339)
		details["default"] = string(g.Default)
	}
	ev := webhook.Event{
		Kind: webhook.KindGateOpened, ID: "gate_opened/" + a.Run.ID + "/" + a.StepRun.Key(), Time: now,
		Pipeline: a.Run.Pipeline, CycleID: a.Run.ID, Step: a.Step.ID, Details: details,
	}
	body, err := ev.Body()
	if err != nil {
		return nil, agentrunner.Fail(agentrunner.ClassInternal, "build the gate_opened notification: %w", err)
	}
	res.Outbox = []*agentrunner.OutboxMessage{{
		Key: ev.ID, Kind: agentrunner.OutboxWebhook, CycleID: a.Run.ID, Payload: body, CreatedAt: now,
	}}
	return res, nil
}

func (k *Kind) now() time.Time {
	if k.Clock == nil {
		return time.Now().UTC()
	}
	return k.Clock.Now()
}
