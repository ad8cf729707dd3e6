package config

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestArchive(t *testing.T) {
	defaults := Archive{Keep: DefaultArchiveKeep, Every: Duration(DefaultArchiveEvery)}
	tests := []struct {
		name     string
		yaml     string
		env      map[string]string
		want     Archive
		problems []string
	}{
		{name: "defaults: keep 50, every hour, archives kept forever", want: defaults},
		{name: "set", yaml: "archive: {keep: 20, every: 30m, retention: {count: 1000, age: 2160h}}\n",
			want: Archive{Keep: 20, Every: Duration(30 * time.Minute), Retention: ArchiveRetention{Count: 1000, Age: Duration(2160 * time.Hour)}}},
		{name: "off", yaml: "archive: {keep: 0}\n", want: Archive{Every: Duration(DefaultArchiveEvery)}},
		{name: "from the environment", env: map[string]string{"AGENTRUNNER_ARCHIVE_KEEP": "7", "AGENTRUNNER_ARCHIVE_RETENTION_COUNT": "30", "AGENTRUNNER_ARCHIVE_RETENTION_AGE": "720h"},
			want: Archive{Keep: 7, Every: Duration(DefaultArchiveEvery), Retention: ArchiveRetention{Count: 30, Age: Duration(720 * time.Hour)}}},
		{name: "out of range", yaml: "archive:\n  keep: -1\n  every: 10s\n  retention: {count: -2}\n", problems: []string{
			"agentrunner.yaml:36:3: archive.keep: must not be negative (0 archives nothing), got -1",
			"agentrunner.yaml:37:3: archive.every: must be at least 1m0s, got 10s",
			"agentrunner.yaml:38:15: archive.retention.count: must not be negative (0 keeps every archive), got -2",
		}},
		{name: "a negative age", yaml: "archive: {retention: {age: -1h}}\n", problems: []string{
			`agentrunner.yaml:35:28: archive.retention.age: duration "-1h" is negative`,
		}},
		{name: "unknown key", yaml: "archive: {kep: 5}\n", problems: []string{
			`agentrunner.yaml:35:11: archive: unknown key "kep" (did you mean "keep"?)`,
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.problems != nil {
				if diff := cmp.Diff(tt.problems, problems(t, valid+tt.yaml, tt.env)); diff != "" {
					t.Errorf("problems (-want +got):\n%s", diff)
				}
				return
			}
			c, err := parse(t, valid+tt.yaml, tt.env)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, c.Archive); diff != "" {
				t.Errorf("archive (-want +got):\n%s", diff)
			}
		})
	}
}
