//go:build linux

package main

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentrunner/agentrunner/internal/syncbuf"
)

// serveNotify starts serve on a fresh workspace with NOTIFY_SOCKET and
// WATCHDOG_USEC set as systemd sets them for a unit of Type=notify, and
// returns the socket systemd would read, the address serve listens on and
// the func that stops serve and returns its exit status.
func serveNotify(t *testing.T, watchdogUSec string) (*net.UnixConn, string, func() int) {
	t.Helper()
	cliMockExec(t)
	addr := cliFreeAddr(t)
	t.Setenv("AGENTRUNNER_SERVER_LISTEN", addr)
	t.Setenv("AGENTRUNNER_SCHEDULE_EVERY", "24h")
	dir := cliExample(t)
	sock := filepath.Join(t.TempDir(), "notify")
	conn, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: sock, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	t.Setenv("NOTIFY_SOCKET", sock)
	t.Setenv("WATCHDOG_USEC", watchdogUSec)
	ctx, cancel := context.WithCancel(t.Context())
	var stdout, stderr syncbuf.Buffer
	done := make(chan int, 1)
	go func() { done <- run(ctx, []string{"serve", "-c", cliConfigPath(dir)}, &stdout, &stderr) }()
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("serve's stderr:\n%s", stderr.String())
		}
	})
	return conn, addr, func() int { cancel(); return <-done }
}

// next reads the next state serve sends, or fails after a while.
func next(t *testing.T, conn *net.UnixConn) string {
	t.Helper()
	buf := make([]byte, 4096)
	if err := conn.SetReadDeadline(time.Now().Add(20 * time.Second)); err != nil {
		t.Fatal(err)
	}
	n, err := conn.Read(buf)
	if err != nil {
		t.Fatalf("no notification from serve: %v", err)
	}
	return string(buf[:n])
}

// Under systemd, serve says READY=1 once it listens, pings the watchdog
// while the engine is well, says STOPPING=1 when stopped, and keeps
// systemd's variables from the agents it starts.
func TestServeNotifiesSystemd(t *testing.T) {
	conn, addr, stop := serveNotify(t, "100000")
	if got, want := next(t, conn), "READY=1\nSTATUS=serving the API on "+addr; got != want {
		t.Fatalf("first notification %q, want %q", got, want)
	}
	if c, err := net.Dial("tcp", addr); err != nil {
		t.Errorf("serve said READY=1 but does not listen on %s: %v", addr, err)
	} else {
		c.Close()
	}
	for _, k := range []string{"NOTIFY_SOCKET", "WATCHDOG_USEC"} {
		if v, ok := os.LookupEnv(k); ok {
			t.Errorf("%s=%q is still in the environment agents inherit", k, v)
		}
	}
	for range 2 {
		if got := next(t, conn); got != "WATCHDOG=1" {
			t.Fatalf("notification %q, want WATCHDOG=1", got)
		}
	}
	if code := stop(); code != exitOK {
		t.Errorf("serve exited %d, want 0", code)
	}
	for {
		got := next(t, conn)
		if got == "STOPPING=1" {
			break
		}
		if got != "WATCHDOG=1" {
			t.Fatalf("notification %q, want STOPPING=1", got)
		}
	}
}

// A NOTIFY_SOCKET systemd would not set stops serve with the variable named.
func TestServeRejectsABadNotifySocket(t *testing.T) {
	cliMockExec(t)
	t.Setenv("AGENTRUNNER_SERVER_LISTEN", cliFreeAddr(t))
	dir := cliExample(t)
	t.Setenv("NOTIFY_SOCKET", "relative/notify")
	code, _, stderr := cliRun(t, "serve", "-c", cliConfigPath(dir))
	if code != exitUsage || !strings.Contains(stderr, "NOTIFY_SOCKET") {
		t.Errorf("serve with a relative NOTIFY_SOCKET: exit %d, stderr:\n%s\nwant exit 2 naming NOTIFY_SOCKET", code, stderr)
	}
}
