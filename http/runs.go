package http

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/agentrunner/agentrunner"
	"github.com/agentrunner/agentrunner/backlog"
	"github.com/agentrunner/agentrunner/config"
	"github.com/agentrunner/agentrunner/internal/clip"
)

// Runner is the graph scheduler as the API sees it: the API writes a
// command, wakes the scheduler and may wait for what came of it.
// *scheduler.Scheduler is one.
type Runner interface {
	// Wake makes the scheduler look at new commands at once.
	Wake()
	// Await waits until the scheduler consumed command id and returns its
	// result ("started run ID" for a start), or ctx's error.
	Await(ctx context.Context, id int64) (string, error)
}

// Graphs is a Runner that knows the pipelines it starts runs on now and
// the graph each run runs on, which a reload may change (the scheduler).
// A server whose Runner is not one uses Options.Pipelines.
type Graphs interface {
	Pipelines() map[string]*agentrunner.Pipeline
	RunPipeline(run *agentrunner.Run) *agentrunner.Pipeline
}

// pipelines are the pipelines runs start on now.
func (s *Server) pipelines() map[string]*agentrunner.Pipeline {
	if g, ok := s.opts.Runs.(Graphs); ok {
		return g.Pipelines()
	}
	return s.opts.Pipelines
}

// runPipeline is the graph run runs on: a run in flight keeps the one it
// began on across a reload that changed or removed its pipeline.
func (s *Server) runPipeline(run *agentrunner.Run) *agentrunner.Pipeline {
	if g, ok := s.opts.Runs.(Graphs); ok {
		return g.RunPipeline(run)
	}
	return s.opts.Pipelines[run.Pipeline]
}

// DefaultStartWait bounds how long POST /api/pipelines/{name}/runs waits
// for the scheduler to start the run before it answers 202 instead.
const DefaultStartWait = 10 * time.Second

// maxCommentBytes bounds a gate decision's comment, kept in the audit log.
const maxCommentBytes = 4096

// runIDPattern is what a run id of any pipeline's format looks like.
var runIDPattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$`)

// startedPrefix begins the result of a run.start command that started
// its run.
const startedPrefix = "started run "

// Run is a run as the API shows it.
type Run struct {
	ID       string                `json:"id"`
	Pipeline string                `json:"pipeline"`
	Status   agentrunner.RunStatus `json:"status"`
	// Step is where a serial run of the loop engine is; a graph run's step
	// runs say where it is.
	Step      string    `json:"step,omitempty"`
	StartedAt time.Time `json:"started_at"`
	// EndedAt is nil while the run is unfinished.
	EndedAt *time.Time `json:"ended_at"`
	// DurationMS runs until now while the run is unfinished.
	DurationMS int64          `json:"duration_ms"`
	Error      string         `json:"error,omitempty"`
	Inputs     map[string]any `json:"inputs,omitempty"`
	Parent     string         `json:"parent,omitempty"`
}

// RunList is a page of runs, newest first; NextBefore, when set, asks for
// the next page.
type RunList struct {
	Runs       []Run  `json:"runs"`
	NextBefore string `json:"next_before,omitempty"`
}

// RunDetail is one run with its step runs.
type RunDetail struct {
	Run   Run       `json:"run"`
	Steps []StepRun `json:"steps"`
	// Artifacts are the store's newest copy of each of the run's artifacts.
	Artifacts []Artifact `json:"artifacts"`
	// Children are the runs the run started (its sub-agents' runs),
	// oldest first.
	Children []ChildRun `json:"children"`
}

// ChildRun is a run another run started (a sub-agent's run, spec 4): its
// task, read from its inputs, and what its attempts spent.
type ChildRun struct {
	ID       string                `json:"id"`
	Pipeline string                `json:"pipeline"`
	Status   agentrunner.RunStatus `json:"status"`
	// TaskName and ToolBudget are the lead's task (inputs.task), when
	// the run has one.
	TaskName   string `json:"task_name,omitempty"`
	ToolBudget int    `json:"tool_budget,omitempty"`
	// Attempts counts the attempts of its steps; the rest sums their
	// usage.
	Attempts     int `json:"attempts"`
	InputTokens  int `json:"input_tokens"`
	OutputTokens int `json:"output_tokens"`
	CachedTokens int `json:"cached_tokens"`
	ToolCalls    int `json:"tool_calls"`
}

// StepRunList lists the step runs of a run, oldest first.
type StepRunList struct {
	Steps []StepRun `json:"steps"`
}

// StepRun is one visit of one step in a run, with its attempts.
type StepRun struct {
	Step   string                    `json:"step"`
	Visit  int                       `json:"visit"`
	Status agentrunner.StepRunStatus `json:"status"`
	// From is the step run that opened it ("step#visit").
	From     string     `json:"from,omitempty"`
	Label    string     `json:"label,omitempty"`
	Output   string     `json:"output,omitempty"`
	OpenedAt time.Time  `json:"opened_at"`
	EndedAt  *time.Time `json:"ended_at"`
	Error    string     `json:"error,omitempty"`
	Decision *Decision  `json:"decision,omitempty"`
	// Signal is its SIGNAL BLOCK, for a step that routes on one.
	Signal *Signal `json:"signal,omitempty"`
	// Attempts summarises its attempts in the order they were made.
	Attempts []AttemptSummary `json:"attempts"`
}

// Signal is the SIGNAL BLOCK a step run's agent ended its output with
// (spec 2), as the agent step kind checked and recorded it.
type Signal struct {
	Agent      string `json:"agent"`
	Cycle      string `json:"cycle"`
	Step       string `json:"step"`
	Confidence int    `json:"confidence"`
	Risk       string `json:"risk"`
	Next       string `json:"next"`
}

// AttemptSummary is one attempt of a step run in a few fields; GET
// /api/cycles/{id} and the events tell the rest.
type AttemptSummary struct {
	Number     int                       `json:"number"`
	Status     agentrunner.AttemptStatus `json:"status"`
	ErrorClass agentrunner.ErrorClass    `json:"error_class,omitempty"`
}

// Decision is an operator's decision on a gate.
type Decision struct {
	Action    agentrunner.DecisionAction `json:"action"`
	To        string                     `json:"to,omitempty"`
	Comment   string                     `json:"comment,omitempty"`
	Operator  string                     `json:"operator"`
	DecidedAt time.Time                  `json:"decided_at"`
}

// Gate is a gate that waits for an operator's decision.
type Gate struct {
	Run      string    `json:"run"`
	Pipeline string    `json:"pipeline"`
	Step     string    `json:"step"`
	Visit    int       `json:"visit"`
	OpenedAt time.Time `json:"opened_at"`
	// TimeoutAt is when Default is decided for the operator, if the gate
	// has a timeout.
	TimeoutAt *time.Time `json:"timeout_at,omitempty"`
	Default   string     `json:"default,omitempty"`
	// Question is what a state agent asked a person, Options the answers
	// it proposed, and Why why its output waits (spec 5's gates).
	Question string   `json:"question,omitempty"`
	Options  []string `json:"options,omitempty"`
	Why      string   `json:"why,omitempty"`
}

// GateList lists the waiting gates, oldest first.
type GateList struct {
	Gates []Gate `json:"gates"`
}

// StartRunRequest is the body of POST /api/pipelines/{name}/runs.
type StartRunRequest struct {
	Inputs map[string]any `json:"inputs,omitempty"`
}

// StartedRun answers a start: the run when the scheduler started (or
// queued) it in time, else the command it will start it from.
type StartedRun struct {
	Run       *Run     `json:"run,omitempty"`
	CommandID int64    `json:"command_id,omitempty"`
	Command   *Command `json:"command,omitempty"`
}

// GateDecision is the body of POST /api/runs/{run}/gates/{step}.
type GateDecision struct {
	Decision agentrunner.DecisionAction `json:"decision"`
	// To is the step a route decision sends the run to.
	To      string `json:"to,omitempty"`
	Comment string `json:"comment,omitempty"`
}

// RunsSummary is the runs part of GET /api/status.
type RunsSummary struct {
	// Unfinished counts the unfinished runs by pipeline and status.
	Unfinished map[string]map[agentrunner.RunStatus]int `json:"unfinished"`
	// WaitingGates counts the gates that wait for a decision.
	WaitingGates int `json:"waiting_gates"`
}

// runStatuses are the statuses a run can have, for the status filter.
var runStatuses = []agentrunner.RunStatus{agentrunner.RunQueued, agentrunner.RunRunning, agentrunner.RunHalted,
	agentrunner.RunCompleted, agentrunner.RunFailed, agentrunner.RunAborted, agentrunner.RunIncomplete}

// viewRun is run as the API shows it.
func (s *Server) viewRun(run *agentrunner.Run) Run {
	v := Run{ID: run.ID, Pipeline: run.Pipeline, Status: run.Status, Step: run.Step, StartedAt: run.StartedAt,
		Error: run.Error, Inputs: run.Inputs, Parent: run.Parent}
	end := s.clock.Now()
	if !run.EndedAt.IsZero() {
		ended := run.EndedAt
		v.EndedAt, end = &ended, ended
	}
	v.DurationMS = max(end.Sub(run.StartedAt).Milliseconds(), 0)
	return v
}

// runQuery reads the filters of GET /api/runs.
func runQuery(r *http.Request) (agentrunner.RunFilter, error) {
	q := r.URL.Query()
	f := agentrunner.RunFilter{Pipeline: q.Get("pipeline"), Before: q.Get("before")}
	var err error
	if f.Status, err = statusQuery(q.Get("status")); err != nil {
		return f, err
	}
	if f.Before != "" && !runIDPattern.MatchString(f.Before) {
		return f, agentrunner.Errorf(agentrunner.EINVALID, "query parameter before: want a run id, got %q", clip.String(f.Before, maxQuoted))
	}
	f.Limit, err = limit(r)
	return f, err
}

// statusQuery reads the query parameter status of a list of runs: empty
// or a run status.
func statusQuery(v string) (agentrunner.RunStatus, error) {
	status := agentrunner.RunStatus(v)
	if status != "" && !slices.Contains(runStatuses, status) {
		return "", agentrunner.Errorf(agentrunner.EINVALID, "query parameter status: want queued, running, halted, completed, failed or aborted, got %q", clip.String(v, maxQuoted))
	}
	return status, nil
}

// handleRuns lists runs, newest first, by pipeline and status.
func (s *Server) handleRuns(w http.ResponseWriter, r *http.Request) {
	f, err := runQuery(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	runs, err := s.store.Runs(r.Context(), f)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	out := RunList{Runs: []Run{}}
	for _, run := range runs {
		out.Runs = append(out.Runs, s.viewRun(run))
	}
	if len(runs) == f.Limit {
		out.NextBefore = runs[len(runs)-1].ID
	}
	writeJSON(w, http.StatusOK, out)
}

// runOf reads the run named in the path, or answers with the error.
func (s *Server) runOf(w http.ResponseWriter, r *http.Request) *agentrunner.Run {
	id := r.PathValue("run")
	if !runIDPattern.MatchString(id) {
		s.writeError(w, r, agentrunner.Errorf(agentrunner.EINVALID, "run id: want letters, digits, _, - and ., got %q", clip.String(id, maxQuoted)))
		return nil
	}
	run, err := s.store.Run(r.Context(), id)
	if agentrunner.ErrorCode(err) == agentrunner.ENOTFOUND {
		err = agentrunner.Errorf(agentrunner.ENOTFOUND, "no run %s", id)
	}
	if err != nil {
		s.writeError(w, r, err)
		return nil
	}
	return run
}

// handleRun returns one run with its step runs and their attempts.
func (s *Server) handleRun(w http.ResponseWriter, r *http.Request) {
	run := s.runOf(w, r)
	if run == nil {
		return
	}
	steps, err := s.stepRuns(r.Context(), run.ID, "")
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	arts, err := s.artifacts(r.Context(), run)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	children, err := s.children(r.Context(), run.ID)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, RunDetail{Run: s.viewRun(run), Steps: steps, Artifacts: arts, Children: children})
}

// children are the runs runID started, oldest first, with their tasks
// and usage.
func (s *Server) children(ctx context.Context, runID string) ([]ChildRun, error) {
	runs, err := s.store.Runs(ctx, agentrunner.RunFilter{Parent: runID})
	if err != nil {
		return nil, err
	}
	out := []ChildRun{}
	for _, c := range slices.Backward(runs) {
		v := ChildRun{ID: c.ID, Pipeline: c.Pipeline, Status: c.Status}
		if task, ok := c.Inputs["task"].(map[string]any); ok {
			v.TaskName, _ = task["task_name"].(string)
			switch b := task["tool_budget"].(type) {
			case float64:
				v.ToolBudget = int(b)
			case int:
				v.ToolBudget = b
			case int64:
				v.ToolBudget = int(b)
			case json.Number:
				n, _ := b.Int64()
				v.ToolBudget = int(n)
			}
		}
		atts, err := s.store.Attempts(ctx, c.ID)
		if err != nil {
			return nil, err
		}
		for _, a := range atts {
			v.Attempts++
			v.InputTokens += a.Usage.InputTokens
			v.OutputTokens += a.Usage.OutputTokens
			v.CachedTokens += a.Usage.CachedTokens
			v.ToolCalls += a.Usage.ToolCalls
		}
		out = append(out, v)
	}
	return out, nil
}

// handleRunSteps lists a run's step runs, oldest first; status filters.
func (s *Server) handleRunSteps(w http.ResponseWriter, r *http.Request) {
	status := agentrunner.StepRunStatus(r.URL.Query().Get("status"))
	switch status {
	case "", agentrunner.StepRunJoining, agentrunner.StepRunOpen, agentrunner.StepRunWaiting,
		agentrunner.StepRunSucceeded, agentrunner.StepRunFailed, agentrunner.StepRunCanceled:
	default:
		s.writeError(w, r, agentrunner.Errorf(agentrunner.EINVALID, "query parameter status: want joining, open, waiting, succeeded, failed or canceled, got %q", clip.String(string(status), maxQuoted)))
		return
	}
	run := s.runOf(w, r)
	if run == nil {
		return
	}
	steps, err := s.stepRuns(r.Context(), run.ID, status)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, StepRunList{Steps: steps})
}

// stepRuns reads a run's step runs with the summaries of their attempts.
func (s *Server) stepRuns(ctx context.Context, runID string, status agentrunner.StepRunStatus) ([]StepRun, error) {
	srs, err := s.store.StepRuns(ctx, agentrunner.StepRunFilter{RunID: runID, Status: status})
	if err != nil {
		return nil, err
	}
	atts, err := s.store.Attempts(ctx, runID)
	if err != nil {
		return nil, err
	}
	signals, err := s.signals(ctx, runID)
	if err != nil {
		return nil, err
	}
	byKey := map[string][]AttemptSummary{}
	for _, a := range atts {
		key := agentrunner.StepRunKey(a.Step, max(a.Visit, 1))
		byKey[key] = append(byKey[key], AttemptSummary{Number: a.Number, Status: a.Status, ErrorClass: a.ErrorClass})
	}
	out := []StepRun{}
	for _, sr := range srs {
		v := StepRun{Step: sr.Step, Visit: sr.Visit, Status: sr.Status, From: sr.From, Label: sr.Label, Output: sr.Output,
			OpenedAt: sr.OpenedAt, EndedAt: timePtr(sr.EndedAt), Error: sr.Error, Signal: signals[sr.Key()], Attempts: orEmpty(byKey[sr.Key()])}
		if d := sr.Decision; d != nil {
			v.Decision = &Decision{Action: d.Action, To: d.To, Comment: d.Comment, Operator: d.Operator, DecidedAt: d.DecidedAt}
		}
		out = append(out, v)
	}
	return out, nil
}

// signals are a run's recorded SIGNAL BLOCKs by step run ("step#visit").
func (s *Server) signals(ctx context.Context, runID string) (map[string]*Signal, error) {
	evs, err := s.store.Events(ctx, agentrunner.EventFilter{CycleID: runID, Type: agentrunner.EventSignal})
	if err != nil {
		return nil, err
	}
	out := map[string]*Signal{}
	for _, ev := range evs {
		d := ev.Details
		str := func(k string) string { v, _ := d[k].(string); return v }
		num := func(k string) int { v, _ := d[k].(float64); return int(v) }
		out[agentrunner.StepRunKey(ev.Step, max(num("visit"), 1))] = &Signal{Agent: str("agent"), Cycle: str("cycle"), Step: str("step"),
			Confidence: num("confidence"), Risk: str("risk"), Next: str("next")}
	}
	return out, nil
}

// handleGates lists the gates that wait for a decision, oldest first;
// pipeline filters.
func (s *Server) handleGates(w http.ResponseWriter, r *http.Request) {
	n, err := limitOr(r, maxLimit)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	pipeline := r.URL.Query().Get("pipeline")
	f := agentrunner.StepRunFilter{Status: agentrunner.StepRunWaiting, Limit: n}
	if pipeline != "" {
		f.Limit = 0 // the pipeline is the run's: filtered below, then cut
	}
	srs, err := s.store.StepRuns(r.Context(), f)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	runs := map[string]*agentrunner.Run{}
	out := GateList{Gates: []Gate{}}
	for _, sr := range srs {
		run := runs[sr.RunID]
		if run == nil {
			if run, err = s.store.Run(r.Context(), sr.RunID); err != nil {
				s.writeError(w, r, err)
				return
			}
			runs[sr.RunID] = run
		}
		if (pipeline == "" || run.Pipeline == pipeline) && len(out.Gates) < n {
			g := s.gateOf(run, sr)
			if err := s.gateQuestion(r.Context(), &g); err != nil {
				s.writeError(w, r, err)
				return
			}
			out.Gates = append(out.Gates, g)
		}
	}
	writeJSON(w, http.StatusOK, out)
}

// gateQuestion adds to g what the state agent whose output waits at it
// asked, from the newest judgement of its step.
func (s *Server) gateQuestion(ctx context.Context, g *Gate) error {
	evs, err := s.store.Events(ctx, agentrunner.EventFilter{CycleID: g.Run, Type: backlog.EventJudged, Newest: true, Limit: 50})
	if err != nil {
		return err
	}
	for _, ev := range evs {
		if ev.Step != g.Step {
			continue
		}
		g.Question, _ = ev.Details["question"].(string)
		g.Why, _ = ev.Details["why"].(string)
		if opts, ok := ev.Details["options"].([]any); ok {
			for _, o := range opts {
				if s, ok := o.(string); ok {
					g.Options = append(g.Options, s)
				}
			}
		}
		return nil
	}
	return nil
}

// gateOf is a waiting step run as the API shows a gate.
func (s *Server) gateOf(run *agentrunner.Run, sr *agentrunner.StepRun) Gate {
	g := Gate{Run: run.ID, Pipeline: run.Pipeline, Step: sr.Step, Visit: sr.Visit, OpenedAt: sr.OpenedAt}
	if p := s.runPipeline(run); p != nil {
		if st := p.Steps[sr.Step]; st != nil && st.Gate != nil && st.Gate.Timeout > 0 {
			at := sr.OpenedAt.Add(st.Gate.Timeout)
			g.TimeoutAt, g.Default = &at, string(st.Gate.Default)
		}
	}
	return g
}

// pipelineOf reads the pipeline named in the path, or answers 404.
func (s *Server) pipelineOf(w http.ResponseWriter, r *http.Request) *agentrunner.Pipeline {
	name := r.PathValue("name")
	pipelines := s.pipelines()
	p := pipelines[name]
	if p == nil {
		names := slices.Sorted(maps.Keys(pipelines))
		s.writeError(w, r, agentrunner.Errorf(agentrunner.ENOTFOUND, "no pipeline %q (pipelines: %s)", clip.String(name, maxQuoted), orNoneText(strings.Join(names, ", "))))
		return nil
	}
	return p
}

func orNoneText(s string) string {
	if s == "" {
		return "none"
	}
	return s
}

// checkInputs checks a run's inputs against its pipeline's inputs_schema,
// compiled when the configuration was loaded: content the schema refuses
// is EUNPROCESSABLE, with the message naming the pipeline and each
// failing field.
func (s *Server) checkInputs(p *agentrunner.Pipeline, inputs map[string]any) error {
	err := s.config().CheckInputs(p.Name, inputs)
	if agentrunner.ErrorCode(err) == agentrunner.EINVALID {
		return agentrunner.Errorf(agentrunner.EUNPROCESSABLE, "%s", agentrunner.ErrorMessage(err))
	}
	return err
}

// handleStartRun starts a run of a pipeline: a run.start command the
// scheduler consumes. It waits a while for the run, so a caller usually
// gets it at once (201); else the command (202), whose result the audit
// log shows.
func (s *Server) handleStartRun(w http.ResponseWriter, r *http.Request) {
	p := s.pipelineOf(w, r)
	if p == nil {
		return
	}
	var body StartRunRequest
	if !s.decode(w, r, &body, true) {
		return
	}
	run, cmd, err := s.startRun(r, p, body.Inputs)
	switch {
	case err != nil:
		s.writeError(w, r, err)
	case run == nil:
		writeJSON(w, http.StatusAccepted, StartedRun{Command: ptr(commandOf(cmd))})
	default:
		w.Header().Set("Location", "/api/runs/"+url.PathEscape(run.ID))
		writeJSON(w, http.StatusCreated, StartedRun{Run: ptr(s.viewRun(run)), CommandID: cmd.ID})
	}
}

// startRun starts a run of p with inputs the way every start does, so
// each is checked, attributed and audited alike: the inputs are checked
// against p's schema, a run.start command is stored and the scheduler is
// given a while to start it. It returns the run once the scheduler
// started (or queued) it; a nil run with the command when there is no
// scheduler or it did not answer in time (the command is durable and the
// run still starts); ECONFLICT when the scheduler refused the run.
func (s *Server) startRun(r *http.Request, p *agentrunner.Pipeline, inputs map[string]any) (*agentrunner.Run, *agentrunner.Command, error) {
	if err := s.checkInputs(p, inputs); err != nil {
		return nil, nil, err
	}
	args := map[string]any{"pipeline": p.Name}
	if len(inputs) > 0 {
		args["inputs"] = inputs
	}
	cmd, err := s.addCommand(r, agentrunner.CommandStartRun, "", args)
	if err != nil {
		return nil, nil, err
	}
	if s.opts.Runs == nil {
		return nil, cmd, nil
	}
	s.opts.Runs.Wake()
	ctx, cancel := context.WithTimeout(r.Context(), s.startWait())
	defer cancel()
	result, err := s.opts.Runs.Await(ctx, cmd.ID)
	if err != nil {
		// Not yet: the command is durable and the scheduler will start it.
		return nil, cmd, nil
	}
	run, err := s.startedRun(r.Context(), p, cmd, result)
	return run, cmd, err
}

// startedRun reads the run a start command the scheduler consumed
// started, or answers ECONFLICT with the scheduler's reason.
func (s *Server) startedRun(ctx context.Context, p *agentrunner.Pipeline, cmd *agentrunner.Command, result string) (*agentrunner.Run, error) {
	id, ok := strings.CutPrefix(result, startedPrefix)
	if !ok {
		return nil, agentrunner.Errorf(agentrunner.ECONFLICT, "pipeline %s: the run was not started (command %d): %s", p.Name, cmd.ID, result)
	}
	return s.store.Run(ctx, id)
}

func ptr[T any](v T) *T { return &v }

// startWait is how long a start waits for the scheduler: within half of
// server.write_timeout, so the answer is still written in time.
func (s *Server) startWait() time.Duration {
	wait := DefaultStartWait
	if s.opts.StartWait > 0 {
		wait = s.opts.StartWait
	}
	return min(wait, s.writeTimeout()/2)
}

// handleDecide gives an operator's decision on a waiting gate: a
// gate.decision command, audited with the caller's identity. The command's
// target is the gate's step run, so the store refuses a second decision.
func (s *Server) handleDecide(w http.ResponseWriter, r *http.Request) {
	run := s.runOf(w, r)
	if run == nil {
		return
	}
	p, st := s.gateStep(w, r, run)
	if st == nil {
		return
	}
	var body GateDecision
	if !s.decode(w, r, &body, false) {
		return
	}
	if err := checkDecision(p, body); err != nil {
		s.writeError(w, r, err)
		return
	}
	sr, err := s.openGate(r.Context(), run, st.ID)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	args := map[string]any{"run": run.ID, "step": st.ID, "visit": sr.Visit, "action": string(body.Decision)}
	if body.To != "" {
		args["to"] = body.To
	}
	if body.Comment != "" {
		args["comment"] = body.Comment
	}
	cmd, err := s.addCommand(r, agentrunner.CommandGateDecision, run.ID+"/"+sr.Key(), args)
	if agentrunner.ErrorCode(err) == agentrunner.ECONFLICT {
		err = agentrunner.Errorf(agentrunner.ECONFLICT, "gate %s of run %s already has a decision; GET /api/audit shows it", sr.Key(), run.ID)
	}
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	s.wakeRunner()
	writeJSON(w, http.StatusAccepted, map[string]any{"command": commandOf(cmd)})
}

// gateStep finds the pipeline of run and the gate step named in the path,
// or answers with the error.
func (s *Server) gateStep(w http.ResponseWriter, r *http.Request, run *agentrunner.Run) (*agentrunner.Pipeline, *agentrunner.Step) {
	p := s.runPipeline(run)
	if p == nil {
		s.writeError(w, r, agentrunner.Errorf(agentrunner.ECONFLICT, "run %s is of pipeline %s, which this server does not run", run.ID, run.Pipeline))
		return nil, nil
	}
	name := r.PathValue("step")
	st := p.Steps[name]
	switch {
	case st == nil:
		s.writeError(w, r, agentrunner.Errorf(agentrunner.ENOTFOUND, "pipeline %s has no step %q (steps: %s)", p.Name, clip.String(name, maxQuoted), strings.Join(slices.Sorted(maps.Keys(p.Steps)), ", ")))
		return nil, nil
	case st.Kind != agentrunner.KindGate && st.Kind != config.StepState: // a state step waits when its agent asks
		s.writeError(w, r, agentrunner.Errorf(agentrunner.ECONFLICT, "step %s of run %s is a %s step, not a gate: it takes no decision", st.ID, run.ID, st.Kind))
		return nil, nil
	}
	return p, st
}

// checkDecision refuses a decision the scheduler could not apply.
func checkDecision(p *agentrunner.Pipeline, d GateDecision) error {
	switch {
	case len(d.Comment) > maxCommentBytes:
		return agentrunner.Errorf(agentrunner.EINVALID, "comment is %d bytes; at most %d", len(d.Comment), maxCommentBytes)
	case d.Decision == agentrunner.DecisionRoute && d.To == "":
		return agentrunner.Errorf(agentrunner.EUNPROCESSABLE, "decision route needs to: the step of pipeline %s to send the run to", p.Name)
	case d.Decision == agentrunner.DecisionRoute && p.Steps[d.To] == nil && d.To != agentrunner.EndStep:
		return agentrunner.Errorf(agentrunner.EUNPROCESSABLE, "to: pipeline %s has no step %q (steps: %s, or %s)",
			p.Name, clip.String(d.To, maxQuoted), strings.Join(slices.Sorted(maps.Keys(p.Steps)), ", "), agentrunner.EndStep)
	case d.Decision == agentrunner.DecisionApprove, d.Decision == agentrunner.DecisionReject:
		if d.To != "" {
			return agentrunner.Errorf(agentrunner.EUNPROCESSABLE, "to is for decision route only, not %s", d.Decision)
		}
	case d.Decision != agentrunner.DecisionRoute:
		return agentrunner.Errorf(agentrunner.EUNPROCESSABLE, "decision: want approve, reject or route, got %q", clip.String(string(d.Decision), maxQuoted))
	}
	return nil
}

// openGate returns the latest step run of the gate step, or ECONFLICT
// naming the run, the step and its status when it does not wait.
func (s *Server) openGate(ctx context.Context, run *agentrunner.Run, step string) (*agentrunner.StepRun, error) {
	srs, err := s.store.StepRuns(ctx, agentrunner.StepRunFilter{RunID: run.ID})
	if err != nil {
		return nil, err
	}
	var latest *agentrunner.StepRun
	for _, sr := range srs {
		if sr.Step == step && (latest == nil || sr.Visit > latest.Visit) {
			latest = sr
		}
	}
	switch {
	case latest == nil:
		return nil, agentrunner.Errorf(agentrunner.ECONFLICT, "gate %s of run %s is not open: the run (%s) has not reached it", step, run.ID, run.Status)
	case latest.Status != agentrunner.StepRunWaiting:
		msg := fmt.Sprintf("gate %s of run %s is not open: its step run %s is %s", step, run.ID, latest.Key(), latest.Status)
		if d := latest.Decision; d != nil {
			msg += fmt.Sprintf(" (%s by %s)", d.Action, d.Operator)
		}
		return nil, agentrunner.Errorf(agentrunner.ECONFLICT, "%s", msg)
	case run.Status.Finished():
		return nil, agentrunner.Errorf(agentrunner.ECONFLICT, "gate %s of run %s is not open: the run is %s", step, run.ID, run.Status)
	}
	return latest, nil
}

// handleAbortRun ends a run: a run.abort command. A finished run is a
// conflict.
func (s *Server) handleAbortRun(w http.ResponseWriter, r *http.Request) {
	s.runCommand(w, r, agentrunner.CommandAbortRun, func(run *agentrunner.Run) error {
		if run.Status.Finished() {
			return agentrunner.Errorf(agentrunner.ECONFLICT, "run %s is already %s", run.ID, run.Status)
		}
		return nil
	})
}

// handleResumeRun resumes a halted run: a run.resume command. A run that
// is not halted is a conflict: only a halted run waits for an operator to
// resume it.
func (s *Server) handleResumeRun(w http.ResponseWriter, r *http.Request) {
	s.runCommand(w, r, agentrunner.CommandResumeRun, func(run *agentrunner.Run) error {
		if run.Status != agentrunner.RunHalted {
			return agentrunner.Errorf(agentrunner.ECONFLICT, "run %s is %s, not halted: only a halted run can be resumed", run.ID, run.Status)
		}
		return nil
	})
}

// runCommand writes a command of kind about the run the path names, with
// the body's optional reason, once check accepts the run, and answers 202
// with the command.
func (s *Server) runCommand(w http.ResponseWriter, r *http.Request, kind string, check func(*agentrunner.Run) error) {
	run := s.runOf(w, r)
	if run == nil {
		return
	}
	var body struct {
		Reason string `json:"reason"`
	}
	if !s.decode(w, r, &body, true) {
		return
	}
	if len(body.Reason) > maxReasonBytes {
		s.writeError(w, r, agentrunner.Errorf(agentrunner.EINVALID, "reason is %d bytes; at most %d", len(body.Reason), maxReasonBytes))
		return
	}
	if err := check(run); err != nil {
		s.writeError(w, r, err)
		return
	}
	args := map[string]any{"run": run.ID}
	if body.Reason != "" {
		args["reason"] = body.Reason
	}
	cmd, err := s.addCommand(r, kind, "", args)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	s.wakeRunner()
	writeJSON(w, http.StatusAccepted, map[string]any{"command": commandOf(cmd)})
}

// wakeRunner tells the scheduler a command was written.
func (s *Server) wakeRunner() {
	if s.opts.Runs != nil {
		s.opts.Runs.Wake()
	}
}

// runsSummary counts the unfinished runs and the waiting gates, for GET
// /api/status, without reading the runs (the page is polled while
// thousands are in flight); nil when the server runs no pipelines of its
// own.
func (s *Server) runsSummary(ctx context.Context) (*RunsSummary, error) {
	if len(s.pipelines()) == 0 {
		return nil, nil
	}
	counts, err := s.store.RunCounts(ctx)
	if err != nil {
		return nil, err
	}
	out := &RunsSummary{Unfinished: map[string]map[agentrunner.RunStatus]int{}, WaitingGates: counts.WaitingGates}
	for _, c := range counts.Unfinished {
		if out.Unfinished[c.Pipeline] == nil {
			out.Unfinished[c.Pipeline] = map[agentrunner.RunStatus]int{}
		}
		out.Unfinished[c.Pipeline][c.Status] = c.N
	}
	return out, nil
}
