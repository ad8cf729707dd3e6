package engine

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/agentrunner/agentrunner"
	"github.com/agentrunner/agentrunner/config"
	"github.com/agentrunner/agentrunner/sqlite"
	"github.com/google/go-cmp/cmp"
)

// scheduledWorkspace is a configuration whose loop fires at midnight in
// Berlin, beside a pipeline every 2 hours that skips overlapping runs
// and one weekly in UTC.
const scheduledWorkspace = `version: 1
name: loop
defaults: {provider: mock}
agents:
  plan: {identity: p.md, output: {file: plan.md, template: t.md}}
pipeline:
  start: plan
  steps: {plan: {agent: plan, next: end}}
schedule: {cron: "0 0 * * *", timezone: Europe/Berlin}
pipelines:
  nightly:
    start: s
    steps: {s: {agent: plan, next: end}}
    schedule: {every: 2h, overlap: skip}
  weekly:
    start: s
    steps: {s: {agent: plan, next: end}}
    schedule: {cron: "@weekly", catch_up: all, overlap: queue}
`

// TestStatusShowsTheNextFireTimeOfEachSchedule: status, read from the
// store alone (or from no store, before the first run), lists every
// schedule with its next fire time; the loop's is its
// next_scheduled_time.
func TestStatusShowsTheNextFireTimeOfEachSchedule(t *testing.T) {
	cfg, err := config.ParseWith("agentrunner.yaml", []byte(scheduledWorkspace), config.Options{LookupEnv: func(string) (string, bool) { return "", false }})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Date(2026, 3, 14, 9, 26, 53, 0, time.UTC)
	at := func(s string) time.Time {
		tm, err := time.Parse(time.RFC3339, s)
		if err != nil {
			t.Fatal(err)
		}
		return tm
	}
	schedules := func(nightly string) []ScheduleStatus {
		return []ScheduleStatus{
			{Pipeline: "loop", Schedule: "cron 0 0 * * * (Europe/Berlin)", NextFireTime: at("2026-03-14T23:00:00Z"), Overlap: "queue", CatchUp: "one"},
			{Pipeline: "nightly", Schedule: "every 2h0m0s", NextFireTime: at(nightly), Overlap: "skip", CatchUp: "one"},
			{Pipeline: "weekly", Schedule: "cron @weekly (UTC)", NextFireTime: at("2026-03-15T00:00:00Z"), Overlap: "queue", CatchUp: "all"},
		}
	}

	st, err := ReadStatus(context.Background(), nil, cfg, now)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(schedules("2026-03-14T09:26:53Z"), st.Schedules); diff != "" {
		t.Errorf("schedules before any run (-want +got):\n%s", diff)
	}
	if !st.NextScheduledTime.Equal(at("2026-03-14T23:00:00Z")) {
		t.Errorf("next_scheduled_time %v, want the loop's next fire time", st.NextScheduledTime)
	}

	store, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "state.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	runs := []*agentrunner.Run{
		{ID: "nightly-000001", Pipeline: "nightly", Status: agentrunner.RunCompleted, StartedAt: at("2026-03-14T03:00:00Z"), EndedAt: at("2026-03-14T03:10:00Z")},
		{ID: "nightly-000002", Pipeline: "nightly", Status: agentrunner.RunRunning, StartedAt: at("2026-03-14T05:00:00Z")},
		{ID: "weekly-000001", Pipeline: "weekly", Status: agentrunner.RunCompleted, StartedAt: at("2026-03-08T00:00:00Z"), EndedAt: at("2026-03-08T00:30:00Z")},
	}
	if err := store.Apply(context.Background(), &agentrunner.Change{Runs: runs}); err != nil {
		t.Fatal(err)
	}
	if st, err = ReadStatus(context.Background(), store, cfg, now); err != nil {
		t.Fatal(err)
	}
	// nightly's run from 05:00 still runs: 07:00 and 09:00 were skipped,
	// and the next fire time is 11:00.
	if diff := cmp.Diff(schedules("2026-03-14T11:00:00Z"), st.Schedules); diff != "" {
		t.Errorf("schedules with runs (-want +got):\n%s", diff)
	}
}
