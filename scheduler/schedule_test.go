package scheduler_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentrunner/agentrunner"
	"github.com/agentrunner/agentrunner/cron"
	"github.com/agentrunner/agentrunner/scheduler"
	"github.com/google/go-cmp/cmp"
)

// mustCron parses a cron expression in the named zone.
func mustCron(t *testing.T, expr, zone string) agentrunner.Timetable {
	t.Helper()
	loc, err := cron.Location(zone)
	if err != nil {
		t.Fatal(err)
	}
	s, err := cron.Parse(expr, loc)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// job is a scheduled pipeline of one step, work.
func job() *agentrunner.Pipeline {
	return &agentrunner.Pipeline{Name: "job", Start: "work", Steps: steps(&agentrunner.Step{ID: "work", Next: agentrunner.EndStep})}
}

// scheduled runs a scheduler over job (scheduled as a test says) and a
// probe pipeline, on a manual clock.
type scheduled struct {
	*harness
	clock *manualClock
}

func newScheduled(t *testing.T, k *scriptKind, p *agentrunner.Pipeline, start string) *scheduled {
	t.Helper()
	probe := &agentrunner.Pipeline{Name: "probe", Start: "one", Steps: steps(&agentrunner.Step{ID: "one", Next: agentrunner.EndStep})}
	h := newHarness(t, k, p, probe)
	f := &scheduled{harness: h, clock: &manualClock{now: utc(t, start)}}
	h.clock = f.clock
	return f
}

func utc(t *testing.T, s string) time.Time {
	t.Helper()
	at, err := time.Parse(time.RFC3339, s)
	if err != nil {
		t.Fatal(err)
	}
	return at
}

// run starts the scheduler and waits for its first look at the time.
func (f *scheduled) run() {
	f.t.Helper()
	f.harness.run()
	select {
	case <-f.sched.Ready():
	case <-time.After(30 * time.Second):
		f.t.Fatal("the scheduler never became ready")
	}
}

// at moves the clock to the time s and returns once the scheduler has
// looked at the time: a probe run's start is committed in a pass that
// comes after the move, and every pass looks at the schedules.
func (f *scheduled) at(s string) {
	f.t.Helper()
	f.clock.Advance(utc(f.t, s).Sub(f.clock.Now()))
	f.startRun("probe", nil)
}

// runs lists job's runs, oldest first.
func (f *scheduled) runs() []*agentrunner.Run {
	f.t.Helper()
	rs, err := f.store.Runs(context.Background(), agentrunner.RunFilter{Pipeline: "job"})
	if err != nil {
		f.t.Fatal(err)
	}
	for i, j := 0, len(rs)-1; i < j; i, j = i+1, j-1 {
		rs[i], rs[j] = rs[j], rs[i]
	}
	return rs
}

// starts lists when job's runs started, oldest first.
func (f *scheduled) starts() []string {
	var out []string
	for _, r := range f.runs() {
		out = append(out, r.StartedAt.UTC().Format(time.RFC3339))
	}
	return out
}

// statuses lists job's runs as "id status", oldest first.
func (f *scheduled) statuses() []string {
	var out []string
	for _, r := range f.runs() {
		out = append(out, fmt.Sprintf("%s %s", r.ID, r.Status))
	}
	return out
}

// eventDetails lists a detail of each event of the type.
func (f *scheduled) eventDetails(typ, key string) []string {
	var out []string
	for _, ev := range eventsOfType(f.t, f.harness, typ) {
		out = append(out, fmt.Sprint(ev.Details[key]))
	}
	return out
}

// waitStatuses waits until job's runs have the statuses.
func (f *scheduled) waitStatuses(want ...string) {
	f.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cmp.Equal(f.statuses(), want) {
		if time.Now().After(deadline) {
			f.t.Fatalf("runs of job: %v, want %v", f.statuses(), want)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestACronScheduleFiresAtItsTimesInItsZone: a cron schedule starts no
// run at once, and then one at each fire time, read in its time zone,
// across a change to summer time; a fixed time that the change skips
// fires at the change.
func TestACronScheduleFiresAtItsTimesInItsZone(t *testing.T) {
	tests := []struct {
		name, expr, zone, start string
		// visits are the times the clock is moved to, in order.
		visits []string
		want   []string
	}{
		{"midnight in Berlin, before and after clocks go forward", "0 0 * * *", "Europe/Berlin", "2026-03-28T12:00:00Z",
			[]string{"2026-03-28T22:59:00Z", "2026-03-28T23:00:00Z", "2026-03-29T21:59:00Z", "2026-03-29T22:00:30Z"},
			[]string{"2026-03-28T23:00:00Z", "2026-03-29T22:00:30Z"}},
		{"02:30 in Berlin, which 29 March skips", "30 2 * * *", "Europe/Berlin", "2026-03-28T12:00:00Z",
			[]string{"2026-03-29T00:59:00Z", "2026-03-29T01:00:00Z", "2026-03-30T00:29:00Z", "2026-03-30T00:30:00Z"},
			[]string{"2026-03-29T01:00:00Z", "2026-03-30T00:30:00Z"}},
		{"weekdays at 09:00 in New York", "0 9 * * mon-fri", "America/New_York", "2026-03-13T12:00:00Z", // a Friday, 08:00 EDT
			[]string{"2026-03-13T13:00:00Z", "2026-03-14T13:00:00Z", "2026-03-15T13:00:00Z", "2026-03-16T13:00:00Z"},
			[]string{"2026-03-13T13:00:00Z", "2026-03-16T13:00:00Z"}},
		{"@hourly in UTC", "@hourly", "UTC", "2026-03-14T09:26:53Z",
			[]string{"2026-03-14T09:59:59Z", "2026-03-14T10:00:00Z", "2026-03-14T10:30:00Z", "2026-03-14T11:00:00Z"},
			[]string{"2026-03-14T10:00:00Z", "2026-03-14T11:00:00Z"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := job()
			p.Cron = mustCron(t, tt.expr, tt.zone)
			f := newScheduled(t, &scriptKind{}, p, tt.start)
			f.run()
			f.at(tt.start)
			if got := f.starts(); len(got) != 0 {
				t.Fatalf("runs at the start: %v, want none (a cron schedule waits for its fire time)", got)
			}
			for _, v := range tt.visits {
				f.at(v)
				var due int
				for _, w := range tt.want {
					if w <= v {
						due++
					}
				}
				if got := f.starts(); len(got) != due {
					t.Fatalf("at %s: runs started at %v, want %d", v, got, due)
				}
			}
			if diff := cmp.Diff(tt.want, f.starts()); diff != "" {
				t.Errorf("start times (-want +got):\n%s", diff)
			}
		})
	}
}

// TestTheOverlapPolicyDecidesAFireTimeThatFindsARunRunning: job's run
// holds while later fire times come. allow starts them beside it (as
// every always did); skip drops them, saying so; queue starts one after
// it and drops the rest, saying so.
func TestTheOverlapPolicyDecidesAFireTimeThatFindsARunRunning(t *testing.T) {
	tests := []struct {
		overlap agentrunner.Overlap
		// held: the runs while the first is held, after the fire times
		// of 14:00 and 15:00; skipped: the reasons of schedule.skipped.
		held, skipped []string
		// after: the runs once the first is released.
		after []string
	}{
		{agentrunner.OverlapAllow,
			[]string{"job-000001 running", "job-000002 running", "job-000003 running"}, nil,
			[]string{"job-000001 completed", "job-000002 completed", "job-000003 completed"}},
		{agentrunner.OverlapSkip,
			[]string{"job-000001 running"},
			[]string{"run job-000001 is still running (overlap: skip)", "run job-000001 is still running (overlap: skip)"},
			[]string{"job-000001 completed"}},
		{agentrunner.OverlapQueue,
			[]string{"job-000001 running", "job-000002 queued"},
			[]string{"run job-000002 is already waiting to start"},
			[]string{"job-000001 completed", "job-000002 completed"}},
	}
	for _, tt := range tests {
		t.Run(string(tt.overlap), func(t *testing.T) {
			k, release := holdStep("work")
			var once sync.Once
			free := func() { once.Do(func() { close(release) }) }
			p := job()
			p.Cron, p.Overlap = mustCron(t, "0 * * * *", "UTC"), tt.overlap
			f := newScheduled(t, k, p, "2026-03-14T12:30:00Z")
			f.run()
			t.Cleanup(free) // runs before the harness's, which waits for the attempts
			f.at("2026-03-14T13:00:00Z")
			waitCalls(t, k, 1)
			f.at("2026-03-14T14:00:00Z")
			f.at("2026-03-14T15:00:00Z")
			f.waitStatuses(tt.held...)
			if diff := cmp.Diff(tt.skipped, f.eventDetails(scheduler.EventScheduleSkipped, "reason")); diff != "" {
				t.Errorf("schedule.skipped reasons (-want +got):\n%s", diff)
			}
			f.clock.Advance(10 * time.Minute)
			free()
			f.waitStatuses(tt.after...)
			if tt.overlap == agentrunner.OverlapQueue {
				if got := f.runs()[1].StartedAt; !got.Equal(utc(t, "2026-03-14T15:10:00Z")) {
					t.Errorf("the queued run started at %s, want when the one before it ended, 15:10", got)
				}
			}
		})
	}
}

// TestCatchUpAfterDowntimeRunsTheMissedFireTimesAsThePolicySays: job ran
// at 13:00; the runner is down from then to 17:30, so the fire times of
// 14:00, 15:00, 16:00 and 17:00 pass. At its start it drops them (none),
// starts one run for them all (one), or one for each up to the bound
// (all). Every schedules count from the newest run alike.
func TestCatchUpAfterDowntimeRunsTheMissedFireTimesAsThePolicySays(t *testing.T) {
	tests := []struct {
		name    string
		every   bool
		policy  agentrunner.CatchUp
		max     int
		overlap agentrunner.Overlap
		// want: the runs' start times after the restart and a visit at
		// 18:00, the next fire time.
		want []string
		runs string // the runs the schedule.missed event says were started
	}{
		{"cron, none", false, agentrunner.CatchUpNone, 10, "", []string{"13:00", "18:00"}, "0"},
		{"cron, one", false, agentrunner.CatchUpOne, 10, "", []string{"13:00", "17:30", "18:00"}, "1"},
		{"cron, the default is one", false, "", 0, "", []string{"13:00", "17:30", "18:00"}, "1"},
		{"cron, all", false, agentrunner.CatchUpAll, 10, "", []string{"13:00", "17:30", "17:30", "17:30", "17:30", "18:00"}, "4"},
		{"cron, all, bounded", false, agentrunner.CatchUpAll, 3, "", []string{"13:00", "17:30", "17:30", "17:30", "18:00"}, "3"},
		{"every, none keeps to the hours counted from the newest run", true, agentrunner.CatchUpNone, 10, "", []string{"13:00", "18:00"}, "0"},
		{"every, all", true, agentrunner.CatchUpAll, 2, "", []string{"13:00", "17:30", "17:30", "18:30"}, "2"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := job()
			if tt.every {
				p.Every = time.Hour
			} else {
				p.Cron = mustCron(t, "0 * * * *", "UTC")
			}
			p.CatchUp, p.CatchUpMax, p.Overlap = tt.policy, tt.max, tt.overlap
			f := newScheduled(t, &scriptKind{}, p, "2026-03-14T12:59:00Z")
			if tt.every { // the first run of an every schedule starts at once
				f.clock.now = utc(t, "2026-03-14T13:00:00Z")
			}
			f.run()
			f.at("2026-03-14T13:00:00Z")
			f.waitStatuses("job-000001 completed")
			f.stop()
			f.clock.Advance(4*time.Hour + 30*time.Minute)
			f.run()
			f.at("2026-03-14T17:30:00Z")
			f.at("2026-03-14T18:00:00Z")
			if tt.every {
				f.at("2026-03-14T18:30:00Z")
			}
			var got []string
			for _, s := range f.starts() {
				got = append(got, utc(t, s).Format("15:04"))
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("start times (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff([]string{"4"}, f.eventDetails(scheduler.EventScheduleMissed, "missed")); diff != "" {
				t.Errorf("schedule.missed counts (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff([]string{tt.runs}, f.eventDetails(scheduler.EventScheduleMissed, "runs")); diff != "" {
				t.Errorf("schedule.missed runs (-want +got):\n%s", diff)
			}
		})
	}
}

// TestCatchUpAllWithQueueRunsTheMissedOnesOneAfterAnother: with overlap:
// queue, the runs a catch-up starts wait for each other, all of them,
// not only one; with allow they run at once.
func TestCatchUpAllWithQueueRunsTheMissedOnesOneAfterAnother(t *testing.T) {
	for _, tt := range []struct {
		overlap  agentrunner.Overlap
		together func(peak int32) bool
	}{
		{agentrunner.OverlapQueue, func(peak int32) bool { return peak == 1 }},
		{agentrunner.OverlapAllow, func(peak int32) bool { return peak > 1 }},
	} {
		t.Run(string(tt.overlap), func(t *testing.T) {
			var running, peak atomic.Int32
			k := &scriptKind{fail: func(a *agentrunner.StepAttempt) error {
				if a.Step.ID == "work" {
					n := running.Add(1)
					defer running.Add(-1)
					for p := peak.Load(); n > p && !peak.CompareAndSwap(p, n); p = peak.Load() {
					}
					time.Sleep(50 * time.Millisecond) // long enough for runs that may overlap to do so
				}
				return nil
			}}
			p := job()
			p.Cron, p.CatchUp, p.CatchUpMax, p.Overlap = mustCron(t, "0 * * * *", "UTC"), agentrunner.CatchUpAll, 10, tt.overlap
			f := newScheduled(t, k, p, "2026-03-14T12:59:00Z")
			f.run()
			f.at("2026-03-14T13:00:00Z")
			f.waitStatuses("job-000001 completed")
			f.stop()
			f.clock.Advance(3*time.Hour + 30*time.Minute)
			f.run()
			f.at("2026-03-14T16:30:00Z")
			f.waitStatuses("job-000001 completed", "job-000002 completed", "job-000003 completed", "job-000004 completed")
			if !tt.together(peak.Load()) {
				t.Errorf("with overlap %s, %d of the caught-up runs ran at once", tt.overlap, peak.Load())
			}
		})
	}
}

// TestMinIntervalSkipsAFireTimeTooSoonAfterTheNewestRun: the learning
// loop's min_cycle holds for cron: a fire time sooner than it after the
// newest run's start is skipped, saying so.
func TestMinIntervalSkipsAFireTimeTooSoonAfterTheNewestRun(t *testing.T) {
	p := job()
	p.Cron, p.MinInterval = mustCron(t, "0 * * * *", "UTC"), 90*time.Minute
	f := newScheduled(t, &scriptKind{}, p, "2026-03-14T12:30:00Z")
	f.run()
	for _, at := range []string{"2026-03-14T13:00:00Z", "2026-03-14T14:00:00Z", "2026-03-14T15:00:00Z"} {
		f.at(at)
	}
	if diff := cmp.Diff([]string{"2026-03-14T13:00:00Z", "2026-03-14T15:00:00Z"}, f.starts()); diff != "" {
		t.Errorf("start times (-want +got):\n%s", diff)
	}
	want := []string{"the newest run started 1h0m0s ago, sooner than the minimum interval 1h30m0s (schedule.min_cycle)"}
	if diff := cmp.Diff(want, f.eventDetails(scheduler.EventScheduleSkipped, "reason")); diff != "" {
		t.Errorf("schedule.skipped reasons (-want +got):\n%s", diff)
	}
}

func TestNextFire(t *testing.T) {
	now := time.Date(2026, 3, 14, 17, 30, 0, 0, time.UTC)
	hourly := func(mut func(p *agentrunner.Pipeline)) *agentrunner.Pipeline {
		p := job()
		p.Every = time.Hour
		mut(p)
		return p
	}
	daily := mustCron(t, "0 0 * * *", "Europe/Berlin")
	tests := []struct {
		name       string
		p          *agentrunner.Pipeline
		newest     time.Time
		unfinished bool
		want       time.Time
	}{
		{"no schedule", job(), now, false, time.Time{}},
		{"every, before the first run: now", hourly(func(*agentrunner.Pipeline) {}), time.Time{}, false, now},
		{"every after the newest run", hourly(func(*agentrunner.Pipeline) {}), now.Add(-20 * time.Minute), false, now.Add(40 * time.Minute)},
		{"every, overdue: due already", hourly(func(*agentrunner.Pipeline) {}), now.Add(-3 * time.Hour), true, now.Add(-2 * time.Hour)},
		{"every, overdue while skipping a running run: the next time counted from it", hourly(func(p *agentrunner.Pipeline) { p.Overlap = agentrunner.OverlapSkip }),
			now.Add(-3*time.Hour - 10*time.Minute), true, now.Add(50 * time.Minute)},
		{"cron: its next fire time in its zone", hourly(func(p *agentrunner.Pipeline) { p.Every, p.Cron = 0, daily }), now.Add(-time.Hour), false,
			time.Date(2026, 3, 14, 23, 0, 0, 0, time.UTC)},
		{"cron: the next fire time past the minimum interval", hourly(func(p *agentrunner.Pipeline) { p.Every, p.Cron, p.MinInterval = 0, daily, 8*time.Hour }),
			time.Date(2026, 3, 14, 17, 0, 0, 0, time.UTC), false, time.Date(2026, 3, 15, 23, 0, 0, 0, time.UTC)},
	}
	for _, tt := range tests {
		if got := scheduler.NextFire(tt.p, tt.newest, tt.unfinished, now); !got.Equal(tt.want) {
			t.Errorf("%s: NextFire = %v, want %v", tt.name, got, tt.want)
		}
	}
}
