package engine

import (
	"context"
	"sync"
	"time"

	"github.com/agentrunner/agentrunner"
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
	EventPaused         = "loop.paused"
	EventUnpaused       = "loop.resumed"
	EventInjected       = "mailbox.injected"
	EventCommandIgnored = scheduler.EventCommandIgnored
)
