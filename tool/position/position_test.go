package position

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/agentrunner/agentrunner/config"
	"github.com/agentrunner/agentrunner/execsvc"
	"github.com/agentrunner/agentrunner/tool"
)

var t0 = time.Date(2026, 11, 22, 14, 0, 0, 0, time.UTC)

// clock is a settable clock for the cache.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) Set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = t
}

func account() *execsvc.Account {
	price := 3100.0
	return &execsvc.Account{
		AsOf:     t0.Add(-5 * time.Second),
		Equity:   105234.12,
		Cash:     40210.5,
		Currency: "USD",
		Positions: []execsvc.Position{
			{Asset: "BTC", Quantity: 0.75, AvgEntryPrice: 61200, MarkPrice: 64000, MarketValue: 48000, UnrealizedPnL: 2100, Side: "long"},
		},
		Balances:   []execsvc.Balance{{Asset: "USD", Free: 40210.5, Locked: 6200}},
		OpenOrders: []execsvc.Order{{ID: "ord-1", Asset: "ETH", Side: "buy", Type: "limit", Quantity: 2, Price: &price, Status: "open", CreatedAt: t0.Add(-time.Minute)}},
	}
}

// startMock runs the Execution Service mock on 127.0.0.1.
func startMock(t *testing.T, a *execsvc.Account) (*execsvc.Mock, *execsvc.Client) {
	t.Helper()
	m := execsvc.NewMock(execsvc.MockOptions{Account: a, Token: "secret-token"})
	url, err := m.Start("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Close() })
	return m, client(t, url)
}

func client(t *testing.T, url string) *execsvc.Client {
	t.Helper()
	c, err := execsvc.NewClient(url, "secret-token", 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func newTool(t *testing.T, cfg *Settings, c AccountReader, now func() time.Time) tool.Handler {
	t.Helper()
	_, h, err := New(nil, cfg, c, now)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

func accountRequests(m *execsvc.Mock) int {
	n := 0
	for _, r := range m.Requests() {
		if r.Path == "/v1/account" {
			n++
		}
	}
	return n
}

func TestFreshFetchReturnsTheAccount(t *testing.T) {
	m, c := startMock(t, account())
	h := newTool(t, nil, c, (&clock{t: t0}).Now)

	out, err := h.Call(context.Background(), json.RawMessage(`{}`))
	if err != nil {
		t.Fatal(err)
	}
	var got execsvc.Account
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatalf("result is not the account JSON: %v\n%s", err, out)
	}
	if diff := cmp.Diff(account(), &got); diff != "" {
		t.Errorf("account (-want +got):\n%s", diff)
	}
	for _, key := range []string{`"positions":[`, `"balances":[`, `"open_orders":[`, `"unrealized_pnl":2100`} {
		if !strings.Contains(out, key) {
			t.Errorf("result lacks %s: %s", key, out)
		}
	}
	if n := accountRequests(m); n != 1 {
		t.Errorf("service saw %d account requests, want 1", n)
	}
}

func TestCacheWithinTTLAndRefetchAfter(t *testing.T) {
	m, c := startMock(t, account())
	clk := &clock{t: t0}
	h := newTool(t, &Settings{CacheTTL: config.Duration(30 * time.Second)}, c, clk.Now)

	steps := []struct {
		at   time.Duration
		want int
	}{
		{0, 1},
		{10 * time.Second, 1},
		{29*time.Second + 999*time.Millisecond, 1},
		{30 * time.Second, 2}, // the TTL has passed: a new snapshot
		{45 * time.Second, 2},
		{61 * time.Second, 3},
		{50 * time.Second, 4}, // the clock went back: the cache is not trusted
	}
	for _, s := range steps {
		clk.Set(t0.Add(s.at))
		if _, err := h.Call(context.Background(), nil); err != nil {
			t.Fatalf("at %s: %v", s.at, err)
		}
		if n := accountRequests(m); n != s.want {
			t.Fatalf("at %s: service saw %d account requests, want %d", s.at, n, s.want)
		}
	}
}

func TestDefaultTTLIsThirtySeconds(t *testing.T) {
	m, c := startMock(t, account())
	clk := &clock{t: t0}
	h := newTool(t, &Settings{}, c, clk.Now)
	for _, at := range []time.Duration{0, 29 * time.Second, 30 * time.Second} {
		clk.Set(t0.Add(at))
		if _, err := h.Call(context.Background(), nil); err != nil {
			t.Fatal(err)
		}
	}
	if n := accountRequests(m); n != 2 {
		t.Errorf("service saw %d account requests, want 2", n)
	}
}

func TestConcurrentCallsShareOneRequest(t *testing.T) {
	m, c := startMock(t, account())
	h := newTool(t, nil, c, (&clock{t: t0}).Now)
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := h.Call(context.Background(), json.RawMessage(`{}`))
			errs <- err
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
	if n := accountRequests(m); n != 1 {
		t.Errorf("service saw %d account requests, want 1", n)
	}
}

func TestServiceDownIsTransient(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	h := newTool(t, nil, client(t, "http://"+addr), (&clock{t: t0}).Now)
	_, err = h.Call(context.Background(), nil)
	if err == nil || !tool.IsTransient(err) {
		t.Fatalf("err = %v, want a transient error", err)
	}
	if !strings.Contains(err.Error(), "Execution Service is unavailable") {
		t.Errorf("error %q does not say the service is unavailable", err)
	}
}

func TestBadAnswersAndRefusals(t *testing.T) {
	tests := []struct {
		name      string
		status    int
		body      string
		transient bool
		want      string
	}{
		{"malformed json", 200, `{"as_of":`, true, "not a JSON account"},
		{"missing field", 200, `{"as_of":"2026-11-22T14:00:00Z","cash":1,"currency":"USD","positions":[],"balances":[],"open_orders":[]}`, true, "equity is missing"},
		{"server error", 502, `bad gateway`, true, "answered 502"},
		{"unauthorized", 401, `{"error":{"code":"unauthorized","message":"wrong token"}}`, false, "operator must check execution_service.url"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.WriteHeader(tt.status)
				fmt.Fprint(w, tt.body)
			}))
			t.Cleanup(srv.Close)
			h := newTool(t, nil, client(t, srv.URL), (&clock{t: t0}).Now)
			_, err := h.Call(context.Background(), nil)
			if err == nil {
				t.Fatal("no error")
			}
			if tool.IsTransient(err) != tt.transient {
				t.Errorf("transient = %v, want %v (err %v)", tool.IsTransient(err), tt.transient, err)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %q does not contain %q", err, tt.want)
			}
			if strings.Contains(err.Error(), "secret-token") {
				t.Errorf("error %q quotes the token", err)
			}
		})
	}
}

func TestFailureIsNotCached(t *testing.T) {
	var mu sync.Mutex
	fail := true
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		if fail {
			w.WriteHeader(503)
			return
		}
		b, _ := json.Marshal(account())
		w.Write(b)
	}))
	t.Cleanup(srv.Close)
	h := newTool(t, nil, client(t, srv.URL), (&clock{t: t0}).Now)
	if _, err := h.Call(context.Background(), nil); !tool.IsTransient(err) {
		t.Fatalf("first call: err = %v, want transient", err)
	}
	mu.Lock()
	fail = false
	mu.Unlock()
	if _, err := h.Call(context.Background(), nil); err != nil {
		t.Fatalf("second call after the service recovered: %v", err)
	}
}

func TestArguments(t *testing.T) {
	_, c := startMock(t, account())
	h := newTool(t, nil, c, (&clock{t: t0}).Now)
	tests := []struct {
		args, wantErr string
	}{
		{``, ""},
		{`null`, ""},
		{` {} `, ""},
		{`{"asset":"BTC"}`, `current_position takes no arguments, but "asset" was given`},
		{`[1]`, "current_position takes no arguments"},
		{`{`, "current_position takes no arguments"},
	}
	for _, tt := range tests {
		_, err := h.Call(context.Background(), json.RawMessage(tt.args))
		switch {
		case tt.wantErr == "" && err != nil:
			t.Errorf("args %q: %v", tt.args, err)
		case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr) || tool.IsTransient(err)):
			t.Errorf("args %q: err = %v, want a permanent error containing %q", tt.args, err, tt.wantErr)
		}
	}
}

// blockingReader holds the first Account call until released.
type blockingReader struct {
	entered chan struct{}
	release chan struct{}
}

func (b *blockingReader) Account(ctx context.Context) (*execsvc.Account, error) {
	close(b.entered)
	<-b.release
	return account(), nil
}

func TestWaitingCallerGivesUpWithItsContext(t *testing.T) {
	b := &blockingReader{entered: make(chan struct{}), release: make(chan struct{})}
	h := newTool(t, nil, b, (&clock{t: t0}).Now)
	first := make(chan error, 1)
	go func() {
		_, err := h.Call(context.Background(), nil)
		first <- err
	}()
	<-b.entered
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := h.Call(ctx, nil); err == nil || !tool.IsTransient(err) {
		t.Errorf("waiting call: err = %v, want a transient error", err)
	}
	close(b.release)
	if err := <-first; err != nil {
		t.Errorf("first call: %v", err)
	}
}

func TestSpec(t *testing.T) {
	two, zero := 2, 0
	tests := []struct {
		name string
		cfg  *config.Tool
		want tool.Spec
	}{
		{"defaults", nil, tool.Spec{Name: Kind, Description: Description, Parameters: json.RawMessage(Parameters), Timeout: 10 * time.Second, Retries: 2, Backoff: time.Second}},
		{"configured", &config.Tool{
			Name: "positions", Description: "Our book.", Parameters: config.JSON(`{"type":"object"}`),
			Timeout: config.Duration(3 * time.Second), Retries: &config.Retries{Max: &zero, Backoff: []config.Duration{config.Duration(5 * time.Second)}},
			Breaker: config.Breaker{Failures: 4, OpenFor: config.Duration(time.Minute)},
		}, tool.Spec{Name: "positions", Description: "Our book.", Parameters: json.RawMessage(`{"type":"object"}`), Timeout: 3 * time.Second, Retries: 0, Backoff: 5 * time.Second, BreakerFailures: 4, BreakerOpenFor: time.Minute}},
		{"retries only", &config.Tool{Retries: &config.Retries{Max: &two}}, tool.Spec{Name: Kind, Description: Description, Parameters: json.RawMessage(Parameters), Timeout: 10 * time.Second, Retries: 2, Backoff: time.Second}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, _, err := New(tt.cfg, nil, &blockingReader{}, nil)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("spec (-want +got):\n%s", diff)
			}
		})
	}
	var schema map[string]any
	if err := json.Unmarshal([]byte(Parameters), &schema); err != nil || schema["additionalProperties"] != false {
		t.Errorf("Parameters %s is not a closed object schema", Parameters)
	}
}

func TestNewRejects(t *testing.T) {
	neg := -1
	tests := []struct {
		name    string
		cfg     *config.Tool
		set     *Settings
		reader  AccountReader
		wantErr string
	}{
		{"no client", nil, nil, nil, "client is missing"},
		{"negative ttl", nil, &Settings{CacheTTL: config.Duration(-time.Second)}, &blockingReader{}, "cache_ttl must not be negative"},
		{"negative timeout", &config.Tool{Timeout: config.Duration(-time.Second)}, nil, &blockingReader{}, "timeout must be positive"},
		{"negative retries", &config.Tool{Retries: &config.Retries{Max: &neg}}, nil, &blockingReader{}, "retries.max must not be negative"},
		{"parameters not an object", &config.Tool{Parameters: config.JSON(`[1]`)}, nil, &blockingReader{}, "parameters must be a JSON Schema object"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, _, err := New(tt.cfg, tt.set, tt.reader, nil)
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("err = %v, want one containing %q", err, tt.wantErr)
			}
		})
	}
}
