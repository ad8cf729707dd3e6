package sdnotify

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/agentrunner/agentrunner"
	"github.com/google/go-cmp/cmp"
)

func env(vars map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) { v, ok := vars[k]; return v, ok }
}

func TestFromEnv(t *testing.T) {
	const pid = 42
	tests := []struct {
		name    string
		vars    map[string]string
		want    *Notifier
		wantErr string // the variable the error names
	}{
		{name: "outside systemd", vars: map[string]string{}},
		{name: "empty socket", vars: map[string]string{"NOTIFY_SOCKET": ""}},
		{name: "path", vars: map[string]string{"NOTIFY_SOCKET": "/run/systemd/notify"}, want: &Notifier{socket: "/run/systemd/notify"}},
		{name: "abstract", vars: map[string]string{"NOTIFY_SOCKET": "@notify"}, want: &Notifier{socket: "@notify"}},
		{name: "relative path", vars: map[string]string{"NOTIFY_SOCKET": "run/notify"}, wantErr: "NOTIFY_SOCKET"},
		{name: "watchdog", vars: map[string]string{"NOTIFY_SOCKET": "@n", "WATCHDOG_USEC": "120000000"}, want: &Notifier{socket: "@n", every: time.Minute}},
		{name: "watchdog of this process", vars: map[string]string{"NOTIFY_SOCKET": "@n", "WATCHDOG_USEC": "2000000", "WATCHDOG_PID": "42"}, want: &Notifier{socket: "@n", every: time.Second}},
		{name: "watchdog of another process", vars: map[string]string{"NOTIFY_SOCKET": "@n", "WATCHDOG_USEC": "2000000", "WATCHDOG_PID": "7"}, want: &Notifier{socket: "@n"}},
		{name: "watchdog not a number", vars: map[string]string{"NOTIFY_SOCKET": "@n", "WATCHDOG_USEC": "2m"}, wantErr: "WATCHDOG_USEC"},
		{name: "watchdog zero", vars: map[string]string{"NOTIFY_SOCKET": "@n", "WATCHDOG_USEC": "0"}, wantErr: "WATCHDOG_USEC"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := FromEnv(env(tt.vars), pid)
			if tt.wantErr != "" {
				if agentrunner.ErrorCode(err) != agentrunner.EINVALID || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("FromEnv error = %v, want an invalid error naming %s", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got, cmp.AllowUnexported(Notifier{})); diff != "" {
				t.Errorf("FromEnv (-want +got):\n%s", diff)
			}
		})
	}
}

// Outside systemd nothing is sent and the watchdog loop returns at once.
func TestNilNotifierDoesNothing(t *testing.T) {
	var n *Notifier
	if err := n.Notify(Ready); err != nil {
		t.Fatalf("Notify on nil = %v", err)
	}
	done := make(chan struct{})
	go func() {
		n.Watch(context.Background(), agentrunner.SystemClock{}, func() bool { return true }, func(error) {})
		close(done)
	}()
	<-done
	if got := n.WatchdogEvery(); got != 0 {
		t.Errorf("WatchdogEvery = %s, want 0", got)
	}
}
