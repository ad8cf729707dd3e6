package scheduler

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/agentrunner/agentrunner"
)

// Events of the schedules (FR-008).
const (
	// EventScheduleSkipped: a fire time started no run, by the overlap
	// policy or the learning loop's min_cycle; details say why.
	EventScheduleSkipped = "schedule.skipped"
	// EventScheduleMissed: fire times passed while the runner was down;
	// details say how many, and how many runs the catch-up policy started.
	EventScheduleMissed = "schedule.missed"
)

// maxMissedCount bounds the counting of a cron schedule's missed fire
// times: a minutely schedule down for a year must not stall the start.
const maxMissedCount = 10000

// recheckNever is when a cron schedule that has no fire time left (none
// within five years) is looked at again.
const recheckNever = 24 * time.Hour

// schedules starts the runs of the scheduled pipelines whose fire time
// has come. While paused, nothing starts: a due run starts at the resume
// (one run, however many fire times the pause covered).
func (s *Scheduler) schedules(ctx context.Context) error {
	if s.control.Paused {
		return nil
	}
	now := s.clock.Now()
	for _, p := range s.scheduled {
		if err := s.schedule(ctx, p, now); err != nil {
			return err
		}
	}
	return nil
}

// schedule fires p's schedule if its time has come. The first look at a
// pipeline reads its newest run from the store, to count from its start.
func (s *Scheduler) schedule(ctx context.Context, p *agentrunner.Pipeline, now time.Time) error {
	at, ok := s.due[p.Name]
	if !ok {
		due, handled, err := s.firstLook(ctx, p, now)
		if err != nil || handled {
			return err
		}
		at = due
	}
	if at.After(now) {
		s.due[p.Name] = at
		return nil
	}
	s.due[p.Name] = s.nextFire(p, now)
	return s.fire(ctx, p, at, false)
}

// firstLook finds when p fires next, counted from the start of its
// newest run. The first look of this process (not one after a reload)
// also catches up on the fire times missed while the runner was down,
// and then reports them handled.
func (s *Scheduler) firstLook(ctx context.Context, p *agentrunner.Pipeline, now time.Time) (time.Time, bool, error) {
	runs, err := s.store.Runs(ctx, agentrunner.RunFilter{Pipeline: p.Name, Limit: 1})
	if err != nil {
		return time.Time{}, false, err
	}
	var newest time.Time
	if len(runs) > 0 {
		newest = runs[0].StartedAt
		if newest.After(s.started[p.Name]) {
			s.started[p.Name] = newest
		}
	}
	if !s.looked[p.Name] {
		s.looked[p.Name] = true
		if handled, err := s.catchUpMissed(ctx, p, newest, now); handled || err != nil {
			return time.Time{}, handled, err
		}
	}
	return firstDue(p, newest, now), false, nil
}

// firstDue is when p fires first, counted from newest, the start of its
// newest run: every after it, or the cron schedule's next fire time (now
// itself, if it is one and no run started since). A pipeline that never
// ran starts its every schedule at once.
func firstDue(p *agentrunner.Pipeline, newest, now time.Time) time.Time {
	switch {
	case p.Cron != nil:
		return p.Cron.Next(later(newest, now.Add(-time.Nanosecond)))
	case newest.IsZero():
		return now
	}
	return newest.Add(p.Every)
}

// nextFire is when p fires after a fire at now: every after it, or the
// cron schedule's next fire time.
func (s *Scheduler) nextFire(p *agentrunner.Pipeline, now time.Time) time.Time {
	if p.Cron == nil {
		return now.Add(p.Every)
	}
	if next := p.Cron.Next(now); !next.IsZero() {
		return next
	}
	s.log.Warn("a cron schedule has no fire time left", "pipeline", p.Name, "schedule", p.Cron.String())
	return now.Add(recheckNever)
}

// missed are the fire times of a schedule that passed while the runner
// was down: how many, the first and the last.
type missed struct {
	n           int
	first, last time.Time
}

// missedFires counts p's fire times after newest, up to now.
func missedFires(p *agentrunner.Pipeline, newest, now time.Time) missed {
	if p.Cron == nil {
		first := newest.Add(p.Every)
		if first.After(now) {
			return missed{}
		}
		n := int(now.Sub(newest) / p.Every)
		return missed{n: n, first: first, last: newest.Add(time.Duration(n) * p.Every)}
	}
	var m missed
	for t := p.Cron.Next(newest); !t.IsZero() && !t.After(now) && m.n < maxMissedCount; t = p.Cron.Next(t) {
		if m.n == 0 {
			m.first = t
		}
		m.n, m.last = m.n+1, t
	}
	return m
}

// catchUpMissed handles the fire times p missed while the runner was
// down, as p.CatchUp says: none drops them, one starts one run for them
// all, all starts one for each, at most p.CatchUpMax. It reports whether
// there were any (a pipeline that never ran missed none: its schedule
// starts).
func (s *Scheduler) catchUpMissed(ctx context.Context, p *agentrunner.Pipeline, newest, now time.Time) (bool, error) {
	if newest.IsZero() {
		return false, nil
	}
	m := missedFires(p, newest, now)
	if m.n == 0 {
		return false, nil
	}
	runs := catchUpRuns(p, m)
	s.workspaceEvent(s.batch.change(), EventScheduleMissed, agentrunner.LevelWarn, map[string]any{
		"pipeline": p.Name, "schedule": DescribeSchedule(p), "missed": m.n,
		"first": m.first.UTC().Format(time.RFC3339), "last": m.last.UTC().Format(time.RFC3339),
		"catch_up": string(catchUpOf(p)), "runs": runs,
	})
	if runs == 0 {
		s.due[p.Name] = s.afterMissed(p, newest, m, now)
		return true, nil
	}
	s.due[p.Name] = s.nextFire(p, now)
	for i := range runs {
		if err := s.fire(ctx, p, m.last, i > 0); err != nil {
			return true, err
		}
	}
	return true, nil
}

// catchUpRuns is how many runs p's catch-up policy starts for m.
func catchUpRuns(p *agentrunner.Pipeline, m missed) int {
	switch catchUpOf(p) {
	case agentrunner.CatchUpNone:
		return 0
	case agentrunner.CatchUpAll:
		return min(m.n, max(p.CatchUpMax, 1))
	}
	return 1
}

// afterMissed is p's first fire time after now when the missed ones are
// dropped: every keeps to the times counted from the newest run.
func (s *Scheduler) afterMissed(p *agentrunner.Pipeline, newest time.Time, m missed, now time.Time) time.Time {
	if p.Cron == nil {
		return newest.Add(time.Duration(m.n+1) * p.Every)
	}
	return s.nextFire(p, now)
}

// fire starts a run of p for its fire time at, as its overlap policy
// says, or records why it starts none. A catch-up's runs after its first
// (backlog) may queue behind each other.
func (s *Scheduler) fire(ctx context.Context, p *agentrunner.Pipeline, at time.Time, backlog bool) error {
	ch := s.batch.change()
	if why := s.skipReason(p, backlog); why != "" {
		s.workspaceEvent(ch, EventScheduleSkipped, agentrunner.LevelInfo, map[string]any{
			"pipeline": p.Name, "schedule": DescribeSchedule(p), "fire_time": at.UTC().Format(time.RFC3339), "reason": why,
		})
		return nil
	}
	queue := s.full(p) || (p.Overlap == agentrunner.OverlapQueue && s.active[p.Name] > 0)
	_, err := s.newRun(ctx, ch, p, p.EveryInputs, "", queue)
	return err
}

// skipReason says why a fire time of p starts no run; "" when it starts
// one.
func (s *Scheduler) skipReason(p *agentrunner.Pipeline, backlog bool) string {
	name, now := p.Name, s.clock.Now()
	if last := s.started[name]; p.MinInterval > 0 && !last.IsZero() && now.Sub(last) < p.MinInterval {
		return fmt.Sprintf("the newest run started %s ago, sooner than the minimum interval %s (schedule.min_cycle)", now.Sub(last), p.MinInterval)
	}
	if p.Overlap == agentrunner.OverlapSkip {
		if id := s.unfinishedRun(name); id != "" {
			return fmt.Sprintf("run %s is still running (overlap: skip)", id)
		}
	}
	if len(s.queued[name]) > 0 && !backlog {
		return fmt.Sprintf("run %s is already waiting to start", s.queued[name][len(s.queued[name])-1].run.ID)
	}
	return ""
}

// unfinishedRun is the id of a running or queued run of the pipeline
// name, the oldest; "" when there is none.
func (s *Scheduler) unfinishedRun(name string) string {
	for _, id := range slices.Sorted(maps.Keys(s.runs)) {
		if s.runs[id].run.Pipeline == name {
			return id
		}
	}
	return ""
}

// later is the later of two times.
func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// catchUpOf is p's catch-up policy, its default spelled out.
func catchUpOf(p *agentrunner.Pipeline) agentrunner.CatchUp {
	if p.CatchUp == "" {
		return agentrunner.CatchUpOne
	}
	return p.CatchUp
}

// DescribeSchedule says how p's schedule is written: "every 6h0m0s" or
// "cron 0 0 * * * (UTC)", in its events and in status.
func DescribeSchedule(p *agentrunner.Pipeline) string {
	if p.Cron != nil {
		return "cron " + p.Cron.String()
	}
	return "every " + p.Every.String()
}

// sameSchedule reports whether a reload left a pipeline's fire times as
// they were, so its next one stands.
func sameSchedule(a, b *agentrunner.Pipeline) bool {
	if a == nil || b == nil || a.Every != b.Every || a.MinInterval != b.MinInterval || (a.Cron == nil) != (b.Cron == nil) {
		return false
	}
	return a.Cron == nil || a.Cron.String() == b.Cron.String()
}

// NextFire is when p's schedule fires next, as the store shows it (the
// status of a runner that may not be running): newest is the start of
// p's newest run (zero: none yet), unfinished whether that run is still
// going. An every schedule fires every after newest (at once before the
// first run), and, with overlap: skip, while a run goes on, at the next
// such time after now; a cron schedule at its next fire time, past
// min_cycle (MinInterval) after newest. Zero for a pipeline without a
// schedule.
func NextFire(p *agentrunner.Pipeline, newest time.Time, unfinished bool, now time.Time) time.Time {
	switch {
	case p.Cron != nil:
		return nextCron(p, newest, now)
	case p.Every <= 0:
		return time.Time{}
	case newest.IsZero():
		return now
	}
	due := newest.Add(p.Every)
	if due.After(now) || !unfinished || p.Overlap != agentrunner.OverlapSkip {
		return due
	}
	return newest.Add(time.Duration(now.Sub(newest)/p.Every+1) * p.Every)
}

// nextCron is a cron schedule's next fire time after now that is not
// skipped for coming sooner than MinInterval after newest.
func nextCron(p *agentrunner.Pipeline, newest, now time.Time) time.Time {
	next := p.Cron.Next(now)
	for i := 0; i < maxMissedCount && !next.IsZero() && !newest.IsZero() && next.Sub(newest) < p.MinInterval; i++ {
		next = p.Cron.Next(next)
	}
	return next
}
