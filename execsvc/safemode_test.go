package execsvc

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/agentrunner/agentrunner"
	"github.com/agentrunner/agentrunner/internal/clip"
)

// manualClock stands still until a test advances it, so the dead man's
// switch is driven without sleeping.
type manualClock struct {
	mu sync.Mutex
	t  time.Time
}

func newManualClock() *manualClock { return &manualClock{t: t0} }

func (c *manualClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *manualClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// newTimedClient is a client whose heartbeats carry the clock's time.
func newTimedClient(t *testing.T, url, token string, now func() time.Time) *Client {
	t.Helper()
	c := newClient(t, url, token)
	c.now = now
	return c
}

const expiredSHA = "ee0373b77ba64e2591addea739419847ebc2dc88a0ef5f1b2ac8c9e03b7e60cf"

func expiredRequest() SafeModeRequest {
	return SafeModeRequest{
		Reason:         ReasonStrategyExpired,
		Detail:         "strategy of cycle 20261122_140000 expired with no successor",
		StrategySHA256: expiredSHA,
		ExpiredAt:      t0.Add(-time.Minute),
	}
}

const safeKey = "safe-mode/strategy_expired/" + expiredSHA

// lift is an operator's DELETE /v1/safe-mode.
func lift(t *testing.T, url string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodDelete, url+"/v1/safe-mode", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusNoContent || len(body) != 0 || resp.Header.Get("Content-Type") != "" {
		t.Fatalf("DELETE /v1/safe-mode: %d %q (Content-Type %q), want 204 without a body",
			resp.StatusCode, body, resp.Header.Get("Content-Type"))
	}
}

func TestHeartbeat(t *testing.T) {
	clock := newManualClock()
	m, url := startMock(t, MockOptions{Now: clock.Now})
	sent := t0.Add(-3 * time.Second) // the runner's clock is behind the service's
	c := newTimedClient(t, url, "", func() time.Time { return sent })

	safe, err := c.Heartbeat(context.Background(), "crypton", 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if safe {
		t.Error("heartbeat answered safe mode, want normal")
	}
	want := []Request{{
		Method: "POST", Path: "/v1/heartbeat", Time: t0, StatusCode: 200,
		Body: []byte(`{"runner":"crypton","sent_at":"2026-11-22T13:59:57Z","interval_seconds":30}`),
	}}
	if diff := cmp.Diff(want, m.Requests()); diff != "" {
		t.Errorf("requests (-want +got):\n%s", diff)
	}
	// Liveness is the service's clock at receipt, not sent_at.
	if diff := cmp.Diff([]time.Time{t0}, m.Heartbeats()); diff != "" {
		t.Errorf("heartbeats (-want +got):\n%s", diff)
	}
	st, err := c.SafeMode(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(&SafeModeState{LastHeartbeat: t0}, st); diff != "" {
		t.Errorf("safe mode (-want +got):\n%s", diff)
	}
}

func TestHeartbeatIntervalRoundsUpToSeconds(t *testing.T) {
	tests := []struct {
		interval time.Duration
		want     int
	}{
		{time.Nanosecond, 1},
		{500 * time.Millisecond, 1},
		{time.Second, 1},
		{1500 * time.Millisecond, 2},
		{30 * time.Second, 30},
		{MaxHeartbeatInterval, 86400},
	}
	for _, tt := range tests {
		t.Run(tt.interval.String(), func(t *testing.T) {
			m, url := startMock(t, MockOptions{})
			if _, err := newClient(t, url, "").Heartbeat(context.Background(), "r", tt.interval); err != nil {
				t.Fatal(err)
			}
			var body struct {
				IntervalSeconds int `json:"interval_seconds"`
			}
			if err := json.Unmarshal(m.Requests()[0].Body, &body); err != nil {
				t.Fatal(err)
			}
			if body.IntervalSeconds != tt.want {
				t.Errorf("interval_seconds = %d, want %d", body.IntervalSeconds, tt.want)
			}
		})
	}
}

func TestHeartbeatValidatesBeforeSending(t *testing.T) {
	tests := []struct {
		name, runner string
		interval     time.Duration
		wantErr      string
	}{
		{"empty runner", "", time.Second, "runner is empty"},
		{"runner with newline", "a\nb", time.Second, "not printable ASCII"},
		{"long runner", strings.Repeat("r", 201), time.Second, "more than 200"},
		{"zero interval", "r", 0, "must be positive"},
		{"negative interval", "r", -time.Second, "must be positive"},
		{"interval over a day", "r", MaxHeartbeatInterval + time.Second, "at most 24h0m0s"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, url := startMock(t, MockOptions{})
			_, err := newClient(t, url, "").Heartbeat(context.Background(), tt.runner, tt.interval)
			if got := agentrunner.ClassOf(err); got != agentrunner.ClassConfig || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("err = %v (class %q), want class config containing %q", err, got, tt.wantErr)
			}
			if n := len(m.Requests()); n != 0 {
				t.Errorf("mock recorded %d requests, want none", n)
			}
		})
	}
}

func TestEnterSafeMode(t *testing.T) {
	clock := newManualClock()
	m, url := startMock(t, MockOptions{Now: clock.Now})
	c := newClient(t, url, "")
	req := expiredRequest()

	st, err := c.EnterSafeMode(context.Background(), safeKey, req)
	if err != nil {
		t.Fatal(err)
	}
	want := &SafeModeState{SafeMode: true, Since: t0, Reason: ReasonStrategyExpired}
	if diff := cmp.Diff(want, st); diff != "" {
		t.Errorf("state (-want +got):\n%s", diff)
	}

	clock.Advance(time.Minute)
	again, err := c.EnterSafeMode(context.Background(), safeKey, req)
	if err != nil {
		t.Fatal(err)
	}
	replayed := *want
	replayed.Replayed = true
	if diff := cmp.Diff(&replayed, again); diff != "" {
		t.Errorf("replayed state (-want +got):\n%s", diff)
	}

	other := req
	other.Detail = "another detail"
	_, err = c.EnterSafeMode(context.Background(), safeKey, other)
	var apiErr *APIError
	if !errors.As(err, &apiErr) || apiErr.StatusCode != 409 || apiErr.Code != "idempotency_conflict" {
		t.Fatalf("err = %v, want an APIError 409 idempotency_conflict", err)
	}
	if got := agentrunner.ClassOf(err); got != agentrunner.ClassConfig {
		t.Errorf("409: class = %q, want %q", got, agentrunner.ClassConfig)
	}

	body, err := req.Body()
	if err != nil {
		t.Fatal(err)
	}
	wantBody := `{"reason":"strategy_expired","detail":"strategy of cycle 20261122_140000 expired with no successor",` +
		`"strategy_sha256":"` + expiredSHA + `","expired_at":"2026-11-22T13:59:00Z"}`
	if string(body) != wantBody {
		t.Errorf("body = %s, want %s", body, wantBody)
	}
	var got []Request
	for _, r := range m.Requests() {
		got = append(got, Request{Method: r.Method, Path: r.Path, IdempotencyKey: r.IdempotencyKey, StatusCode: r.StatusCode})
	}
	wantReqs := []Request{
		{Method: "POST", Path: "/v1/safe-mode", IdempotencyKey: safeKey, StatusCode: 202},
		{Method: "POST", Path: "/v1/safe-mode", IdempotencyKey: safeKey, StatusCode: 200},
		{Method: "POST", Path: "/v1/safe-mode", IdempotencyKey: safeKey, StatusCode: 409},
	}
	if diff := cmp.Diff(wantReqs, got); diff != "" {
		t.Errorf("requests (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(body, m.Requests()[0].Body); diff != "" {
		t.Errorf("recorded body (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(SafeModeState{SafeMode: true, Since: t0, Reason: ReasonStrategyExpired}, m.SafeMode()); diff != "" {
		t.Errorf("mock state after the conflict (-want +got):\n%s", diff)
	}
}

// TestEnterSafeModeKeepsFirstCause sends a second request under a new key
// while in safe mode: accepted, but the state keeps its first time and
// reason.
func TestEnterSafeModeKeepsFirstCause(t *testing.T) {
	clock := newManualClock()
	_, url := startMock(t, MockOptions{Now: clock.Now})
	c := newClient(t, url, "")
	if _, err := c.EnterSafeMode(context.Background(), "op-1", SafeModeRequest{Reason: ReasonOperator}); err != nil {
		t.Fatal(err)
	}
	clock.Advance(time.Hour)
	st, err := c.EnterSafeMode(context.Background(), safeKey, expiredRequest())
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(&SafeModeState{SafeMode: true, Since: t0, Reason: ReasonOperator}, st); diff != "" {
		t.Errorf("state (-want +got):\n%s", diff)
	}
}

// TestReplayAfterLiftDoesNotReenter: a resend of a request the service
// already acted on must not undo an operator's decision to lift safe mode.
func TestReplayAfterLiftDoesNotReenter(t *testing.T) {
	clock := newManualClock()
	m, url := startMock(t, MockOptions{Now: clock.Now})
	c := newClient(t, url, "")
	first, err := c.EnterSafeMode(context.Background(), safeKey, expiredRequest())
	if err != nil {
		t.Fatal(err)
	}
	clock.Advance(time.Minute)
	lift(t, url)
	again, err := c.EnterSafeMode(context.Background(), safeKey, expiredRequest())
	if err != nil {
		t.Fatal(err)
	}
	if !again.Replayed || !again.Since.Equal(first.Since) {
		t.Errorf("resend = %+v, want the first answer (since %s) replayed", again, first.Since)
	}
	if st := m.SafeMode(); st.SafeMode {
		t.Errorf("mock is in safe mode again after a replay: %+v", st)
	}
}

func TestEnterSafeModeValidatesBeforeSending(t *testing.T) {
	tests := []struct {
		name    string
		key     string
		req     SafeModeRequest
		wantErr string
	}{
		{"empty key", "", expiredRequest(), "idempotency key is empty"},
		{"key with CRLF", "a\r\nX-Evil: 1", expiredRequest(), "not printable ASCII"},
		{"no reason", safeKey, SafeModeRequest{}, "reason is empty"},
		{"reason not a code", safeKey, SafeModeRequest{Reason: "Strategy Expired"}, "is not a code"},
		{"reason too long", safeKey, SafeModeRequest{Reason: strings.Repeat("r", 65)}, "is not a code"},
		{"expired without sha", safeKey, SafeModeRequest{Reason: ReasonStrategyExpired}, "strategy_sha256 is missing"},
		{"bad sha", safeKey, SafeModeRequest{Reason: ReasonOperator, StrategySHA256: "ABC"}, "not 64 lowercase hex"},
		{"long detail", safeKey, SafeModeRequest{Reason: ReasonOperator, Detail: strings.Repeat("d", 1001)}, "more than 1000"},
		{"control in detail", safeKey, SafeModeRequest{Reason: ReasonOperator, Detail: "a\x1b[31m"}, "control character at byte 1"},
		{"bad UTF-8 in detail", safeKey, SafeModeRequest{Reason: ReasonOperator, Detail: "a\xff"}, "not valid UTF-8"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, url := startMock(t, MockOptions{})
			_, err := newClient(t, url, "").EnterSafeMode(context.Background(), tt.key, tt.req)
			if got := agentrunner.ClassOf(err); got != agentrunner.ClassInternal || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("err = %v (class %q), want class internal containing %q", err, got, tt.wantErr)
			}
			if n := len(m.Requests()); n != 0 {
				t.Errorf("mock recorded %d requests, want none", n)
			}
		})
	}
}

// TestDeadMansSwitch drives the mock's switch with a fake clock: beats keep
// it normal, silence past the timeout puts it in safe mode, strategies are
// refused while it lasts, and an operator's DELETE lifts it.
func TestDeadMansSwitch(t *testing.T) {
	const timeout = 2 * time.Minute
	clock := newManualClock()
	m, url := startMock(t, MockOptions{Now: clock.Now, HeartbeatTimeout: timeout})
	c := newTimedClient(t, url, "", clock.Now)
	ctx := context.Background()
	beat := func(want bool) {
		t.Helper()
		safe, err := c.Heartbeat(ctx, "crypton", time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		if safe != want {
			t.Fatalf("heartbeat at %s answered safe_mode %v, want %v", clock.Now().Format(time.RFC3339), safe, want)
		}
	}
	normal := func(lastBeat time.Time) {
		t.Helper()
		if diff := cmp.Diff(SafeModeState{LastHeartbeat: lastBeat}, m.SafeMode()); diff != "" {
			t.Fatalf("at %s (-want +got):\n%s", clock.Now().Format(time.RFC3339), diff)
		}
	}

	// Before the first beat the switch is not armed: a runner that never
	// started is not a runner that died.
	clock.Advance(time.Hour)
	normal(time.Time{})
	start := clock.Now()
	for range 3 {
		beat(false)
		clock.Advance(90 * time.Second)
	}
	last := start.Add(180 * time.Second)
	// 90s after the last beat; then exactly the timeout: not yet.
	normal(last)
	clock.Advance(timeout - 90*time.Second)
	normal(last)

	// Strategies are taken while normal; keep one to replay later.
	accepted := submission(t, `{"v":1}`)
	if _, err := c.Submit(ctx, "before", accepted); err != nil {
		t.Fatal(err)
	}

	clock.Advance(time.Nanosecond)
	tripped := SafeModeState{SafeMode: true, Since: last.Add(timeout), Reason: ReasonHeartbeatLost, LastHeartbeat: last}
	if diff := cmp.Diff(tripped, m.SafeMode()); diff != "" {
		t.Fatalf("past the timeout (-want +got):\n%s", diff)
	}
	st, err := c.SafeMode(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(&tripped, st); diff != "" {
		t.Errorf("GET /v1/safe-mode (-want +got):\n%s", diff)
	}

	// New strategies are refused with 423; a replay starts nothing and is
	// still answered.
	_, err = c.Submit(ctx, "during", submission(t, `{"v":2}`))
	var apiErr *APIError
	if !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusLocked || apiErr.Code != "safe_mode" {
		t.Fatalf("submit in safe mode: err = %v, want an APIError 423 safe_mode", err)
	}
	if got := agentrunner.ClassOf(err); got != agentrunner.ClassConfig || !IsSafeMode(err) {
		t.Errorf("submit in safe mode: class %q, IsSafeMode %v; want config, true", got, IsSafeMode(err))
	}
	if !strings.Contains(err.Error(), "heartbeat_lost") {
		t.Errorf("error %q does not say why the service is in safe mode", err)
	}
	if rc, err := c.Submit(ctx, "before", accepted); err != nil || !rc.Replayed {
		t.Errorf("replay in safe mode: %+v, %v; want a replayed receipt", rc, err)
	}

	// A beat does not lift safe mode; it says so.
	clock.Advance(time.Minute)
	beat(true)
	resumed := clock.Now()

	clock.Advance(time.Minute)
	lift(t, url)
	lifted := clock.Now()
	normal(resumed)
	if _, err := c.Submit(ctx, "after", submission(t, `{"v":3}`)); err != nil {
		t.Fatalf("submit after the lift: %v", err)
	}
	if n := len(m.Strategies()); n != 2 {
		t.Errorf("mock accepted %d strategies, want 2 (before and after safe mode)", n)
	}

	// Re-armed from the lift, not from the older beat: silence for the
	// timeout after the lift trips it again.
	clock.Advance(timeout)
	normal(resumed)
	clock.Advance(time.Second)
	again := SafeModeState{SafeMode: true, Since: lifted.Add(timeout), Reason: ReasonHeartbeatLost, LastHeartbeat: resumed}
	if diff := cmp.Diff(again, m.SafeMode()); diff != "" {
		t.Errorf("after the lift (-want +got):\n%s", diff)
	}
}

// TestLateHeartbeatDoesNotUndoTheSwitch: a beat that arrives after the
// timeout ran out finds the service already in safe mode.
func TestLateHeartbeatDoesNotUndoTheSwitch(t *testing.T) {
	clock := newManualClock()
	m, url := startMock(t, MockOptions{Now: clock.Now, HeartbeatTimeout: time.Minute})
	c := newTimedClient(t, url, "", clock.Now)
	if _, err := c.Heartbeat(context.Background(), "r", 30*time.Second); err != nil {
		t.Fatal(err)
	}
	clock.Advance(5 * time.Minute)
	safe, err := c.Heartbeat(context.Background(), "r", 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if !safe {
		t.Error("late heartbeat answered safe_mode false, want true")
	}
	want := SafeModeState{SafeMode: true, Since: t0.Add(time.Minute), Reason: ReasonHeartbeatLost, LastHeartbeat: t0.Add(5 * time.Minute)}
	if diff := cmp.Diff(want, m.SafeMode()); diff != "" {
		t.Errorf("state (-want +got):\n%s", diff)
	}
}

func TestSwitchDisarmed(t *testing.T) {
	for _, timeout := range []time.Duration{0, -time.Minute} {
		t.Run(timeout.String(), func(t *testing.T) {
			clock := newManualClock()
			m := NewMock(MockOptions{Now: clock.Now, HeartbeatTimeout: timeout})
			hb := `{"runner":"r","sent_at":"2026-11-22T14:00:00Z","interval_seconds":30}`
			if w := serve(m, "POST", "/v1/heartbeat", http.Header{"Content-Type": {"application/json"}}, hb); w.Code != 200 {
				t.Fatalf("heartbeat: %d %s", w.Code, w.Body)
			}
			clock.Advance(30 * 24 * time.Hour)
			if st := m.SafeMode(); st.SafeMode {
				t.Errorf("disarmed switch tripped: %+v", st)
			}
		})
	}
}

func TestMockRejectsBadHeartbeats(t *testing.T) {
	jsonCT := http.Header{"Content-Type": {"application/json"}}
	tests := []struct {
		name   string
		header http.Header
		body   string
		status int
		code   string
		msg    string
	}{
		{"no content type", nil, `{}`, 415, "unsupported_media_type", "application/json"},
		{"not json", jsonCT, `runner=r`, 400, "invalid_request", "not a valid heartbeat object"},
		{"trailing data", jsonCT, `{"runner":"r","sent_at":"2026-11-22T14:00:00Z","interval_seconds":30}{}`, 400, "invalid_request", "data after"},
		{"unknown field", jsonCT, `{"runner":"r","sent_at":"2026-11-22T14:00:00Z","interval_seconds":30,"pid":1}`, 400, "invalid_request", `unknown field \"pid\"`},
		{"missing runner", jsonCT, `{"sent_at":"2026-11-22T14:00:00Z","interval_seconds":30}`, 400, "invalid_request", "runner is missing"},
		{"empty runner", jsonCT, `{"runner":"","sent_at":"2026-11-22T14:00:00Z","interval_seconds":30}`, 400, "invalid_request", "runner is empty"},
		{"missing sent_at", jsonCT, `{"runner":"r","interval_seconds":30}`, 400, "invalid_request", "sent_at is missing"},
		{"bad sent_at", jsonCT, `{"runner":"r","sent_at":"yesterday","interval_seconds":30}`, 400, "invalid_request", `sent_at \"yesterday\" is not an RFC 3339 time`},
		{"missing interval", jsonCT, `{"runner":"r","sent_at":"2026-11-22T14:00:00Z"}`, 400, "invalid_request", "interval_seconds is missing"},
		{"fractional interval", jsonCT, `{"runner":"r","sent_at":"2026-11-22T14:00:00Z","interval_seconds":1.5}`, 400, "invalid_request", "not a whole number"},
		{"string interval", jsonCT, `{"runner":"r","sent_at":"2026-11-22T14:00:00Z","interval_seconds":"30"}`, 400, "invalid_request", "not a whole number"},
		{"zero interval", jsonCT, `{"runner":"r","sent_at":"2026-11-22T14:00:00Z","interval_seconds":0}`, 400, "invalid_request", "must be 1 to 86400"},
		{"interval over a day", jsonCT, `{"runner":"r","sent_at":"2026-11-22T14:00:00Z","interval_seconds":86401}`, 400, "invalid_request", "must be 1 to 86400"},
		{"body over 1 MiB", jsonCT, `{"runner":"` + strings.Repeat("r", MaxBodyBytes) + `"}`, 413, "too_large", "larger than"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := NewMock(MockOptions{HeartbeatTimeout: time.Minute})
			w := serve(m, "POST", "/v1/heartbeat", tt.header, tt.body)
			if w.Code != tt.status {
				t.Fatalf("status = %d, want %d; body %s", w.Code, tt.status, w.Body)
			}
			if !strings.Contains(w.Body.String(), tt.msg) {
				t.Errorf("body %s does not say %q", w.Body, tt.msg)
			}
			if code := errorCode(t, w); code != tt.code {
				t.Errorf("code = %q, want %q", code, tt.code)
			}
			if n := len(m.Heartbeats()); n != 0 {
				t.Errorf("mock counted %d heartbeats, want 0", n)
			}
			if reqs := m.Requests(); len(reqs) != 1 || reqs[0].StatusCode != tt.status {
				t.Errorf("requests = %+v, want one recorded with status %d", reqs, tt.status)
			}
		})
	}
}

func TestMockRejectsBadSafeModeRequests(t *testing.T) {
	good := `{"reason":"operator"}`
	tests := []struct {
		name   string
		header http.Header
		body   string
		status int
		code   string
		msg    string
	}{
		{"missing key", http.Header{"Content-Type": {"application/json"}}, good, 400, "invalid_request", "Idempotency-Key header is required"},
		{"two keys", http.Header{"Content-Type": {"application/json"}, "Idempotency-Key": {"a", "b"}}, good, 400, "invalid_request", "exactly one"},
		{"long key", jsonHeader(strings.Repeat("k", 201)), good, 400, "invalid_request", "more than 200"},
		{"no content type", http.Header{"Idempotency-Key": {"k"}}, good, 415, "unsupported_media_type", "application/json"},
		{"not json", jsonHeader("k"), `reason=operator`, 400, "invalid_request", "not a valid safe-mode request object"},
		{"unknown field", jsonHeader("k"), `{"reason":"operator","force":true}`, 400, "invalid_request", `unknown field \"force\"`},
		{"missing reason", jsonHeader("k"), `{"detail":"x"}`, 400, "invalid_request", "reason is missing"},
		{"null reason", jsonHeader("k"), `{"reason":null}`, 400, "invalid_request", "reason is missing"},
		{"reason not a code", jsonHeader("k"), `{"reason":"DROP TABLE"}`, 400, "invalid_request", "is not a code"},
		{"expired without sha", jsonHeader("k"), `{"reason":"strategy_expired"}`, 400, "invalid_request", "strategy_sha256 is missing"},
		{"empty sha", jsonHeader("k"), `{"reason":"operator","strategy_sha256":""}`, 400, "invalid_request", "strategy_sha256 is empty"},
		{"bad sha", jsonHeader("k"), `{"reason":"operator","strategy_sha256":"xyz"}`, 400, "invalid_request", "not 64 lowercase hex"},
		{"bad expired_at", jsonHeader("k"), `{"reason":"operator","expired_at":"2026-11-22"}`, 400, "invalid_request", "not an RFC 3339 time"},
		{"detail not a string", jsonHeader("k"), `{"reason":"operator","detail":5}`, 400, "invalid_request", "not a valid safe-mode request object"},
		{"body over 1 MiB", jsonHeader("k"), `{"reason":"operator","detail":"` + strings.Repeat("d", MaxBodyBytes) + `"}`, 413, "too_large", "larger than"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := NewMock(MockOptions{})
			w := serve(m, "POST", "/v1/safe-mode", tt.header, tt.body)
			if w.Code != tt.status {
				t.Fatalf("status = %d, want %d; body %s", w.Code, tt.status, w.Body)
			}
			if !strings.Contains(w.Body.String(), tt.msg) {
				t.Errorf("body %s does not say %q", w.Body, tt.msg)
			}
			if code := errorCode(t, w); code != tt.code {
				t.Errorf("code = %q, want %q", code, tt.code)
			}
			if st := m.SafeMode(); st.SafeMode {
				t.Errorf("mock entered safe mode on a refused request: %+v", st)
			}
		})
	}
}

// TestMockSafeModeAnswers checks the answers byte for byte: the GET shape
// with nulls, the POST shape, and its replay.
func TestMockSafeModeAnswers(t *testing.T) {
	clock := newManualClock()
	m := NewMock(MockOptions{Now: clock.Now})
	if w := serve(m, "GET", "/v1/safe-mode", nil, ""); w.Code != 200 ||
		w.Body.String() != `{"safe_mode":false,"since":null,"reason":"","last_heartbeat":null}` {
		t.Errorf("GET before anything: %d %s", w.Code, w.Body)
	}
	first := serve(m, "POST", "/v1/safe-mode", jsonHeader("k"), `{"reason":"operator","detail":"maintenance"}`)
	clock.Advance(time.Second)
	// The same request with other spacing is the same request.
	again := serve(m, "POST", "/v1/safe-mode", jsonHeader("k"), `{ "detail": "maintenance", "reason": "operator" }`)
	want := `{"safe_mode":true,"since":"2026-11-22T14:00:00Z","reason":"operator"}`
	if first.Code != 202 || first.Body.String() != want {
		t.Errorf("POST: %d %s, want 202 %s", first.Code, first.Body, want)
	}
	if again.Code != 200 || again.Body.String() != want {
		t.Errorf("replay: %d %s, want 200 %s", again.Code, again.Body, want)
	}
	if w := serve(m, "GET", "/v1/safe-mode", nil, ""); w.Code != 200 ||
		w.Body.String() != `{"safe_mode":true,"since":"2026-11-22T14:00:00Z","reason":"operator","last_heartbeat":null}` {
		t.Errorf("GET in safe mode: %d %s", w.Code, w.Body)
	}
	// Keys are per endpoint: a strategy may use the same key.
	obj := `{"v":1}`
	if w := serve(m, "POST", "/v1/strategies", jsonHeader("k"), rawBody("c1", sha([]byte(obj)), obj)); w.Code != 423 || errorCode(t, w) != "safe_mode" {
		t.Errorf("strategy in safe mode: %d %s, want 423 safe_mode", w.Code, w.Body)
	}
	if w := serve(m, "DELETE", "/v1/safe-mode", nil, ""); w.Code != 204 || w.Body.Len() != 0 {
		t.Errorf("DELETE: %d %q, want 204 without a body", w.Code, w.Body)
	}
	if w := serve(m, "DELETE", "/v1/safe-mode", nil, ""); w.Code != 204 {
		t.Errorf("DELETE when not in safe mode: %d, want 204", w.Code)
	}
	if w := serve(m, "POST", "/v1/strategies", jsonHeader("k"), rawBody("c1", sha([]byte(obj)), obj)); w.Code != 202 {
		t.Errorf("strategy after the lift: %d %s, want 202", w.Code, w.Body)
	}
}

func TestMockSafeModeRoutes(t *testing.T) {
	tests := []struct {
		method, path string
		allow        string
	}{
		{"GET", "/v1/heartbeat", "POST"},
		{"PUT", "/v1/heartbeat", "POST"},
		{"PUT", "/v1/safe-mode", "GET, POST, DELETE"},
		{"PATCH", "/v1/safe-mode", "GET, POST, DELETE"},
	}
	for _, tt := range tests {
		t.Run(tt.method+" "+tt.path, func(t *testing.T) {
			w := serve(NewMock(MockOptions{}), tt.method, tt.path, nil, "")
			if w.Code != http.StatusMethodNotAllowed {
				t.Fatalf("status = %d, want 405", w.Code)
			}
			if code := errorCode(t, w); code != "method_not_allowed" {
				t.Errorf("code = %q", code)
			}
			if got := w.Header().Get("Allow"); got != tt.allow {
				t.Errorf("Allow = %q, want %q", got, tt.allow)
			}
		})
	}
	// Every new endpoint needs the token, DELETE included.
	m := NewMock(MockOptions{Token: "tok"})
	serve(m, "POST", "/v1/safe-mode", http.Header{"Content-Type": {"application/json"}, "Idempotency-Key": {"k"}, "Authorization": {"Bearer tok"}}, `{"reason":"operator"}`)
	for _, r := range []struct{ method, path, body string }{
		{"POST", "/v1/heartbeat", `{"runner":"r","sent_at":"2026-11-22T14:00:00Z","interval_seconds":30}`},
		{"GET", "/v1/safe-mode", ""},
		{"POST", "/v1/safe-mode", `{"reason":"operator"}`},
		{"DELETE", "/v1/safe-mode", ""},
	} {
		w := serve(m, r.method, r.path, jsonHeader("k2"), r.body)
		if w.Code != http.StatusUnauthorized {
			t.Errorf("%s %s without the token: %d, want 401", r.method, r.path, w.Code)
		}
	}
	if !m.SafeMode().SafeMode || len(m.Heartbeats()) != 0 {
		t.Errorf("unauthorized requests changed the mock: %+v, %d heartbeats", m.SafeMode(), len(m.Heartbeats()))
	}
}

// safeOps calls each new endpoint of the client once.
func safeOps(c *Client) map[string]func(context.Context) error {
	return map[string]func(context.Context) error{
		"heartbeat": func(ctx context.Context) error { _, err := c.Heartbeat(ctx, "r", time.Minute); return err },
		"enter":     func(ctx context.Context) error { _, err := c.EnterSafeMode(ctx, safeKey, expiredRequest()); return err },
		"query":     func(ctx context.Context) error { _, err := c.SafeMode(ctx); return err },
	}
}

func TestSafeModeErrorStatusClasses(t *testing.T) {
	tests := []struct {
		status int
		class  agentrunner.ErrorClass
	}{
		{400, agentrunner.ClassInvalidOutput},
		{401, agentrunner.ClassConfig},
		{404, agentrunner.ClassConfig},
		{409, agentrunner.ClassConfig},
		{423, agentrunner.ClassConfig},
		{429, agentrunner.ClassUnavailable},
		{500, agentrunner.ClassUnavailable},
		{503, agentrunner.ClassUnavailable},
		{204, agentrunner.ClassUnavailable},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprint(tt.status), func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.WriteHeader(tt.status)
				fmt.Fprint(w, `{"error":{"code":"some_code","message":"the reason"}}`)
			}))
			t.Cleanup(srv.Close)
			for op, call := range safeOps(newClient(t, srv.URL, "")) {
				err := call(context.Background())
				if got := agentrunner.ClassOf(err); got != tt.class {
					t.Errorf("%s: class = %q (err %v), want %q", op, got, err, tt.class)
				}
				var apiErr *APIError
				if !errors.As(err, &apiErr) || apiErr.StatusCode != tt.status {
					t.Errorf("%s: err = %v, want an APIError with status %d", op, err, tt.status)
				}
				if got := IsSafeMode(err); got != (tt.status == 423) {
					t.Errorf("%s: IsSafeMode = %v", op, got)
				}
			}
		})
	}
}

// TestSafeModeInvalidAnswers: a success answer the client cannot rely on
// is an unavailable service, named by field.
func TestSafeModeInvalidAnswers(t *testing.T) {
	tests := []struct {
		op, body, wantErr string
	}{
		{"heartbeat", `<html>`, "not a JSON heartbeat answer"},
		{"heartbeat", `{}`, "safe_mode is missing"},
		{"heartbeat", `{"safe_mode":"yes"}`, "not a JSON heartbeat answer"},
		{"enter", `{"safe_mode":false,"since":null,"reason":""}`, "safe_mode is false"},
		{"enter", `{"safe_mode":true,"reason":"operator"}`, "since is missing"},
		{"enter", `{"safe_mode":true,"since":"2026-11-22T14:00:00Z"}`, "reason is missing"},
		{"enter", `{"safe_mode":true,"since":"2026-11-22T14:00:00Z","reason":"Bad Reason"}`, "is not a code"},
		{"enter", `{"safe_mode":true,"since":"noon","reason":"operator"}`, `since "noon" is not an RFC 3339 time`},
		{"query", `[]`, "not a JSON safe-mode state"},
		{"query", `{"since":null}`, "safe_mode is missing"},
		{"query", `{"safe_mode":false,"since":"2026-11-22T14:00:00Z"}`, "but safe_mode is false"},
		{"query", `{"safe_mode":false,"reason":"operator"}`, "but safe_mode is false"},
		{"query", `{"safe_mode":false,"last_heartbeat":"soon"}`, `last_heartbeat "soon" is not an RFC 3339 time`},
		{"query", `{"safe_mode":false,"pad":"` + strings.Repeat("x", MaxBodyBytes) + `"}`, "larger than 1048576 bytes"},
	}
	for _, tt := range tests {
		t.Run(tt.op+" "+clip.String(tt.body, 60), func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.Method == http.MethodPost && r.URL.Path == "/v1/safe-mode" {
					w.WriteHeader(http.StatusAccepted)
				}
				fmt.Fprint(w, tt.body)
			}))
			t.Cleanup(srv.Close)
			err := safeOps(newClient(t, srv.URL, ""))[tt.op](context.Background())
			if got := agentrunner.ClassOf(err); got != agentrunner.ClassUnavailable || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("err = %v (class %q), want class unavailable containing %q", err, got, tt.wantErr)
			}
		})
	}
}

// TestSafeModeAnswersWithUnknownFields: the service may add fields.
func TestSafeModeAnswersWithUnknownFields(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.URL.Path == "/v1/heartbeat":
			fmt.Fprint(w, `{"safe_mode":true,"server":"x"}`)
		case r.Method == http.MethodPost:
			w.WriteHeader(http.StatusAccepted)
			fmt.Fprint(w, `{"safe_mode":true,"since":"2026-11-22T15:00:00+01:00","reason":"operator","by":"ops"}`)
		default:
			fmt.Fprint(w, `{"safe_mode":false,"since":null,"reason":null,"last_heartbeat":"2026-11-22T14:00:00.5Z","version":2}`)
		}
	}))
	t.Cleanup(srv.Close)
	c := newClient(t, srv.URL, "")
	if safe, err := c.Heartbeat(context.Background(), "r", time.Minute); err != nil || !safe {
		t.Errorf("heartbeat: %v, %v; want true", safe, err)
	}
	st, err := c.EnterSafeMode(context.Background(), safeKey, expiredRequest())
	if err != nil {
		t.Fatal(err)
	}
	if !st.Since.Equal(t0) || st.Reason != ReasonOperator || st.Replayed {
		t.Errorf("enter: %+v", st)
	}
	st, err = c.SafeMode(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(&SafeModeState{LastHeartbeat: t0.Add(500 * time.Millisecond)}, st); diff != "" {
		t.Errorf("query (-want +got):\n%s", diff)
	}
}

// TestSafeModeTokenNeverInErrors uses a service that echoes the
// Authorization header in every answer.
func TestSafeModeTokenNeverInErrors(t *testing.T) {
	const token = "tok-ABCDEF123456"
	// Each answer is one that fails every endpoint named with it.
	for format, ops := range map[string][]string{
		`{"error":{"code":"invalid_request","message":"you sent %s"}}`: {"heartbeat", "enter", "query"},
		`{"safe_mode":true,"since":"%s","reason":"operator"}`:          {"enter", "query"},
		`{"safe_mode":false,"last_heartbeat":"%s"}`:                    {"query"},
	} {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if strings.HasPrefix(format, `{"error"`) {
				w.WriteHeader(http.StatusBadRequest)
			} else if r.Method == http.MethodPost && r.URL.Path == "/v1/safe-mode" {
				w.WriteHeader(http.StatusAccepted)
			}
			fmt.Fprintf(w, format, r.Header.Get("Authorization"))
		}))
		calls := safeOps(newClient(t, srv.URL, token))
		for _, op := range ops {
			err := calls[op](context.Background())
			if err == nil {
				t.Errorf("%s with %s: succeeded, want an error", op, format)
				continue
			}
			if strings.Contains(err.Error(), token) {
				t.Errorf("%s: error %q contains the token", op, err)
			}
			if !strings.Contains(err.Error(), "[redacted]") {
				t.Errorf("%s: error %q does not show where the token was redacted", op, err)
			}
		}
		srv.Close()
	}
}

func TestSafeModeUnavailable(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	for op, call := range safeOps(newClient(t, "http://"+addr, "")) {
		if err := call(context.Background()); agentrunner.ClassOf(err) != agentrunner.ClassUnavailable {
			t.Errorf("%s with nothing listening: err = %v, want class unavailable", op, err)
		}
	}
	m, url := startMock(t, MockOptions{})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	for op, call := range safeOps(newClient(t, url, "")) {
		if err := call(ctx); !errors.Is(err, context.Canceled) || agentrunner.ClassOf(err) != agentrunner.ClassUnavailable {
			t.Errorf("%s with a cancelled context: err = %v, want unavailable wrapping context.Canceled", op, err)
		}
	}
	if n := len(m.Requests()); n != 0 {
		t.Errorf("mock recorded %d requests, want 0", n)
	}
}

// TestConcurrentEnterSafeMode sends one key from several goroutines: one
// 202, the rest replays, and every caller sees the same state.
func TestConcurrentEnterSafeMode(t *testing.T) {
	clock := &fakeClock{}
	m, url := startMock(t, MockOptions{Now: clock.Now})
	c := newClient(t, url, "")
	const callers = 8
	states := make([]*SafeModeState, callers)
	var wg sync.WaitGroup
	for i := range callers {
		wg.Go(func() {
			st, err := c.EnterSafeMode(context.Background(), safeKey, expiredRequest())
			if err != nil {
				t.Error(err)
				return
			}
			states[i] = st
		})
	}
	wg.Wait()
	fresh := 0
	for _, st := range states {
		if st == nil {
			t.FailNow()
		}
		if !st.Replayed {
			fresh++
		}
		if !st.Since.Equal(states[0].Since) {
			t.Errorf("since %s differs from %s", st.Since, states[0].Since)
		}
	}
	if fresh != 1 {
		t.Errorf("%d callers got 202, want exactly 1", fresh)
	}
	statuses := map[int]int{}
	for _, r := range m.Requests() {
		statuses[r.StatusCode]++
	}
	if diff := cmp.Diff(map[int]int{202: 1, 200: callers - 1}, statuses); diff != "" {
		t.Errorf("statuses (-want +got):\n%s", diff)
	}
}

func TestSafeModeJSONRoundTrip(t *testing.T) {
	for _, st := range []SafeModeState{
		{},
		{LastHeartbeat: t0},
		{SafeMode: true, Since: t0, Reason: ReasonHeartbeatLost, LastHeartbeat: t0.Add(-3 * time.Minute)},
	} {
		b, err := json.Marshal(st)
		if err != nil {
			t.Fatal(err)
		}
		got, err := ParseSafeModeState(b)
		if err != nil {
			t.Fatalf("%s: %v", b, err)
		}
		if diff := cmp.Diff(&st, got); diff != "" {
			t.Errorf("%s (-want +got):\n%s", b, diff)
		}
		var viaJSON SafeModeState
		if err := json.Unmarshal(b, &viaJSON); err != nil || !cmp.Equal(st, viaJSON) {
			t.Errorf("json.Unmarshal(%s) = %+v, %v", b, viaJSON, err)
		}
	}
	var st SafeModeState
	if err := json.Unmarshal([]byte(`{"safe_mode":true}`), &st); err == nil {
		t.Error("json.Unmarshal accepted a safe mode without since")
	}
}

func TestSafeModeRequestRoundTrip(t *testing.T) {
	for _, req := range []SafeModeRequest{
		expiredRequest(),
		{Reason: ReasonOperator},
		{Reason: "custom_reason_2", Detail: "line one\n\tline two — ünïcode"},
	} {
		body, err := req.Body()
		if err != nil {
			t.Fatal(err)
		}
		got, err := ParseSafeModeRequest(body)
		if err != nil {
			t.Fatalf("%s: %v", body, err)
		}
		if diff := cmp.Diff(req, got); diff != "" {
			t.Errorf("%s (-want +got):\n%s", body, diff)
		}
	}
	// An expiry given in another offset is sent in UTC and is the same instant.
	req := expiredRequest()
	req.ExpiredAt = req.ExpiredAt.In(time.FixedZone("CET", 3600))
	body, err := req.Body()
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(body), `"expired_at":"2026-11-22T13:59:00Z"`) {
		t.Errorf("body %s does not carry expired_at in UTC", body)
	}
	got, err := ParseSafeModeRequest(body)
	if err != nil || !got.equal(req) {
		t.Errorf("parsed %+v, %v; want a request equal to %+v", got, err, req)
	}
}

func TestParseHeartbeatRequest(t *testing.T) {
	got, err := ParseHeartbeatRequest([]byte(`{"runner":"crypton","sent_at":"2026-11-22T15:00:00+01:00","interval_seconds":30}`))
	if err != nil {
		t.Fatal(err)
	}
	if got.Runner != "crypton" || !got.SentAt.Equal(t0) || got.IntervalSeconds != 30 {
		t.Errorf("parsed %+v", got)
	}
	if err := (HeartbeatRequest{Runner: "r", IntervalSeconds: 30}).Validate(); err == nil || !strings.Contains(err.Error(), "sent_at is missing") {
		t.Errorf("zero sent_at: err = %v", err)
	}
}

func TestIsSafeMode(t *testing.T) {
	tests := []struct {
		err  error
		want bool
	}{
		{nil, false},
		{errors.New("423"), false},
		{agentrunner.Fail(agentrunner.ClassConfig, "x: %w", &APIError{StatusCode: 409}), false},
		{agentrunner.Fail(agentrunner.ClassConfig, "x: %w", &APIError{StatusCode: 423, Code: "safe_mode"}), true},
	}
	for _, tt := range tests {
		if got := IsSafeMode(tt.err); got != tt.want {
			t.Errorf("IsSafeMode(%v) = %v, want %v", tt.err, got, tt.want)
		}
	}
}
