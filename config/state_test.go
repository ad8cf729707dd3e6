package config

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestStateBackup(t *testing.T) {
	tests := []struct {
		name     string
		state    string
		env      map[string]string
		want     StateBackup
		problems []string
	}{
		{name: "off by default", want: StateBackup{Dir: "artifacts/backups", Keep: DefaultBackupKeep}},
		{name: "set", state: "state: {backup: {every: 24h, dir: /srv/backups, keep: 3}}\n",
			want: StateBackup{Every: Duration(24 * time.Hour), Dir: "/srv/backups", Keep: 3}},
		{name: "from the environment", env: map[string]string{"AGENTRUNNER_STATE_BACKUP_EVERY": "12h"},
			want: StateBackup{Every: Duration(12 * time.Hour), Dir: "artifacts/backups", Keep: DefaultBackupKeep}},
		{name: "too often and none kept", state: "state:\n  backup:\n    every: 30s\n    keep: 0\n", problems: []string{
			"agentrunner.yaml:37:5: state.backup.every: must be at least 1m0s, or 0 for no scheduled backups, got 30s",
			"agentrunner.yaml:38:5: state.backup.keep: must be at least 1, got 0",
		}},
		{name: "not a duration", state: "state: {backup: {every: daily}}\n", problems: []string{
			`agentrunner.yaml:35:25: state.backup.every: invalid duration "daily": want a Go duration such as 90s, 30m or 6h`,
		}},
		{name: "unknown key", state: "state: {backup: {evry: 1h}}\n", problems: []string{
			`agentrunner.yaml:35:18: state.backup: unknown key "evry" (did you mean "every"?)`,
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.problems != nil {
				if diff := cmp.Diff(tt.problems, problems(t, valid+tt.state, tt.env)); diff != "" {
					t.Errorf("problems (-want +got):\n%s", diff)
				}
				return
			}
			c, err := parse(t, valid+tt.state, tt.env)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, c.State.Backup); diff != "" {
				t.Errorf("state.backup (-want +got):\n%s", diff)
			}
		})
	}
}
