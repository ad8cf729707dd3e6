package tool

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentrunner/agentrunner"
	"github.com/agentrunner/agentrunner/internal/clocktest"
	"github.com/google/go-cmp/cmp"
)

var epoch = time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)

// recorder collects the executor's events.
type recorder struct {
	mu     sync.Mutex
	events []*agentrunner.Event
}

func (r *recorder) record(ev *agentrunner.Event) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, ev)
}

func (r *recorder) all() []*agentrunner.Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]*agentrunner.Event(nil), r.events...)
}

func (r *recorder) last(t *testing.T) *agentrunner.Event {
	t.Helper()
	evs := r.all()
	if len(evs) == 0 {
		t.Fatal("no event recorded")
	}
	return evs[len(evs)-1]
}

// fixture is an executor with a fake clock and one scope of its tools.
type fixture struct {
	clock  *clocktest.Clock
	events *recorder
	exec   *Executor
	scope  *Scope
}

func newFixture(t *testing.T, opts Options, tools ...Local) *fixture {
	t.Helper()
	f := &fixture{clock: clocktest.New(epoch), events: &recorder{}}
	reg := NewRegistry()
	var names []string
	for _, l := range tools {
		if err := reg.Register(l.Spec, l.Handler); err != nil {
			t.Fatal(err)
		}
		names = append(names, l.Spec.Name)
	}
	if opts.Clock == nil {
		opts.Clock = f.clock
	}
	opts.Record = f.events.record
	f.exec = NewExecutor(reg, opts)
	f.scope = f.exec.Scope(names)
	if err := f.scope.Err(); err != nil {
		t.Fatal(err)
	}
	return f
}

func (f *fixture) call(name, args string) agentrunner.ToolResult {
	return f.scope.Execute(context.Background(), agentrunner.ToolCall{ID: "call-1", Name: name, Arguments: json.RawMessage(args)})
}

// counting wraps a handler and counts its calls.
type counting struct {
	n atomic.Int32
	h HandlerFunc
}

func (c *counting) Call(ctx context.Context, args json.RawMessage) (string, error) {
	c.n.Add(1)
	return c.h(ctx, args)
}

func count(h HandlerFunc) *counting { return &counting{h: h} }

const assetSchema = `{"type":"object","properties":{"asset":{"type":"string"},"days":{"type":"integer","minimum":1}},"required":["asset"],"additionalProperties":false}`

func TestExecuteRefusesBadCalls(t *testing.T) {
	h := count(func(context.Context, json.RawMessage) (string, error) { return "ok", nil })
	f := newFixture(t, Options{},
		Local{Spec{Name: "price", Parameters: json.RawMessage(assetSchema)}, h},
		Local{Spec{Name: "news"}, echo()})
	tests := []struct {
		name, tool, args, want string
	}{
		{"unknown tool", "prices", `{}`, `unknown tool "prices"; available tools: news, price`},
		{"invalid JSON", "price", `{"asset":`, "price: arguments are not valid JSON: unexpected EOF"},
		{"trailing data", "price", `{"asset":"BTC"} x`, "price: arguments are not valid JSON: unexpected data after the JSON value"},
		{"array", "price", `["BTC"]`, "price: arguments must be a JSON object, got an array"},
		{"string", "price", `"BTC"`, "price: arguments must be a JSON object, got a string"},
		{"number", "price", `1`, "price: arguments must be a JSON object, got a number"},
		{"empty is no arguments", "price", ``, "price: invalid arguments:\n- at (root): missing property 'asset'"},
		{"null is no arguments", "price", `null`, "price: invalid arguments:\n- at (root): missing property 'asset'"},
		{"every violation with its pointer", "price", `{"days":0,"extra":true}`,
			"price: invalid arguments:\n" +
				"- at (root): additional properties 'extra' not allowed\n" +
				"- at (root): missing property 'asset'\n" +
				"- at /days: minimum: got 0, want 1"},
		{"nested pointer", "price", `{"asset":7,"days":"x"}`,
			"price: invalid arguments:\n- at /asset: got number, want string\n- at /days: got string, want integer"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := f.call(tc.tool, tc.args)
			if diff := cmp.Diff(agentrunner.ToolResult{IsError: true, Message: tc.want}, got); diff != "" {
				t.Errorf("result (-want +got):\n%s", diff)
			}
			ev := f.events.last(t)
			if ev.Level != agentrunner.LevelWarn || ev.Details["is_error"] != true || ev.Details["tries"] != 0 {
				t.Errorf("event level %s details %v, want a warning with is_error and 0 tries", ev.Level, ev.Details)
			}
		})
	}
	if n := h.n.Load(); n != 0 {
		t.Errorf("handler called %d times for refused calls", n)
	}
	if got := f.call("news", ""); got.IsError || got.Message != "{}" {
		t.Errorf("news with empty arguments = %+v, want the handler to get {}", got)
	}
}

func TestExecuteUnknownToolWithoutTools(t *testing.T) {
	scope := NewExecutor(nil, Options{}).Scope(nil)
	got := scope.Execute(context.Background(), agentrunner.ToolCall{Name: strings.Repeat("x", 300)})
	if !got.IsError || !strings.Contains(got.Message, "no tools are available") || len(got.Message) > 300 {
		t.Errorf("result %+v, want a bounded unknown-tool error", got)
	}
}

func TestExecuteSuccessEvent(t *testing.T) {
	f := newFixture(t, Options{}, Local{Spec{Name: "price", Parameters: json.RawMessage(assetSchema)},
		HandlerFunc(func(_ context.Context, args json.RawMessage) (string, error) {
			return "price of " + string(args), nil
		})})
	got := f.scope.Execute(context.Background(), agentrunner.ToolCall{
		ID: "c1", Name: "price", Arguments: json.RawMessage(` {"asset":"BTC"} `),
		Agent: "research", Step: "research", CycleID: "20250101_000000", Attempt: 2,
	})
	if diff := cmp.Diff(agentrunner.ToolResult{Message: `price of {"asset":"BTC"}`}, got); diff != "" {
		t.Errorf("result (-want +got):\n%s", diff)
	}
	want := &agentrunner.Event{
		Timestamp: epoch, Type: EventToolCall, Agent: "research", Step: "research", CycleID: "20250101_000000",
		Level: agentrunner.LevelInfo,
		Details: map[string]any{
			"tool": "price", "call_id": "c1", "arguments": `{"asset":"BTC"}`, "duration_ms": int64(0),
			"result_bytes": len(got.Message), "is_error": false, "tries": 1, "attempt": 2,
		},
	}
	if diff := cmp.Diff([]*agentrunner.Event{want}, f.events.all()); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
}

func TestExecuteFailuresAndRetries(t *testing.T) {
	errUpstream := errors.New("upstream answered 503")
	tests := []struct {
		name      string
		spec      Spec
		results   []error // per try; the last one repeats
		want      agentrunner.ToolResult
		wantTries int
		wantWaits []time.Duration
	}{
		{
			name:    "handler error is not retried",
			spec:    Spec{Retries: 3, Backoff: time.Second},
			results: []error{errors.New("asset FOO is unknown")},
			want:    agentrunner.ToolResult{IsError: true, Message: "t: asset FOO is unknown"}, wantTries: 1,
		},
		{
			name:    "tool name is not repeated",
			spec:    Spec{},
			results: []error{errors.New("t: asset FOO is unknown")},
			want:    agentrunner.ToolResult{IsError: true, Message: "t: asset FOO is unknown"}, wantTries: 1,
		},
		{
			name:    "transient error retried then success",
			spec:    Spec{Retries: 3, Backoff: time.Second},
			results: []error{Transient(errUpstream), Transient(errUpstream), nil},
			want:    agentrunner.ToolResult{Message: "ok 3"}, wantTries: 3,
			wantWaits: []time.Duration{time.Second, 2 * time.Second},
		},
		{
			name:    "retries exhausted",
			spec:    Spec{Retries: 2, Backoff: time.Second},
			results: []error{Transient(errUpstream)},
			want:    agentrunner.ToolResult{IsError: true, Message: "t: upstream answered 503 (gave up after 3 tries)"}, wantTries: 3,
			wantWaits: []time.Duration{time.Second, 2 * time.Second},
		},
		{
			name:    "no retries configured",
			spec:    Spec{Backoff: time.Second},
			results: []error{Transient(errUpstream)},
			want:    agentrunner.ToolResult{IsError: true, Message: "t: upstream answered 503"}, wantTries: 1,
		},
		{
			name:    "retry after is honoured instead of the backoff",
			spec:    Spec{Retries: 2, Backoff: time.Second},
			results: []error{RetryAfter(errors.New("rate limited"), 7*time.Second), Transient(errUpstream), nil},
			want:    agentrunner.ToolResult{Message: "ok 3"}, wantTries: 3,
			wantWaits: []time.Duration{7 * time.Second, 2 * time.Second},
		},
		{
			name:    "zero backoff retries at once",
			spec:    Spec{Retries: 1},
			results: []error{Transient(errUpstream), nil},
			want:    agentrunner.ToolResult{Message: "ok 2"}, wantTries: 2,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var tries atomic.Int32
			spec := tc.spec
			spec.Name = "t"
			f := newFixture(t, Options{}, Local{spec, HandlerFunc(func(context.Context, json.RawMessage) (string, error) {
				n := int(tries.Add(1))
				err := tc.results[min(n, len(tc.results))-1]
				if err != nil {
					return "", err
				}
				return "ok " + string(rune('0'+n)), nil
			})})
			got := f.call("t", `{}`)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("result (-want +got):\n%s", diff)
			}
			if int(tries.Load()) != tc.wantTries {
				t.Errorf("handler ran %d times, want %d", tries.Load(), tc.wantTries)
			}
			if diff := cmp.Diff(tc.wantWaits, f.clock.Waits()); diff != "" {
				t.Errorf("waits (-want +got):\n%s", diff)
			}
			ev := f.events.last(t)
			if ev.Details["tries"] != tc.wantTries {
				t.Errorf("event tries %v, want %d", ev.Details["tries"], tc.wantTries)
			}
			var waited time.Duration
			for _, w := range tc.wantWaits {
				waited += w
			}
			if ev.Details["duration_ms"] != waited.Milliseconds() {
				t.Errorf("event duration_ms %v, want the waits' %d", ev.Details["duration_ms"], waited.Milliseconds())
			}
			if tc.want.IsError && (ev.Level != agentrunner.LevelWarn || ev.Details["error"] != tc.want.Message) {
				t.Errorf("event level %s error %v, want warn and %q", ev.Level, ev.Details["error"], tc.want.Message)
			}
			s := f.exec.Stats()["t"]
			if s.Retries != tc.wantTries-1 || s.Calls != 1 {
				t.Errorf("stats %+v, want 1 call and %d retries", s, tc.wantTries-1)
			}
		})
	}
}

func TestExecuteTimeoutIsRetriedThenReported(t *testing.T) {
	release := make(chan struct{})
	defer close(release)
	handlers := map[string]HandlerFunc{
		"honours context": func(ctx context.Context, _ json.RawMessage) (string, error) {
			<-ctx.Done()
			return "", ctx.Err()
		},
		"ignores context": func(context.Context, json.RawMessage) (string, error) {
			<-release
			return "too late", nil
		},
	}
	for name, h := range handlers {
		t.Run(name, func(t *testing.T) {
			c := count(h)
			f := newFixture(t, Options{}, Local{Spec{Name: "slow", Timeout: 20 * time.Millisecond, Retries: 1, Backoff: time.Second}, c})
			got := f.call("slow", `{}`)
			want := agentrunner.ToolResult{IsError: true, Message: "slow: timed out after 20ms (gave up after 2 tries)"}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("result (-want +got):\n%s", diff)
			}
			if n := c.n.Load(); n != 2 {
				t.Errorf("handler ran %d times, want 2", n)
			}
			s := f.exec.Stats()["slow"]
			if s.Timeouts != 2 || s.Retries != 1 || s.Errors != 1 || s.LastError != want.Message {
				t.Errorf("stats %+v, want 2 timeouts, 1 retry, 1 error", s)
			}
		})
	}
}

func TestExecuteRetryAfterPastDeadlineIsNotWaited(t *testing.T) {
	c := count(func(context.Context, json.RawMessage) (string, error) {
		return "", RetryAfter(errors.New("rate limited"), time.Hour)
	})
	f := newFixture(t, Options{}, Local{Spec{Name: "t", Retries: 3, Backoff: time.Second}, c})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	got := f.scope.Execute(ctx, agentrunner.ToolCall{Name: "t"})
	want := agentrunner.ToolResult{IsError: true, Message: "t: rate limited (not retried: the next try, in 1h0m0s, would start after the deadline)"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("result (-want +got):\n%s", diff)
	}
	if n := c.n.Load(); n != 1 || len(f.clock.Waits()) != 0 {
		t.Errorf("handler ran %d times with waits %v, want 1 and none", n, f.clock.Waits())
	}
}

func TestExecuteParentCancellationStopsAtOnce(t *testing.T) {
	t.Run("cancelled during the try", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		c := count(func(context.Context, json.RawMessage) (string, error) {
			cancel()
			return "", Transient(errors.New("connection reset"))
		})
		f := newFixture(t, Options{}, Local{Spec{Name: "t", Retries: 3, Backoff: time.Second, BreakerFailures: 1, BreakerOpenFor: time.Minute}, c})
		got := f.scope.Execute(ctx, agentrunner.ToolCall{Name: "t"})
		if diff := cmp.Diff(agentrunner.ToolResult{IsError: true, Message: "t: the call was cancelled"}, got); diff != "" {
			t.Errorf("result (-want +got):\n%s", diff)
		}
		if n := c.n.Load(); n != 1 || len(f.clock.Waits()) != 0 {
			t.Errorf("handler ran %d times with waits %v, want once and no wait", n, f.clock.Waits())
		}
		if s := f.exec.Stats()["t"].BreakerState; s != BreakerClosed {
			t.Errorf("breaker %s after a cancelled call, want closed: the tool is not at fault", s)
		}
	})
	t.Run("cancelled before the call", func(t *testing.T) {
		c := count(func(context.Context, json.RawMessage) (string, error) { return "ok", nil })
		f := newFixture(t, Options{}, Local{Spec{Name: "t"}, c})
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		got := f.scope.Execute(ctx, agentrunner.ToolCall{Name: "t"})
		if !got.IsError || c.n.Load() != 0 {
			t.Errorf("result %+v after %d handler calls, want an error without calling", got, c.n.Load())
		}
	})
	t.Run("cancelled while a handler ignores it", func(t *testing.T) {
		release := make(chan struct{})
		defer close(release)
		entered := make(chan struct{})
		f := newFixture(t, Options{}, Local{Spec{Name: "t", Timeout: time.Hour, Retries: 3}, HandlerFunc(func(context.Context, json.RawMessage) (string, error) {
			close(entered)
			<-release
			return "late", nil
		})})
		ctx, cancel := context.WithCancel(context.Background())
		go func() { <-entered; cancel() }()
		got := f.scope.Execute(ctx, agentrunner.ToolCall{Name: "t"})
		if diff := cmp.Diff(agentrunner.ToolResult{IsError: true, Message: "t: the call was cancelled"}, got); diff != "" {
			t.Errorf("result (-want +got):\n%s", diff)
		}
	})
	t.Run("deadline passed", func(t *testing.T) {
		f := newFixture(t, Options{}, Local{Spec{Name: "t", Timeout: time.Hour}, HandlerFunc(func(ctx context.Context, _ json.RawMessage) (string, error) {
			<-ctx.Done()
			return "", ctx.Err()
		})})
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
		defer cancel()
		got := f.scope.Execute(ctx, agentrunner.ToolCall{Name: "t"})
		want := agentrunner.ToolResult{IsError: true, Message: "t: the call was stopped: the attempt's deadline passed"}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("result (-want +got):\n%s", diff)
		}
	})
}

func TestExecutePanicIsRecovered(t *testing.T) {
	f := newFixture(t, Options{Secrets: []string{"sk-live-123"}}, Local{Spec{Name: "boom", Retries: 2}, HandlerFunc(func(context.Context, json.RawMessage) (string, error) {
		var m map[string]int
		m["sk-live-123"]++ // nil map: panics
		return "", nil
	})})
	got := f.call("boom", `{}`)
	if diff := cmp.Diff(agentrunner.ToolResult{IsError: true, Message: "internal error in tool boom"}, got); diff != "" {
		t.Errorf("result (-want +got):\n%s", diff)
	}
	ev := f.events.last(t)
	stack, _ := ev.Details["stack"].(string)
	if !strings.Contains(stack, "panic: assignment to entry in nil map") || !strings.Contains(stack, "executor_test.go") {
		t.Errorf("event stack %q, want the panic and its stack", stack)
	}
	if ev.Level != agentrunner.LevelError || ev.Details["tries"] != 1 {
		t.Errorf("event level %s tries %v, want error level and no retry", ev.Level, ev.Details["tries"])
	}
	if s := f.exec.Stats()["boom"]; s.Errors != 1 || strings.Contains(s.LastError, "goroutine") {
		t.Errorf("stats %+v", s)
	}
}

func TestExecuteTruncatesResults(t *testing.T) {
	f := newFixture(t, Options{MaxResultBytes: 11},
		Local{Spec{Name: "big"}, HandlerFunc(func(context.Context, json.RawMessage) (string, error) {
			return strings.Repeat("ü", 10), nil // 20 bytes
		})},
		Local{Spec{Name: "small"}, HandlerFunc(func(context.Context, json.RawMessage) (string, error) {
			return "12345678901", nil
		})},
		Local{Spec{Name: "bad"}, HandlerFunc(func(context.Context, json.RawMessage) (string, error) {
			return "", errors.New("this error is long")
		})})
	tests := []struct{ tool, want string }{
		{"big", "üüüüü\n[truncated: the result has 20 bytes; only the first 10 are shown]"},
		{"small", "12345678901"},
		{"bad", "bad: this e\n[truncated: the result has 23 bytes; only the first 11 are shown]"},
	}
	for _, tc := range tests {
		got := f.call(tc.tool, `{}`)
		if got.Message != tc.want {
			t.Errorf("%s: message %q, want %q", tc.tool, got.Message, tc.want)
		}
		if ev := f.events.last(t); ev.Details["result_bytes"] != len(tc.want) {
			t.Errorf("%s: result_bytes %v, want %d", tc.tool, ev.Details["result_bytes"], len(tc.want))
		}
	}
}

func TestExecuteRedactsSecrets(t *testing.T) {
	secrets := []string{"sk-SECRET", `pa"ss`, ""}
	f := newFixture(t, Options{Secrets: secrets},
		Local{Spec{Name: "leaky"}, HandlerFunc(func(_ context.Context, args json.RawMessage) (string, error) {
			if strings.Contains(string(args), "fail") {
				return "", errors.New("upstream refused key sk-SECRET")
			}
			return "used key sk-SECRET and " + `pa"ss`, nil
		})})
	got := f.call("leaky", `{"q":"sk-SECRET","api_key":"other-key","nested":{"Authorization":"Bearer xyz","keep":1.50},"list":[{"access_token":3}],"p":"pa\"ss"}`)
	if want := "used key [redacted] and [redacted]"; got.Message != want {
		t.Errorf("result %q, want %q", got.Message, want)
	}
	wantArgs := `{"api_key":"[redacted]","list":[{"access_token":"[redacted]"}],"nested":{"Authorization":"[redacted]","keep":1.50},"p":"[redacted]","q":"[redacted]"}`
	if args := f.events.last(t).Details["arguments"]; args != wantArgs {
		t.Errorf("event arguments\n%v\nwant\n%s", args, wantArgs)
	}

	got = f.call("leaky", `{"q":"fail"}`)
	if want := "leaky: upstream refused key [redacted]"; got.Message != want {
		t.Errorf("error result %q, want %q", got.Message, want)
	}
	ev := f.events.last(t)
	if ev.Details["error"] != "leaky: upstream refused key [redacted]" {
		t.Errorf("event error %v", ev.Details["error"])
	}
	if s := f.exec.Stats()["leaky"]; strings.Contains(s.LastError, "sk-SECRET") {
		t.Errorf("stats last error leaks the secret: %q", s.LastError)
	}

	f.call("leaky", `{"token": "sk-SECRET"`) // not JSON: recorded as text
	if args := f.events.last(t).Details["arguments"]; args != `{"token": "[redacted]"` {
		t.Errorf("event arguments of invalid JSON %q", args)
	}
	for _, ev := range f.events.all() {
		b, err := json.Marshal(ev)
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(b), "SECRET") || strings.Contains(string(b), "other-key") || strings.Contains(string(b), "xyz") {
			t.Errorf("event leaks a secret: %s", b)
		}
	}
}

func TestExecuteStats(t *testing.T) {
	fail := atomic.Bool{}
	f := newFixture(t, Options{},
		Local{Spec{Name: "t", Parameters: json.RawMessage(assetSchema), Retries: 1, Backoff: 2 * time.Second}, HandlerFunc(func(context.Context, json.RawMessage) (string, error) {
			if fail.Load() {
				return "", Transient(errors.New("down"))
			}
			return "ok", nil
		})},
		Local{Spec{Name: "idle"}, echo()})
	f.call("t", `{"asset":"BTC"}`)
	f.call("t", `{}`) // invalid arguments
	fail.Store(true)
	f.call("t", `{"asset":"BTC"}`)
	f.call("nope", `{}`) // unknown tools have no stats

	want := map[string]Stats{
		"t": {
			Calls: 3, Errors: 2, Retries: 1, BreakerState: BreakerClosed,
			TotalDuration: 2 * time.Second, LastError: "t: down (gave up after 2 tries)", LastCall: epoch,
		},
		"idle": {BreakerState: BreakerClosed},
	}
	if diff := cmp.Diff(want, f.exec.Stats()); diff != "" {
		t.Errorf("stats (-want +got):\n%s", diff)
	}
}

func TestBreaker(t *testing.T) {
	var fail atomic.Bool
	fail.Store(true)
	gate := make(chan struct{}) // when set, the handler waits on it
	var gated atomic.Bool
	entered := make(chan struct{}, 1)
	c := count(func(context.Context, json.RawMessage) (string, error) {
		if gated.Load() {
			entered <- struct{}{}
			<-gate
		}
		if fail.Load() {
			return "", Transient(errors.New("upstream down"))
		}
		return "ok", nil
	})
	f := newFixture(t, Options{}, Local{Spec{
		Name: "svc", Parameters: json.RawMessage(assetSchema), Retries: 1, Backoff: 10 * time.Second,
		BreakerFailures: 2, BreakerOpenFor: time.Minute,
	}, c})
	args := `{"asset":"BTC"}`
	state := func() string { return f.exec.Stats()["svc"].BreakerState }

	// Invalid arguments and unknown tools are not the tool's failures.
	for range 5 {
		f.call("svc", `{"asset":1}`)
	}
	if s := state(); s != BreakerClosed {
		t.Fatalf("breaker %s after invalid arguments, want closed", s)
	}

	// Two failed calls (each after its retry) open it.
	f.call("svc", args)
	if s := state(); s != BreakerClosed {
		t.Fatalf("breaker %s after 1 failure, want closed", s)
	}
	f.call("svc", args)
	if s := state(); s != BreakerOpen {
		t.Fatalf("breaker %s after 2 failures, want open", s)
	}
	openedAt := f.clock.Now()
	calls := c.n.Load()

	got := f.call("svc", args)
	want := agentrunner.ToolResult{IsError: true, Message: "circuit open for svc after 2 consecutive failures; retry after " +
		openedAt.Add(time.Minute).Format(time.RFC3339)}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("refused result (-want +got):\n%s", diff)
	}
	if c.n.Load() != calls {
		t.Errorf("the handler ran while the breaker was open")
	}

	// After OpenFor it is half-open; a failed trial opens it again.
	f.clock.Advance(time.Minute)
	if s := state(); s != BreakerHalfOpen {
		t.Fatalf("breaker %s after open_for, want half-open", s)
	}
	got = f.call("svc", args)
	if !got.IsError || c.n.Load() != calls+2 {
		t.Fatalf("trial result %+v after %d handler runs, want a failed trial with its retry", got, c.n.Load()-calls)
	}
	if s := state(); s != BreakerOpen {
		t.Fatalf("breaker %s after a failed trial, want open", s)
	}
	reopened := f.clock.Now()
	got = f.call("svc", args)
	if want := "circuit open for svc after 3 consecutive failures; retry after " + reopened.Add(time.Minute).Format(time.RFC3339); got.Message != want {
		t.Errorf("refusal %q, want %q", got.Message, want)
	}

	// Half-open again: one trial runs, a concurrent call is refused, and
	// the trial's success closes the breaker.
	f.clock.Advance(time.Minute)
	fail.Store(false)
	gated.Store(true)
	trial := make(chan agentrunner.ToolResult)
	go func() { trial <- f.call("svc", args) }()
	<-entered
	gated.Store(false)
	got = f.call("svc", args)
	if want := "circuit open for svc after 3 consecutive failures; a trial call is running, retry after it ends"; got.Message != want {
		t.Errorf("call during the trial: %q, want %q", got.Message, want)
	}
	close(gate)
	if res := <-trial; res.IsError {
		t.Fatalf("trial failed: %+v", res)
	}
	if s := state(); s != BreakerClosed {
		t.Fatalf("breaker %s after a successful trial, want closed", s)
	}
	if got := f.call("svc", args); got.IsError {
		t.Errorf("call after closing: %+v", got)
	}
}

func TestBreakerSchedule(t *testing.T) {
	clock := clocktest.New(epoch)
	b := newBreaker(2, time.Minute)
	step := func(name string, wantState string) {
		t.Helper()
		if got := b.state(clock.Now()); got != wantState {
			t.Errorf("%s: state %s, want %s", name, got, wantState)
		}
	}
	b.failure(clock.Now(), false)
	b.success(false)
	b.failure(clock.Now(), false)
	step("success resets the count", BreakerClosed)
	b.failure(clock.Now(), false)
	step("two in a row", BreakerOpen)
	clock.Advance(30 * time.Second)
	b.failure(clock.Now(), false) // a call that started before it opened
	clock.Advance(30 * time.Second)
	step("late failures do not extend the open time", BreakerHalfOpen)
	trial, refused := b.allow(clock.Now())
	if !trial || refused != nil {
		t.Fatalf("allow in half-open = %v, %+v, want the trial", trial, refused)
	}
	if _, refused := b.allow(clock.Now()); refused == nil || !refused.trialActive {
		t.Fatalf("second allow in half-open = %+v, want refused", refused)
	}
	b.abandon(true)
	if trial, refused := b.allow(clock.Now()); !trial || refused != nil {
		t.Fatalf("allow after an abandoned trial = %v, %+v, want a new trial", trial, refused)
	}
	b.success(true)
	step("successful trial", BreakerClosed)

	off := newBreaker(0, 0)
	for range 10 {
		off.failure(clock.Now(), false)
	}
	if trial, refused := off.allow(clock.Now()); trial || refused != nil || off.state(clock.Now()) != BreakerClosed {
		t.Error("a disabled breaker refused or opened")
	}
}

func TestExecuteRunsCallsConcurrently(t *testing.T) {
	reg := NewRegistry()
	err := reg.Register(Spec{Name: "sleep"}, HandlerFunc(func(ctx context.Context, _ json.RawMessage) (string, error) {
		select {
		case <-time.After(200 * time.Millisecond):
			return "slept", nil
		case <-ctx.Done():
			return "", ctx.Err()
		}
	}))
	if err != nil {
		t.Fatal(err)
	}
	var events atomic.Int32
	scope := NewExecutor(reg, Options{Record: func(*agentrunner.Event) { events.Add(1) }}).Scope([]string{"sleep"})
	start := time.Now()
	var wg sync.WaitGroup
	results := make([]agentrunner.ToolResult, 5)
	for i := range results {
		wg.Go(func() {
			results[i] = scope.Execute(context.Background(), agentrunner.ToolCall{Name: "sleep", Arguments: json.RawMessage(`{}`)})
		})
	}
	wg.Wait()
	if elapsed := time.Since(start); elapsed >= 800*time.Millisecond {
		t.Errorf("5 concurrent 200ms calls took %s, want well under 1s", elapsed)
	}
	for i, r := range results {
		if r.IsError || r.Message != "slept" {
			t.Errorf("call %d: %+v", i, r)
		}
	}
	if events.Load() != 5 {
		t.Errorf("%d events, want 5", events.Load())
	}
}

func TestScope(t *testing.T) {
	reg := NewRegistry()
	for _, name := range []string{"web_search", "web_fetch", "bird"} {
		if err := reg.Register(Spec{Name: name}, echo()); err != nil {
			t.Fatal(err)
		}
	}
	exec := NewExecutor(reg, Options{})
	scope := exec.Scope([]string{"web_search", "bird", "web_search"},
		Local{Spec{Name: "filesystem_read"}, echo()},
		Local{Spec{Name: "bad name"}, echo()},
		Local{Spec{Name: "web_fetch"}, echo()},
		Local{Spec{Name: "filesystem_read"}, echo()},
		Local{Spec{Name: "no_handler"}, nil})
	var names []string
	for _, s := range scope.Specs() {
		names = append(names, s.Name)
	}
	if diff := cmp.Diff([]string{"bird", "filesystem_read", "web_search"}, names); diff != "" {
		t.Errorf("scope specs (-want +got):\n%s", diff)
	}
	wantErr := `local tool "bad name": invalid name: use 1 to 64 letters, digits, '_' or '-'; ` +
		`local tool "web_fetch" has the name of a registered tool; ` +
		`local tool "filesystem_read" is given twice; ` +
		`local tool "no_handler": handler is nil`
	if err := scope.Err(); err == nil || err.Error() != wantErr {
		t.Errorf("Err() = %v\nwant %s", err, wantErr)
	}
	got := scope.Execute(context.Background(), agentrunner.ToolCall{Name: "web_fetch"})
	if want := `unknown tool "web_fetch"; available tools: bird, filesystem_read, web_search`; got.Message != want || !got.IsError {
		t.Errorf("registered but not allowed tool: %+v, want %q", got, want)
	}
	if got := scope.Execute(context.Background(), agentrunner.ToolCall{Name: "filesystem_read"}); got.IsError {
		t.Errorf("local tool: %+v", got)
	}
	if err := exec.Scope([]string{"missing"}).Err(); err == nil || err.Error() != `tool "missing" is not registered` {
		t.Errorf("unregistered tool: Err() = %v", err)
	}
	stats := exec.Stats()
	if _, ok := stats["filesystem_read"]; !ok || len(stats) != 4 {
		t.Errorf("stats cover %v, want the 3 registered tools and the called local one", stats)
	}
}

// FuzzExecuteArguments checks that any arguments a model sends give a
// result without a panic, and that the handler only sees arguments that
// satisfy the schema.
func FuzzExecuteArguments(f *testing.F) {
	for _, a := range []string{``, `null`, `{}`, `{"asset":"BTC"}`, `{"asset":"BTC","days":3}`, `[1]`, `"x"`, `{"asset":`, `{"days":1.5}`, "{\"asset\":\"\xff\"}"} {
		f.Add(a)
	}
	reg := NewRegistry()
	err := reg.Register(Spec{Name: "price", Parameters: json.RawMessage(assetSchema)}, HandlerFunc(func(_ context.Context, args json.RawMessage) (string, error) {
		var v struct {
			Asset *string `json:"asset"`
			Days  *int    `json:"days"`
		}
		dec := json.NewDecoder(strings.NewReader(string(args)))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&v); err != nil || v.Asset == nil || (v.Days != nil && *v.Days < 1) {
			panic(fmt.Sprintf("handler got arguments the schema refuses: %s (%v)", args, err))
		}
		return "ok", nil
	}))
	if err != nil {
		f.Fatal(err)
	}
	scope := NewExecutor(reg, Options{Clock: clocktest.New(epoch)}).Scope([]string{"price"})
	f.Fuzz(func(t *testing.T, args string) {
		res := scope.Execute(context.Background(), agentrunner.ToolCall{Name: "price", Arguments: json.RawMessage(args)})
		if res.IsError && strings.Contains(res.Message, "internal error") {
			t.Fatalf("arguments %q reached the handler although invalid", args)
		}
		if res.Message == "" {
			t.Fatalf("arguments %q: empty result", args)
		}
	})
}

func TestAHandlerKnowsWhoCalledIt(t *testing.T) {
	reg := NewRegistry()
	var got agentrunner.ToolCall
	err := reg.Register(Spec{Name: "whoami"}, HandlerFunc(func(ctx context.Context, _ json.RawMessage) (string, error) {
		call, ok := CallOf(ctx)
		if !ok {
			return "", errors.New("no call in the context")
		}
		got = call
		return call.Agent, nil
	}))
	if err != nil {
		t.Fatal(err)
	}
	call := agentrunner.ToolCall{Name: "whoami", Agent: "plan", Step: "plan", CycleID: "20261127_090000", Attempt: 2}
	res := NewExecutor(reg, Options{}).Scope([]string{"whoami"}).Execute(context.Background(), call)
	if res.IsError || res.Message != "plan" || got.CycleID != call.CycleID || got.Attempt != 2 {
		t.Errorf("result %+v, call seen %+v", res, got)
	}
	if _, ok := CallOf(context.Background()); ok {
		t.Error("CallOf found a call outside an executor")
	}
}

func TestScopeRefuse(t *testing.T) {
	reg := NewRegistry()
	if err := reg.Register(Spec{Name: "web_search"}, echo()); err != nil {
		t.Fatal(err)
	}
	var events []*agentrunner.Event
	exec := NewExecutor(reg, Options{Record: func(ev *agentrunner.Event) { events = append(events, ev) }})
	scope := exec.Scope([]string{"web_search"}).Refuse("not for you", "filesystem_read")
	if got := scope.Execute(context.Background(), agentrunner.ToolCall{Name: "filesystem_read"}); !got.IsError || got.Message != "not for you" {
		t.Errorf("refused tool: %+v, want the refusal", got)
	}
	if got := scope.Execute(context.Background(), agentrunner.ToolCall{Name: "other"}); !got.IsError || got.Message != `unknown tool "other"; available tools: web_search` {
		t.Errorf("unknown tool: %+v", got)
	}
	if len(events) != 2 {
		t.Errorf("%d events, want both calls recorded", len(events))
	}
	if len(scope.Specs()) != 1 {
		t.Errorf("specs %v: a refused tool is not offered", scope.Specs())
	}
}
