package engine

import (
	"context"
	"time"

	"github.com/agentrunner/agentrunner"
	"github.com/agentrunner/agentrunner/config"
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
	// LastCycle summarizes the most recent cycle, running or finished.
	LastCycle *CycleSummary `json:"last_cycle"`
	// Paused says an operator paused the loop: no new step starts.
	Paused   bool       `json:"paused"`
	PausedBy string     `json:"paused_by,omitempty"`
	PausedAt *time.Time `json:"paused_at,omitempty"`
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
// it without a running server.
func ReadStatus(ctx context.Context, store agentrunner.Store, cfg *config.Config, now time.Time) (*Status, error) {
	st := &Status{Pipeline: cfg.Name, CurrentState: agentrunner.StateIdle, NextScheduledTime: now}
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
	st.NextScheduledTime = NextStart(cfg.Schedule, c, now)
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
