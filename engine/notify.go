package engine

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/agentrunner/agentrunner"
	"github.com/agentrunner/agentrunner/mailbox"
	"github.com/agentrunner/agentrunner/scheduler"
	"github.com/agentrunner/agentrunner/webhook"
)

// broadcast wakes every waiter at once: the execution steps in flight,
// each waiting between two polls of its strategy's status, when a command
// (a status callback) arrives.
type broadcast struct {
	mu sync.Mutex
	ch chan struct{}
}

func newBroadcast() *broadcast { return &broadcast{ch: make(chan struct{})} }

// wake ends every current wait.
func (b *broadcast) wake() {
	b.mu.Lock()
	close(b.ch)
	b.ch = make(chan struct{})
	b.mu.Unlock()
}

// sleep returns a sleep on clock that a wake ends early; it fails when
// ctx ends.
func (b *broadcast) sleep(clock agentrunner.Clock) func(context.Context, time.Duration) error {
	return func(ctx context.Context, d time.Duration) error {
		b.mu.Lock()
		woken := b.ch
		b.mu.Unlock()
		select {
		case <-ctx.Done():
		case <-clock.After(d):
		case <-woken:
		}
		return ctx.Err()
	}
}

// alert adds a webhook notification to a change, when a webhook is
// configured: the outbox delivers it, signed, with retries.
func (e *Engine) alert(ch *agentrunner.Change, ev webhook.Event) {
	if e.Config().Escalation.Webhook.URL == "" {
		return
	}
	body, err := ev.Body()
	if err != nil {
		e.log.Error("building a webhook notification", "id", ev.ID, "error", err)
		return
	}
	ch.Outbox = append(ch.Outbox, &agentrunner.OutboxMessage{
		Key: ev.ID, Kind: agentrunner.OutboxWebhook, CycleID: ev.CycleID, Payload: body, CreatedAt: e.clock.Now(),
	})
}

// Event types of escalation and recovery in the learning loop, under the
// names the loop engine gave them.
const (
	EventHalted  = agentrunner.EventCycleHalted
	EventSkipped = "step.skipped"
	EventResumed = "cycle.resumed"
	EventForced  = "cycle.forced"
	// EventEscalation: a step failed for good and its policy applies.
	EventEscalation = "escalation"
	// Operators' overrides (FR-162..167).
	EventPaused         = scheduler.EventPaused
	EventUnpaused       = scheduler.EventUnpaused
	EventInjected       = scheduler.EventInjected
	EventCommandIgnored = scheduler.EventCommandIgnored
)

// inject makes the deposit of an operator's message into an agent's
// mailbox, committed by the scheduler with the command's consumption and
// written into the mailbox's file after it: the agent reads it on its
// next run, or at its next turn if it is a model agent running now. The
// message's id is the command's, so delivering it again would replace it
// rather than double it.
func (e *Engine) inject(_ context.Context, cmd *agentrunner.Command) (*scheduler.Injection, error) {
	agent, _ := cmd.Args["agent"].(string)
	body, _ := cmd.Args["message"].(string)
	e.cfgMu.RLock()
	known, boxes := e.cfg.Agents[agent] != nil, e.boxes
	e.cfgMu.RUnlock()
	if !known {
		return nil, agentrunner.Errorf(agentrunner.EINVALID, "no agent %q", agent)
	}
	msg := mailbox.Message{
		ID: fmt.Sprintf("inject-%d", cmd.ID), Time: cmd.CreatedAt, From: "operator:" + cmd.Operator, Kind: mailbox.Inject, Body: body,
	}
	d, err := boxes.Deposit(agent, msg)
	if err != nil {
		return nil, err
	}
	ev := &agentrunner.Event{Timestamp: e.clock.Now(), Type: EventInjected, Agent: agent, Level: agentrunner.LevelInfo, Details: map[string]any{
		"operator": cmd.Operator, "command": cmd.ID, "to": agent, "message_id": msg.ID, "bytes": len(body),
	}}
	return &scheduler.Injection{Mail: d, Event: ev, Result: "delivered to the mailbox of " + agent}, nil
}
