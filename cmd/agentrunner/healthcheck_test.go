package main

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/agentrunner/agentrunner/internal/syncbuf"
)

// healthServer answers /health/ready with status and body, and records
// the credentials it was sent.
func healthServer(t *testing.T, status int, body string, auth *string) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		*auth = r.Header.Get("Authorization")
		if r.URL.Path != "/health/ready" {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		w.Write([]byte(body))
	}))
	t.Cleanup(srv.Close)
	return srv.URL + "/health/ready"
}

func TestHealthcheck(t *testing.T) {
	notReady := `{"status":"not_ready","checks":{"database":{"ok":true},"engine":{"ok":false,"message":"the engine loop is 3m0s past its deadline"},"disk_space":{"ok":false,"message":"12 MiB free"}}}`
	for _, tt := range []struct {
		name     string
		status   int
		body     string
		key      string
		wantCode int
		want     string // in stdout when ready, else in stderr
	}{
		{name: "ready", status: 200, body: `{"status":"ready"}`, wantCode: exitOK, want: "ready: "},
		{name: "not ready names the failed checks", status: 503, body: notReady, wantCode: exitFailure,
			want: "503 Service Unavailable: disk_space (12 MiB free), engine (the engine loop is 3m0s past its deadline)"},
		{name: "unauthorized says why", status: 401, body: `{"error":{"code":"unauthorized","message":"missing credentials"}}`, wantCode: exitFailure, want: "401 Unauthorized: missing credentials"},
		{name: "the API key is sent", status: 200, body: `{}`, key: "k-123", wantCode: exitOK, want: "ready: "},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var auth string
			url := healthServer(t, tt.status, tt.body, &auth)
			t.Setenv("AGENTRUNNER_API_KEY", tt.key)
			code, stdout, stderr := cliRun(t, "healthcheck", "--url", url)
			out := stdout
			if tt.wantCode != exitOK {
				out = stderr
			}
			if code != tt.wantCode || !strings.Contains(out, tt.want) {
				t.Errorf("exit %d, stdout %q, stderr %q; want exit %d and %q", code, stdout, stderr, tt.wantCode, tt.want)
			}
			if tt.key != "" && auth != "Bearer "+tt.key {
				t.Errorf("Authorization %q, want the key from AGENTRUNNER_API_KEY", auth)
			}
			if strings.Contains(stdout+stderr, "k-123") {
				t.Errorf("the API key is in the output")
			}
		})
	}
}

func TestHealthcheckRejectsBadFlagsAndNamesADeadServer(t *testing.T) {
	dead := "http://" + cliFreeAddr(t) + "/health/ready"
	for _, tt := range []struct {
		name     string
		args     []string
		wantCode int
		want     string
	}{
		{name: "not a URL", args: []string{"--url", "127.0.0.1:8080/health/ready"}, wantCode: exitUsage, want: "--url"},
		{name: "no host", args: []string{"--url", "http:///health/ready"}, wantCode: exitUsage, want: "--url"},
		{name: "zero timeout", args: []string{"--timeout", "0s"}, wantCode: exitUsage, want: "--timeout"},
		{name: "nothing listens", args: []string{"--url", dead}, wantCode: exitFailure, want: "not ready: " + dead + " does not answer"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			code, _, stderr := cliRun(t, append([]string{"healthcheck"}, tt.args...)...)
			if code != tt.wantCode || !strings.Contains(stderr, tt.want) {
				t.Errorf("exit %d, stderr %q; want exit %d and %q", code, stderr, tt.wantCode, tt.want)
			}
		})
	}
}

// healthcheck against a real serve: ready once it runs.
func TestHealthcheckOfServe(t *testing.T) {
	cliMockExec(t)
	addr := cliFreeAddr(t)
	t.Setenv("AGENTRUNNER_SERVER_LISTEN", addr)
	t.Setenv("AGENTRUNNER_SCHEDULE_EVERY", "24h")
	dir := cliExample(t)
	ctx, cancel := context.WithCancel(t.Context())
	var stdout, stderr syncbuf.Buffer
	done := make(chan int, 1)
	go func() { done <- run(ctx, []string{"serve", "-c", cliConfigPath(dir)}, &stdout, &stderr) }()
	defer func() { cancel(); <-done }()
	url := "http://" + addr + "/health/ready"
	deadline := time.Now().Add(20 * time.Second)
	for {
		code, out, errOut := cliRun(t, "healthcheck", "--url", url)
		if code == exitOK {
			if !strings.Contains(out, "ready: "+url) {
				t.Errorf("stdout %q", out)
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("serve never reported ready: %s\nserve's stderr:\n%s", errOut, stderr.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
}
