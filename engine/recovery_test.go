package engine

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentrunner/agentrunner"
	"github.com/agentrunner/agentrunner/config"
	"github.com/agentrunner/agentrunner/execsvc"
	"github.com/agentrunner/agentrunner/runtime/mock"
	"github.com/agentrunner/agentrunner/step/execution"
	"github.com/agentrunner/agentrunner/webhook"

	"github.com/google/go-cmp/cmp"
)

const hookSecret = "a-webhook-secret-of-32-characters"

// receiver is an operator's webhook endpoint that can be down.
type receiver struct {
	mu       sync.Mutex
	down     bool
	received map[string]int // accepted deliveries per idempotency key
	badSigs  int
	now      func() time.Time
}

func (r *receiver) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	body, _ := io.ReadAll(req.Body)
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.down {
		http.Error(w, "down for maintenance", http.StatusServiceUnavailable)
		return
	}
	if err := webhook.Verify([]byte(hookSecret), body, req.Header.Get(webhook.SignatureHeader), r.now(), time.Hour); err != nil {
		r.badSigs++
		http.Error(w, "bad signature", http.StatusUnauthorized)
		return
	}
	r.received[req.Header.Get(webhook.IdempotencyHeader)]++
	w.WriteHeader(http.StatusAccepted)
}

// TestWebhookOutageLosesNothing: while the operators' endpoint is down,
// notifications queue up in the outbox; after it recovers each arrives,
// exactly once, with a valid signature.
func TestWebhookOutageLosesNothing(t *testing.T) {
	rcv := &receiver{down: true, received: map[string]int{}}
	srv := httptest.NewServer(rcv)
	defer srv.Close()
	f := newFixture(t, execsvc.MockOptions{}, func(c *config.Config) {
		c.Escalation.Policy = config.PolicyFail
		c.Escalation.Webhook = config.Webhook{URL: srv.URL + "/hooks/agentrunner", SecretEnv: "HOOK_SECRET", Timeout: config.Duration(time.Second)}
	})
	rcv.now = f.clock.Now
	sender, err := webhook.NewSender(srv.URL+"/hooks/agentrunner", []byte(hookSecret), time.Second)
	if err != nil {
		t.Fatal(err)
	}
	d := &Dispatcher{Store: f.store, Clock: f.clock, Log: slog.New(slog.DiscardHandler), Deliver: map[string]Deliver{
		agentrunner.OutboxWebhook: func(ctx context.Context, m *agentrunner.OutboxMessage, now time.Time) ([]byte, error) {
			return nil, sender.Deliver(ctx, m.Key, webhook.KindEscalation, m.Payload, now)
		},
	}}
	// Three cycles fail for good, each escalating to the operators.
	e := f.engine()
	for i := 0; i < 3; i++ {
		if i > 0 {
			f.toNextCycle()
		}
		f.fail("research", fourCrashes...)
		f.mu.Lock()
		f.faults = map[string][]mock.Fault{"research": fourCrashes}
		f.mu.Unlock()
		if c := f.runOnce(e); c.Status != agentrunner.CycleFailed {
			t.Fatalf("cycle %d: %s", i, c.Status)
		}
		f.faults = map[string][]mock.Fault{}
		if n, err := d.DeliverDue(context.Background()); err != nil || n != 0 {
			t.Fatalf("delivered %d while the receiver is down: %v", n, err)
		}
	}
	pending, _ := f.store.Outbox(context.Background(), agentrunner.OutboxFilter{Due: f.clock.Now().Add(24 * time.Hour), Kind: agentrunner.OutboxWebhook})
	if len(pending) != 3 {
		t.Fatalf("%d notifications queued, want 3", len(pending))
	}
	for _, m := range pending {
		if m.Attempts == 0 || !strings.Contains(m.LastError, "503") || !m.NextAttemptAt.After(f.clock.Now()) {
			t.Errorf("queued notification %s: %d tries, %q, next %v", m.Key, m.Attempts, m.LastError, m.NextAttemptAt)
		}
	}

	rcv.mu.Lock()
	rcv.down = false
	rcv.mu.Unlock()
	// Not due yet: nothing is sent before the backoff ends.
	if n, _ := d.DeliverDue(context.Background()); n != 0 {
		t.Errorf("%d delivered before their next attempt", n)
	}
	f.clock.Advance(2 * time.Hour)
	if n, err := d.DeliverDue(context.Background()); err != nil || n != 3 {
		t.Fatalf("after the recovery: %d delivered, %v; want 3", n, err)
	}
	f.clock.Advance(2 * time.Hour)
	if n, _ := d.DeliverDue(context.Background()); n != 0 {
		t.Errorf("%d delivered again", n)
	}
	rcv.mu.Lock()
	defer rcv.mu.Unlock()
	if len(rcv.received) != 3 || rcv.badSigs != 0 {
		t.Fatalf("receiver got %v, %d bad signatures; want 3 notifications, all signed", rcv.received, rcv.badSigs)
	}
	for key, n := range rcv.received {
		if n != 1 || !strings.HasPrefix(key, "escalation/") {
			t.Errorf("notification %s arrived %d times", key, n)
		}
	}
}

// TestStrategyExpiryTriggersSafeModeOnce: once the strategy's validity
// window ends with no newer strategy, the strategy is flagged and the
// Execution Service told to enter safe mode, exactly once (FR-052..054).
func TestStrategyExpiryTriggersSafeModeOnce(t *testing.T) {
	f := newFixture(t, execsvc.MockOptions{}, nil)
	e := f.engine()
	f.runOnce(e)
	client, _ := execsvc.NewClient(f.ws.Config.ExecutionService.URL, "", time.Second)
	d := &Dispatcher{Store: f.store, Clock: f.clock, Log: slog.New(slog.DiscardHandler), Deliver: map[string]Deliver{
		execution.OutboxSafeMode: func(ctx context.Context, m *agentrunner.OutboxMessage, now time.Time) ([]byte, error) {
			req, err := execsvc.ParseSafeModeRequest(m.Payload)
			if err != nil {
				return nil, err
			}
			_, err = client.EnterSafeMode(ctx, m.Key, req)
			return nil, err
		},
	}}
	expires, err := e.CheckStrategy(context.Background())
	if err != nil || !expires.Equal(t0.Add(6*time.Hour)) {
		t.Fatalf("CheckStrategy = %v, %v; want the strategy's valid_until", expires, err)
	}
	if d.DeliverDue(context.Background()); f.es.SafeMode().SafeMode {
		t.Fatal("safe mode while the strategy is valid")
	}
	f.clock.Advance(7 * time.Hour)
	for i := 0; i < 3; i++ {
		if _, err := e.CheckStrategy(context.Background()); err != nil {
			t.Fatal(err)
		}
		if _, err := d.DeliverDue(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	// A restarted runner checks again and must not signal again.
	if _, err := f.engine().CheckStrategy(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, err := d.DeliverDue(context.Background()); err != nil {
		t.Fatal(err)
	}
	if st := f.es.SafeMode(); !st.SafeMode || st.Reason != execsvc.ReasonStrategyExpired {
		t.Errorf("Execution Service: %+v, want safe mode for an expired strategy", st)
	}
	posts := 0
	for _, r := range f.es.Requests() {
		if r.Method == "POST" && r.Path == "/v1/safe-mode" {
			posts++
		}
	}
	if posts != 1 || len(f.eventsOf(execution.EventStrategyExpired)) != 1 {
		t.Errorf("%d safe-mode orders and %d expiry events, want 1 each", posts, len(f.eventsOf(execution.EventStrategyExpired)))
	}
}

// TestNewerStrategyPreventsSafeMode: a strategy replaced in time never
// expires.
func TestNewerStrategyPreventsSafeMode(t *testing.T) {
	f := newFixture(t, execsvc.MockOptions{}, nil)
	e := f.engine()
	f.runOnce(e)
	f.clock.Advance(5 * time.Hour)
	f.toNextCycle()
	f.runOnce(e) // a new strategy, valid 6h from now
	f.clock.Advance(2 * time.Hour)
	if _, err := e.CheckStrategy(context.Background()); err != nil {
		t.Fatal(err)
	}
	if n := len(f.eventsOf(execution.EventStrategyExpired)); n != 0 {
		t.Errorf("%d expiry events though a newer strategy is valid", n)
	}
}

// stuck is an agent that ignores its deadline.
type stuck struct {
	once    *sync.Once
	entered chan struct{}
	release chan struct{}
}

func (s stuck) Run(ctx context.Context, inv *agentrunner.Invocation) (*agentrunner.RunResult, error) {
	s.once.Do(func() { close(s.entered) })
	<-s.release
	return nil, agentrunner.Fail(agentrunner.ClassCrash, "released")
}

// TestWatchdogSeesAStalledEngine: an engine stuck past its operation's
// deadline is reported, so the process can exit for a supervisor to
// restart it.
func TestWatchdogSeesAStalledEngine(t *testing.T) {
	f := newFixture(t, execsvc.MockOptions{}, func(c *config.Config) { c.Agents["plan"].Timeout = config.Duration(time.Minute) })
	s := stuck{once: &sync.Once{}, entered: make(chan struct{}), release: make(chan struct{})}
	e := f.engineWith(func(o *Options) { o.Runtimes["mock"] = s })
	done := make(chan struct{})
	go func() {
		defer close(done)
		e.RunOnce(context.Background())
	}()
	<-s.entered
	if late := e.Stalled(); late != 0 {
		t.Fatalf("stalled by %v while within the attempt's time", late)
	}
	var late time.Duration
	Watchdog(context.Background(), e, 5*time.Minute, time.Minute, func(l time.Duration) { late = l })
	if late <= 5*time.Minute {
		t.Errorf("the watchdog reported %v, want a stall beyond the 5m grace", late)
	}
	if now := f.clock.Now(); now.Sub(t0) < 7*time.Minute {
		t.Errorf("reported after %v, before timeout (1m) + slack (1m) + kill grace + grace (5m)", now.Sub(t0))
	}
	close(s.release)
	<-done
}

// TestCallbackEndsTheExecutionAtOnce: the Execution Service's callback
// (a command from the API) reports completion without waiting for a poll.
// It arrives before the execute step starts, and waits for it.
func TestCallbackEndsTheExecutionAtOnce(t *testing.T) {
	f := newFixture(t, execsvc.MockOptions{CompletedAfter: 1 << 30}, func(c *config.Config) {
		c.ExecutionService.PollInterval = config.Duration(10 * time.Minute)
	})
	e := f.engine()
	f.onRun = func(inv *agentrunner.Invocation) {
		if inv.Step == "synthesize" {
			f.command(e, execution.CommandExecutionStatus, "execution-service", map[string]any{"strategy_id": "strat-000001", "status": "completed"})
		}
	}
	c := f.runOnce(e)
	if c.Status != agentrunner.CycleCompleted {
		t.Fatalf("cycle %s: %s", c.Status, c.Error)
	}
	for _, r := range f.es.Requests() {
		if r.Method == "GET" && strings.HasPrefix(r.Path, "/v1/strategies/") {
			t.Errorf("polled %s although the callback said completed", r.Path)
		}
	}
	final := f.eventsOf(execution.EventExecutionStatus)
	if last := final[len(final)-1]; last.Details["status"] != "completed" {
		t.Errorf("final execution status %+v", last.Details)
	}
	if pending, _ := f.store.PendingCommands(context.Background()); len(pending) != 0 {
		t.Errorf("the callback was not consumed: %+v", pending)
	}
}

// TestLateCallbackIsConsumed: a callback that arrives when no execute step
// is running (the step ended on a poll or its timeout, or the strategy is
// not ours) is consumed as ignored, not left pending forever.
func TestLateCallbackIsConsumed(t *testing.T) {
	f := newFixture(t, execsvc.MockOptions{}, nil)
	e := f.engine()
	if c := f.runOnce(e); c.Status != agentrunner.CycleCompleted {
		t.Fatalf("cycle %s: %s", c.Status, c.Error)
	}
	f.command(e, execution.CommandExecutionStatus, "execution-service", map[string]any{"strategy_id": "strat-000001", "status": "completed"})
	f.clock.Advance(24 * time.Hour)
	if c := f.runOnce(e); c.Status != agentrunner.CycleCompleted {
		t.Fatalf("second cycle %s: %s", c.Status, c.Error)
	}
	if pending, _ := f.store.PendingCommands(context.Background()); len(pending) != 0 {
		t.Errorf("the late callback is still pending: %+v", pending)
	}
	want := []string{"execution.status:ignored: no strategy is being followed (callback about strat-000001)"}
	if diff := cmp.Diff(want, f.audit()); diff != "" {
		t.Errorf("audit (-want +got):\n%s", diff)
	}
}

// TestACycleDirectoryTheStoreDoesNotKnowIsNotReused: after a restore from
// an older backup, the directory of a cycle the backup does not hold is
// still there; a new cycle starting in that second takes the next one, so
// the lost cycle's files never mix with the new cycle's.
func TestACycleDirectoryTheStoreDoesNotKnowIsNotReused(t *testing.T) {
	f := newFixture(t, execsvc.MockOptions{}, nil)
	lost := f.ws.Layout.Cycle(t0.Format("20060102_150405"))
	if err := os.MkdirAll(lost, 0o755); err != nil {
		t.Fatal(err)
	}
	stale := filepath.Join(lost, "plan.md")
	if err := os.WriteFile(stale, []byte("a lost cycle's plan\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	c := f.runOnce(f.engine())
	if want := t0.Add(time.Second).Format("20060102_150405"); c.ID != want {
		t.Errorf("the new cycle is %s, want %s (the next free second)", c.ID, want)
	}
	if got, _ := os.ReadFile(stale); string(got) != "a lost cycle's plan\n" {
		t.Errorf("the lost cycle's file was changed: %q", got)
	}
}
