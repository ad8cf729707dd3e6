package execsvc

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/agentrunner/agentrunner/internal/clocktest"
	"github.com/agentrunner/agentrunner/webhook"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

// receiver is a runner's callback endpoint on loopback: it verifies each
// push's signature as serve does and answers with status.
type receiver struct {
	url    string
	bodies chan string
}

func newReceiver(t *testing.T, secret []byte, now func() time.Time, status int) *receiver {
	t.Helper()
	r := &receiver{bodies: make(chan string, 16)}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, _ := io.ReadAll(req.Body)
		if err := webhook.Verify(secret, body, req.Header.Get(webhook.SignatureHeader), now(), 5*time.Minute); err != nil {
			t.Errorf("push signature: %v", err)
		}
		if ct := req.Header.Get("Content-Type"); ct != "application/json" {
			t.Errorf("push Content-Type %q", ct)
		}
		r.bodies <- string(body)
		w.WriteHeader(status)
		io.WriteString(w, `{"error":{"code":"x","message":"refused"}}`)
	}))
	t.Cleanup(srv.Close)
	r.url = srv.URL + "/api/execution/callback"
	return r
}

// next is the next push's body; the bound only keeps a broken mock from
// hanging the test.
func (r *receiver) next(t *testing.T) string {
	t.Helper()
	select {
	case b := <-r.bodies:
		return b
	case <-time.After(10 * time.Second):
		t.Fatal("no push arrived")
		return ""
	}
}

// submitTo hands one strategy to the mock at url and returns its id.
func submitTo(t *testing.T, url string) (*Client, string) {
	t.Helper()
	c, err := NewClient(url, "", 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	obj := []byte(`{"v":1}`)
	r, err := c.Submit(context.Background(), "k1", Submission{CycleID: "c1", SHA256: sha(obj), Strategy: obj})
	if err != nil {
		t.Fatal(err)
	}
	return c, r.StrategyID
}

// TestMockAdvancesAndPushes: with Advance, a strategy moves on by itself
// (on a fake clock, so nothing sleeps), each change pushed to the runner,
// signed, in order; a poll afterwards reports the final status.
func TestMockAdvancesAndPushes(t *testing.T) {
	cases := []struct {
		name     string
		failWith string
		want     []string
	}{
		{"completes", "", []string{`{"strategy_id":"strat-000001","status":"executing"}`, `{"strategy_id":"strat-000001","status":"completed"}`}},
		{"fails", "exchange down", []string{`{"strategy_id":"strat-000001","status":"executing"}`, `{"strategy_id":"strat-000001","status":"error","error":"exchange down"}`}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			clock := clocktest.New(time.Date(2026, 11, 27, 9, 0, 0, 0, time.UTC))
			secret := []byte("s3cret")
			rcv := newReceiver(t, secret, clock.Now, http.StatusAccepted)
			m := NewMock(MockOptions{CompletedAfter: 1 << 30, FailWith: tc.failWith, Now: clock.Now, After: clock.After,
				Advance: time.Minute, Callback: MockCallback{URL: rcv.url, Secret: secret}})
			url, err := m.Start("127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			defer m.Close()
			c, id := submitTo(t, url)
			got := []string{rcv.next(t), rcv.next(t)}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("pushes (-want +got):\n%s", diff)
			}
			rc, err := c.Status(context.Background(), id)
			if err != nil || !rc.Status.Terminal() || rc.Error != tc.failWith {
				t.Errorf("poll after the pushes: %+v, %v", rc, err)
			}
			if diff := cmp.Diff([]time.Duration{time.Minute, time.Minute}, clock.Waits()); diff != "" {
				t.Errorf("waits (-want +got):\n%s", diff)
			}
		})
	}
}

// TestMockPushesWhatPollsChange: without Advance, the changes polls make
// are pushed too (never the first acknowledged, which the receipt said),
// and a refused push is recorded with the runner's answer.
func TestMockPushesWhatPollsChange(t *testing.T) {
	secret := []byte("s3cret")
	rcv := newReceiver(t, secret, time.Now, http.StatusUnauthorized)
	var hooked []Push
	m := NewMock(MockOptions{ExecutingAfter: 1, CompletedAfter: 2, Callback: MockCallback{URL: rcv.url, Secret: secret},
		OnPush: func(p Push) { hooked = append(hooked, p) }})
	url, err := m.Start("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	c, id := submitTo(t, url)
	for range 3 {
		if _, err := c.Status(context.Background(), id); err != nil {
			t.Fatal(err)
		}
	}
	rcv.next(t)
	rcv.next(t)
	m.Close() // waits for the sender: Pushes is complete
	want := []Push{
		{StrategyID: id, Status: StatusExecuting, StatusCode: 401, Failure: `{"error":{"code":"x","message":"refused"}}`},
		{StrategyID: id, Status: StatusCompleted, StatusCode: 401, Failure: `{"error":{"code":"x","message":"refused"}}`},
	}
	if diff := cmp.Diff(want, m.Pushes(), cmpopts.IgnoreFields(Push{}, "Time")); diff != "" {
		t.Errorf("pushes (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(m.Pushes(), hooked); diff != "" {
		t.Errorf("pushes the hook saw (-Pushes +hook):\n%s", diff)
	}
}

// TestMockPushesNothingUnasked: without a callback URL nothing is pushed,
// and Advance alone still moves strategies on.
func TestMockPushesNothingUnasked(t *testing.T) {
	clock := clocktest.New(time.Date(2026, 11, 27, 9, 0, 0, 0, time.UTC))
	m := NewMock(MockOptions{CompletedAfter: 1 << 30, Now: clock.Now, After: clock.After, Advance: time.Second})
	url, err := m.Start("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	_, id := submitTo(t, url)
	m.Close() // waits for the advance to end
	w := serve(m, http.MethodGet, "/v1/strategies/"+id, nil, "")
	var rc Receipt
	if err := json.Unmarshal(w.Body.Bytes(), &rc); err != nil || rc.Status != StatusCompleted {
		t.Errorf("after Advance twice: %s (%v), want completed", w.Body, err)
	}
	if p := m.Pushes(); len(p) != 0 {
		t.Errorf("pushed %v without a callback URL", p)
	}
}

func TestMockCallbackValidate(t *testing.T) {
	cases := []struct {
		name string
		cb   MockCallback
		want string
	}{
		{"good", MockCallback{URL: "http://127.0.0.1:8080/api/execution/callback", Secret: []byte("s")}, ""},
		{"relative", MockCallback{URL: "/api/execution/callback", Secret: []byte("s")}, "absolute http or https URL"},
		{"ftp", MockCallback{URL: "ftp://h/x", Secret: []byte("s")}, "absolute http or https URL"},
		{"credentials", MockCallback{URL: "http://u:p@h/x", Secret: []byte("s")}, "credentials"},
		{"no secret", MockCallback{URL: "http://h/x"}, "secret is empty"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.cb.Validate()
			if tc.want == "" && err != nil || tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)) {
				t.Errorf("Validate() = %v, want %q", err, tc.want)
			}
		})
	}
}

// TestMockOnRequest: the hook sees every request once answered, refused
// ones too, with its status; the Authorization header is not in it.
func TestMockOnRequest(t *testing.T) {
	var seen []Request
	m := NewMock(MockOptions{Token: "tok", OnRequest: func(r Request) { seen = append(seen, r) }})
	serve(m, http.MethodGet, "/v1/account", http.Header{"Authorization": {"Bearer tok"}}, "")
	serve(m, http.MethodGet, "/v1/account", nil, "")
	serve(m, http.MethodDelete, "/v1/heartbeat", http.Header{"Authorization": {"Bearer tok"}}, "")
	got := make([]string, len(seen))
	for i, r := range seen {
		got[i] = r.Method + " " + r.Path + " " + http.StatusText(r.StatusCode)
	}
	want := []string{"GET /v1/account OK", "GET /v1/account Unauthorized", "DELETE /v1/heartbeat Method Not Allowed"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("requests seen (-want +got):\n%s", diff)
	}
}
