package engine

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/agentrunner/agentrunner"
	"github.com/agentrunner/agentrunner/execsvc"
	"github.com/agentrunner/agentrunner/step/execution"
	"github.com/google/go-cmp/cmp"
)

// lostAnswer stops the runner while its strategy POST is in flight: the
// request reaches the service (when reaches is set) and the runner stops
// before it reads the answer, as a runner killed at that moment would.
type lostAnswer struct {
	ExecutionService
	reaches bool
	cancel  func()
}

func (l lostAnswer) Submit(ctx context.Context, key string, s execsvc.Submission) (*execsvc.Receipt, error) {
	if l.reaches {
		if _, err := l.ExecutionService.Submit(ctx, key, s); err != nil {
			return nil, err
		}
	}
	l.cancel()
	return nil, agentrunner.Fail(agentrunner.ClassUnavailable, "submit strategy: %w", context.Canceled)
}

// crashMidHandOff runs a cycle until the runner stops with the strategy
// POST in flight, then moves the clock past the strategy's validity window
// (six hours), as a runner restarted late finds it.
func crashMidHandOff(t *testing.T, f *fixture, reaches bool) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	e := f.engineWith(func(o *Options) { o.Exec = lostAnswer{ExecutionService: o.Exec, reaches: reaches, cancel: cancel} })
	if _, err := e.RunOnce(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("RunOnce: %v, want it stopped during the hand-off", err)
	}
	if diff := cmp.Diff([]string{"plan#1:succeeded", "research#1:succeeded", "analyze#1:succeeded", "synthesize#1:succeeded", "execute#1:running"},
		f.attempts("20261122_140000")); diff != "" {
		t.Fatalf("state after the crash (-want +got):\n%s", diff)
	}
	f.clock.Advance(7 * time.Hour)
}

// strategyPosts returns "key status" for each POST /v1/strategies the
// service received.
func strategyPosts(es *execsvc.Mock) []string {
	var out []string
	for _, r := range es.Requests() {
		if r.Method == "POST" && r.Path == "/v1/strategies" {
			out = append(out, r.IdempotencyKey+" "+itoa(r.StatusCode))
		}
	}
	return out
}

// TestAmbiguousHandOffIsResolvedWithTheKey: the runner stops while the
// service takes its strategy and starts again after the strategy's window.
// It sends the strategy again with the same key, learns from the replay
// that the service has it, and the cycle goes on to execution and
// evaluation; the service still holds one strategy.
func TestAmbiguousHandOffIsResolvedWithTheKey(t *testing.T) {
	f := newFixture(t, execsvc.MockOptions{}, nil)
	crashMidHandOff(t, f, true)

	e := f.engine()
	c := f.runOnce(e)
	if c.Status != agentrunner.CycleCompleted {
		t.Fatalf("cycle %s: %q, want completed", c.Status, c.Error)
	}
	want := []string{"plan#1:succeeded", "research#1:succeeded", "analyze#1:succeeded", "synthesize#1:succeeded",
		"execute#1:failed:interrupted", "execute#2:succeeded", "evaluate#1:succeeded"}
	if diff := cmp.Diff(want, f.attempts(c.ID)); diff != "" {
		t.Errorf("attempts (-want +got):\n%s", diff)
	}
	posts := strategyPosts(f.es)
	if len(posts) != 2 || !strings.HasSuffix(posts[0], " 202") || posts[1] != strings.TrimSuffix(posts[0], "202")+"200" {
		t.Errorf("POSTs %q, want one taken (202) and its replay under the same key (200)", posts)
	}
	if n := len(f.es.Strategies()); n != 1 {
		t.Errorf("the service holds %d strategies, want 1", n)
	}
	key := strings.Fields(posts[0])[0]
	if msg, err := f.store.OutboxMessage(context.Background(), key); err != nil || msg.DeliveredAt.IsZero() {
		t.Errorf("outbox message %s: %+v, %v; want it delivered", key, msg, err)
	}
	notified := f.eventsOf(execution.EventExecutionNotified)
	if len(notified) != 1 || notified[0].Details["replayed"] != true {
		t.Errorf("execution.notified events %+v, want one, replayed", notified)
	}
	// The service trades that strategy, whose window is over: it is the one
	// the expiry watch flags.
	if _, err := e.CheckStrategy(context.Background()); err != nil {
		t.Fatal(err)
	}
	if n := len(f.eventsOf(execution.EventStrategyExpired)); n != 1 {
		t.Errorf("%d strategy.expired events, want 1 for the strategy the service has", n)
	}
}

// TestLostHandOffIsExpired: the runner stops before its POST reaches the
// service and starts again after the strategy's window. The resend with
// the same key is refused as expired, so the strategy was not handed over:
// the step fails as expired and the cycle halts, as for any expired
// strategy, and the service takes nothing.
func TestLostHandOffIsExpired(t *testing.T) {
	f := newFixture(t, execsvc.MockOptions{}, nil)
	crashMidHandOff(t, f, false)
	f.onRun = func(inv *agentrunner.Invocation) {
		if inv.Step == "evaluate" {
			t.Error("the cycle went on after a strategy the service does not have expired")
		}
	}
	c := f.runOnce(f.engine())
	if c.Status != agentrunner.CycleHalted || !strings.Contains(c.Error, "strategy expired at 2026-11-22T20:00:00Z, before it could be handed over") ||
		!strings.Contains(c.Error, "422 strategy_expired") {
		t.Fatalf("cycle %s: %q, want halted: expired, refused by the service", c.Status, c.Error)
	}
	posts := strategyPosts(f.es)
	if len(posts) != 1 || !strings.HasSuffix(posts[0], " 422") {
		t.Errorf("POSTs %q, want one resend, refused with 422", posts)
	}
	if n := len(f.es.Strategies()); n != 0 {
		t.Errorf("the service took %d strategies, want none", n)
	}
	if msg, err := f.store.OutboxMessage(context.Background(), strings.Fields(posts[0])[0]); err != nil || !msg.DeliveredAt.IsZero() {
		t.Errorf("outbox message: %+v, %v; want it undelivered", msg, err)
	}
}

// flakyExec fails the first n submissions as unreachable.
type flakyExec struct {
	ExecutionService
	n *int
}

func (f flakyExec) Submit(ctx context.Context, key string, s execsvc.Submission) (*execsvc.Receipt, error) {
	if *f.n > 0 {
		*f.n--
		return nil, agentrunner.Fail(agentrunner.ClassUnavailable, "submit strategy: connection refused")
	}
	return f.ExecutionService.Submit(ctx, key, s)
}

// TestAmbiguousHandOffWaitsForTheService: after the window, a service that
// cannot be reached has not said whether it has the strategy, so nothing
// is declared expired; the step retries until the service answers.
func TestAmbiguousHandOffWaitsForTheService(t *testing.T) {
	f := newFixture(t, execsvc.MockOptions{}, nil)
	crashMidHandOff(t, f, true)
	down := 1
	e := f.engineWith(func(o *Options) { o.Exec = flakyExec{ExecutionService: o.Exec, n: &down} })
	c := f.runOnce(e)
	if c.Status != agentrunner.CycleCompleted {
		t.Fatalf("cycle %s: %q, want completed", c.Status, c.Error)
	}
	want := []string{"plan#1:succeeded", "research#1:succeeded", "analyze#1:succeeded", "synthesize#1:succeeded",
		"execute#1:failed:interrupted", "execute#2:failed:unavailable", "execute#3:succeeded", "evaluate#1:succeeded"}
	if diff := cmp.Diff(want, f.attempts(c.ID)); diff != "" {
		t.Errorf("attempts (-want +got):\n%s", diff)
	}
}

// windowlessStore serves strategy outbox messages as a runner that did not
// send valid_until stored them.
type windowlessStore struct{ agentrunner.Store }

func (s windowlessStore) OutboxMessage(ctx context.Context, key string) (*agentrunner.OutboxMessage, error) {
	m, err := s.Store.OutboxMessage(ctx, key)
	if err != nil || m.Kind != execution.OutboxStrategy {
		return m, err
	}
	sub, err := execsvc.ParseSubmission(m.Payload)
	if err != nil {
		return nil, err
	}
	sub.ValidUntil = time.Time{}
	m.Payload, err = sub.Body()
	return m, err
}

// TestResendOfAWindowlessMessageCarriesTheWindow: a message stored without
// valid_until is resent with the window read from the strategy, so a
// service that never received it refuses it rather than taking an expired
// strategy.
func TestResendOfAWindowlessMessageCarriesTheWindow(t *testing.T) {
	f := newFixture(t, execsvc.MockOptions{}, nil)
	crashMidHandOff(t, f, false)
	e := f.engineWith(func(o *Options) { o.Store = windowlessStore{o.Store} })
	c := f.runOnce(e)
	if c.Status != agentrunner.CycleHalted || !strings.Contains(c.Error, "strategy expired") {
		t.Fatalf("cycle %s: %q, want halted: expired", c.Status, c.Error)
	}
	if n := len(f.es.Strategies()); n != 0 {
		t.Errorf("the service took %d expired strategies, want none", n)
	}
}
