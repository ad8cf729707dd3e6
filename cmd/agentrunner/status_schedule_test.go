package main

import (
	"strings"
	"testing"
	"time"

	"github.com/agentrunner/agentrunner"
	"github.com/agentrunner/agentrunner/cron"
	"github.com/agentrunner/agentrunner/engine"
	"github.com/google/go-cmp/cmp"
)

// TestStatusShowsTheNextFireTimeOfACronSchedule: a loop on cron, before
// its first cycle, is next due at the expression's next fire time in its
// zone, in the JSON and the text of status.
func TestStatusShowsTheNextFireTimeOfACronSchedule(t *testing.T) {
	dir := cliExample(t)
	cfg := cliConfigPath(dir)
	cliEdit(t, cfg, "  every: 6h\n", "  cron: \"0 0 * * *\"\n  timezone: Europe/Berlin\n")
	loc, err := cron.Location("Europe/Berlin")
	if err != nil {
		t.Fatal(err)
	}
	midnight, err := cron.Parse("0 0 * * *", loc)
	if err != nil {
		t.Fatal(err)
	}
	want := midnight.Next(time.Now()).UTC()
	st := cliStatus(t, cfg)
	wantSchedules := []engine.ScheduleStatus{{Pipeline: "crypton", Schedule: "cron 0 0 * * * (Europe/Berlin)", NextFireTime: want,
		Overlap: agentrunner.OverlapQueue, CatchUp: agentrunner.CatchUpOne}}
	if diff := cmp.Diff(wantSchedules, st.Schedules); diff != "" {
		t.Errorf("schedules (-want +got):\n%s", diff)
	}
	if !st.NextScheduledTime.Equal(want) {
		t.Errorf("next_scheduled_time %v, want the next midnight in Berlin, %v", st.NextScheduledTime, want)
	}
	code, stdout, stderr := cliRun(t, "status", "-c", cfg)
	if code != exitOK {
		t.Fatalf("status: exit %d, stderr:\n%s", code, stderr)
	}
	line := "  crypton: cron 0 0 * * * (Europe/Berlin); next " + want.Format(time.RFC3339) + "; overlap queue, catch_up one\n"
	if !strings.Contains(stdout, "schedules:\n"+line) {
		t.Errorf("status should list the schedule as %q:\n%s", line, stdout)
	}
}
