package engine

import (
	"context"
	"maps"
	"slices"
	"time"

	"github.com/agentrunner/agentrunner"
	"github.com/agentrunner/agentrunner/config"
	"github.com/agentrunner/agentrunner/scheduler"
)

// Status is the loop's state as GET /api/status reports it (FR-062).
type Status struct {
	Pipeline string `json:"pipeline"`
	// CurrentState is Idle, WaitingForNextCycle or the running step.
	CurrentState agentrunner.State `json:"current_state"`
	// CurrentCycleID is the running cycle, or the last one between cycles.
	CurrentCycleID    string `json:"current_cycle_id"`
	LastCompletedStep string `json:"last_completed_step"`
	// NextScheduledTime is when the next cycle is due.
	NextScheduledTime time.Time `json:"next_scheduled_time"`
	// Schedules are the workspace's schedules, the loop's and its
	// pipelines', with when each fires next (FR-008).
	Schedules []ScheduleStatus `json:"schedules,omitempty"`
	// LastCycle summarizes the most recent cycle, running or finished.
	LastCycle *CycleSummary `json:"last_cycle"`
	// Paused says an operator paused the loop: no new step starts.
	Paused   bool       `json:"paused"`
	PausedBy string     `json:"paused_by,omitempty"`
	PausedAt *time.Time `json:"paused_at,omitempty"`
}

// ScheduleStatus is one pipeline's schedule as status shows it.
type ScheduleStatus struct {
	Pipeline string `json:"pipeline"`
	// Schedule is how it is written: "every 6h0m0s" or
	// "cron 0 0 * * * (UTC)".
	Schedule     string              `json:"schedule"`
	NextFireTime time.Time           `json:"next_fire_time"`
	Overlap      agentrunner.Overlap `json:"overlap"`
	CatchUp      agentrunner.CatchUp `json:"catch_up"`
}

// CycleSummary is a cycle's outcome in a few fields.
type CycleSummary struct {
	ID        string                  `json:"id"`
	Status    agentrunner.CycleStatus `json:"status"`
	StartedAt time.Time               `json:"started_at"`
	EndedAt   *time.Time              `json:"ended_at"`
	Error     string                  `json:"error,omitempty"`
}

// ReadStatus reads the status from the store alone, so the CLI can report
// it without a running server. A nil store is a workspace without a
// state database yet: nothing ran.
func ReadStatus(ctx context.Context, store agentrunner.Store, cfg *config.Config, now time.Time) (*Status, error) {
	st := &Status{Pipeline: cfg.Name, CurrentState: agentrunner.StateIdle, NextScheduledTime: now}
	var runs runLister
	if store != nil {
		runs = store
	}
	var err error
	if st.Schedules, err = ReadSchedules(ctx, runs, cfg, now); err != nil {
		return nil, err
	}
	for _, sc := range st.Schedules {
		if sc.Pipeline == cfg.Name && cfg.HasLoop() {
			st.NextScheduledTime = sc.NextFireTime
		}
	}
	if store == nil {
		return st, nil
	}
	ctl, err := store.Control(ctx)
	if err != nil {
		return nil, err
	}
	if ctl.Paused {
		st.Paused, st.PausedBy = true, ctl.PausedBy
		at := ctl.PausedAt
		st.PausedAt = &at
	}
	// The loop's pipeline only: runs of the graph scheduler's pipelines
	// share the store, and may even carry the workspace's name when there
	// is no loop.
	if !cfg.HasLoop() {
		return st, nil
	}
	cs, err := store.Cycles(ctx, agentrunner.CycleFilter{Pipeline: cfg.Name, Limit: 1})
	if err != nil || len(cs) == 0 {
		return st, err
	}
	c := cs[0]
	st.CurrentState = c.State()
	st.CurrentCycleID = c.ID
	st.LastCompletedStep = c.LastCompletedStep
	st.LastCycle = &CycleSummary{ID: c.ID, Status: c.Status, StartedAt: c.StartedAt, Error: c.Error}
	if !c.EndedAt.IsZero() {
		ended := c.EndedAt
		st.LastCycle.EndedAt = &ended
	}
	return st, nil
}

// NextStart is when the cycle after last is due: schedule.every after its
// start, and never sooner than schedule.min_cycle after it (FR-005). With
// no cycle yet, it is now.
func NextStart(s config.Schedule, last *agentrunner.Cycle, now time.Time) time.Time {
	if last == nil {
		return now
	}
	return last.StartedAt.Add(max(s.Every.D(), s.MinCycle.D()))
}

// runLister is what ReadSchedules needs of the store.
type runLister interface {
	Runs(ctx context.Context, f agentrunner.RunFilter) ([]*agentrunner.Run, error)
}

// ReadSchedules lists the schedules of the workspace's pipelines, by
// name, each with when it fires next as its newest run in the store
// shows it (scheduler.NextFire). A nil store has no runs.
func ReadSchedules(ctx context.Context, store runLister, cfg *config.Config, now time.Time) ([]ScheduleStatus, error) {
	graphs := cfg.Graphs()
	var out []ScheduleStatus
	for _, name := range slices.Sorted(maps.Keys(graphs)) {
		p := graphs[name]
		if !p.Scheduled() {
			continue
		}
		var newest time.Time
		var unfinished bool
		if store != nil {
			rs, err := store.Runs(ctx, agentrunner.RunFilter{Pipeline: name, Limit: 1})
			if err != nil {
				return nil, err
			}
			if len(rs) > 0 {
				newest, unfinished = rs[0].StartedAt, !rs[0].Status.Finished()
			}
		}
		out = append(out, ScheduleStatus{Pipeline: name, Schedule: scheduler.DescribeSchedule(p),
			NextFireTime: scheduler.NextFire(p, newest, unfinished, now), Overlap: p.Overlap, CatchUp: p.CatchUp})
	}
	return out, nil
}
