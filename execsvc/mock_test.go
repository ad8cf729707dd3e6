package execsvc

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// serve sends one request straight to the mock's handler.
func serve(m *Mock, method, path string, header http.Header, body string) *httptest.ResponseRecorder {
	r := httptest.NewRequest(method, path, strings.NewReader(body))
	for k, vs := range header {
		r.Header[k] = vs
	}
	w := httptest.NewRecorder()
	m.ServeHTTP(w, r)
	return w
}

// errorCode decodes the contract's error shape, failing the test when the
// answer does not have it.
func errorCode(t *testing.T, w *httptest.ResponseRecorder) string {
	t.Helper()
	if ct := w.Header().Get("Content-Type"); ct != "application/json" {
		t.Errorf("Content-Type = %q, want application/json", ct)
	}
	var eb errorBody
	// Decode a copy so the caller can still read the body.
	dec := json.NewDecoder(bytes.NewReader(w.Body.Bytes()))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&eb); err != nil || eb.Error.Code == "" || eb.Error.Message == "" {
		t.Fatalf("body is not a contract error (%v): %s", err, w.Body)
	}
	return eb.Error.Code
}

func jsonHeader(key string) http.Header {
	return http.Header{"Content-Type": {"application/json"}, "Idempotency-Key": {key}}
}

// rawBody builds a body by hand, so tests can send what the client never would.
func rawBody(cycleID, sum, strategy string) string {
	return fmt.Sprintf(`{"cycle_id":%q,"sha256":%q,"strategy":%s}`, cycleID, sum, strategy)
}

func TestMockRejectsBadSubmissions(t *testing.T) {
	obj := `{"v":1}`
	good := rawBody("c1", sha([]byte(obj)), obj)
	tests := []struct {
		name   string
		header http.Header
		body   string
		status int
		code   string
		msg    string
	}{
		{"missing key", http.Header{"Content-Type": {"application/json"}}, good, 400, "invalid_request", "Idempotency-Key header is required"},
		{"empty key", jsonHeader(""), good, 400, "invalid_request", "Idempotency-Key is empty"},
		{"two keys", http.Header{"Content-Type": {"application/json"}, "Idempotency-Key": {"a", "b"}}, good, 400, "invalid_request", "exactly one"},
		{"long key", jsonHeader(strings.Repeat("k", 201)), good, 400, "invalid_request", "more than 200"},
		{"non-ASCII key", jsonHeader("clé"), good, 400, "invalid_request", "not printable ASCII"},
		{"no content type", http.Header{"Idempotency-Key": {"k"}}, good, 415, "unsupported_media_type", "application/json"},
		{"text content type", http.Header{"Idempotency-Key": {"k"}, "Content-Type": {"text/plain"}}, good, 415, "unsupported_media_type", "application/json"},
		{"not json", jsonHeader("k"), `cycle_id=c1`, 400, "invalid_request", "not a valid submission object"},
		{"empty body", jsonHeader("k"), ``, 400, "invalid_request", "not a valid submission object"},
		{"trailing data", jsonHeader("k"), good + `{}`, 400, "invalid_request", "data after"},
		{"unknown field", jsonHeader("k"), `{"cycle_id":"c1","sha256":"` + sha([]byte(obj)) + `","strategy":{"v":1},"extra":1}`, 400, "invalid_request", `unknown field \"extra\"`},
		{"missing cycle_id", jsonHeader("k"), `{"sha256":"` + sha([]byte(obj)) + `","strategy":{"v":1}}`, 400, "invalid_request", "cycle_id is missing"},
		{"empty cycle_id", jsonHeader("k"), rawBody("", sha([]byte(obj)), obj), 400, "invalid_request", "cycle_id is empty"},
		{"bad valid_until", jsonHeader("k"), `{"cycle_id":"c1","sha256":"` + sha([]byte(obj)) + `","valid_until":"soon","strategy":{"v":1}}`, 400, "invalid_request", "valid_until \\\"soon\\\" is not an RFC 3339 time"},
		{"missing sha256", jsonHeader("k"), `{"cycle_id":"c1","strategy":{"v":1}}`, 400, "invalid_request", "sha256 is missing"},
		{"short sha256", jsonHeader("k"), rawBody("c1", "abc123", obj), 400, "invalid_request", "not 64 lowercase hex"},
		{"uppercase sha256", jsonHeader("k"), rawBody("c1", strings.ToUpper(sha([]byte(obj))), obj), 400, "invalid_request", "not 64 lowercase hex"},
		{"sha256 of other bytes", jsonHeader("k"), rawBody("c1", sha([]byte(`{"v":2}`)), obj), 400, "invalid_request", "does not match the strategy bytes"},
		// The hash covers the bytes as sent: the same object re-spaced is other bytes.
		{"sha256 of re-spaced strategy", jsonHeader("k"), rawBody("c1", sha([]byte(`{"v": 1}`)), obj), 400, "invalid_request", "does not match"},
		{"missing strategy", jsonHeader("k"), `{"cycle_id":"c1","sha256":"` + sha([]byte(obj)) + `"}`, 400, "invalid_request", "strategy is missing"},
		{"null strategy", jsonHeader("k"), rawBody("c1", sha([]byte("null")), "null"), 400, "invalid_request", "strategy is missing"},
		{"array strategy", jsonHeader("k"), rawBody("c1", sha([]byte("[1]")), "[1]"), 400, "invalid_request", "not a JSON object"},
		{"string strategy", jsonHeader("k"), rawBody("c1", sha([]byte(`"s"`)), `"s"`), 400, "invalid_request", "not a JSON object"},
		{"body over 1 MiB", jsonHeader("k"), rawBody("c1", sha([]byte(obj)), `{"pad":"`+strings.Repeat("x", MaxBodyBytes)+`"}`), 413, "too_large", "larger than"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := NewMock(MockOptions{})
			w := serve(m, "POST", "/v1/strategies", tt.header, tt.body)
			if w.Code != tt.status {
				t.Fatalf("status = %d, want %d; body %s", w.Code, tt.status, w.Body)
			}
			if got := w.Body.String(); !strings.Contains(got, tt.msg) {
				t.Errorf("body %s does not say %q", got, tt.msg)
			}
			if code := errorCode(t, w); code != tt.code {
				t.Errorf("code = %q, want %q", code, tt.code)
			}
			if n := len(m.Strategies()); n != 0 {
				t.Errorf("mock accepted %d strategies, want 0", n)
			}
			reqs := m.Requests()
			if len(reqs) != 1 || reqs[0].StatusCode != tt.status {
				t.Errorf("requests = %+v, want one recorded with status %d", reqs, tt.status)
			}
		})
	}
}

// TestMockHashesBytesAsSent accepts a strategy whose spacing differs from
// what encoding/json would write, and keeps those exact bytes.
func TestMockHashesBytesAsSent(t *testing.T) {
	obj := "{ \"v\" :\n 1 }"
	m := NewMock(MockOptions{})
	w := serve(m, "POST", "/v1/strategies", jsonHeader("k"), rawBody("c1", sha([]byte(obj)), obj))
	if w.Code != http.StatusAccepted {
		t.Fatalf("status = %d, want 202; body %s", w.Code, w.Body)
	}
	want := []Submission{{CycleID: "c1", SHA256: sha([]byte(obj)), Strategy: json.RawMessage(obj)}}
	if diff := cmp.Diff(want, m.Strategies()); diff != "" {
		t.Errorf("strategies (-want +got):\n%s", diff)
	}
}

// TestMockReplayAnswersTheFirstBody checks the replay is the first answer
// byte for byte, with 200 instead of 202.
func TestMockReplayAnswersTheFirstBody(t *testing.T) {
	m := NewMock(MockOptions{Now: (&fakeClock{}).Now})
	obj := `{"v":1}`
	body := rawBody("c1", sha([]byte(obj)), obj)
	first := serve(m, "POST", "/v1/strategies", jsonHeader("k"), body)
	again := serve(m, "POST", "/v1/strategies", jsonHeader("k"), body)
	if first.Code != 202 || again.Code != 200 {
		t.Fatalf("statuses = %d, %d; want 202, 200", first.Code, again.Code)
	}
	if diff := cmp.Diff(first.Body.String(), again.Body.String()); diff != "" {
		t.Errorf("replay body (-first +replay):\n%s", diff)
	}
	want := `{"strategy_id":"strat-000001","status":"acknowledged","received_at":"2026-11-22T14:00:01Z"}`
	if got := first.Body.String(); got != want {
		t.Errorf("body = %s, want %s", got, want)
	}
}

func TestMockRoutes(t *testing.T) {
	tests := []struct {
		method, path string
		status       int
		code, allow  string
	}{
		{"GET", "/v1/strategies", 405, "method_not_allowed", "POST"},
		{"DELETE", "/v1/strategies/strat-000001", 405, "method_not_allowed", "GET"},
		{"GET", "/v1/strategies/", 404, "not_found", ""},
		{"GET", "/v1/strategies/a/b", 404, "not_found", ""},
		{"GET", "/v2/strategies", 404, "not_found", ""},
		{"GET", "/v1/strategies/strat-000001", 404, "not_found", ""},
	}
	for _, tt := range tests {
		t.Run(tt.method+" "+tt.path, func(t *testing.T) {
			m := NewMock(MockOptions{})
			w := serve(m, tt.method, tt.path, nil, "")
			if w.Code != tt.status {
				t.Fatalf("status = %d, want %d", w.Code, tt.status)
			}
			if code := errorCode(t, w); code != tt.code {
				t.Errorf("code = %q, want %q", code, tt.code)
			}
			if got := w.Header().Get("Allow"); got != tt.allow {
				t.Errorf("Allow = %q, want %q", got, tt.allow)
			}
		})
	}
}

func TestMockUnauthorized(t *testing.T) {
	const token = "mock-token"
	tests := []struct {
		name string
		auth []string
	}{
		{"none", nil},
		{"wrong", []string{"Bearer other"}},
		{"not bearer", []string{"Basic " + token}},
		{"lower-case scheme", []string{"bearer " + token}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := NewMock(MockOptions{Token: token})
			w := serve(m, "GET", "/v1/strategies/strat-000001", http.Header{"Authorization": tt.auth}, "")
			if w.Code != http.StatusUnauthorized {
				t.Fatalf("status = %d, want 401", w.Code)
			}
			if code := errorCode(t, w); code != "unauthorized" {
				t.Errorf("code = %q, want unauthorized", code)
			}
			if !strings.HasPrefix(w.Header().Get("WWW-Authenticate"), "Bearer") {
				t.Errorf("WWW-Authenticate = %q, want a Bearer challenge", w.Header().Get("WWW-Authenticate"))
			}
		})
	}
	m := NewMock(MockOptions{Token: token})
	if w := serve(m, "GET", "/v1/strategies/strat-000001", http.Header{"Authorization": {"Bearer " + token}}, ""); w.Code != http.StatusNotFound {
		t.Errorf("with the token: status = %d, want 404 (authorized, unknown id)", w.Code)
	}
}

func TestMockStartClose(t *testing.T) {
	m := NewMock(MockOptions{})
	if err := m.Close(); err != nil {
		t.Fatalf("Close before Start: %v", err)
	}
	url, err := m.Start("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.Start("127.0.0.1:0"); err == nil {
		t.Error("second Start succeeded, want an error")
	}
	resp, err := http.Get(url + "/v1/strategies/none")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Errorf("status = %d, want 404", resp.StatusCode)
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	if err := m.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	if resp, err := http.Get(url + "/v1/strategies/none"); err == nil {
		resp.Body.Close()
		t.Error("request after Close succeeded, want a connection error")
	}
	if _, err := m.Start("127.0.0.1:-1"); err == nil {
		t.Error("Start on a bad address succeeded, want an error")
	}
}

// TestMockRecordsAreCopies checks callers cannot change the record.
func TestMockRecordsAreCopies(t *testing.T) {
	m := NewMock(MockOptions{})
	obj := `{"v":1}`
	serve(m, "POST", "/v1/strategies", jsonHeader("k"), rawBody("c1", sha([]byte(obj)), obj))
	m.Requests()[0].Body[0] = 'X'
	m.Strategies()[0].Strategy[0] = 'X'
	if got := m.Requests()[0].Body[0]; got != '{' {
		t.Errorf("recorded body starts with %q after a caller changed its copy", got)
	}
	if got := m.Strategies()[0].Strategy[0]; got != '{' {
		t.Errorf("recorded strategy starts with %q after a caller changed its copy", got)
	}
}
