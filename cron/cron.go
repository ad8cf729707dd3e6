// Package cron reads the cron expressions of schedules (FR-008): the
// five standard fields (minute hour day-of-month month day-of-week) or a
// descriptor (@daily …), parsed by github.com/robfig/cron, in a named
// time zone.
//
// There is no seconds field: a pipeline's run takes minutes, so a
// schedule never needs to say a second, and a sixth field would be read
// as seconds by some tools and as a year by others. A six-field
// expression is refused, saying so, rather than guessed at.
//
// Across a daylight saving change, a fixed-time schedule (one that names
// its hours, such as 30 2 * * *) runs as cron daemons run it: a fire time
// that falls in the hour skipped when clocks go forward fires at the
// change instead of being lost, and the hour repeated when clocks go back
// fires once, not twice. A schedule that fires in every hour (its hour
// field is *) keeps to real time: it fires in both passes of a repeated
// hour and not in a skipped one, so its runs stay evenly spaced.
package cron

import (
	"strings"
	"time"
	// The time zone database is built in, so that a zone name works on
	// every machine the static binary runs on: Windows and minimal
	// container images have no zoneinfo of their own.
	_ "time/tzdata"

	"github.com/agentrunner/agentrunner"
	robfig "github.com/robfig/cron/v3"
)

// Schedule is a parsed cron expression in its time zone.
type Schedule struct {
	expr string
	loc  *time.Location
	spec *robfig.SpecSchedule
	// everyHour: the hour field takes every hour, so the schedule keeps
	// to real time across daylight saving changes.
	everyHour bool
}

var _ agentrunner.Timetable = (*Schedule)(nil)

// parser reads the standard five fields and the descriptors.
var parser = robfig.NewParser(robfig.Minute | robfig.Hour | robfig.Dom | robfig.Month | robfig.Dow | robfig.Descriptor)

// allHours are the hour bits of a schedule that fires in every hour.
const allHours = 1<<24 - 1

// Location loads the time zone of a schedule by its IANA name (UTC,
// Europe/Berlin). Local is refused: a schedule would then change with
// the machine it runs on.
func Location(name string) (*time.Location, error) {
	if name == "" || strings.EqualFold(name, "Local") {
		return nil, agentrunner.Errorf(agentrunner.EINVALID, "want an IANA time zone name such as UTC or Europe/Berlin, got %q", name)
	}
	loc, err := time.LoadLocation(name)
	if err != nil {
		return nil, agentrunner.Errorf(agentrunner.EINVALID, "unknown time zone %q: want an IANA name such as UTC or Europe/Berlin", name)
	}
	return loc, nil
}

// Parse reads a cron expression to be read in loc.
func Parse(expr string, loc *time.Location) (*Schedule, error) {
	expr = strings.TrimSpace(expr)
	if err := checkShape(expr); err != nil {
		return nil, err
	}
	parsed, err := parser.Parse(expr)
	if err != nil {
		return nil, agentrunner.Errorf(agentrunner.EINVALID, "invalid cron expression %q: %v; %s", expr, err, shapeHint)
	}
	spec, ok := parsed.(*robfig.SpecSchedule)
	if !ok { // @every, which checkShape refuses first
		return nil, agentrunner.Errorf(agentrunner.EINVALID, "invalid cron expression %q: %s", expr, shapeHint)
	}
	spec.Location = loc
	s := &Schedule{expr: expr, loc: loc, spec: spec, everyHour: spec.Hour&allHours == allHours}
	if s.spec.Next(time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)).IsZero() {
		return nil, agentrunner.Errorf(agentrunner.EINVALID, "cron expression %q never fires: no date matches it", expr)
	}
	return s, nil
}

const shapeHint = "want five fields (minute hour day-of-month month day-of-week), such as 0 0 * * *, or a descriptor: @yearly, @monthly, @weekly, @daily, @hourly"

// checkShape refuses what looks like cron from elsewhere, with the fix:
// a seconds field, @every, a time zone inside the expression.
func checkShape(expr string) error {
	switch fields := strings.Fields(expr); {
	case expr == "":
		return agentrunner.Errorf(agentrunner.EINVALID, "the cron expression is empty: %s", shapeHint)
	case strings.HasPrefix(expr, "TZ=") || strings.HasPrefix(expr, "CRON_TZ="):
		return agentrunner.Errorf(agentrunner.EINVALID, "cron expression %q names its time zone: give it with timezone: instead", expr)
	case strings.HasPrefix(expr, "@every"):
		return agentrunner.Errorf(agentrunner.EINVALID, "cron expression %q: write every: with a duration (every: 1h) instead of @every", expr)
	case len(fields) == 6 && !strings.HasPrefix(expr, "@"):
		return agentrunner.Errorf(agentrunner.EINVALID, "cron expression %q has six fields: there is no seconds field; %s", expr, shapeHint)
	}
	return nil
}

// String is the expression and its time zone, as status shows them.
func (s *Schedule) String() string { return s.expr + " (" + s.loc.String() + ")" }

// Next returns the first fire time after t, in t's location; zero when
// there is none within five years.
func (s *Schedule) Next(t time.Time) time.Time {
	n := s.spec.Next(t)
	if n.IsZero() || s.everyHour {
		return n
	}
	if at, ok := s.skippedFire(t, n); ok {
		return at.In(t.Location())
	}
	if end, ok := repeated(n.In(s.loc)); ok {
		return s.Next(end.Add(-time.Second).In(t.Location()))
	}
	return n
}

// skippedFire finds a fire time that a change to summer time skipped
// between t and n (the next fire time that exists): it fires at the
// change, as cron daemons run such jobs at once.
func (s *Schedule) skippedFire(t, n time.Time) (time.Time, bool) {
	at := t.In(s.loc)
	for {
		_, change := at.ZoneBounds()
		if change.IsZero() || change.After(n) {
			return time.Time{}, false
		}
		_, before := change.Add(-time.Nanosecond).Zone()
		_, after := change.Zone()
		if gap := time.Duration(after-before) * time.Second; gap > 0 && s.firesIn(change, gap, before) {
			return change, true
		}
		at = change
	}
}

// firesIn reports whether the schedule names a wall-clock time in the gap
// that starts at change, read on the clock of the offset before it.
func (s *Schedule) firesIn(change time.Time, gap time.Duration, offset int) bool {
	old := *s.spec
	old.Location = time.FixedZone("", offset)
	m := old.Next(change.Add(-time.Second))
	return !m.IsZero() && m.Before(change.Add(gap))
}

// repeated reports whether t falls in the second pass of an hour that a
// change to winter time repeats, and when that pass ends. Every
// wall-clock time of the second pass was already passed in the first.
func repeated(t time.Time) (end time.Time, ok bool) {
	start, _ := t.ZoneBounds()
	if start.IsZero() {
		return time.Time{}, false
	}
	_, before := start.Add(-time.Nanosecond).Zone()
	_, after := t.Zone()
	overlap := time.Duration(before-after) * time.Second
	if overlap <= 0 || t.Sub(start) >= overlap {
		return time.Time{}, false
	}
	return start.Add(overlap), true
}

// ShortestGap is the shortest time between two of the first n fire times
// after from: how soon a schedule may fire again after it fired.
func (s *Schedule) ShortestGap(from time.Time, n int) time.Duration {
	var gap time.Duration
	prev := s.Next(from)
	for i := 1; i < n && !prev.IsZero(); i++ {
		next := s.Next(prev)
		if next.IsZero() {
			break
		}
		if d := next.Sub(prev); gap == 0 || d < gap {
			gap = d
		}
		prev = next
	}
	return gap
}
