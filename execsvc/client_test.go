package execsvc

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/agentrunner/agentrunner"
	"github.com/agentrunner/agentrunner/internal/clocktest"
)

var t0 = time.Date(2026, 11, 22, 14, 0, 0, 0, time.UTC)

// fakeClock advances one second per reading, so every timestamp the mock
// writes is distinct and predictable.
type fakeClock struct {
	mu sync.Mutex
	n  int
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.n++
	return t0.Add(time.Duration(c.n-1) * time.Second)
}

func startMock(t *testing.T, opts MockOptions) (*Mock, string) {
	t.Helper()
	m := NewMock(opts)
	url, err := m.Start("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := m.Close(); err != nil {
			t.Errorf("close mock: %v", err)
		}
	})
	return m, url
}

func newClient(t *testing.T, url, token string) *Client {
	t.Helper()
	c, err := NewClient(url, token, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func submission(t *testing.T, strategy string) Submission {
	t.Helper()
	s, err := NewSubmission("20261122_140000", []byte(strategy))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

const key = "20261122_140000/synthesize/abc"

func TestSubmitAcknowledged(t *testing.T) {
	m, url := startMock(t, MockOptions{Now: (&fakeClock{}).Now})
	c := newClient(t, url, "")
	s := submission(t, strategyFile)

	rc, err := c.Submit(context.Background(), key, s)
	if err != nil {
		t.Fatal(err)
	}
	want := &Receipt{StrategyID: "strat-000001", Status: StatusAcknowledged, ReceivedAt: t0.Add(time.Second)}
	if diff := cmp.Diff(want, rc); diff != "" {
		t.Errorf("receipt (-want +got):\n%s", diff)
	}
	body, err := s.Body()
	if err != nil {
		t.Fatal(err)
	}
	wantReqs := []Request{{Method: "POST", Path: "/v1/strategies", IdempotencyKey: key, Body: body, Time: t0, StatusCode: 202}}
	if diff := cmp.Diff(wantReqs, m.Requests()); diff != "" {
		t.Errorf("requests (-want +got):\n%s", diff)
	}
	// The service received the strategy bytes exactly as written.
	if diff := cmp.Diff([]Submission{s}, m.Strategies()); diff != "" {
		t.Errorf("strategies (-want +got):\n%s", diff)
	}
}

func TestSubmitReplayIsIdempotent(t *testing.T) {
	m, url := startMock(t, MockOptions{Now: (&fakeClock{}).Now})
	c := newClient(t, url, "")
	s := submission(t, strategyFile)

	first, err := c.Submit(context.Background(), key, s)
	if err != nil {
		t.Fatal(err)
	}
	again, err := c.Submit(context.Background(), key, s)
	if err != nil {
		t.Fatal(err)
	}
	want := *first
	want.Replayed = true
	if diff := cmp.Diff(&want, again); diff != "" {
		t.Errorf("replayed receipt (-want +got):\n%s", diff)
	}
	var statuses []int
	for _, r := range m.Requests() {
		statuses = append(statuses, r.StatusCode)
	}
	if diff := cmp.Diff([]int{202, 200}, statuses); diff != "" {
		t.Errorf("request statuses (-want +got):\n%s", diff)
	}
	if n := len(m.Strategies()); n != 1 {
		t.Errorf("mock accepted %d strategies, want 1", n)
	}
}

// TestSubmitAfterTheWindow: once a strategy's validity window is over, a
// resend under its known key is still answered with the first receipt (the
// service had it), while a key the service does not know is refused as
// expired (422 strategy_expired), even in safe mode, and nothing is stored.
func TestSubmitAfterTheWindow(t *testing.T) {
	clock := clocktest.New(t0)
	m, url := startMock(t, MockOptions{Now: clock.Now})
	c := newClient(t, url, "")
	s := submission(t, strategyFile)
	s.ValidUntil = t0.Add(time.Hour)
	first, err := c.Submit(context.Background(), key, s)
	if err != nil {
		t.Fatal(err)
	}
	clock.Advance(time.Hour)

	again, err := c.Submit(context.Background(), key, s)
	if err != nil {
		t.Fatalf("resend of a known key after the window: %v", err)
	}
	want := *first
	want.Replayed = true
	if diff := cmp.Diff(&want, again); diff != "" {
		t.Errorf("replayed receipt (-want +got):\n%s", diff)
	}

	other := submission(t, `{"v":2}`)
	other.ValidUntil = t0.Add(time.Hour)
	for _, safeMode := range []bool{false, true} {
		if safeMode {
			m.mu.Lock()
			m.safe = SafeModeState{SafeMode: true, Since: t0, Reason: ReasonOperator}
			m.mu.Unlock()
		}
		_, err = c.Submit(context.Background(), "20261122_140000/synthesize/other", other)
		if !IsExpired(err) || agentrunner.ClassOf(err) != agentrunner.ClassInvalidOutput || !strings.Contains(err.Error(), "validity window ended at 2026-11-22T15:00:00Z") {
			t.Errorf("new key after the window (safe mode %v): err = %v (class %q), want 422 strategy_expired, invalid_output", safeMode, err, agentrunner.ClassOf(err))
		}
	}
	if n := len(m.Strategies()); n != 1 {
		t.Errorf("mock holds %d strategies, want only the first", n)
	}
	if IsExpired(errors.New("strategy_expired")) || IsExpired(&APIError{StatusCode: 422, Code: "invalid_request"}) {
		t.Error("IsExpired is true for an error that is not a 422 strategy_expired")
	}
}

func TestSubmitMismatchedReplayIsConflict(t *testing.T) {
	m, url := startMock(t, MockOptions{})
	c := newClient(t, url, "")
	if _, err := c.Submit(context.Background(), key, submission(t, `{"v":1}`)); err != nil {
		t.Fatal(err)
	}
	_, err := c.Submit(context.Background(), key, submission(t, `{"v":2}`))
	if got := agentrunner.ClassOf(err); got != agentrunner.ClassConfig {
		t.Fatalf("class = %q (err %v), want %q", got, err, agentrunner.ClassConfig)
	}
	var apiErr *APIError
	if !errors.As(err, &apiErr) || apiErr.StatusCode != 409 || apiErr.Code != "idempotency_conflict" {
		t.Fatalf("err = %v, want an APIError 409 idempotency_conflict", err)
	}
	if !strings.Contains(err.Error(), "409") {
		t.Errorf("error %q does not name the status", err)
	}
	if n := len(m.Strategies()); n != 1 {
		t.Errorf("mock accepted %d strategies, want 1", n)
	}
}

func TestStatusProgress(t *testing.T) {
	tests := []struct {
		name string
		opts MockOptions
		want []Status
	}{
		{"zero values complete at first poll", MockOptions{}, []Status{StatusCompleted, StatusCompleted}},
		{"scripted", MockOptions{ExecutingAfter: 1, CompletedAfter: 3},
			[]Status{StatusAcknowledged, StatusExecuting, StatusExecuting, StatusCompleted, StatusCompleted}},
		{"negative counts as zero", MockOptions{ExecutingAfter: -1, CompletedAfter: -5}, []Status{StatusCompleted}},
		{"fail", MockOptions{CompletedAfter: 1, FailWith: "exchange rejected the order"},
			[]Status{StatusExecuting, StatusErrored, StatusErrored}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, url := startMock(t, tt.opts)
			c := newClient(t, url, "")
			rc, err := c.Submit(context.Background(), key, submission(t, strategyFile))
			if err != nil {
				t.Fatal(err)
			}
			var got []Status
			for range tt.want {
				st, err := c.Status(context.Background(), rc.StrategyID)
				if err != nil {
					t.Fatal(err)
				}
				if st.StrategyID != rc.StrategyID {
					t.Errorf("status is about %q, want %q", st.StrategyID, rc.StrategyID)
				}
				wantErr := ""
				if st.Status == StatusErrored {
					wantErr = tt.opts.FailWith
				}
				if st.Error != wantErr {
					t.Errorf("status %s has error %q, want %q", st.Status, st.Error, wantErr)
				}
				got = append(got, st.Status)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("statuses (-want +got):\n%s", diff)
			}
		})
	}
}

func TestStatusUpdatedAtMovesWithStatus(t *testing.T) {
	_, url := startMock(t, MockOptions{ExecutingAfter: 1, CompletedAfter: 2, Now: (&fakeClock{}).Now})
	c := newClient(t, url, "")
	rc, err := c.Submit(context.Background(), key, submission(t, strategyFile))
	if err != nil {
		t.Fatal(err)
	}
	var got []time.Time
	for range 4 {
		st, err := c.Status(context.Background(), rc.StrategyID)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, st.UpdatedAt)
	}
	// The clock reads once per request and once per status change: the
	// acknowledgement keeps received_at, each change takes a new reading.
	want := []time.Time{rc.ReceivedAt, t0.Add(4 * time.Second), t0.Add(6 * time.Second), t0.Add(6 * time.Second)}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("updated_at per poll (-want +got):\n%s", diff)
	}
}

func TestStatusUnknownStrategy(t *testing.T) {
	_, url := startMock(t, MockOptions{})
	c := newClient(t, url, "")
	_, err := c.Status(context.Background(), "strat-999999")
	var apiErr *APIError
	if !errors.As(err, &apiErr) || apiErr.StatusCode != 404 || apiErr.Code != "not_found" {
		t.Fatalf("err = %v, want an APIError 404 not_found", err)
	}
	if got := agentrunner.ClassOf(err); got != agentrunner.ClassConfig {
		t.Errorf("class = %q, want %q", got, agentrunner.ClassConfig)
	}
}

func TestBearerToken(t *testing.T) {
	const token = "s3cret-T0ken"
	m, url := startMock(t, MockOptions{Token: token})
	s := submission(t, strategyFile)

	if _, err := newClient(t, url, token).Submit(context.Background(), key, s); err != nil {
		t.Fatalf("with the right token: %v", err)
	}
	for name, tok := range map[string]string{"no token": "", "wrong token": "s3cret-T0kenX"} {
		t.Run(name, func(t *testing.T) {
			_, err := newClient(t, url, tok).Submit(context.Background(), key, s)
			var apiErr *APIError
			if !errors.As(err, &apiErr) || apiErr.StatusCode != 401 {
				t.Fatalf("err = %v, want an APIError 401", err)
			}
			if got := agentrunner.ClassOf(err); got != agentrunner.ClassConfig {
				t.Errorf("class = %q, want %q", got, agentrunner.ClassConfig)
			}
			if strings.Contains(err.Error(), token) {
				t.Errorf("error %q contains the token", err)
			}
		})
	}
	if n := len(m.Strategies()); n != 1 {
		t.Errorf("mock accepted %d strategies, want 1", n)
	}
	if n := len(m.Requests()); n != 3 {
		t.Errorf("mock recorded %d requests, want 3", n)
	}
}

// TestTokenNeverInErrors uses a service that echoes the Authorization
// header in every answer: the client must redact it.
func TestTokenNeverInErrors(t *testing.T) {
	const token = "tok-ABCDEF123456"
	bodies := map[int]string{
		400: `{"error":{"code":"invalid_request","message":"you sent %s"}}`,
		500: `<html>%s</html>`,
		200: `{"strategy_id":"x","status":"%s"}`,
	}
	for status, format := range bodies {
		t.Run(fmt.Sprint(status), func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.WriteHeader(status)
				fmt.Fprintf(w, format, r.Header.Get("Authorization"))
			}))
			t.Cleanup(srv.Close)
			c := newClient(t, srv.URL, token)
			_, err := c.Submit(context.Background(), key, submission(t, strategyFile))
			if err == nil {
				t.Fatal("Submit succeeded, want an error")
			}
			if strings.Contains(err.Error(), token) {
				t.Errorf("error %q contains the token", err)
			}
			if !strings.Contains(err.Error(), "[redacted]") {
				t.Errorf("error %q does not show where the token was redacted", err)
			}
		})
	}
}

func TestErrorStatusClasses(t *testing.T) {
	tests := []struct {
		status int
		class  agentrunner.ErrorClass
	}{
		{400, agentrunner.ClassInvalidOutput},
		{401, agentrunner.ClassConfig},
		{403, agentrunner.ClassConfig},
		{404, agentrunner.ClassConfig},
		{408, agentrunner.ClassUnavailable},
		{409, agentrunner.ClassConfig},
		{413, agentrunner.ClassInvalidOutput},
		{422, agentrunner.ClassInvalidOutput},
		{429, agentrunner.ClassUnavailable},
		{500, agentrunner.ClassUnavailable},
		{502, agentrunner.ClassUnavailable},
		{503, agentrunner.ClassUnavailable},
		{307, agentrunner.ClassConfig},
		{204, agentrunner.ClassUnavailable},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprint(tt.status), func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if tt.status == 307 {
					w.Header().Set("Location", "http://elsewhere.invalid/v1/strategies")
				}
				w.WriteHeader(tt.status)
				fmt.Fprint(w, `{"error":{"code":"some_code","message":"the reason"}}`)
			}))
			t.Cleanup(srv.Close)
			c := newClient(t, srv.URL, "")
			for op, call := range operations(t, c) {
				_, err := call(context.Background())
				if got := agentrunner.ClassOf(err); got != tt.class {
					t.Errorf("%s: class = %q (err %v), want %q", op, got, err, tt.class)
				}
				var apiErr *APIError
				if !errors.As(err, &apiErr) || apiErr.StatusCode != tt.status {
					t.Errorf("%s: err = %v, want an APIError with status %d", op, err, tt.status)
				}
				if tt.status != 204 && !strings.Contains(err.Error(), fmt.Sprintf("%d some_code: the reason", tt.status)) {
					t.Errorf("%s: error %q does not carry the status and the service's message", op, err)
				}
			}
		})
	}
}

// operations calls each endpoint of the client once.
func operations(t *testing.T, c *Client) map[string]func(context.Context) (*Receipt, error) {
	t.Helper()
	s := submission(t, `{"v":1}`)
	return map[string]func(context.Context) (*Receipt, error){
		"submit": func(ctx context.Context) (*Receipt, error) { return c.Submit(ctx, key, s) },
		"status": func(ctx context.Context) (*Receipt, error) { return c.Status(ctx, "strat-000001") },
	}
}

func TestUnavailable(t *testing.T) {
	tests := []struct {
		name    string
		handler http.HandlerFunc
		wantErr string
	}{
		{"503", func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(503)
			fmt.Fprint(w, `{"error":{"code":"maintenance","message":"back soon"}}`)
		}, "503 maintenance: back soon"},
		{"garbage json", func(w http.ResponseWriter, r *http.Request) {
			fmt.Fprint(w, `{"strategy_id": "strat-000001", "status": `)
		}, "not a JSON receipt"},
		{"html", func(w http.ResponseWriter, r *http.Request) {
			fmt.Fprint(w, `<html>ok</html>`)
		}, "not a JSON receipt"},
		{"unknown status", func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(statusFor(r))
			fmt.Fprint(w, `{"strategy_id": "strat-000001", "status": "paused"}`)
		}, `status "paused" is not one of`},
		{"missing strategy id", func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(statusFor(r))
			fmt.Fprint(w, `{"status": "acknowledged"}`)
		}, "strategy_id is missing"},
		{"unusable strategy id", func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(statusFor(r))
			fmt.Fprint(w, `{"strategy_id": "strat\u0000one", "status": "acknowledged"}`)
		}, "strategy_id has a character that is not printable ASCII"},
		{"body over 1 MiB", func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(statusFor(r))
			fmt.Fprintf(w, `{"strategy_id": "strat-000001", "status": "acknowledged", "pad": "%s"}`, strings.Repeat("x", MaxBodyBytes))
		}, "larger than 1048576 bytes"},
		{"connection closed", func(w http.ResponseWriter, r *http.Request) {
			if conn, _, err := w.(http.Hijacker).Hijack(); err == nil {
				conn.Close()
			}
		}, "EOF"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := httptest.NewServer(tt.handler)
			t.Cleanup(srv.Close)
			c := newClient(t, srv.URL, "")
			for op, call := range operations(t, c) {
				rc, err := call(context.Background())
				if got := agentrunner.ClassOf(err); got != agentrunner.ClassUnavailable {
					t.Errorf("%s: class = %q (receipt %+v, err %v), want %q", op, got, rc, err, agentrunner.ClassUnavailable)
					continue
				}
				if !strings.Contains(err.Error(), tt.wantErr) {
					t.Errorf("%s: error %q does not contain %q", op, err, tt.wantErr)
				}
			}
		})
	}
}

// statusFor is the success status of the endpoint r calls.
func statusFor(r *http.Request) int {
	if r.Method == http.MethodPost {
		return http.StatusAccepted
	}
	return http.StatusOK
}

func TestUnavailableWhenServiceHangs(t *testing.T) {
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-release:
		}
	}))
	t.Cleanup(srv.Close)
	t.Cleanup(func() { close(release) }) // runs first, so Close does not wait
	c, err := NewClient(srv.URL, "", 150*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	for op, call := range operations(t, c) {
		_, err := call(context.Background())
		if got := agentrunner.ClassOf(err); got != agentrunner.ClassUnavailable {
			t.Errorf("%s: class = %q (err %v), want %q", op, got, err, agentrunner.ClassUnavailable)
		}
		if !strings.Contains(err.Error(), "Timeout") {
			t.Errorf("%s: error %q does not say it timed out", op, err)
		}
	}
}

func TestUnavailableWhenNothingListens(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	c := newClient(t, "http://"+addr, "")
	for op, call := range operations(t, c) {
		if _, err := call(context.Background()); agentrunner.ClassOf(err) != agentrunner.ClassUnavailable {
			t.Errorf("%s: err = %v, want class %q", op, err, agentrunner.ClassUnavailable)
		}
	}
}

func TestCancelledContext(t *testing.T) {
	m, url := startMock(t, MockOptions{})
	c := newClient(t, url, "")
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	for op, call := range operations(t, c) {
		_, err := call(ctx)
		if !errors.Is(err, context.Canceled) || agentrunner.ClassOf(err) != agentrunner.ClassUnavailable {
			t.Errorf("%s: err = %v, want an unavailable error wrapping context.Canceled", op, err)
		}
	}
	if n := len(m.Requests()); n != 0 {
		t.Errorf("mock recorded %d requests, want 0", n)
	}
}

func TestStatusRefusesAnswerAboutAnotherStrategy(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, `{"strategy_id": "strat-000002", "status": "completed"}`)
	}))
	t.Cleanup(srv.Close)
	_, err := newClient(t, srv.URL, "").Status(context.Background(), "strat-000001")
	if agentrunner.ClassOf(err) != agentrunner.ClassUnavailable || !strings.Contains(err.Error(), `about strategy "strat-000002"`) {
		t.Fatalf("err = %v, want an unavailable error naming the other strategy", err)
	}
}

func TestSubmitValidatesBeforeSending(t *testing.T) {
	good := submission(t, strategyFile)
	wrongHash := good
	wrongHash.SHA256 = strings.Repeat("0", 64)
	big := submission(t, `{"pad":"`+strings.Repeat("x", MaxBodyBytes)+`"}`)
	tests := []struct {
		name    string
		key     string
		sub     Submission
		class   agentrunner.ErrorClass
		wantErr string
	}{
		{"empty key", "", good, agentrunner.ClassInternal, "idempotency key is empty"},
		{"long key", strings.Repeat("k", 201), good, agentrunner.ClassInternal, "more than 200"},
		{"control char in key", "a\r\nX-Evil: 1", good, agentrunner.ClassInternal, "not printable ASCII"},
		{"key ends with space", "abc ", good, agentrunner.ClassInternal, "ends with a space"},
		{"wrong hash", key, wrongHash, agentrunner.ClassInvalidOutput, "does not match the strategy bytes"},
		{"no strategy", key, Submission{CycleID: "c1", SHA256: good.SHA256}, agentrunner.ClassInvalidOutput, "strategy is missing"},
		{"too large", key, big, agentrunner.ClassInvalidOutput, "more than the contract's limit"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, url := startMock(t, MockOptions{})
			_, err := newClient(t, url, "").Submit(context.Background(), tt.key, tt.sub)
			if got := agentrunner.ClassOf(err); got != tt.class || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("err = %v (class %q), want class %q containing %q", err, got, tt.class, tt.wantErr)
			}
			if n := len(m.Requests()); n != 0 {
				t.Errorf("mock recorded %d requests, want none", n)
			}
		})
	}
}

func TestStatusValidatesID(t *testing.T) {
	m, url := startMock(t, MockOptions{})
	c := newClient(t, url, "")
	for _, id := range []string{"", "a\nb", strings.Repeat("i", 201)} {
		if _, err := c.Status(context.Background(), id); agentrunner.ClassOf(err) != agentrunner.ClassInternal {
			t.Errorf("Status(%q): err = %v, want class %q", id, err, agentrunner.ClassInternal)
		}
	}
	if n := len(m.Requests()); n != 0 {
		t.Errorf("mock recorded %d requests, want none", n)
	}
}

func TestStatusEscapesID(t *testing.T) {
	m, url := startMock(t, MockOptions{})
	_, err := newClient(t, url, "").Status(context.Background(), "a/../b?c")
	var apiErr *APIError
	if !errors.As(err, &apiErr) || apiErr.StatusCode != 404 {
		t.Fatalf("err = %v, want a 404 for an id the mock never issued", err)
	}
	reqs := m.Requests()
	if len(reqs) != 1 || reqs[0].Path != "/v1/strategies/a/../b?c" {
		t.Errorf("requests = %+v, want one to the escaped path", reqs)
	}
}

func TestNewClient(t *testing.T) {
	tests := []struct {
		name, url, token string
		timeout          time.Duration
		wantErr          string
	}{
		{"ok", "https://exec.example.com", "tok", time.Second, ""},
		{"ok with prefix", "http://127.0.0.1:8080/api/", "", time.Second, ""},
		{"bad scheme", "ftp://exec.example.com", "", time.Second, "scheme must be http or https"},
		{"no scheme", "exec.example.com", "", time.Second, "scheme must be http or https"},
		{"no host", "http:///v1", "", time.Second, "host is missing"},
		{"credentials", "https://user:pw@exec.example.com", "", time.Second, "must not contain credentials"},
		{"query", "https://exec.example.com?x=1", "", time.Second, "query or fragment"},
		{"fragment", "https://exec.example.com#x", "", time.Second, "query or fragment"},
		{"unparsable", "http://[::1", "", time.Second, "missing ']'"},
		{"token with newline", "https://exec.example.com", "abc\ndef", time.Second, "character 4 is not visible ASCII"},
		{"token with space", "https://exec.example.com", "abc def", time.Second, "character 4 is not visible ASCII"},
		{"zero timeout", "https://exec.example.com", "", 0, "timeout must be positive"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := NewClient(tt.url, tt.token, tt.timeout)
			if tt.wantErr == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("err = %v, want it to contain %q", err, tt.wantErr)
			}
			if agentrunner.ErrorCode(err) != agentrunner.EINVALID {
				t.Errorf("code = %q, want %q", agentrunner.ErrorCode(err), agentrunner.EINVALID)
			}
			if tt.token != "" && strings.Contains(err.Error(), tt.token) {
				t.Errorf("error %q contains the token", err)
			}
		})
	}
}

func TestBaseURLPathPrefix(t *testing.T) {
	m := NewMock(MockOptions{})
	srv := httptest.NewServer(http.StripPrefix("/api", m))
	t.Cleanup(srv.Close)
	c := newClient(t, srv.URL+"/api/", "")
	rc, err := c.Submit(context.Background(), key, submission(t, strategyFile))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Status(context.Background(), rc.StrategyID); err != nil {
		t.Fatal(err)
	}
	var paths []string
	for _, r := range m.Requests() {
		paths = append(paths, r.Path)
	}
	if diff := cmp.Diff([]string{"/v1/strategies", "/v1/strategies/strat-000001"}, paths); diff != "" {
		t.Errorf("paths (-want +got):\n%s", diff)
	}
}

// TestConcurrentSubmissions submits each of a few strategies from several
// goroutines at once: the mock accepts each key once and every caller gets
// the same strategy id for it.
func TestConcurrentSubmissions(t *testing.T) {
	m, url := startMock(t, MockOptions{})
	c := newClient(t, url, "")
	const keys, callers = 4, 5
	subs := make([]Submission, keys)
	for i := range subs {
		subs[i] = submission(t, fmt.Sprintf(`{"n":%d}`, i))
	}
	ids := make([][]string, keys)
	for i := range ids {
		ids[i] = make([]string, callers)
	}
	var wg sync.WaitGroup
	for k := range keys {
		for j := range callers {
			wg.Go(func() {
				rc, err := c.Submit(context.Background(), fmt.Sprintf("key-%d", k), subs[k])
				if err != nil {
					t.Error(err)
					return
				}
				ids[k][j] = rc.StrategyID
			})
		}
	}
	wg.Wait()
	seen := map[string]bool{}
	for k := range keys {
		for j := range callers {
			if ids[k][j] != ids[k][0] {
				t.Errorf("key-%d: caller %d got %q, caller 0 got %q", k, j, ids[k][j], ids[k][0])
			}
		}
		seen[ids[k][0]] = true
	}
	if len(seen) != keys {
		t.Errorf("%d distinct strategy ids, want %d", len(seen), keys)
	}
	got := m.Strategies()
	if len(got) != keys {
		t.Fatalf("mock accepted %d strategies, want %d", len(got), keys)
	}
	if diff := cmp.Diff(subs, got, cmpopts.SortSlices(func(a, b Submission) bool { return a.SHA256 < b.SHA256 })); diff != "" {
		t.Errorf("strategies (-want +got):\n%s", diff)
	}
	if n := len(m.Requests()); n != keys*callers {
		t.Errorf("mock recorded %d requests, want %d", n, keys*callers)
	}
}
