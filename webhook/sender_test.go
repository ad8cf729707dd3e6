package webhook

import (
	"context"
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
)

// testSecret is distinctive so a test can look for it in every error.
var testSecret = []byte("S3CRET-never-in-errors-0123456789")

// testNow is the signing time of every delivery in these tests; the fake
// receiver verifies against it, so nothing depends on the wall clock.
var testNow = time.Date(2026, 5, 1, 12, 47, 5, 0, time.UTC)

// received is what the fake receiver saw of one request.
type received struct {
	Method, Path, Query string
	ContentType         string
	Event, Key, Agent   string
	Body                string
	// Verified is Verify's verdict on the signature header.
	Verified string
}

// receiver is a webhook receiver on 127.0.0.1 that verifies each request's
// signature the way docs/webhooks.md tells receivers to, records it and
// answers with respond.
type receiver struct {
	*httptest.Server
	mu  sync.Mutex
	got []received
}

func newReceiver(t *testing.T, respond http.HandlerFunc) *receiver {
	t.Helper()
	rc := &receiver{}
	rc.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			t.Errorf("receiver: read body: %v", err)
		}
		verdict := "ok"
		if err := Verify(testSecret, body, r.Header.Get(SignatureHeader), testNow.Add(time.Second), 5*time.Minute); err != nil {
			verdict = err.Error()
		}
		rc.mu.Lock()
		rc.got = append(rc.got, received{
			Method: r.Method, Path: r.URL.Path, Query: r.URL.RawQuery,
			ContentType: r.Header.Get("Content-Type"),
			Event:       r.Header.Get(EventHeader), Key: r.Header.Get(IdempotencyHeader), Agent: r.Header.Get("User-Agent"),
			Body: string(body), Verified: verdict,
		})
		rc.mu.Unlock()
		respond(w, r)
	}))
	t.Cleanup(rc.Close)
	return rc
}

func (rc *receiver) requests() []received {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return append([]received(nil), rc.got...)
}

func newTestSender(t *testing.T, url string, timeout time.Duration) *Sender {
	t.Helper()
	s, err := NewSender(url, testSecret, timeout)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// testBody is a stored event body and its id and kind.
func testBody(t *testing.T) (id, kind string, body []byte) {
	t.Helper()
	body, err := exampleEvent.Body()
	if err != nil {
		t.Fatal(err)
	}
	return exampleEvent.ID, exampleEvent.Kind, body
}

func TestDeliverSendsSignedEvent(t *testing.T) {
	rc := newReceiver(t, func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusNoContent) })
	s := newTestSender(t, rc.URL+"/hooks/ops?team=trading", 5*time.Second)
	id, kind, body := testBody(t)
	if err := s.Deliver(context.Background(), id, kind, body, testNow); err != nil {
		t.Fatalf("Deliver: %v", err)
	}
	want := []received{{
		Method: "POST", Path: "/hooks/ops", Query: "team=trading",
		ContentType: "application/json",
		Event:       "escalation", Key: "escalation/20260501_120000/research", Agent: "agentrunner",
		Body: exampleBody, Verified: "ok",
	}}
	if diff := cmp.Diff(want, rc.requests()); diff != "" {
		t.Errorf("received (-want +got):\n%s", diff)
	}
	// The receiver's check is real: a delivery signed an hour ago fails it.
	if err := s.Deliver(context.Background(), id, kind, body, testNow.Add(-time.Hour)); err != nil {
		t.Fatal(err)
	}
	if got := rc.requests()[1].Verified; !strings.Contains(got, ErrSignatureAge.Error()) {
		t.Errorf("a delivery signed an hour ago was verified as %q, want refused by age", got)
	}
}

func TestDeliverOutcomes(t *testing.T) {
	tests := []struct {
		name       string
		respond    http.HandlerFunc
		want       bool // delivered
		status     int
		retryable  bool
		retryAfter time.Duration
		says       string
	}{
		{name: "200", respond: func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, `{"ok":true}`) }, want: true},
		{name: "202 without body", respond: status(http.StatusAccepted, ""), want: true},
		{name: "500", respond: status(500, `{"error":"database down"}`), status: 500, retryable: true, says: `HTTP 500: {"error":"database down"}`},
		{name: "502", respond: status(502, "bad gateway"), status: 502, retryable: true},
		{name: "503 with Retry-After date", respond: func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Retry-After", testNow.Add(2*time.Minute).Format(http.TimeFormat))
			w.WriteHeader(503)
		}, status: 503, retryable: true, retryAfter: 2 * time.Minute, says: "retry after 2m0s"},
		{name: "429 with Retry-After seconds", respond: func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Retry-After", "7")
			w.WriteHeader(429)
		}, status: 429, retryable: true, retryAfter: 7 * time.Second, says: "HTTP 429, retry after 7s"},
		{name: "429 with Retry-After too long", respond: func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Retry-After", "99999999999")
			w.WriteHeader(429)
		}, status: 429, retryable: true, retryAfter: 24 * time.Hour},
		{name: "429 with a bad Retry-After", respond: func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Retry-After", "soon")
			w.WriteHeader(429)
		}, status: 429, retryable: true},
		{name: "429 with a Retry-After in the past", respond: func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Retry-After", testNow.Add(-time.Minute).Format(http.TimeFormat))
			w.WriteHeader(429)
		}, status: 429, retryable: true},
		{name: "408", respond: status(408, ""), status: 408, retryable: true},
		{name: "400", respond: status(400, "missing field\x00 \n\n  kind"), status: 400, says: "HTTP 400: missing field kind"},
		{name: "400 ignores Retry-After", respond: func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Retry-After", "7")
			w.WriteHeader(400)
		}, status: 400},
		{name: "401", respond: status(401, ""), status: 401},
		{name: "404", respond: status(404, ""), status: 404},
		{name: "410", respond: status(410, ""), status: 410},
		{name: "413", respond: status(413, ""), status: 413},
		{name: "huge error body is clipped", respond: status(500, strings.Repeat("x", 5<<20)), status: 500, retryable: true, says: strings.Repeat("x", maxSnippet) + "…"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rc := newReceiver(t, tt.respond)
			s := newTestSender(t, rc.URL, 5*time.Second)
			id, kind, body := testBody(t)
			err := s.Deliver(context.Background(), id, kind, body, testNow)
			if got := len(rc.requests()); got != 1 {
				t.Errorf("receiver got %d requests, want 1 (no retries inside Deliver)", got)
			}
			if tt.want {
				if err != nil {
					t.Fatalf("Deliver: %v", err)
				}
				return
			}
			var de *DeliveryError
			if !errors.As(err, &de) {
				t.Fatalf("error %v (%T) is not a *DeliveryError", err, err)
			}
			got := [3]any{de.Status, de.Retryable, de.RetryAfter}
			if want := [3]any{tt.status, tt.retryable, tt.retryAfter}; got != want {
				t.Errorf("status, retryable, retry after = %v, want %v", got, want)
			}
			if !strings.Contains(err.Error(), tt.says) {
				t.Errorf("error %q does not say %q", err, tt.says)
			}
			if len(err.Error()) > 600 {
				t.Errorf("error is %d bytes long", len(err.Error()))
			}
		})
	}
}

func status(code int, body string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(code)
		io.WriteString(w, body)
	}
}

func TestDeliverDoesNotFollowRedirects(t *testing.T) {
	elsewhere := newReceiver(t, status(200, ""))
	rc := newReceiver(t, func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, elsewhere.URL+"/other/PATHTOKEN-x?token=QUERYTOKEN", http.StatusTemporaryRedirect)
	})
	s := newTestSender(t, rc.URL, 5*time.Second)
	id, kind, body := testBody(t)
	err := s.Deliver(context.Background(), id, kind, body, testNow)
	var de *DeliveryError
	if !errors.As(err, &de) || de.Status != 307 || de.Retryable {
		t.Fatalf("err = %v, want a non-retryable 307", err)
	}
	if n := len(elsewhere.requests()); n != 0 {
		t.Errorf("the redirect was followed: the other server got %d requests", n)
	}
	host := strings.TrimPrefix(elsewhere.URL, "http://")
	if !strings.Contains(err.Error(), "redirects to "+host) {
		t.Errorf("error %q does not name the redirect's host %s", err, host)
	}
	for _, leak := range []string{"PATHTOKEN", "QUERYTOKEN"} {
		if strings.Contains(err.Error(), leak) {
			t.Errorf("error %q quotes the Location's %s", err, leak)
		}
	}
}

func TestDeliverTimeout(t *testing.T) {
	release := make(chan struct{})
	rc := newReceiver(t, func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-release:
		}
	})
	defer close(release) // before rc.Close, which waits for the handler
	s := newTestSender(t, rc.URL, 100*time.Millisecond)
	id, kind, body := testBody(t)
	err := s.Deliver(context.Background(), id, kind, body, testNow)
	var de *DeliveryError
	if !errors.As(err, &de) || !de.Retryable || de.Status != 0 {
		t.Fatalf("err = %v, want a retryable error without status", err)
	}
	var ne net.Error
	if !errors.As(err, &ne) || !ne.Timeout() {
		t.Errorf("err = %v, want a timeout in its chain", err)
	}
}

func TestDeliverConnectionRefused(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	s := newTestSender(t, "http://"+addr+"/hook", 5*time.Second)
	id, kind, body := testBody(t)
	err = s.Deliver(context.Background(), id, kind, body, testNow)
	var de *DeliveryError
	if !errors.As(err, &de) || !de.Retryable || de.Status != 0 {
		t.Fatalf("err = %v, want a retryable error without status", err)
	}
	if !strings.Contains(err.Error(), "to http://"+addr+":") {
		t.Errorf("error %q does not name the receiver", err)
	}
}

func TestDeliverCanceled(t *testing.T) {
	rc := newReceiver(t, status(200, ""))
	s := newTestSender(t, rc.URL, 5*time.Second)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	id, kind, body := testBody(t)
	err := s.Deliver(ctx, id, kind, body, testNow)
	var de *DeliveryError
	if !errors.As(err, &de) || !de.Retryable || !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want a retryable error wrapping context.Canceled", err)
	}
	if n := len(rc.requests()); n != 0 {
		t.Errorf("receiver got %d requests after cancellation", n)
	}
}

func TestDeliverRefusesBadInput(t *testing.T) {
	id, kind, body := testBody(t)
	tests := []struct {
		name     string
		id, kind string
		body     string
		now      time.Time
		says     string
	}{
		{"id with a newline", "a\nb", kind, string(body), testNow, "not printable ASCII"},
		{"empty id", "", kind, string(body), testNow, "id is empty"},
		{"kind with upper case", id, "Escalation", string(body), testNow, "not allowed"},
		{"zero signing time", id, kind, string(body), time.Time{}, "signing time is not set"},
		{"empty body", id, kind, "", testNow, "body is empty"},
		{"body not JSON", id, kind, "escalation!", testNow, "not a JSON event"},
		{"body a JSON array", id, kind, "[]", testNow, "not a JSON event"},
		{"body too large", id, kind, `{"x":"` + strings.Repeat("a", MaxBodyBytes) + `"}`, testNow, "more than 262144"},
		{"id not the body's", "another-id", kind, string(body), testNow, "body's id is not the Idempotency-Key"},
		{"kind not the body's", id, KindResumed, string(body), testNow, "body's kind is not the Agentrunner-Event"},
		{"body without id", id, kind, `{"kind":"escalation"}`, testNow, "body's id"},
	}
	rc := newReceiver(t, status(200, ""))
	s := newTestSender(t, rc.URL, 5*time.Second)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := s.Deliver(context.Background(), tt.id, tt.kind, []byte(tt.body), tt.now)
			var de *DeliveryError
			if !errors.As(err, &de) || de.Retryable || de.Status != 0 {
				t.Fatalf("err = %v, want a non-retryable error without status", err)
			}
			if !strings.Contains(err.Error(), tt.says) {
				t.Errorf("error %q does not say %q", err, tt.says)
			}
		})
	}
	if n := len(rc.requests()); n != 0 {
		t.Errorf("receiver got %d requests of refused input", n)
	}
}

func TestNewSenderRefuses(t *testing.T) {
	tests := []struct {
		name    string
		url     string
		secret  []byte
		timeout time.Duration
		says    string
	}{
		{"empty URL", "", testSecret, time.Second, "scheme must be http or https"},
		{"ftp", "ftp://example.com/hook", testSecret, time.Second, `got "ftp"`},
		{"no scheme", "example.com/hook", testSecret, time.Second, "scheme must be"},
		{"no host", "https:///hook", testSecret, time.Second, "host is missing"},
		{"port only", "https://:443/hook", testSecret, time.Second, "host is missing"},
		{"unparsable", "https://[::1/PATHTOKEN", testSecret, time.Second, "cannot parse it"},
		{"credentials", "https://user:PASSWORD1@example.com/hook", testSecret, time.Second, "must not contain credentials"},
		{"fragment", "https://example.com/hook#PATHTOKEN", testSecret, time.Second, "fragment"},
		{"empty fragment", "https://example.com/hook#", testSecret, time.Second, "fragment"},
		{"no secret", "https://example.com/hook", nil, time.Second, "0 bytes, fewer than 16"},
		{"short secret", "https://example.com/hook", []byte("S3CRET-short"), time.Second, "12 bytes, fewer than 16"},
		{"zero timeout", "https://example.com/hook", testSecret, 0, "timeout must be positive"},
		{"negative timeout", "https://example.com/hook", testSecret, -time.Second, "timeout must be positive"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := NewSender(tt.url, tt.secret, tt.timeout)
			if err == nil {
				t.Fatalf("NewSender accepted it: %+v", s)
			}
			if !strings.Contains(err.Error(), tt.says) {
				t.Errorf("error %q does not say %q", err, tt.says)
			}
			for _, leak := range []string{"S3CRET", "PASSWORD1", "PATHTOKEN"} {
				if strings.Contains(err.Error(), leak) {
					t.Errorf("error %q quotes %s", err, leak)
				}
			}
		})
	}
}

func TestNewSenderCopiesSecret(t *testing.T) {
	rc := newReceiver(t, status(200, ""))
	secret := append([]byte(nil), testSecret...)
	s, err := NewSender(rc.URL, secret, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	secret[0] = 'X' // the caller reuses its buffer
	id, kind, body := testBody(t)
	if err := s.Deliver(context.Background(), id, kind, body, testNow); err != nil {
		t.Fatal(err)
	}
	if got := rc.requests()[0].Verified; got != "ok" {
		t.Errorf("signature verified as %q after the caller changed its secret buffer", got)
	}
}

// TestSecretNeverInErrors drives every kind of failure against a receiver
// that echoes everything it knows, the secret included, and looks for the
// secret and the URL's tokens in the errors.
func TestSecretNeverInErrors(t *testing.T) {
	echo := func(code int) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(code)
			fmt.Fprintf(w, "%s %s %s secret=%s decoded=%s query=%s", r.Method, r.URL.RequestURI(), r.Header, testSecret, r.URL.Path, r.URL.Query().Get("token"))
		}
	}
	cutSecret := func(w http.ResponseWriter, r *http.Request) {
		// The secret straddles the end of what is read of the answer.
		w.WriteHeader(500)
		io.WriteString(w, strings.Repeat(" ", maxResponseBytes-10)+string(testSecret))
	}
	redirect := func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "http://example.invalid/"+string(testSecret)+"?token="+string(testSecret), http.StatusFound)
	}
	const path = "/hooks/PATHTOKEN%2Fabc/x"
	const query = "?token=QUERYTOKEN&x=1"
	var errs []error
	for _, h := range []http.HandlerFunc{echo(500), echo(400), echo(429), cutSecret, redirect} {
		rc := newReceiver(t, h)
		s := newTestSender(t, rc.URL+path+query, 5*time.Second)
		id, kind, body := testBody(t)
		errs = append(errs, s.Deliver(context.Background(), id, kind, body, testNow))
		errs = append(errs, s.Deliver(context.Background(), "x\n", kind, body, testNow))
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	s := newTestSender(t, "http://"+addr+path+query, 5*time.Second)
	id, kind, body := testBody(t)
	errs = append(errs, s.Deliver(context.Background(), id, kind, body, testNow))
	_, err = NewSender("http://"+addr+path+query, testSecret[:10], time.Second)
	errs = append(errs, err)

	for i, err := range errs {
		if err == nil {
			t.Fatalf("case %d: no error", i)
		}
		msg := err.Error()
		for _, leak := range []string{"S3CRET", "PATHTOKEN", "QUERYTOKEN"} {
			if strings.Contains(msg, leak) {
				t.Errorf("case %d: error %q contains %q", i, msg, leak)
			}
		}
	}
	if !strings.Contains(errs[0].Error(), "[redacted]") {
		t.Errorf("the echo was not redacted but removed: %q", errs[0])
	}
}
