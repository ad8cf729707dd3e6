package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentrunner/agentrunner/execsvc"
	"github.com/agentrunner/agentrunner/webhook"
	"github.com/google/go-cmp/cmp"
)

// syncBuffer is output a running command writes while the test reads it.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// awaitOutput waits until the output matches re and returns the first
// submatch; the bound only keeps a broken command from hanging the test.
func awaitOutput(t *testing.T, out *syncBuffer, re *regexp.Regexp) string {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		if m := re.FindStringSubmatch(out.String()); m != nil {
			return m[len(m)-1]
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("the output never matched %s:\n%s", re, out)
	return ""
}

// mockCommand is `execsvc mock` running in-process until stop is called,
// which returns its exit status.
type mockCommand struct {
	url      string
	out, err *syncBuffer
	stop     func() int
}

var mockURL = regexp.MustCompile(`listening on (http://127\.0\.0\.1:\d+)\n`)

func startMockCommand(t *testing.T, args ...string) *mockCommand {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	m := &mockCommand{out: &syncBuffer{}, err: &syncBuffer{}}
	done := make(chan int, 1)
	go func() {
		done <- run(ctx, append([]string{"execsvc", "mock", "--listen", "127.0.0.1:0"}, args...), m.out, m.err)
	}()
	m.stop = func() int {
		cancel()
		return <-done
	}
	t.Cleanup(cancel)
	m.url = awaitOutput(t, m.out, mockURL)
	return m
}

// TestExecsvcMockServesUntilInterrupted: the command serves the contract
// on the port it prints, says how to point a runner at it, prints and
// records each request, completes a strategy at its first poll, and exits
// 0 when interrupted, with a summary.
func TestExecsvcMockServesUntilInterrupted(t *testing.T) {
	record := filepath.Join(t.TempDir(), "requests.jsonl")
	m := startMockCommand(t, "--record", record)
	if !strings.Contains(m.out.String(), "AGENTRUNNER_EXECUTION_SERVICE_URL="+m.url) {
		t.Errorf("the banner does not say how to point a runner at %s:\n%s", m.url, m.out)
	}
	c, err := execsvc.NewClient(m.url, "", 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	obj := []byte(`{"v":1}`)
	sub, _ := execsvc.NewSubmission("c1", obj)
	r, err := c.Submit(t.Context(), "c1/execute/1", sub)
	if err != nil {
		t.Fatal(err)
	}
	if rc, err := c.Status(t.Context(), r.StrategyID); err != nil || rc.Status != execsvc.StatusCompleted {
		t.Errorf("first poll: %+v, %v; want completed", rc, err)
	}
	if code := m.stop(); code != exitOK {
		t.Errorf("exit %d after the interrupt, want 0\n%s", code, m.err)
	}
	for _, want := range []string{" POST /v1/strategies 202 key=c1/execute/1\n", " GET /v1/strategies/strat-000001 200\n", "stopped: 2 request(s), 1 strategy(ies) accepted"} {
		if !strings.Contains(m.out.String(), want) {
			t.Errorf("the output lacks %q:\n%s", want, m.out)
		}
	}
	data, err := os.ReadFile(record)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		var rl recordLine
		if err := json.Unmarshal([]byte(line), &rl); err != nil {
			t.Fatalf("record line %q: %v", line, err)
		}
		got = append(got, rl.Method+" "+rl.Path+" "+string(rl.Body))
	}
	want := []string{`POST /v1/strategies {"cycle_id":"c1","sha256":"` + sub.SHA256 + `","strategy":{"v":1}}`, "GET /v1/strategies/strat-000001 "}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("recorded requests (-want +got):\n%s", diff)
	}
}

// TestExecsvcMockPushesToTheRunner: with --advance and a callback target,
// each strategy moves on by itself and every change is pushed, signed with
// the secret the named variable holds, while polls only report.
func TestExecsvcMockPushesToTheRunner(t *testing.T) {
	secret := "cb-secret-0123"
	t.Setenv("TEST_CALLBACK_SECRET", secret)
	bodies := make(chan string, 4)
	rcv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if err := webhook.Verify([]byte(secret), body, r.Header.Get(webhook.SignatureHeader), time.Now(), time.Minute); err != nil {
			t.Errorf("push: %v", err)
		}
		bodies <- string(body)
		w.WriteHeader(http.StatusAccepted)
	}))
	defer rcv.Close()
	m := startMockCommand(t, "--advance", "20ms", "--callback-url", rcv.URL+"/api/execution/callback", "--callback-secret-env", "TEST_CALLBACK_SECRET")
	c, _ := execsvc.NewClient(m.url, "", 5*time.Second)
	sub, _ := execsvc.NewSubmission("c1", []byte(`{"v":1}`))
	if _, err := c.Submit(t.Context(), "k", sub); err != nil {
		t.Fatal(err)
	}
	var got []string
	for range 2 {
		select {
		case b := <-bodies:
			got = append(got, b)
		case <-time.After(10 * time.Second):
			t.Fatalf("pushes so far %q\n%s", got, m.out)
		}
	}
	want := []string{`{"strategy_id":"strat-000001","status":"executing"}`, `{"strategy_id":"strat-000001","status":"completed"}`}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("pushes (-want +got):\n%s", diff)
	}
	m.stop()
	if !strings.Contains(m.out.String(), "push strat-000001 completed: 202") || strings.Contains(m.out.String()+m.err.String(), secret) {
		t.Errorf("the output does not show the pushes, or shows the secret:\n%s%s", m.out, m.err)
	}
}

// TestExecsvcMockDeadMansSwitch: with --heartbeat-timeout, the mock
// enters safe mode when the beats stop, and says so without a request.
func TestExecsvcMockDeadMansSwitch(t *testing.T) {
	m := startMockCommand(t, "--heartbeat-timeout", "200ms")
	resp, err := http.Post(m.url+"/v1/heartbeat", "application/json",
		strings.NewReader(`{"runner":"crypton","sent_at":"2026-11-27T09:00:00Z","interval_seconds":30}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("heartbeat: %s", resp.Status)
	}
	awaitOutput(t, m.out, regexp.MustCompile(`safe mode since \S+ \(reason (heartbeat_lost)\)`))
}

// TestExecsvcMockRefusesBadFlags: each bad flag is a usage error (exit 2)
// naming the flag, before anything listens.
func TestExecsvcMockRefusesBadFlags(t *testing.T) {
	t.Setenv("TEST_UNSET_SECRET", "")
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"--listen", "9090"}, `--listen "9090": want host:port`},
		{[]string{"--completed-after", "-1"}, "must not be negative"},
		{[]string{"--advance", "-1s"}, "must not be negative"},
		{[]string{"--token-env", "TEST_UNSET_SECRET"}, "--token-env: environment variable TEST_UNSET_SECRET is not set"},
		{[]string{"--token-env", "NOT-A-NAME"}, `--token-env "NOT-A-NAME" is not an environment variable name`},
		{[]string{"--callback-url", "http://127.0.0.1:8080/api/execution/callback"}, "--callback-url and --callback-secret-env go together"},
		{[]string{"--callback-secret-env", "PATH", "--callback-url", "/api/execution/callback"}, "--callback-url: callback URL \"/api/execution/callback\": want an absolute http or https URL"},
	}
	for _, tc := range cases {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			code, _, stderr := cliRun(t, append([]string{"execsvc", "mock"}, tc.args...)...)
			if code != exitUsage || !strings.Contains(stderr, tc.want) {
				t.Errorf("exit %d, stderr %q; want %d naming %q", code, stderr, exitUsage, tc.want)
			}
		})
	}
}
