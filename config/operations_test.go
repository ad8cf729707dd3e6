package config

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// TestShutdownAndReloadKeys: shutdown.grace and reload.watch have their
// defaults, are set in the file and from the environment, and a negative
// grace is refused where it was given (durations are never negative).
func TestShutdownAndReloadKeys(t *testing.T) {
	tests := []struct {
		name  string
		yaml  string
		env   map[string]string
		grace time.Duration
		watch bool
	}{
		{name: "defaults", grace: 30 * time.Second},
		{name: "in the file", yaml: "shutdown: {grace: 2m}\nreload: {watch: true}\n", grace: 2 * time.Minute, watch: true},
		{name: "no grace", yaml: "shutdown: {grace: 0s}\n", grace: 0},
		{name: "from the environment", env: map[string]string{"AGENTRUNNER_SHUTDOWN_GRACE": "5s", "AGENTRUNNER_RELOAD_WATCH": "true"}, grace: 5 * time.Second, watch: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := parse(t, valid+tt.yaml, tt.env)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff([]any{tt.grace, tt.watch}, []any{c.Shutdown.Grace.D(), c.Reload.Watch}); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
	bad := problems(t, valid, map[string]string{"AGENTRUNNER_SHUTDOWN_GRACE": "-1s"})
	want := []string{`environment variable AGENTRUNNER_SHUTDOWN_GRACE: shutdown.grace: invalid duration "-1s": want a Go duration such as 90s, 30m or 6h`}
	if diff := cmp.Diff(want, bad); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}
