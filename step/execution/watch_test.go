package execution

import (
	"context"
	"testing"
	"time"

	"github.com/agentrunner/agentrunner"
	"github.com/agentrunner/agentrunner/config"
	"github.com/agentrunner/agentrunner/execsvc"
	"github.com/agentrunner/agentrunner/webhook"
	"github.com/google/go-cmp/cmp"
)

// TestCheckStrategyFlagsExpiryOnce: the watcher returns when the newest
// strategy handed over expires; once it has, the strategy is flagged with
// an event, an operators' alert and a safe-mode order, exactly once
// (FR-052..054), whichever watcher looks again.
func TestCheckStrategyFlagsExpiryOnce(t *testing.T) {
	e := newEnv(t, execsvc.MockOptions{})
	ctx := context.Background()
	if _, err := e.kind(t).Run(ctx, e.attempt()); err != nil {
		t.Fatal(err)
	}
	var alerts []string
	watcher := func() *Watcher {
		return NewWatcher(WatcherOptions{Store: e.store, Clock: e.clock, Alert: func(_ *agentrunner.Change, ev webhook.Event) {
			alerts = append(alerts, ev.Kind+" "+ev.Step)
		}})
	}
	expires, err := watcher().CheckStrategy(ctx, e.ws.Config)
	if err != nil || !expires.Equal(t0.Add(6*time.Hour)) {
		t.Fatalf("CheckStrategy = %v, %v; want the strategy's valid_until", expires, err)
	}
	e.clock.Advance(7 * time.Hour)
	for range 2 {
		if expires, err := watcher().CheckStrategy(ctx, e.ws.Config); err != nil || !expires.IsZero() {
			t.Fatalf("CheckStrategy after expiry = %v, %v; want nothing left to watch", expires, err)
		}
	}
	orders, err := e.store.Outbox(ctx, agentrunner.OutboxFilter{Kind: OutboxSafeMode, Due: e.clock.Now()})
	if err != nil || len(orders) != 1 {
		t.Fatalf("safe-mode orders: %v, %v; want 1", orders, err)
	}
	req, err := execsvc.ParseSafeModeRequest(orders[0].Payload)
	if err != nil || req.Reason != execsvc.ReasonStrategyExpired || !req.ExpiredAt.Equal(t0.Add(6*time.Hour)) {
		t.Errorf("order %+v, %v; want strategy_expired at its valid_until", req, err)
	}
	evs, err := e.store.Events(ctx, agentrunner.EventFilter{Type: EventStrategyExpired})
	if err != nil || len(evs) != 1 || evs[0].Step != "execute" {
		t.Errorf("expiry events: %v, %v; want 1 of the execute step", evs, err)
	}
	if len(alerts) != 1 || alerts[0] != webhook.KindStrategyExpired+" execute" {
		t.Errorf("alerts = %q, want one strategy_expired", alerts)
	}
}

// TestCheckStrategyWithoutAWindow: a strategy whose step configures no
// validity window never expires.
func TestCheckStrategyWithoutAWindow(t *testing.T) {
	e := newEnv(t, execsvc.MockOptions{})
	ctx := context.Background()
	if _, err := e.kind(t).Run(ctx, e.attempt()); err != nil {
		t.Fatal(err)
	}
	e.ws.Config.Pipeline.Steps["execute"].Validity.Until = ""
	e.clock.Advance(7 * time.Hour)
	if expires, err := NewWatcher(WatcherOptions{Store: e.store, Clock: e.clock}).CheckStrategy(ctx, e.ws.Config); err != nil || !expires.IsZero() {
		t.Fatalf("CheckStrategy = %v, %v; want nothing to watch", expires, err)
	}
	if orders, _ := e.store.Outbox(ctx, agentrunner.OutboxFilter{Kind: OutboxSafeMode, Due: e.clock.Now()}); len(orders) != 0 {
		t.Errorf("safe-mode orders without a window: %v", orders)
	}
}

// countingBeats forwards heartbeats and stops the runner after n.
type countingBeats struct {
	HeartbeatSender
	n      int
	cancel func()
}

func (c *countingBeats) Heartbeat(ctx context.Context, runner string, interval time.Duration) (bool, error) {
	on, err := c.HeartbeatSender.Heartbeat(ctx, runner, interval)
	if c.n--; c.n == 0 {
		c.cancel()
	}
	return on, err
}

// TestDeadMansSwitch: the runner's heartbeats keep the Execution Service
// out of safe mode; when they stop for longer than its timeout, the
// service enters safe mode by itself (FR-055/056), tested from both sides.
func TestDeadMansSwitch(t *testing.T) {
	e := newEnv(t, execsvc.MockOptions{HeartbeatTimeout: 2 * time.Minute})
	ctx, cancel := context.WithCancel(context.Background())
	beats := &countingBeats{HeartbeatSender: e.client, n: 10, cancel: cancel}
	NewWatcher(WatcherOptions{Clock: e.clock}).Heartbeats(ctx, beats, "crypton", 30*time.Second)
	var want []time.Time
	for i := range 10 {
		want = append(want, t0.Add(time.Duration(i)*30*time.Second))
	}
	if diff := cmp.Diff(want, e.es.Heartbeats()); diff != "" {
		t.Fatalf("the service's heartbeats, 30s apart (-want +got):\n%s", diff)
	}
	if e.es.SafeMode().SafeMode {
		t.Fatal("safe mode while heartbeats arrive every 30s")
	}
	// The runner dies: no more heartbeats.
	e.clock.Advance(2*time.Minute + time.Second)
	if st := e.es.SafeMode(); !st.SafeMode || st.Reason != execsvc.ReasonHeartbeatLost {
		t.Errorf("after 2m without a heartbeat: %+v, want safe mode (heartbeat_lost)", st)
	}
}

// TestCheckStrategyOfAGraphRun: a strategy handed over by an execution
// step of a pipeline under pipelines: expires by that step's validity
// window, and its alert names that pipeline.
func TestCheckStrategyOfAGraphRun(t *testing.T) {
	e := newEnv(t, execsvc.MockOptions{})
	ctx := context.Background()
	cfg := e.ws.Config
	loopStep := cfg.Pipeline.Steps["execute"]
	graphStep := *loopStep
	cfg.Pipelines = map[string]*config.Pipeline{"trade": {Name: "trade", Steps: map[string]*config.Step{"execute": &graphStep}}}
	loopStep.Validity = config.Validity{} // the loop's step would let it be
	e.run.Pipeline = "trade"
	if err := e.store.Apply(ctx, &agentrunner.Change{Runs: []*agentrunner.Run{e.run}}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.kind(t).Run(ctx, e.attempt()); err != nil {
		t.Fatal(err)
	}
	var pipelines []string
	w := NewWatcher(WatcherOptions{Store: e.store, Clock: e.clock, Alert: func(_ *agentrunner.Change, ev webhook.Event) {
		pipelines = append(pipelines, ev.Pipeline)
	}})
	if expires, err := w.CheckStrategy(ctx, cfg); err != nil || !expires.Equal(t0.Add(6*time.Hour)) {
		t.Fatalf("CheckStrategy = %v, %v; want the graph step's valid_until", expires, err)
	}
	e.clock.Advance(7 * time.Hour)
	if _, err := w.CheckStrategy(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"trade"}, pipelines); diff != "" {
		t.Errorf("strategy_expired alerts' pipelines (-want +got):\n%s", diff)
	}
}
