package config

import (
	"strings"
	"testing"
	"time"

	"github.com/agentrunner/agentrunner"
	"github.com/google/go-cmp/cmp"
)

// nightly is a pipeline under pipelines: with a schedule, appended to
// valid; SCHEDULE stands for the schedule's keys.
const nightly = `pipelines:
  nightly:
    start: s
    steps: {s: {agent: strategist, next: end}}
    schedule: {SCHEDULE}
`

// timingOf summarizes the schedule of a root Pipeline.
type timingOf struct {
	Every, MinInterval time.Duration
	Cron               string
	Overlap            agentrunner.Overlap
	CatchUp            agentrunner.CatchUp
	CatchUpMax         int
}

func summarizeTiming(p *agentrunner.Pipeline) timingOf {
	t := timingOf{Every: p.Every, MinInterval: p.MinInterval, Overlap: p.Overlap, CatchUp: p.CatchUp, CatchUpMax: p.CatchUpMax}
	if p.Cron != nil {
		t.Cron = p.Cron.String()
	}
	return t
}

func TestSchedulesTakeEveryOrCronWithTheirPolicies(t *testing.T) {
	tests := []struct {
		name, src string
		env       map[string]string
		loop      timingOf
		pipeline  *timingOf
	}{
		{"defaults: every 6h, a cycle due while one runs queues", valid, nil,
			timingOf{Every: 6 * time.Hour, Overlap: "queue", CatchUp: "one", CatchUpMax: 1}, nil},
		{"the loop on cron, in UTC by default, with min_cycle as its floor",
			valid + "schedule: {cron: \"0 0 * * *\"}\n", nil,
			timingOf{Cron: "0 0 * * * (UTC)", MinInterval: time.Hour, Overlap: "queue", CatchUp: "one", CatchUpMax: 1}, nil},
		{"the loop on a descriptor in a zone, skipping and not catching up",
			valid + "schedule: {cron: \"@daily\", timezone: Europe/Berlin, overlap: skip, catch_up: none}\n", nil,
			timingOf{Cron: "@daily (Europe/Berlin)", MinInterval: time.Hour, Overlap: "skip", CatchUp: "none", CatchUpMax: 1}, nil},
		{"cron from the environment replaces the file's every set to 0",
			valid + "schedule: {every: 2h}\n", map[string]string{"AGENTRUNNER_SCHEDULE_CRON": "30 6 * * mon-fri", "AGENTRUNNER_SCHEDULE_EVERY": "0s", "AGENTRUNNER_SCHEDULE_TIMEZONE": "Asia/Tokyo"},
			timingOf{Cron: "30 6 * * mon-fri (Asia/Tokyo)", MinInterval: time.Hour, Overlap: "queue", CatchUp: "one", CatchUpMax: 1}, nil},
		{"a pipeline's every keeps allowing overlap and catching up one",
			valid + strings.Replace(nightly, "SCHEDULE", "every: 1h", 1), nil,
			timingOf{Every: 6 * time.Hour, Overlap: "queue", CatchUp: "one", CatchUpMax: 1},
			&timingOf{Every: time.Hour, Overlap: "allow", CatchUp: "one", CatchUpMax: 10}},
		{"a pipeline's cron, queued, catching up all of at most 3",
			valid + strings.Replace(nightly, "SCHEDULE", `cron: "0 2 * * *", timezone: America/New_York, overlap: queue, catch_up: all, catch_up_max: 3`, 1), nil,
			timingOf{Every: 6 * time.Hour, Overlap: "queue", CatchUp: "one", CatchUpMax: 1},
			&timingOf{Cron: "0 2 * * * (America/New_York)", Overlap: "queue", CatchUp: "all", CatchUpMax: 3}},
		{"a pipeline's policies from the environment",
			valid + strings.Replace(nightly, "SCHEDULE", `cron: "@hourly"`, 1),
			map[string]string{"AGENTRUNNER_PIPELINES_NIGHTLY_SCHEDULE_OVERLAP": "skip", "AGENTRUNNER_PIPELINES_NIGHTLY_SCHEDULE_CATCH_UP": "none"},
			timingOf{Every: 6 * time.Hour, Overlap: "queue", CatchUp: "one", CatchUpMax: 1},
			&timingOf{Cron: "@hourly (UTC)", Overlap: "skip", CatchUp: "none", CatchUpMax: 10}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := parse(t, tt.src, tt.env)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.loop, summarizeTiming(c.Loop())); diff != "" {
				t.Errorf("the loop's schedule (-want +got):\n%s", diff)
			}
			if tt.pipeline == nil {
				return
			}
			if diff := cmp.Diff(*tt.pipeline, summarizeTiming(c.Graphs()["nightly"])); diff != "" {
				t.Errorf("nightly's schedule (-want +got):\n%s", diff)
			}
		})
	}
}

func TestScheduleProblemsNameTheirPlace(t *testing.T) {
	const at = "agentrunner.yaml:35:"
	tests := []struct {
		name, schedule string
		env            map[string]string
		want           []string
	}{
		{"every and cron", `{every: 1h, cron: "0 0 * * *"}`, nil, []string{
			at + `23: schedule.cron: give either every or cron, not both (every is 1h0m0s)`}},
		{"a field out of range", `{cron: "0 24 * * *"}`, nil, []string{
			at + `12: schedule.cron: invalid cron expression "0 24 * * *": end of range (24) above maximum (23): 24; want five fields (minute hour day-of-month month day-of-week), such as 0 0 * * *, or a descriptor: @yearly, @monthly, @weekly, @daily, @hourly`}},
		{"a seconds field", `{cron: "0 0 0 * * *"}`, nil, []string{
			at + `12: schedule.cron: cron expression "0 0 0 * * *" has six fields: there is no seconds field; want five fields (minute hour day-of-month month day-of-week), such as 0 0 * * *, or a descriptor: @yearly, @monthly, @weekly, @daily, @hourly`}},
		{"@every", `{cron: "@every 2h"}`, nil, []string{
			at + `12: schedule.cron: cron expression "@every 2h": write every: with a duration (every: 1h) instead of @every`}},
		{"an unknown zone", `{cron: "@daily", timezone: Europe/Atlantis}`, nil, []string{
			at + `28: schedule.timezone: unknown time zone "Europe/Atlantis": want an IANA name such as UTC or Europe/Berlin`}},
		{"a zone without cron", `{every: 2h, timezone: UTC}`, nil, []string{
			at + `23: schedule.timezone: applies to a cron schedule only: every counts from the start of the newest run`}},
		{"closer than min_cycle", `{cron: "*/20 * * * *"}`, nil, []string{
			at + `12: schedule.cron: fires as soon as 20m0s after a fire time, sooner than schedule.min_cycle 1h0m0s, so some fire times would be skipped: fire less often, or lower min_cycle`}},
		{"closer than min_cycle only across a change of clocks", `{cron: "0 0 * * *", timezone: America/New_York, min_cycle: 24h}`, nil, []string{
			at + `12: schedule.cron: fires as soon as 23h0m0s after a fire time, sooner than schedule.min_cycle 24h0m0s, so some fire times would be skipped: fire less often, or lower min_cycle`}},
		{"unknown policies", `{overlap: sometimes, catch_up: most}`, nil, []string{
			at + `12: schedule.overlap: unknown value "sometimes" (supported: allow, skip, queue)`,
			at + `32: schedule.catch_up: unknown value "most" (supported: none, one, all)`}},
		{"policies the loop cannot take", `{overlap: allow, catch_up: all}`, nil, []string{
			at + `12: schedule.overlap: the learning loop runs one cycle at a time: use queue (the default: the cycle starts after the running one) or skip`,
			at + `28: schedule.catch_up: the learning loop starts one cycle at most for the fire times it missed (its cycles are never closer than min_cycle): use one (the default) or none`}},
		{"a bad cron from the environment", `{every: 1h}`, map[string]string{"AGENTRUNNER_SCHEDULE_EVERY": "0s", "AGENTRUNNER_SCHEDULE_CRON": "daily"}, []string{
			`environment variable AGENTRUNNER_SCHEDULE_CRON: schedule.cron: invalid cron expression "daily": expected exactly 5 fields, found 1: [daily]; want five fields (minute hour day-of-month month day-of-week), such as 0 0 * * *, or a descriptor: @yearly, @monthly, @weekly, @daily, @hourly`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := problems(t, valid+"schedule: "+tt.schedule+"\n", tt.env)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("problems (-want +got):\n%s", diff)
			}
		})
	}
}

func TestPipelineScheduleProblemsNameTheirPlace(t *testing.T) {
	const at = "agentrunner.yaml:39:"
	tests := []struct {
		name, schedule string
		want           []string
	}{
		{"neither every nor cron", `overlap: skip`, []string{
			at + `5: pipelines.nightly.schedule.every: must be positive: the time from one run's start to the next one's (or give cron instead)`}},
		{"both", `every: 1h, cron: "@daily"`, []string{
			at + `27: pipelines.nightly.schedule.cron: give either every or cron, not both (every is 1h0m0s)`}},
		{"a cron that never fires", `cron: "0 0 30 2 *"`, []string{
			at + `16: pipelines.nightly.schedule.cron: cron expression "0 0 30 2 *" never fires: no date matches it`}},
		{"Local is no zone", `cron: "@daily", timezone: Local`, []string{
			at + `32: pipelines.nightly.schedule.timezone: want an IANA time zone name such as UTC or Europe/Berlin, got "Local"`}},
		{"skip cannot catch up all", `every: 1h, overlap: skip, catch_up: all`, []string{
			at + `42: pipelines.nightly.schedule.catch_up: all, with overlap: skip, would skip every missed run but the first (they all start at once): use catch_up: one, or overlap: queue to run them one after another`}},
		{"a catch-up bound out of range", `every: 1h, catch_up: all, catch_up_max: 0`, []string{
			at + `42: pipelines.nightly.schedule.catch_up_max: must be from 1 to 1000, got 0`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := problems(t, valid+strings.Replace(nightly, "SCHEDULE", tt.schedule, 1), nil)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("problems (-want +got):\n%s", diff)
			}
		})
	}
}
