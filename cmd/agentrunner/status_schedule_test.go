package main

import (
	"strconv"
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

// TestValidateNamesABadScheduleAtItsLine: a cron expression out of
// range, a seconds field and an unknown time zone are each reported by
// validate at their file:line, with what is wrong.
func TestValidateNamesABadScheduleAtItsLine(t *testing.T) {
	tests := []struct{ name, schedule, lineOf, mention string }{
		{"a field out of range", "  cron: \"0 25 * * *\"\n", "cron:",
			`schedule.cron: invalid cron expression "0 25 * * *": end of range (25) above maximum (23)`},
		{"a seconds field", "  cron: \"0 0 0 * * *\"\n", "cron:",
			`schedule.cron: cron expression "0 0 0 * * *" has six fields: there is no seconds field`},
		{"an unknown zone", "  cron: \"@daily\"\n  timezone: Mars/Olympus_Mons\n", "timezone:",
			`schedule.timezone: unknown time zone "Mars/Olympus_Mons"`},
		{"every and cron", "  every: 6h\n  cron: \"@daily\"\n", "cron:",
			`schedule.cron: give either every or cron, not both`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := cliExample(t)
			cfg := cliConfigPath(dir)
			cliEdit(t, cfg, "  every: 6h\n", tt.schedule)
			where := cfg + ":" + strconv.Itoa(cliLine(t, cfg, tt.lineOf, tt.lineOf)) + ":"
			code, _, stderr := cliRun(t, "validate", "-c", cfg)
			if code != exitFailure {
				t.Errorf("exit %d, want %d (validation found problems)", code, exitFailure)
			}
			if !strings.Contains(stderr, "1 problem(s)") || !strings.Contains(stderr, where) || !strings.Contains(stderr, tt.mention) {
				t.Errorf("stderr should report one problem at %s: %s; got:\n%s", where, tt.mention, stderr)
			}
		})
	}
}
