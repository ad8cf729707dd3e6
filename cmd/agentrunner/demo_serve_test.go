package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/agentrunner/agentrunner/internal/syncbuf"
)

// TestDemoServeOpensADashboardWhereAGateIsApproved is the new user's
// path: demo --serve --example review serves the dashboard on loopback,
// a run waits at its gate, an approve posted through the dashboard's
// confirmation form completes it, and Ctrl-C ends the demo cleanly.
func TestDemoServeOpensADashboardWhereAGateIsApproved(t *testing.T) {
	for _, k := range []string{"AGENTRUNNER_SERVER_LISTEN", "AGENTRUNNER_EXECUTION_SERVICE_URL", "AGENTRUNNER_EXECUTION_SERVICE_POLL_INTERVAL"} {
		t.Setenv(k, "") // restored when the test ends: the demo sets them for its serve
		os.Unsetenv(k)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	listen := ln.Addr().String()
	ln.Close()
	base := "http://" + listen
	ctx, cancel := context.WithCancel(t.Context())
	var out, errOut syncbuf.Buffer
	done := make(chan int, 1)
	go func() {
		done <- run(ctx, []string{"demo", "--serve", "--example", "review", "--dir", filepath.Join(t.TempDir(), "demo"), "--listen", listen}, &out, &errOut)
	}()
	defer func() {
		cancel()
		select {
		case code := <-done:
			if code != exitOK {
				t.Errorf("the demo ended with exit %d after Ctrl-C; stderr:\n%s", code, errOut.String())
			}
		case <-time.After(20 * time.Second):
			t.Error("the demo did not stop after Ctrl-C")
		}
	}()
	gate := waitForGate(t, base)
	if !strings.Contains(out.String(), "dashboard:      "+base+"/") {
		t.Errorf("the demo does not say where the dashboard is:\n%s", out.String())
	}
	jar, _ := cookiejar.New(nil)
	client := &http.Client{Jar: jar, Timeout: 10 * time.Second}
	page := get(t, client, base+"/confirm?action=approve&run="+gate+"&step=decide")
	m := regexp.MustCompile(`name="csrf" value="([^"]+)"`).FindStringSubmatch(page)
	if m == nil {
		t.Fatalf("the confirmation has no form:\n%s", page)
	}
	resp, err := client.PostForm(base+"/act", url.Values{"csrf": {m[1]}, "action": {"approve"}, "run": {gate}, "step": {"decide"}, "comment": {"good enough"}})
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), "gate.decision") {
		t.Fatalf("approve: %d\n%s", resp.StatusCode, body)
	}
	deadline := time.Now().Add(20 * time.Second)
	for !strings.Contains(get(t, client, base+"/api/runs/"+gate), `"status": "completed"`) {
		if time.Now().After(deadline) {
			t.Fatalf("the run did not complete after the approve")
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// waitForGate waits until the demo's run waits at its gate and returns
// the run's id.
func waitForGate(t *testing.T, base string) string {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		if resp, err := http.Get(base + "/api/gates"); err == nil {
			var list struct {
				Gates []struct {
					Run string `json:"run"`
				} `json:"gates"`
			}
			json.NewDecoder(resp.Body).Decode(&list)
			resp.Body.Close()
			if len(list.Gates) == 1 {
				return list.Gates[0].Run
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatal("no gate waited within a minute")
	return ""
}

func get(t *testing.T, c *http.Client, u string) string {
	t.Helper()
	resp, err := c.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d %s", u, resp.StatusCode, data)
	}
	return fmt.Sprint(string(data))
}
