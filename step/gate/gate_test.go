package gate_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/agentrunner/agentrunner"
	"github.com/agentrunner/agentrunner/internal/clocktest"
	"github.com/agentrunner/agentrunner/step/gate"
)

func attempt(g *agentrunner.GateSpec) *agentrunner.StepAttempt {
	opened := time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)
	return &agentrunner.StepAttempt{
		Run:     &agentrunner.Run{ID: "review-000007", Pipeline: "review"},
		Step:    &agentrunner.Step{ID: "decide", Kind: agentrunner.KindGate, Gate: g},
		StepRun: &agentrunner.StepRun{RunID: "review-000007", Step: "decide", Visit: 2, OpenedAt: opened},
		Attempt: &agentrunner.Attempt{Number: 2},
	}
}

func TestAGateWaitsAndNotifiesOnce(t *testing.T) {
	k := &gate.Kind{Notify: true, Clock: clocktest.New(time.Date(2026, 11, 24, 12, 0, 1, 0, time.UTC))}
	res, err := k.Run(context.Background(), attempt(&agentrunner.GateSpec{Timeout: 24 * time.Hour, Default: agentrunner.DecisionReject}))
	if err != nil {
		t.Fatal(err)
	}
	if !res.Wait || len(res.Outbox) != 1 {
		t.Fatalf("result %+v: want a wait and one notification", res)
	}
	m := res.Outbox[0]
	if m.Key != "gate_opened/review-000007/decide#2" || m.Kind != agentrunner.OutboxWebhook || m.CycleID != "review-000007" {
		t.Errorf("outbox message %+v", m)
	}
	var body map[string]any
	if err := json.Unmarshal(m.Payload, &body); err != nil {
		t.Fatal(err)
	}
	want := map[string]any{
		"kind": "gate_opened", "id": m.Key, "time": "2026-11-24T12:00:01Z", "pipeline": "review", "cycle_id": "review-000007", "step": "decide",
		"details": map[string]any{"visit": float64(2), "timeout_at": "2026-11-25T12:00:00Z", "default": "reject"},
	}
	if diff := cmp.Diff(want, body); diff != "" {
		t.Errorf("webhook body (-want +got):\n%s", diff)
	}
}

func TestAGateWithoutAWebhookOnlyWaits(t *testing.T) {
	res, err := (&gate.Kind{}).Run(context.Background(), attempt(nil))
	if err != nil || !res.Wait || len(res.Outbox) != 0 {
		t.Fatalf("result %+v, %v: want a wait and nothing else", res, err)
	}
}
