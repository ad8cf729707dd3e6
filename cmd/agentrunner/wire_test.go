package main

import (
	"log/slog"
	"testing"
	"time"

	"github.com/agentrunner/agentrunner"
	"github.com/agentrunner/agentrunner/webhook"
)

// TestOutboxAlert: the scheduler's alerts become webhook messages in the
// outbox of their change, keyed by the event's id; one that breaks the
// webhook contract is dropped.
func TestOutboxAlert(t *testing.T) {
	alert := outboxAlert(slog.New(slog.DiscardHandler))
	ch := &agentrunner.Change{}
	at := time.Date(2026, 11, 24, 5, 0, 0, 0, time.UTC)
	alert(ch, webhook.Event{Kind: webhook.KindEscalation, ID: "escalation/p-000001/b/2", Time: at, Pipeline: "p", CycleID: "p-000001",
		Step: "b", Attempts: 2, ErrorClass: "crash", Error: "boom", Policy: "halt"})
	alert(ch, webhook.Event{Kind: webhook.KindEscalation, ID: "escalation/p-000001/b/3", Time: at, Pipeline: "p"}) // no policy
	if len(ch.Outbox) != 1 {
		t.Fatalf("%d outbox messages, want 1: %+v", len(ch.Outbox), ch.Outbox)
	}
	m := ch.Outbox[0]
	if m.Key != "escalation/p-000001/b/2" || m.Kind != agentrunner.OutboxWebhook || m.CycleID != "p-000001" || !m.CreatedAt.Equal(at) || len(m.Payload) == 0 {
		t.Errorf("outbox message %+v", m)
	}
}
