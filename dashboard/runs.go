package dashboard

import (
	"cmp"
	"context"
	"html/template"
	"maps"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"time"

	"github.com/agentrunner/agentrunner"
	"github.com/agentrunner/agentrunner/config"
)

// Bounds of the run pages.
const (
	runsPage      = 50
	runEvents     = 100
	runChildren   = 100
	maxRunAttempt = 100000
)

// runIDPattern is what a run id of any pipeline looks like (the API's).
var runIDPattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$`)

// stepIDPattern is what a step's name looks like in a path.
var stepIDPattern = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$`)

// runsView is the list of runs.
type runsView struct {
	Pipeline   string
	Status     string
	Pipelines  []string
	Statuses   []agentrunner.RunStatus
	Runs       []runRow
	NextBefore string
}

// runStatuses are the statuses a run can have, for the filter.
var runStatuses = []agentrunner.RunStatus{agentrunner.RunQueued, agentrunner.RunRunning, agentrunner.RunHalted,
	agentrunner.RunCompleted, agentrunner.RunFailed, agentrunner.RunAborted, agentrunner.RunIncomplete}

// handleRuns lists runs, newest first, by pipeline and status, a page at
// a time.
func (d *Dashboard) handleRuns(w http.ResponseWriter, r *http.Request, s *session) {
	q := r.URL.Query()
	v := runsView{Pipeline: q.Get("pipeline"), Status: q.Get("status"), Statuses: runStatuses,
		Pipelines: slices.Sorted(maps.Keys(d.pipelines()))}
	f := agentrunner.RunFilter{Pipeline: v.Pipeline, Status: agentrunner.RunStatus(v.Status), Before: q.Get("before"), Limit: runsPage}
	switch {
	case f.Status != "" && !slices.Contains(runStatuses, f.Status):
		d.fail(w, r, s, errorf(agentrunner.EINVALID, "status: want one of queued, running, halted, completed, failed, aborted, incomplete"))
		return
	case f.Before != "" && !runIDPattern.MatchString(f.Before):
		d.fail(w, r, s, errorf(agentrunner.EINVALID, "before: want a run id"))
		return
	case v.Pipeline != "" && !runIDPattern.MatchString(v.Pipeline):
		d.fail(w, r, s, errorf(agentrunner.EINVALID, "pipeline: want a pipeline's name"))
		return
	}
	ctx, cancel := pageContext(r)
	defer cancel()
	runs, err := d.store.Runs(ctx, f)
	if err == nil {
		v.Runs, err = d.runRows(ctx, runs, true)
	}
	if err != nil {
		d.fail(w, r, s, fmtErr("list the runs", err))
		return
	}
	if len(runs) == runsPage {
		v.NextBefore = runs[len(runs)-1].ID
	}
	d.render(w, r, s, http.StatusOK, "runs", "Runs", v)
}

// runView is the run page's data.
type runView struct {
	Run      *agentrunner.Run
	Duration time.Duration
	// Pipeline is nil for a run of a pipeline no longer configured.
	Pipeline *agentrunner.Pipeline
	Graph    template.HTML
	Timeline template.HTML
	StepRuns []stepRunRow
	// Steps sums each step's attempts: time, tokens and tool calls.
	Steps     []stepTotal
	Total     stepTotal
	Current   []string
	Gates     []gateRow
	Artifacts []*agentrunner.StoredFile
	Events    []*agentrunner.Event
	// MoreEvents: the run has more events than the page shows.
	MoreEvents bool
	Children   []runRow
	// CanAbort and CanResume say which run actions apply.
	CanAbort, CanResume bool
	// Serial: the run is a cycle of the learning loop, steered by the
	// loop's overrides rather than the run actions.
	Serial bool
}

// stepRunRow is one step run with its attempts.
type stepRunRow struct {
	*agentrunner.StepRun
	Attempts []*agentrunner.Attempt
	Duration time.Duration
}

// stepTotal sums what one step's attempts did.
type stepTotal struct {
	Step         string
	Agent        string
	Visits       int
	Attempts     int
	Failed       int
	Time         time.Duration
	InputTokens  int
	OutputTokens int
	CachedTokens int
	ToolCalls    int
	// Cost is what the attempts cost at their providers' prices.
	Cost spent
}

// handleRun shows one run: its graph, timeline, step runs with their
// attempts, tokens, artifacts, events and child runs.
func (d *Dashboard) handleRun(w http.ResponseWriter, r *http.Request, s *session) {
	ctx, cancel := pageContext(r)
	defer cancel()
	run, err := d.runOf(ctx, r.PathValue("run"))
	if err != nil {
		d.fail(w, r, s, err)
		return
	}
	v, err := d.runPage(ctx, run)
	if err != nil {
		d.fail(w, r, s, err)
		return
	}
	d.render(w, r, s, http.StatusOK, "run", "Run "+run.ID, v)
}

// runOf reads the run of an id from a path, checked first.
func (d *Dashboard) runOf(ctx context.Context, id string) (*agentrunner.Run, error) {
	if !runIDPattern.MatchString(id) {
		return nil, errorf(agentrunner.EINVALID, "run id: want letters, digits, _, - and .")
	}
	run, err := d.store.Run(ctx, id)
	if agentrunner.ErrorCode(err) == agentrunner.ENOTFOUND {
		return nil, errorf(agentrunner.ENOTFOUND, "no run %s", id)
	}
	return run, err
}

// runPage reads everything the run page shows.
func (d *Dashboard) runPage(ctx context.Context, run *agentrunner.Run) (*runView, error) {
	now := d.clock.Now()
	v := &runView{Run: run, Pipeline: d.runPipeline(run), Serial: run.Serial}
	end := cmp.Or(run.EndedAt, now)
	v.Duration = max(end.Sub(run.StartedAt), 0)
	srs, err := d.store.StepRuns(ctx, agentrunner.StepRunFilter{RunID: run.ID})
	if err != nil {
		return nil, fmtErr("read the step runs", err)
	}
	atts, err := d.store.Attempts(ctx, run.ID)
	if err != nil {
		return nil, fmtErr("read the attempts", err)
	}
	v.StepRuns, v.Steps, v.Total = stepRunRows(srs, atts, now, pricesFor(d.config(), v.Pipeline))
	states := map[string]stepState{}
	var rows []timelineRow
	for _, sr := range v.StepRuns {
		st := states[sr.Step]
		st.Visits, st.Status = max(st.Visits, sr.Visit), sr.Status
		states[sr.Step] = st
		if isCurrent(sr.Status) {
			v.Current = append(v.Current, sr.Key())
		}
		if sr.Status == agentrunner.StepRunWaiting {
			v.Gates = append(v.Gates, gateRow{Run: run.ID, Pipeline: run.Pipeline, Step: sr.Step, Visit: sr.Visit, OpenedAt: sr.OpenedAt,
				State: d.isStateStep(run.Pipeline, sr.Step)})
		}
		rows = append(rows, timelineRow{Key: sr.Key(), Status: sr.Status, Opened: sr.OpenedAt, Ended: sr.EndedAt, Attempts: sr.Attempts})
	}
	v.Graph = drawGraph(v.Pipeline, states)
	v.Timeline = drawTimeline(rows, span{from: run.StartedAt, to: end}, now)
	if v.Artifacts, err = d.store.Files(ctx, agentrunner.FileFilter{RunID: run.ID, Kind: agentrunner.FileArtifact, Latest: true, NoData: true}); err != nil {
		return nil, fmtErr("list the artifacts", err)
	}
	evs, err := d.store.Events(ctx, agentrunner.EventFilter{CycleID: run.ID, Newest: true, Limit: runEvents + 1})
	if err != nil {
		return nil, fmtErr("read the events", err)
	}
	if len(evs) > runEvents {
		evs, v.MoreEvents = evs[:runEvents], true
	}
	v.Events = evs
	children, err := d.store.Runs(ctx, agentrunner.RunFilter{Parent: run.ID, Limit: runChildren})
	if err == nil {
		v.Children, err = d.runRows(ctx, children, false)
	}
	if err != nil {
		return nil, fmtErr("list the child runs", err)
	}
	v.CanAbort = !run.Serial && !run.Status.Finished()
	v.CanResume = !run.Serial && run.Status == agentrunner.RunHalted
	return v, nil
}

// stepRunRows joins the attempts to their step runs, and sums them by
// step, with their cost at price's prices. A cycle from before step runs
// were recorded has attempts only: each of its steps is shown as one step
// run made of its attempts.
func stepRunRows(srs []*agentrunner.StepRun, atts []*agentrunner.Attempt, now time.Time, price priceFunc) ([]stepRunRow, []stepTotal, stepTotal) {
	byKey := map[string][]*agentrunner.Attempt{}
	for _, a := range atts {
		byKey[agentrunner.StepRunKey(a.Step, max(a.Visit, 1))] = append(byKey[agentrunner.StepRunKey(a.Step, max(a.Visit, 1))], a)
	}
	if len(srs) == 0 {
		srs = stepRunsOf(atts)
	}
	rows := make([]stepRunRow, 0, len(srs))
	totals := map[string]*stepTotal{}
	var order []string
	var all stepTotal
	for _, sr := range srs {
		row := stepRunRow{StepRun: sr, Attempts: byKey[sr.Key()]}
		end := cmp.Or(sr.EndedAt, now)
		row.Duration = max(end.Sub(sr.OpenedAt), 0)
		rows = append(rows, row)
		t := totals[sr.Step]
		if t == nil {
			t = &stepTotal{Step: sr.Step}
			totals[sr.Step] = t
			order = append(order, sr.Step)
		}
		t.Visits++
		for _, a := range row.Attempts {
			p := price(a)
			t.add(a, p, now)
			all.add(a, p, now)
		}
	}
	out := make([]stepTotal, 0, len(order))
	for _, step := range order {
		out = append(out, *totals[step])
	}
	all.Visits = len(rows)
	return rows, out, all
}

// add counts one attempt into the total, its cost at prices p (nil: the
// cost is unknown).
func (t *stepTotal) add(a *agentrunner.Attempt, p *config.Prices, now time.Time) {
	t.Attempts++
	t.Agent = cmp.Or(t.Agent, a.Agent)
	if a.Status == agentrunner.AttemptFailed {
		t.Failed++
	}
	if !a.StartedAt.IsZero() {
		t.Time += max(cmp.Or(a.EndedAt, now).Sub(a.StartedAt), 0)
	}
	t.InputTokens += a.Usage.InputTokens
	t.OutputTokens += a.Usage.OutputTokens
	t.CachedTokens += a.Usage.CachedTokens
	t.ToolCalls += a.Usage.ToolCalls
	t.Cost.add(a, p)
}

// stepRunsOf makes the step runs of a run that has attempts only.
func stepRunsOf(atts []*agentrunner.Attempt) []*agentrunner.StepRun {
	var out []*agentrunner.StepRun
	seen := map[string]*agentrunner.StepRun{}
	for _, a := range atts {
		key := agentrunner.StepRunKey(a.Step, max(a.Visit, 1))
		sr := seen[key]
		if sr == nil {
			sr = &agentrunner.StepRun{RunID: a.CycleID, Step: a.Step, Visit: max(a.Visit, 1), OpenedAt: cmp.Or(a.StartedAt, a.NotBefore)}
			seen[key] = sr
			out = append(out, sr)
		}
		sr.EndedAt = a.EndedAt
		switch a.Status {
		case agentrunner.AttemptSucceeded:
			sr.Status = agentrunner.StepRunSucceeded
		case agentrunner.AttemptFailed:
			sr.Status = agentrunner.StepRunFailed
		default:
			sr.Status = agentrunner.StepRunOpen
		}
	}
	return out
}

// isStateStep reports whether a pipeline's step is a state step, whose
// agent may ask a person a question: the gate takes an answer.
func (d *Dashboard) isStateStep(pipeline, step string) bool {
	p := d.pipeline(pipeline)
	return p != nil && p.Steps[step] != nil && p.Steps[step].Kind == config.StepState
}

// attemptNumber reads an attempt number from a path.
func attemptNumber(v string) (int, error) {
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 || n > maxRunAttempt {
		return 0, errorf(agentrunner.EINVALID, "attempt: want a number from 1")
	}
	return n, nil
}
