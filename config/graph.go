package config

import (
	"errors"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strings"

	"github.com/agentrunner/agentrunner"
	"github.com/agentrunner/agentrunner/graph"
	"github.com/agentrunner/agentrunner/route"
)

// runIDFormats are the run id formats a pipeline under pipelines: may use.
var runIDFormats = []string{string(agentrunner.RunIDTimestamp), string(agentrunner.RunIDDateSeq), string(agentrunner.RunIDSeq)}

// DefaultRunID is the run id format of a pipeline under pipelines:.
const DefaultRunID = agentrunner.RunIDSeq

// graphStepKeys are the step keys of graphs that the learning loop's
// pipeline: refuses: its steps run once per cycle, so it has no routes
// and no loops; it may fan out (then) and join.
var graphStepKeys = []string{"routes", "label", "max_visits", "on_cap", "gate", "capsule", "state", "tasks"}

// graphPipelineKeys are the pipeline keys of pipelines: only.
var graphPipelineKeys = []string{"run_id", "max_concurrent_runs", "inputs_schema", "schedule", "max_duration", "document"}

// Graphs returns the root Pipeline of every pipeline of the workspace, by
// name, for the scheduler: the learning loop's (Loop) under the
// workspace's name, and each one under pipelines:. Their steps have their
// edges, their place in the file, their retry policy and time limit
// (StepPolicy, StepTimeout); Step.Config is the *Step.
func (c *Config) Graphs() map[string]*agentrunner.Pipeline {
	out := make(map[string]*agentrunner.Pipeline, len(c.Pipelines)+1)
	for name, p := range c.Pipelines {
		if p != nil {
			out[name] = c.graph(name, p)
		}
	}
	if loop := c.Loop(); loop != nil {
		out[loop.Name] = loop
	}
	return out
}

// Loop returns the learning loop's pipeline (pipeline:), nil when the
// workspace has none. Its runs are cycles: one at a time, named by their
// start time, started every schedule.every but never sooner than
// schedule.min_cycle after the last one (FR-005), forced to the final step
// once older than schedule.max_cycle (FR-007); a step that fails for good
// escalates by its policy (FR-048..051).
func (c *Config) Loop() *agentrunner.Pipeline {
	if !c.HasLoop() {
		return nil
	}
	p := c.graph(c.Name, &c.Pipeline)
	p.Where = fileLine(c.Where("pipeline"))
	p.RunID, p.MaxConcurrentRuns, p.Serial, p.Noun = agentrunner.RunIDTimestamp, 1, true, "cycle"
	c.Schedule.timing().apply(p)
	if p.Cron != nil {
		p.MinInterval = c.Schedule.MinCycle.D()
	} else {
		p.Every = max(c.Schedule.Every.D(), c.Schedule.MinCycle.D())
	}
	p.MaxDuration, p.Final = c.Schedule.MaxCycle.D(), c.Pipeline.Final
	for id, st := range p.Steps {
		st.Where = fileLine(c.Where("pipeline.steps." + id))
		st.OnFailure = agentrunner.FailurePolicy(c.StepPolicyName(c.Pipeline.Steps[id]))
	}
	return p
}

// graph builds the root Pipeline of the pipeline name.
func (c *Config) graph(name string, p *Pipeline) *agentrunner.Pipeline {
	key := "pipelines." + name
	g := &agentrunner.Pipeline{
		Name: name, Start: p.Start, Steps: map[string]*agentrunner.Step{},
		RunID: agentrunner.RunIDFormat(p.RunID), MaxConcurrentRuns: p.MaxConcurrentRuns,
		InputSchemaPath: c.Abs(p.InputsSchema), Where: fileLine(c.Where(key)),
		MaxDuration: p.MaxDuration.D(), Final: p.Final, Views: agentrunner.ViewMode(p.Views),
	}
	if p.Schedule != nil {
		p.Schedule.timing(name).apply(g)
		g.EveryInputs = p.Schedule.ScheduleInputs()
	}
	if d := p.Document; d != nil {
		g.Document = &agentrunner.DocumentSpec{File: c.Abs(d.File), Archive: c.Abs(d.Archive), Iteration: d.Iteration}
	}
	for id, s := range p.Steps {
		if s != nil {
			g.Steps[id] = c.graphStep(key+".steps."+id, id, s)
		}
	}
	return g
}

// graphStep builds the root Step of s.
func (c *Config) graphStep(key, id string, s *Step) *agentrunner.Step {
	pol := c.StepPolicy(s)
	out := &agentrunner.Step{
		ID: id, Kind: s.Kind, Next: s.Next, Then: slices.Clone(s.Then),
		Join: agentrunner.JoinMode(s.Join), MaxVisits: s.MaxVisits,
		// Not escalation.policy, the loop's default: a graph's step that
		// fails for good fails its run unless it says otherwise (the zero
		// value is agentrunner.FailRun).
		OnFailure: agentrunner.FailurePolicy(s.OnFailure),
		Retry:     agentrunner.RetryPolicy{Max: pol.Max, Backoff: pol.Backoff, InvalidOutput: pol.InvalidOutput},
		Timeout:   c.StepTimeout(s), Where: fileLine(c.Where(key)), Config: s,
	}
	if l := s.Label; l != nil {
		out.Label = &agentrunner.LabelSource{Pointer: l.Pointer, Section: l.Section, Field: l.Field, Regex: l.Regex, Parser: l.Parser}
	}
	for _, r := range s.Routes {
		if r.Otherwise != "" {
			out.Routes = append(out.Routes, agentrunner.Route{To: r.Otherwise, Otherwise: true})
		} else {
			out.Routes = append(out.Routes, agentrunner.Route{When: r.When, To: r.To})
		}
	}
	switch {
	case s.OnCap == nil && s.MaxVisits > 0:
		out.OnCap = agentrunner.CapAction{Halt: true} // a loop at its cap keeps its state for a person
	case s.OnCap != nil:
		out.OnCap = agentrunner.CapAction{Halt: s.OnCap.Halt, End: s.OnCap.End, To: s.OnCap.To + s.OnCap.Gate}
	}
	if g := s.Gate; g != nil {
		out.Gate = &agentrunner.GateSpec{Timeout: g.Timeout.D(), Default: agentrunner.DecisionAction(g.Default)}
	}
	return out
}

// fileLine cuts the column off a "file:line:col" position.
func fileLine(where string) string {
	i := strings.LastIndexByte(where, ':')
	j := strings.LastIndexByte(where[:max(i, 0)], ':')
	if i < 0 || j < 0 || !digits(where[i+1:]) || !digits(where[j+1:i]) {
		return where
	}
	return where[:i]
}

func digits(s string) bool {
	return s != "" && strings.Trim(s, "0123456789") == ""
}

// given reports whether a key was given in the file or the environment.
func (c *Config) given(key string) bool {
	_, ok := c.lines[key]
	return ok
}

// loopOnly reports a graph key given in the learning loop's pipeline:.
func (v *validator) loopOnly(key string) {
	for _, k := range graphStepKeys {
		if v.c.given(key + "." + k) {
			v.add(key+"."+k, "%s is a key of graphs, and pipeline: is the learning loop, a chain (with parallel branches at most: then and join): move the pipeline under pipelines: (pipelines: {NAME: {start, steps}}) to use it", k)
		}
	}
}

// graphs checks the pipelines under pipelines:.
func (v *validator) graphs() {
	for _, name := range slices.Sorted(maps.Keys(v.c.Pipelines)) {
		v.graphPipeline(name, v.c.Pipelines[name])
	}
}

// graphPipeline checks one pipeline under pipelines:, and its graph once
// its keys are right.
func (v *validator) graphPipeline(name string, p *Pipeline) {
	c, key, before := v.c, "pipelines."+name, len(v.problems)
	switch {
	case !namePattern.MatchString(name):
		v.add(key, "pipeline names are lower-case letters, digits, _ and - (they name runs)")
	case name == c.Name && c.HasLoop():
		v.add(key, "%q is the name of the workspace (name: %s), which the learning loop's pipeline: has; choose another name", name, c.Name)
	}
	if p == nil {
		v.add(key, "is empty")
		return
	}
	if len(p.Steps) == 0 {
		v.add(key+".steps", "the pipeline needs at least one step")
		return
	}
	v.graphSettings(key, p)
	for _, id := range slices.Sorted(maps.Keys(p.Steps)) {
		v.graphStep(key, p, id)
	}
	v.graphInputs(key, p)
	if len(v.problems) > before {
		return // the graph check would only repeat what is already said
	}
	g := c.graph(name, p)
	v.checkGraph(key, g)
	if len(v.problems) == before {
		v.parallelWriters(key, g)
	}
}

// graphSettings checks the keys of a pipeline under pipelines: other
// than its steps.
func (v *validator) graphSettings(key string, p *Pipeline) {
	v.timeBound(key, p)
	v.viewMode(key, p)
	if !slices.Contains(runIDFormats, p.RunID) {
		v.add(key+".run_id", "unknown run id format %q (supported: %s)", p.RunID, strings.Join(runIDFormats, ", "))
	}
	if p.MaxConcurrentRuns < 0 {
		v.add(key+".max_concurrent_runs", "must not be negative (0: no bound), got %d", p.MaxConcurrentRuns)
	}
	if p.Schedule != nil {
		if p.Schedule.Cron == "" && p.Schedule.Every <= 0 {
			v.add(key+".schedule.every", "must be positive: the time from one run's start to the next one's (or give cron instead)")
		}
		v.schedule(p.Schedule.timing(p.Name))
	}
	v.document(key+".document", p)
	v.documentReaders(key, p)
}

// documentReaders checks that the agents of a pipeline without a
// document read none.
func (v *validator) documentReaders(key string, p *Pipeline) {
	if p.Document != nil {
		return
	}
	for _, id := range slices.Sorted(maps.Keys(p.Steps)) {
		s := p.Steps[id]
		if s == nil || v.c.Agents[s.Agent] == nil {
			continue
		}
		for i, in := range v.c.Agents[s.Agent].Inputs {
			if in.Document {
				v.add(fmt.Sprintf("agents.%s.inputs[%d].document", s.Agent, i), "step %s of %s runs this agent, and the pipeline has no document", id, key)
			}
		}
	}
}

// document checks a pipeline's shared document: two paths inside the
// workspace, and runs that take turns with date-seq ids, which its one
// file and its archive names need.
func (v *validator) document(key string, p *Pipeline) {
	d := p.Document
	if d == nil {
		return
	}
	for _, f := range []struct{ name, path string }{{"file", d.File}, {"archive", d.Archive}} {
		if !filepath.IsLocal(filepath.FromSlash(f.path)) {
			v.add(key+"."+f.name, "want a path inside the workspace, relative to agentrunner.yaml, got %q", f.path)
		}
	}
	if d.Iteration != "" && p.Steps[d.Iteration] == nil {
		v.add(key+".iteration", "%q is not a step of the pipeline", d.Iteration)
	}
	if p.RunID != string(agentrunner.RunIDDateSeq) {
		v.add(key, "a document's archive is named by the run's date and number: set run_id: date-seq")
	}
	if p.MaxConcurrentRuns != 1 {
		v.add(key, "one document serves one run at a time: set max_concurrent_runs: 1")
	}
}

// viewModes are the values of a pipeline's views.
var viewModes = []string{string(agentrunner.ViewsEager), string(agentrunner.ViewsOnRead)}

// viewMode checks a pipeline's views.
func (v *validator) viewMode(key string, p *Pipeline) {
	if p.Views != "" && !slices.Contains(viewModes, p.Views) {
		v.add(key+".views", "unknown view mode %q (supported: %s)", p.Views, strings.Join(viewModes, ", "))
	}
}

// timeBound checks max_duration and final: a positive bound, and a final
// step of the pipeline that an overdue run is forced to.
func (v *validator) timeBound(key string, p *Pipeline) {
	if v.c.given(key+".max_duration") && p.MaxDuration <= 0 {
		v.add(key+".max_duration", "must be positive: the longest a run may last before it is forced to its final step (leave it out for no bound)")
	}
	switch {
	case p.Final == "":
	case p.Steps[p.Final] == nil:
		v.add(key+".final", "%q is not a step of the pipeline", p.Final)
	case p.MaxDuration <= 0:
		v.add(key+".final", "final is the step a run that outlives max_duration is forced to: set max_duration with it")
	}
}

// checkGraph reports the faults of a pipeline's graph at their steps.
func (v *validator) checkGraph(key string, g *agentrunner.Pipeline) {
	var faults graph.Faults
	if err := graph.Check(g); !errors.As(err, &faults) {
		return
	}
	for _, f := range faults {
		k := key
		if f.Step != "" {
			k += ".steps." + f.Step
		}
		if f.Key != "" {
			k += "." + f.Key
		}
		where, msg := f.Where, f.Message
		if f.Step != "" {
			msg = "step " + f.Step + ": " + msg
		} else {
			where = fileLine(v.c.Where(k)) // the pipeline's key (start) is more precise
		}
		v.problems = append(v.problems, Problem{Where: where, Key: k, Message: msg})
	}
}

// graphStep checks the keys of one step of a pipeline under pipelines:.
func (v *validator) graphStep(pkey string, p *Pipeline, id string) {
	s, key := p.Steps[id], pkey+".steps."+id
	if !namePattern.MatchString(id) {
		v.add(key, "step names are lower-case letters, digits, _ and - (they name folders)")
	}
	if s == nil {
		v.add(key, "is empty")
		return
	}
	switch s.Kind {
	case StepAgent:
		v.agentStep(key, s)
	case StepGate:
		v.gateStep(key, s)
	case StepExecution:
		v.executionStep(key, s)
	case StepCapsule:
		v.capsuleStep(key, s)
	case StepState:
		v.stateStep(key, s)
	case StepTasks:
		v.tasksStep(key, p, s)
	default:
		v.add(key+".kind", "unknown step kind %q (supported: agent, capsule, execution, gate, state, tasks)", s.Kind)
	}
	v.retries(key+".retries", s.Retries)
	if s.OnFailure != "" && !slices.Contains(policies, s.OnFailure) {
		v.add(key+".on_failure", "unknown policy %q (supported: halt, skip, fail)", s.OnFailure)
	}
	v.deliveries(key, s)
	v.stepRoutes(key, s)
	v.label(key+".label", s.Label)
	if s.Join != "" && s.Join != string(agentrunner.JoinAll) && s.Join != string(agentrunner.JoinAny) {
		v.add(key+".join", "unknown join %q (supported: all, any)", s.Join)
	}
	if s.MaxVisits < 0 {
		v.add(key+".max_visits", "must not be negative, got %d", s.MaxVisits)
	}
	v.onCap(key+".on_cap", p, s.OnCap)
}

// gateStep checks a gate step: it runs no agent, produces nothing, and
// its gate settings are whole.
func (v *validator) gateStep(key string, s *Step) {
	if s.Agent != "" {
		v.add(key+".agent", "a gate runs no agent: it waits for an operator's decision")
	}
	if s.Artifact != "" || s.Validity != (Validity{}) || len(s.Deliver) > 0 {
		v.add(key, "a gate produces no artifact: artifact, validity and deliver apply to other steps")
	}
	v.gateSettings(key, s.Gate)
}

// gateSettings checks the settings of a gate: a gate step's, or a state
// step's, whose output may wait at one.
func (v *validator) gateSettings(key string, g *Gate) {
	if g == nil {
		return
	}
	if g.Default != "" && g.Default != string(agentrunner.DecisionApprove) && g.Default != string(agentrunner.DecisionReject) {
		v.add(key+".gate.default", "unknown decision %q (supported: approve, reject)", g.Default)
	}
	if (g.Timeout > 0) != (g.Default != "") {
		v.add(key+".gate", "set timeout and default together: the decision taken for the operator when the timeout passes")
	}
}

// stepRoutes checks each route's form; where routes lead is the graph's.
func (v *validator) stepRoutes(key string, s *Step) {
	if s.Gate != nil && s.Kind != StepGate && s.Kind != StepState {
		v.add(key+".gate", "applies to gate steps (kind: gate) and state steps (kind: state) only")
	}
	if s.Capsule != nil && s.Kind != StepCapsule {
		v.add(key+".capsule", "applies to capsule steps (kind: capsule) only")
	}
	if s.State != "" && s.Kind != StepState {
		v.add(key+".state", "applies to state steps (kind: state) only")
	}
	if s.Tasks != nil && s.Kind != StepTasks {
		v.add(key+".tasks", "applies to tasks steps (kind: tasks) only")
	}
	for i, r := range s.Routes {
		rk := fmt.Sprintf("%s.routes[%d]", key, i)
		switch {
		case r.Otherwise != "" && (r.When != "" || r.To != ""):
			v.add(rk, "an otherwise route is {otherwise: STEP} alone; a route with a label is {when: LABEL, to: STEP}")
		case r.Otherwise != "":
		case r.When == "":
			v.add(rk+".when", "is required: the label that takes this route (or write {otherwise: STEP})")
		case r.To == "":
			v.add(rk+".to", `is required: a step name or "end"`)
		}
	}
}

// label checks a label source as the scheduler will use it: exactly one
// way to read the label, and that one well formed (a JSON pointer, a
// regular expression that compiles, a parser that exists).
func (v *validator) label(key string, l *Label) {
	if l == nil {
		return
	}
	src := &agentrunner.LabelSource{Pointer: l.Pointer, Section: l.Section, Field: l.Field, Regex: l.Regex, Parser: l.Parser}
	if _, err := route.Compile(src); err != nil {
		v.add(key, "%v", err)
	}
}

// onCap checks the form of on_cap; its gate form must name a gate step.
func (v *validator) onCap(key string, p *Pipeline, o *OnCap) {
	switch {
	case o == nil || o.Halt || o.End:
	case (o.To == "") == (o.Gate == ""):
		v.add(key, "want halt, end, {to: STEP} or {gate: STEP}: set exactly one of to and gate")
	case o.Gate == "":
	case p.Steps[o.Gate] == nil:
		v.add(key+".gate", "%q is not a step of the pipeline", o.Gate)
	case p.Steps[o.Gate].Kind != StepGate:
		v.add(key+".gate", "step %q is not a gate (kind: gate); use {to: %s} to go to another kind of step", o.Gate, o.Gate)
	}
}

// HasLoop reports whether the workspace has the learning loop's pipeline:
// (given, or the only pipeline); a workspace of graphs only has none.
func (c *Config) HasLoop() bool {
	return len(c.Pipeline.Steps) > 0 || c.given("pipeline") || len(c.Pipelines) == 0
}

// graphProduces reports whether an agent or capsule step under
// pipelines: produces the artifact file.
func (c *Config) graphProduces(file string) bool {
	for _, p := range c.Pipelines {
		if p == nil {
			continue
		}
		if slices.Contains(capsuleFiles(p), file) {
			return true
		}
		for _, s := range p.Steps {
			if s == nil || s.Kind != StepAgent {
				continue
			}
			if a := c.Agents[s.Agent]; a != nil && a.Output.File == file {
				return true
			}
		}
	}
	return false
}

// graphInputs checks that the artifacts the agents of a graph read from
// their run are produced by some step of it. Which step runs first depends
// on labels, so the order is not checked, unlike the learning loop's.
func (v *validator) graphInputs(key string, p *Pipeline) {
	produced := map[string]bool{}
	for _, s := range p.Steps {
		if a := v.stepAgent(s); a != nil {
			produced[a.Output.File] = true
		}
	}
	for _, f := range capsuleFiles(p) {
		produced[f] = true
	}
	for _, id := range slices.Sorted(maps.Keys(p.Steps)) {
		if s := p.Steps[id]; s != nil && s.Kind == StepExecution && s.Artifact != "" && !produced[s.Artifact] {
			v.add(key+".steps."+id+".artifact", "%q is not produced by a step of the pipeline", s.Artifact)
		}
		a := v.stepAgent(p.Steps[id])
		if a == nil {
			continue
		}
		for _, in := range a.Inputs {
			if in.Artifact != "" && in.History == nil && !produced[in.Artifact] {
				v.add(key+".steps."+id+".agent", "agent %s reads %q, which no step of the pipeline produces", a.Name, in.Artifact)
			}
		}
	}
}

// stepAgent is the agent an agent step runs, if it is known.
func (v *validator) stepAgent(s *Step) *Agent {
	if s == nil || s.Kind != StepAgent {
		return nil
	}
	return v.c.Agents[s.Agent]
}
