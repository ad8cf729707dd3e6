package dashboard

import (
	"context"
	"encoding/json"
	"maps"
	"net/http"
	"slices"
	"sort"
	"time"

	"github.com/agentrunner/agentrunner"
	"github.com/agentrunner/agentrunner/engine"
)

// Bounds of the overview's lists: each is one indexed query with a limit.
const (
	overviewInFlight = 25
	overviewRecent   = 15
	overviewGates    = 25
)

// overviewView is the overview's data.
type overviewView struct {
	// Loop is the learning loop's status; nil without a loop.
	Loop      *engine.Status
	Pipelines []pipelineRow
	InFlight  []runRow
	// Unfinished counts every unfinished run, of which InFlight shows the
	// newest.
	Unfinished int
	Recent     []runRow
	Health     *healthView
	Gates      []gateRow
	// WaitingGates counts every waiting gate.
	WaitingGates int
}

// pipelineRow is one pipeline with its schedule and its unfinished runs.
type pipelineRow struct {
	Name  string
	Loop  bool
	Steps int
	// Every is its schedule (zero: runs start on demand); Next when the
	// next scheduled run is due.
	Every   time.Duration
	Next    time.Time
	Running int
	Queued  int
	Halted  int
}

// runRow is a run in a list, with the steps it is at now.
type runRow struct {
	ID        string
	Pipeline  string
	Status    agentrunner.RunStatus
	Current   []string
	StartedAt time.Time
	EndedAt   time.Time
	Duration  time.Duration
	Error     string
	Parent    string
}

// gateRow is a gate that waits.
type gateRow struct {
	Run      string
	Pipeline string
	Step     string
	Visit    int
	OpenedAt time.Time
	// State: the step is a state step, which takes an answer.
	State bool
}

// healthView is the readiness checks, as /health/ready answers them.
type healthView struct {
	Status string                 `json:"status"`
	Checks map[string]healthCheck `json:"checks"`
}

type healthCheck struct {
	OK         bool   `json:"ok"`
	Message    string `json:"message"`
	DurationMS int64  `json:"duration_ms"`
}

// handleOverview shows what runs, what waits and what happened lately.
func (d *Dashboard) handleOverview(w http.ResponseWriter, r *http.Request, s *session) {
	ctx, cancel := pageContext(r)
	defer cancel()
	v, err := d.overview(ctx)
	if err != nil {
		d.fail(w, r, s, err)
		return
	}
	v.Health = d.health(ctx, s)
	d.render(w, r, s, http.StatusOK, "overview", "Overview", v)
}

// overview reads the overview's data from the store.
func (d *Dashboard) overview(ctx context.Context) (*overviewView, error) {
	now := d.clock.Now()
	cfg := d.config()
	v := &overviewView{}
	if cfg.HasLoop() {
		st, err := engine.ReadStatus(ctx, d.store, cfg, now)
		if err != nil {
			return nil, fmtErr("read the loop's status", err)
		}
		v.Loop = st
	}
	counts, err := d.store.RunCounts(ctx)
	if err != nil {
		return nil, fmtErr("count the runs", err)
	}
	v.WaitingGates = counts.WaitingGates
	for _, c := range counts.Unfinished {
		v.Unfinished += c.N
	}
	if v.Pipelines, err = d.pipelineRows(ctx, counts, v.Loop); err != nil {
		return nil, err
	}
	inflight, err := d.store.Runs(ctx, agentrunner.RunFilter{Unfinished: true, Limit: overviewInFlight})
	if err != nil {
		return nil, fmtErr("list the runs in flight", err)
	}
	if v.InFlight, err = d.runRows(ctx, inflight, true); err != nil {
		return nil, err
	}
	recent, err := d.store.Runs(ctx, agentrunner.RunFilter{Limit: overviewRecent})
	if err != nil {
		return nil, fmtErr("list the recent runs", err)
	}
	if v.Recent, err = d.runRows(ctx, recent, false); err != nil {
		return nil, err
	}
	if v.Gates, err = d.waitingGates(ctx, overviewGates); err != nil {
		return nil, err
	}
	return v, nil
}

// pipelineRows lists the pipelines by name with their schedules: the
// loop's next cycle as the engine computes it, a graph's next scheduled
// run one interval after its newest run's start.
func (d *Dashboard) pipelineRows(ctx context.Context, counts agentrunner.RunCounts, loop *engine.Status) ([]pipelineRow, error) {
	byName := map[string]*pipelineRow{}
	pipelines := d.pipelines()
	for _, name := range slices.Sorted(maps.Keys(pipelines)) {
		p := pipelines[name]
		row := &pipelineRow{Name: name, Loop: p.Serial, Steps: len(p.Steps), Every: p.Every}
		switch {
		case p.Serial && loop != nil && loop.Pipeline == name:
			row.Next = loop.NextScheduledTime
		case p.Every > 0:
			newest, err := d.store.Runs(ctx, agentrunner.RunFilter{Pipeline: name, Limit: 1})
			if err != nil {
				return nil, fmtErr("read the newest run of "+name, err)
			}
			row.Next = d.clock.Now()
			if len(newest) == 1 {
				row.Next = newest[0].StartedAt.Add(p.Every)
			}
		}
		byName[name] = row
	}
	for _, c := range counts.Unfinished {
		row := byName[c.Pipeline]
		if row == nil {
			continue // a pipeline no longer configured
		}
		switch c.Status {
		case agentrunner.RunRunning:
			row.Running += c.N
		case agentrunner.RunQueued:
			row.Queued += c.N
		case agentrunner.RunHalted:
			row.Halted += c.N
		}
	}
	out := make([]pipelineRow, 0, len(byName))
	for _, name := range slices.Sorted(maps.Keys(byName)) {
		out = append(out, *byName[name])
	}
	return out, nil
}

// runRows shows runs as rows; with current, each unfinished run's open
// and waiting step runs are read too (one indexed query per run, for the
// few runs a page shows).
func (d *Dashboard) runRows(ctx context.Context, runs []*agentrunner.Run, current bool) ([]runRow, error) {
	now := d.clock.Now()
	out := make([]runRow, 0, len(runs))
	for _, run := range runs {
		row := runRow{ID: run.ID, Pipeline: run.Pipeline, Status: run.Status, StartedAt: run.StartedAt, EndedAt: run.EndedAt,
			Error: run.Error, Parent: run.Parent}
		end := run.EndedAt
		if end.IsZero() {
			end = now
		}
		row.Duration = max(end.Sub(run.StartedAt), 0)
		if current && !run.Status.Finished() {
			steps, err := d.currentSteps(ctx, run)
			if err != nil {
				return nil, err
			}
			row.Current = steps
		}
		out = append(out, row)
	}
	return out, nil
}

// currentSteps names the step runs where run is now, "step#visit
// (status)"; a serial cycle's current step when it has no step runs.
func (d *Dashboard) currentSteps(ctx context.Context, run *agentrunner.Run) ([]string, error) {
	srs, err := d.store.StepRuns(ctx, agentrunner.StepRunFilter{RunID: run.ID})
	if err != nil {
		return nil, fmtErr("read the step runs of "+run.ID, err)
	}
	var out []string
	for _, sr := range srs {
		if isCurrent(sr.Status) {
			out = append(out, sr.Key()+" ("+string(sr.Status)+")")
		}
	}
	sort.Strings(out)
	if len(out) == 0 && run.Step != "" {
		out = append(out, run.Step)
	}
	return out, nil
}

// waitingGates lists the gates that wait, oldest first, at most n.
func (d *Dashboard) waitingGates(ctx context.Context, n int) ([]gateRow, error) {
	srs, err := d.store.StepRuns(ctx, agentrunner.StepRunFilter{Status: agentrunner.StepRunWaiting, Limit: n})
	if err != nil {
		return nil, fmtErr("list the waiting gates", err)
	}
	runs := map[string]*agentrunner.Run{}
	out := make([]gateRow, 0, len(srs))
	for _, sr := range srs {
		run := runs[sr.RunID]
		if run == nil {
			if run, err = d.store.Run(ctx, sr.RunID); err != nil {
				return nil, fmtErr("read run "+sr.RunID, err)
			}
			runs[sr.RunID] = run
		}
		out = append(out, gateRow{Run: run.ID, Pipeline: run.Pipeline, Step: sr.Step, Visit: sr.Visit, OpenedAt: sr.OpenedAt,
			State: d.isStateStep(run.Pipeline, sr.Step)})
	}
	return out, nil
}

// health runs the readiness checks through the API; nil when they could
// not be run (the page still shows the rest).
func (d *Dashboard) health(ctx context.Context, s *session) *healthView {
	ans, err := d.call(ctx, s, http.MethodGet, "/health/ready", nil)
	if ans == nil || len(ans.Body) == 0 {
		d.log.Warn("dashboard: readiness checks", "error", err)
		return nil
	}
	var h healthView
	if err := json.Unmarshal(ans.Body, &h); err != nil {
		d.log.Warn("dashboard: readiness checks", "error", err)
		return nil
	}
	return &h
}
