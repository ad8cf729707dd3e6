//go:build linux

package sdnotify

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/agentrunner/agentrunner"
	"github.com/agentrunner/agentrunner/internal/clocktest"
	"github.com/google/go-cmp/cmp"
)

// listen opens a unixgram socket as systemd's, at a path in a fresh
// directory, and points NOTIFY_SOCKET at it.
func listen(t *testing.T) *net.UnixConn {
	t.Helper()
	path := filepath.Join(t.TempDir(), "notify")
	conn, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: path, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	t.Setenv("NOTIFY_SOCKET", path)
	return conn
}

// received reads the datagrams sent so far, each one state.
func received(t *testing.T, conn *net.UnixConn) []string {
	t.Helper()
	var got []string
	buf := make([]byte, 4096)
	for {
		if err := conn.SetReadDeadline(time.Now().Add(100 * time.Millisecond)); err != nil {
			t.Fatal(err)
		}
		n, err := conn.Read(buf)
		if err != nil {
			return got
		}
		got = append(got, string(buf[:n]))
	}
}

func TestNotifySendsOneDatagramPerState(t *testing.T) {
	conn := listen(t)
	n, err := FromEnv(os.LookupEnv, os.Getpid())
	if err != nil || n == nil {
		t.Fatalf("FromEnv = %v, %v; want a notifier", n, err)
	}
	for _, s := range []string{Ready, "STATUS=serving on 127.0.0.1:8080", Stopping} {
		if err := n.Notify(s); err != nil {
			t.Fatal(err)
		}
	}
	want := []string{"READY=1", "STATUS=serving on 127.0.0.1:8080", "STOPPING=1"}
	if diff := cmp.Diff(want, received(t, conn)); diff != "" {
		t.Errorf("datagrams (-want +got):\n%s", diff)
	}
}

func TestNotifyAbstractSocket(t *testing.T) {
	name := "@agentrunner-sdnotify-test-" + filepath.Base(t.TempDir())
	conn, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: name, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	n, err := FromEnv(env(map[string]string{"NOTIFY_SOCKET": name}), os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if err := n.Notify(Ready); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"READY=1"}, received(t, conn)); diff != "" {
		t.Errorf("datagrams (-want +got):\n%s", diff)
	}
}

func TestNotifyWithoutListenerIsUnavailable(t *testing.T) {
	t.Setenv("NOTIFY_SOCKET", filepath.Join(t.TempDir(), "gone"))
	n, err := FromEnv(os.LookupEnv, os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if err := n.Notify(Ready); agentrunner.ErrorCode(err) != agentrunner.EUNAVAILABLE {
		t.Fatalf("Notify to a missing socket = %v, want an unavailable error", err)
	}
}

// The watchdog pings at half of WATCHDOG_USEC, and not while the engine
// is stalled: systemd then restarts the runner.
func TestWatchPingsOnlyWhileHealthy(t *testing.T) {
	conn := listen(t)
	t.Setenv("WATCHDOG_USEC", "60000000")
	t.Setenv("WATCHDOG_PID", "")
	n, err := FromEnv(os.LookupEnv, os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	health := []bool{true, false, false, true}
	ctx, cancel := context.WithCancel(context.Background())
	clock := clocktest.New(time.Date(2026, 11, 27, 0, 0, 0, 0, time.UTC))
	clock.OnAfter = func(time.Duration) bool {
		if len(clock.Waits()) == len(health) {
			cancel()
			return false
		}
		return true
	}
	i := 0
	healthy := func() bool { i++; return health[i-1] }
	n.Watch(ctx, clock, healthy, func(err error) { t.Errorf("ping: %v", err) })
	if diff := cmp.Diff([]string{"WATCHDOG=1", "WATCHDOG=1"}, received(t, conn)); diff != "" {
		t.Errorf("datagrams (-want +got):\n%s", diff)
	}
	want := []time.Duration{30 * time.Second, 30 * time.Second, 30 * time.Second, 30 * time.Second}
	if diff := cmp.Diff(want, clock.Waits()); diff != "" {
		t.Errorf("waits (-want +got):\n%s", diff)
	}
}

// A ping that cannot be sent is reported and the loop goes on.
func TestWatchReportsFailedPings(t *testing.T) {
	t.Setenv("NOTIFY_SOCKET", filepath.Join(t.TempDir(), "gone"))
	t.Setenv("WATCHDOG_USEC", "2000000")
	n, err := FromEnv(os.LookupEnv, os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	clock := clocktest.New(time.Unix(0, 0))
	clock.OnAfter = func(time.Duration) bool {
		if len(clock.Waits()) == 2 {
			cancel()
			return false
		}
		return true
	}
	var failures int
	n.Watch(ctx, clock, func() bool { return true }, func(err error) {
		if agentrunner.ErrorCode(err) != agentrunner.EUNAVAILABLE {
			t.Errorf("ping error = %v, want unavailable", err)
		}
		failures++
	})
	if failures != 2 {
		t.Errorf("failed pings reported = %d, want 2", failures)
	}
}
