package main

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/agentrunner/agentrunner/internal/syncbuf"
)

// servedCLI is serve run in this process on an example workspace.
type servedCLI struct {
	t      *testing.T
	dir    string
	base   string
	stderr *syncbuf.Buffer
	done   chan int
}

// startServeCLI starts serve on the workspace dir with a schedule of 24h
// (one cycle at start), and returns once the API answers; serve is
// stopped at the end of the test.
func startServeCLI(t *testing.T, dir string) *servedCLI {
	t.Helper()
	addr := cliFreeAddr(t)
	t.Setenv("AGENTRUNNER_SERVER_LISTEN", addr)
	t.Setenv("AGENTRUNNER_SCHEDULE_EVERY", "24h")
	ctx, cancel := context.WithCancel(t.Context())
	s := &servedCLI{t: t, dir: dir, base: "http://" + addr, stderr: &syncbuf.Buffer{}, done: make(chan int, 1)}
	go func() { s.done <- run(ctx, []string{"serve", "-c", cliConfigPath(dir)}, &syncbuf.Buffer{}, s.stderr) }()
	t.Cleanup(func() {
		cancel()
		select {
		case <-s.done:
		case <-time.After(10 * time.Second):
			t.Error("serve did not return within 10s of its context ending")
		}
	})
	s.await("the API to answer", func() bool {
		status, _, err := cliGet(ctx, s.base+"/health/live")
		return err == nil && status == http.StatusOK
	})
	return s
}

// await polls ok every 20ms for up to 15s, failing the test with what
// if it never holds or serve exits.
func (s *servedCLI) await(what string, ok func() bool) {
	s.t.Helper()
	for deadline := time.Now().Add(15 * time.Second); !ok(); time.Sleep(20 * time.Millisecond) {
		select {
		case code := <-s.done:
			s.t.Fatalf("serve exited %d while waiting for %s; stderr:\n%s", code, what, s.stderr.String())
		default:
		}
		if time.Now().After(deadline) {
			s.t.Fatalf("no %s within 15s; stderr:\n%s", what, s.stderr.String())
		}
	}
}

// getJSON decodes the answer of GET path into v, failing on any status
// but 200.
func (s *servedCLI) getJSON(path string, v any) {
	s.t.Helper()
	status, body, err := cliGet(s.t.Context(), s.base+path)
	if err != nil || status != http.StatusOK {
		s.t.Fatalf("GET %s: %d %v %s", path, status, err, body)
	}
	if err := json.Unmarshal(body, v); err != nil {
		s.t.Fatalf("GET %s: %v\n%s", path, err, body)
	}
}

// TestServeMailboxSizeFollowsAReload: after a reload that changes
// mailbox.max_messages, the API shows the new size, as the engine keeps
// it, not the one serve started with.
func TestServeMailboxSizeFollowsAReload(t *testing.T) {
	cliMockExec(t)
	dir := cliExample(t)
	s := startServeCLI(t, dir)
	var box struct {
		MaxMessages int `json:"max_messages"`
	}
	s.getJSON("/api/mailboxes/plan", &box)
	if box.MaxMessages != 5 {
		t.Fatalf("max_messages %d before the reload, want 5", box.MaxMessages)
	}
	path := cliConfigPath(dir)
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	edited := strings.Replace(string(data), "mailbox:\n  max_messages: 5\n", "mailbox:\n  max_messages: 9\n", 1)
	if edited == string(data) {
		t.Fatal("the example has no mailbox.max_messages: 5 to edit")
	}
	if err := os.WriteFile(path, []byte(edited), 0o644); err != nil {
		t.Fatal(err)
	}
	resp, err := http.Post(s.base+"/api/admin/reload", "application/json", nil)
	if err != nil || resp.StatusCode != http.StatusAccepted {
		t.Fatalf("POST /api/admin/reload: %v %v", resp, err)
	}
	resp.Body.Close()
	s.await("the reload applied", func() bool {
		_, body, _ := cliGet(t.Context(), s.base+"/api/audit?limit=1")
		return strings.Contains(string(body), `"result": "reloaded `)
	})
	s.getJSON("/api/mailboxes/plan", &box)
	if box.MaxMessages != 9 {
		t.Errorf("max_messages %d after the reload, want 9", box.MaxMessages)
	}
}
