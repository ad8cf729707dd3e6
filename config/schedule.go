package config

import (
	"cmp"
	"slices"
	"strings"
	"time"

	"github.com/agentrunner/agentrunner"
	"github.com/agentrunner/agentrunner/cron"
)

// The overlap and catch-up policies a schedule may name.
var (
	overlaps = []string{string(agentrunner.OverlapAllow), string(agentrunner.OverlapSkip), string(agentrunner.OverlapQueue)}
	catchUps = []string{string(agentrunner.CatchUpNone), string(agentrunner.CatchUpOne), string(agentrunner.CatchUpAll)}
)

// gapSample is how many fire times of the loop's cron schedule are
// looked at to find how close two of them come (schedule.min_cycle):
// from a fixed date, so that the answer is the same on every run, and
// enough to pass a daylight saving change for all but minutely ones.
const gapSample = 2000

// gapFrom is where that sample starts.
var gapFrom = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// timing is what the loop's schedule and a pipeline's share: how runs
// are started on a clock, and where the schedule is in the file.
type timing struct {
	key                              string
	every                            Duration
	cron, timezone, overlap, catchUp string
	catchUpMax                       int
	// defaultOverlap is the overlap of a schedule built without its
	// defaults (a Config made in code): the loop's or a pipeline's.
	defaultOverlap string
}

func (s *Schedule) timing() timing {
	return timing{key: "schedule", every: s.Every, cron: s.Cron, timezone: s.Timezone, overlap: s.Overlap, catchUp: s.CatchUp, catchUpMax: 1,
		defaultOverlap: DefaultLoopOverlap}
}

func (s *PipelineSchedule) timing(name string) timing {
	return timing{key: "pipelines." + name + ".schedule", every: s.Every, cron: s.Cron, timezone: s.Timezone,
		overlap: s.Overlap, catchUp: s.CatchUp, catchUpMax: s.CatchUpMax, defaultOverlap: DefaultPipelineOverlap}
}

// scheduleDefaults fills the schedules' keys not given. A cron schedule
// has no every; only a cron schedule has a time zone.
func (c *Config) scheduleDefaults() {
	s := &c.Schedule
	if s.Cron == "" {
		orDefault(c, "schedule.every", &s.Every, Duration(DefaultEvery))
	} else {
		orDefault(c, "schedule.timezone", &s.Timezone, DefaultTimezone)
	}
	orDefault(c, "schedule.overlap", &s.Overlap, DefaultLoopOverlap)
	orDefault(c, "schedule.catch_up", &s.CatchUp, DefaultCatchUp)
	for name, p := range c.Pipelines {
		if p == nil || p.Schedule == nil {
			continue
		}
		key, ps := "pipelines."+name+".schedule", p.Schedule
		if ps.Cron != "" {
			orDefault(c, key+".timezone", &ps.Timezone, DefaultTimezone)
		}
		orDefault(c, key+".overlap", &ps.Overlap, DefaultPipelineOverlap)
		orDefault(c, key+".catch_up", &ps.CatchUp, DefaultCatchUp)
		orDefault(c, key+".catch_up_max", &ps.CatchUpMax, DefaultCatchUpMax)
	}
}

// schedule checks what the loop's schedule and a pipeline's have in
// common: every or cron, not both; a cron expression that parses, in a
// zone that exists; known policies that go together. The caller checks
// every alone.
func (v *validator) schedule(t timing) *cron.Schedule {
	var s *cron.Schedule
	switch {
	case t.cron != "" && t.every > 0:
		v.add(t.key+".cron", "give either every or cron, not both (every is %s)", t.every)
	case t.cron != "":
		s = v.cron(t)
	case v.c.given(t.key + ".timezone"):
		v.add(t.key+".timezone", "applies to a cron schedule only: every counts from the start of the newest run")
	}
	v.oneOf(t.key+".overlap", t.overlap, overlaps)
	v.oneOf(t.key+".catch_up", t.catchUp, catchUps)
	if t.overlap == string(agentrunner.OverlapSkip) && t.catchUp == string(agentrunner.CatchUpAll) {
		v.add(t.key+".catch_up", "all, with overlap: skip, would skip every missed run but the first (they all start at once): use catch_up: one, or overlap: queue to run them one after another")
	}
	if t.catchUpMax < 1 || t.catchUpMax > MaxCatchUp {
		v.add(t.key+".catch_up_max", "must be from 1 to %d, got %d", MaxCatchUp, t.catchUpMax)
	}
	return s
}

// cron parses a schedule's expression in its zone, reporting either.
func (v *validator) cron(t timing) *cron.Schedule {
	loc, err := cron.Location(t.timezone)
	if err != nil {
		v.add(t.key+".timezone", "%s", agentrunner.ErrorMessage(err))
		return nil
	}
	s, err := cron.Parse(t.cron, loc)
	if err != nil {
		v.add(t.key+".cron", "%s", agentrunner.ErrorMessage(err))
		return nil
	}
	return s
}

// oneOf reports a value that is not one of the known ones.
func (v *validator) oneOf(key, value string, known []string) {
	if !slices.Contains(known, value) {
		v.add(key, "unknown value %q (supported: %s)", value, strings.Join(known, ", "))
	}
}

// loopSchedule checks the learning loop's schedule: it runs one cycle at
// a time, never sooner than min_cycle after the last one started, so its
// cycles do not overlap, do not all catch up, and a cron schedule must
// not fire closer than min_cycle.
func (v *validator) loopSchedule() {
	s := &v.c.Schedule
	if s.Overlap == string(agentrunner.OverlapAllow) {
		v.add("schedule.overlap", "the learning loop runs one cycle at a time: use queue (the default: the cycle starts after the running one) or skip")
	}
	if s.CatchUp == string(agentrunner.CatchUpAll) {
		v.add("schedule.catch_up", "the learning loop starts one cycle at most for the fire times it missed (its cycles are never closer than min_cycle): use one (the default) or none")
	}
	c := v.schedule(s.timing())
	if c == nil {
		return
	}
	if gap := c.ShortestGap(gapFrom, gapSample); gap < s.MinCycle.D() {
		v.add("schedule.cron", "fires as soon as %s after a fire time, sooner than schedule.min_cycle %s, so some fire times would be skipped: fire less often, or lower min_cycle", gap, s.MinCycle)
	}
}

// timetable is the parsed cron schedule of t, nil for an every schedule
// (or one that validation refused).
func (t timing) timetable() agentrunner.Timetable {
	if t.cron == "" {
		return nil
	}
	loc, err := cron.Location(t.timezone)
	if err != nil {
		return nil
	}
	s, err := cron.Parse(t.cron, loc)
	if err != nil {
		return nil
	}
	return s
}

// apply sets the schedule of p: Every or Cron, and its policies, their
// defaults filled in for a Config made in code, without WithDefaults.
func (t timing) apply(p *agentrunner.Pipeline) {
	if t.cron != "" && t.timezone == "" { // a Config made in code: UTC, as WithDefaults says
		t.timezone = DefaultTimezone
	}
	p.Every, p.Cron = t.every.D(), t.timetable()
	if p.Cron != nil {
		p.Every = 0
	}
	p.Overlap = agentrunner.Overlap(cmp.Or(t.overlap, t.defaultOverlap))
	p.CatchUp = agentrunner.CatchUp(cmp.Or(t.catchUp, DefaultCatchUp))
	p.CatchUpMax = cmp.Or(t.catchUpMax, DefaultCatchUpMax)
}
