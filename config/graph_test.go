package config

import (
	"errors"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/agentrunner/agentrunner"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"go.yaml.in/yaml/v3"
)

// loadProblems loads the test workspace dir and returns its problems, one
// string each.
func loadProblems(t *testing.T, dir string) []string {
	t.Helper()
	_, err := Load("testdata/graphs/" + dir + "/agentrunner.yaml")
	var ps Problems
	if err != nil && !errors.As(err, &ps) {
		t.Fatalf("err = %v (%T), want Problems", err, err)
	}
	var out []string
	for _, p := range ps {
		out = append(out, p.String())
	}
	return out
}

// TestGraphFaults: each bad graph, written as a workspace, is refused by
// Load with the file:line of its step (or pipeline) and a sentence that
// says what is wrong.
func TestGraphFaults(t *testing.T) {
	for _, tt := range []struct {
		dir  string
		want []string
	}{
		{"uncapped-loop", []string{
			`testdata/graphs/uncapped-loop/agentrunner.yaml:17: pipelines.p.steps.fix.max_visits: step fix: an uncapped loop: it is on a loop with review and has no max_visits; every step on a loop needs one`,
		}},
		{"self-loop", []string{
			`testdata/graphs/self-loop/agentrunner.yaml:12: pipelines.p.steps.poll.max_visits: step poll: an uncapped loop: it is on a loop to itself and has no max_visits; every step on a loop needs one`,
		}},
		{"unreachable", []string{
			`testdata/graphs/unreachable/agentrunner.yaml:13: pipelines.p.steps.orphan: step orphan: unreachable: no edge leads to it from the start step "a"`,
		}},
		{"route-to-nowhere", []string{
			`testdata/graphs/route-to-nowhere/agentrunner.yaml:12: pipelines.p.steps.review.routes: step review: a route to nowhere: the route for "APPROVE" leads to "publish", which is not a step of the pipeline`,
			`testdata/graphs/route-to-nowhere/agentrunner.yaml:12: pipelines.p.steps.review.on_cap: step review: a route to nowhere: on_cap leads to "escalation", which is not a step of the pipeline`,
		}},
		{"join-without-branches", []string{
			`testdata/graphs/join-without-branches/agentrunner.yaml:13: pipelines.p.steps.merge.join: step merge: a join without its branches: only step "a" leads to it; a join waits for two or more`,
		}},
		{"gate-no-way-out", []string{
			`testdata/graphs/gate-no-way-out/agentrunner.yaml:13: pipelines.p.steps.approval.routes: step approval: a gate with no way out on reject: add a route {when: reject, to: STEP} or an otherwise route`,
			`testdata/graphs/gate-no-way-out/agentrunner.yaml:16: pipelines.p.steps.signoff: step signoff: a gate with no way out: give it next (approve goes there, a reject ends the run as failed) or routes for approve and reject`,
		}},
		{"routes-without-label", []string{
			`testdata/graphs/routes-without-label/agentrunner.yaml:12: pipelines.p.steps.review.label: step review: routes without a label source: say where the routing label is read (label: {pointer, section, field, regex or parser})`,
		}},
		{"then-one-branch", []string{
			`testdata/graphs/then-one-branch/agentrunner.yaml:12: pipelines.p.steps.a.then: step a: then starts parallel branches and needs at least two; use next for one successor`,
		}},
		{"start-not-a-step", []string{
			`testdata/graphs/start-not-a-step/agentrunner.yaml:10: pipelines.p.start: start "begin" is not a step of the pipeline`,
		}},
		{"reserved-end", []string{
			`testdata/graphs/reserved-end/agentrunner.yaml:13: pipelines.p.steps.end: step end: "end" is reserved: as an edge's target it ends the branch; give the step another name`,
		}},
		{"name-twice", []string{
			`testdata/graphs/name-twice/agentrunner.yaml:13:3: pipelines.ws: "ws" is the name of the workspace (name: ws), which the learning loop's pipeline: has; choose another name`,
		}},
		{"views-mode", []string{
			`testdata/graphs/views-mode/agentrunner.yaml:9:3: pipeline.views: unknown view mode "lazily" (supported: eager, on_read)`,
			`testdata/graphs/views-mode/agentrunner.yaml:20:5: pipelines.q.views: unknown view mode "sometimes" (supported: eager, on_read)`,
		}},
		{"graph-keys-in-pipeline", []string{
			`testdata/graphs/graph-keys-in-pipeline/agentrunner.yaml:10:3: pipeline.run_id: applies to pipelines under pipelines: only; the learning loop's cycles have timestamp ids, run one at a time and follow schedule:`,
			`testdata/graphs/graph-keys-in-pipeline/agentrunner.yaml:11:3: pipeline.schedule: applies to pipelines under pipelines: only; the learning loop's cycles have timestamp ids, run one at a time and follow schedule:`,
			`testdata/graphs/graph-keys-in-pipeline/agentrunner.yaml:20:3: pipeline.max_duration: applies to pipelines under pipelines: only; the learning loop's cycles have timestamp ids, run one at a time and follow schedule:`,
			`testdata/graphs/graph-keys-in-pipeline/agentrunner.yaml:19:15: pipeline.steps.approve.kind: gate steps run in graphs, and pipeline: is the learning loop, a chain: move the pipeline under pipelines: (pipelines: {NAME: {start, steps}}) to use gates`,
			`testdata/graphs/graph-keys-in-pipeline/agentrunner.yaml:17:7: pipeline.steps.review.routes: routes is a key of graphs, and pipeline: is the learning loop, a chain (with parallel branches at most: then and join): move the pipeline under pipelines: (pipelines: {NAME: {start, steps}}) to use it`,
			`testdata/graphs/graph-keys-in-pipeline/agentrunner.yaml:16:7: pipeline.steps.review.label: label is a key of graphs, and pipeline: is the learning loop, a chain (with parallel branches at most: then and join): move the pipeline under pipelines: (pipelines: {NAME: {start, steps}}) to use it`,
			`testdata/graphs/graph-keys-in-pipeline/agentrunner.yaml:18:7: pipeline.steps.review.max_visits: max_visits is a key of graphs, and pipeline: is the learning loop, a chain (with parallel branches at most: then and join): move the pipeline under pipelines: (pipelines: {NAME: {start, steps}}) to use it`,
		}},
		{"on-cap-word", []string{
			`testdata/graphs/on-cap-word/agentrunner.yaml:12:55: pipelines.p.steps.a.on_cap: want halt, end, {to: STEP} or {gate: STEP}, got the string "stop"`,
			`testdata/graphs/on-cap-word/agentrunner.yaml:13:55: pipelines.p.steps.b.on_cap: want halt, end, {to: STEP} or {gate: STEP}, got a list`,
		}},
		{"step-keys", []string{
			`testdata/graphs/step-keys/agentrunner.yaml:14:5: pipelines.p.final: final is the step a run that outlives max_duration is forced to: set max_duration with it`,
			`testdata/graphs/step-keys/agentrunner.yaml:11:5: pipelines.p.run_id: unknown run id format "uuid" (supported: timestamp, date-seq, seq)`,
			`testdata/graphs/step-keys/agentrunner.yaml:12:5: pipelines.p.max_concurrent_runs: must not be negative (0: no bound), got -1`,
			`testdata/graphs/step-keys/agentrunner.yaml:13:16: pipelines.p.schedule.every: must be positive: the time from one run's start to the next one's (or give cron instead)`,
			`testdata/graphs/step-keys/agentrunner.yaml:22:9: pipelines.p.steps.a.gate: applies to gate steps (kind: gate) and state steps (kind: state) only`,
			`testdata/graphs/step-keys/agentrunner.yaml:19:18: pipelines.p.steps.a.routes[0]: an otherwise route is {otherwise: STEP} alone; a route with a label is {when: LABEL, to: STEP}`,
			`testdata/graphs/step-keys/agentrunner.yaml:19:50: pipelines.p.steps.a.routes[1].when: is required: the label that takes this route (or write {otherwise: STEP})`,
			`testdata/graphs/step-keys/agentrunner.yaml:19:59: pipelines.p.steps.a.routes[2].to: is required: a step name or "end"`,
			`testdata/graphs/step-keys/agentrunner.yaml:18:9: pipelines.p.steps.a.label: the label source sets pointer and regex: set only one`,
			`testdata/graphs/step-keys/agentrunner.yaml:20:9: pipelines.p.steps.a.join: unknown join "some" (supported: all, any)`,
			`testdata/graphs/step-keys/agentrunner.yaml:21:9: pipelines.p.steps.a.on_cap: want halt, end, {to: STEP} or {gate: STEP}: set exactly one of to and gate`,
			`testdata/graphs/step-keys/agentrunner.yaml:26:9: pipelines.p.steps.g.agent: a gate runs no agent: it waits for an operator's decision`,
			`testdata/graphs/step-keys/agentrunner.yaml:27:16: pipelines.p.steps.g.gate.default: unknown decision "maybe" (supported: approve, reject)`,
			`testdata/graphs/step-keys/agentrunner.yaml:27:9: pipelines.p.steps.g.gate: set timeout and default together: the decision taken for the operator when the timeout passes`,
			`testdata/graphs/step-keys/agentrunner.yaml:29:11: pipelines.p.steps.h.kind: unknown step kind "judge" (supported: agent, capsule, execution, gate, state, tasks)`,
			`testdata/graphs/step-keys/agentrunner.yaml:29:35: pipelines.p.steps.h.on_failure: unknown policy "retry" (supported: halt, skip, fail)`,
			`testdata/graphs/step-keys/agentrunner.yaml:30:56: pipelines.p.steps.i.on_cap.gate: step "a" is not a gate (kind: gate); use {to: a} to go to another kind of step`,
			`testdata/graphs/step-keys/agentrunner.yaml:23:28: pipelines.p.steps.b.artifact: "c.json" is not produced by a step of the pipeline`,
			`testdata/graphs/step-keys/agentrunner.yaml:23:7: pipelines.p.steps.b: an execution step hands its artifact to the Execution Service: set execution_service.url`,
		}},
		{"parallel-writers", []string{
			`testdata/graphs/parallel-writers/agentrunner.yaml:16:7: pipelines.p.steps.papers: step papers writes "notes.md", which step web also writes on a parallel branch of lead: they may run at once and overwrite each other; give each branch its own artifact`,
		}},
		{"time-bound", []string{
			`testdata/graphs/time-bound/agentrunner.yaml:9:5: pipelines.p.max_duration: must be positive: the longest a run may last before it is forced to its final step (leave it out for no bound)`,
			`testdata/graphs/time-bound/agentrunner.yaml:10:5: pipelines.p.final: "z" is not a step of the pipeline`,
		}},
		{"loop-parallel-reads-sibling", []string{
			`testdata/graphs/loop-parallel-reads-sibling/agentrunner.yaml:9:36: agents.analysis.inputs[1].artifact: "research.md" is produced by step research, which runs in parallel with analyze: it may not be written yet when analyze starts; read the last cycle's (history: {last: 1}) or join both branches before analyze`,
			`testdata/graphs/loop-parallel-reads-sibling/agentrunner.yaml:11:66: agents.synthesis.inputs[1].artifact: "report.md" is not produced by a step before "synthesize"`,
		}},
		{"loop-join-any", []string{
			`testdata/graphs/loop-join-any/agentrunner.yaml:8:51: agents.d.inputs[1].artifact: "c.md" is produced by step c, which runs in parallel with d: it may not be written yet when d starts; read the last cycle's (history: {last: 1}) or join both branches before d`,
		}},
		{"loop-branches-without-join", []string{
			`testdata/graphs/loop-branches-without-join/agentrunner.yaml:15:5: pipeline.steps.d: steps b, c lead to it, on parallel branches: give it join: all, so that it runs once per cycle, after all of them`,
		}},
		{"input-not-produced", []string{
			`testdata/graphs/input-not-produced/agentrunner.yaml:14:11: pipelines.p.steps.b.agent: agent b reads "notes.md", which no step of the pipeline produces`,
		}},
		{"inputs-schema", []string{
			`testdata/graphs/inputs-schema/agentrunner.yaml:27:5: pipelines.broken.inputs_schema: broken.schema.json does not compile: broken.schema.json is not valid against metaschema: jsonschema validation failed with 'https://json-schema.org/draft/2020-12/schema#'
- at '': 'allOf' failed
  - at '/properties/n': 'allOf' failed
    - at '/properties/n/minimum': got string, want number`,
			`testdata/graphs/inputs-schema/agentrunner.yaml:16:5: pipelines.list.inputs_schema: list.schema.json: a run's inputs are a JSON object, so the schema's type must be "object", got array`,
			`testdata/graphs/inputs-schema/agentrunner.yaml:11:5: pipelines.missing.inputs_schema: file missing.json does not exist`,
			`testdata/graphs/inputs-schema/agentrunner.yaml:22:27: pipelines.scheduled.schedule.inputs: inputs of pipeline scheduled do not satisfy object.schema.json: at "/topic": got number, want string`,
		}},
	} {
		t.Run(tt.dir, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, loadProblems(t, tt.dir)); diff != "" {
				t.Errorf("problems (-want +got):\n%s", diff)
			}
		})
	}
}

// TestGraphShapes: the review ⇄ fix loop whose cap opens a gate, the
// fan-out to three branches and a join, and signal routing load as the
// root Pipelines the scheduler runs, each step with its file:line and the
// retry policy and time limit of the loop engine's rules.
func TestGraphShapes(t *testing.T) {
	const file = "testdata/graphs/shapes/agentrunner.yaml"
	c, err := Load(file)
	if err != nil {
		t.Fatal(err)
	}
	at := func(line string) string { return file + ":" + line }
	def := agentrunner.RetryPolicy{Max: 2, Backoff: []time.Duration{time.Second, 2 * time.Second}}
	noRetry := agentrunner.RetryPolicy{Max: 0, Backoff: def.Backoff}
	five := agentrunner.RetryPolicy{Max: 5, Backoff: def.Backoff}
	want := map[string]*agentrunner.Pipeline{
		"review": {Name: "review", Start: "draft", RunID: agentrunner.RunIDDateSeq, MaxConcurrentRuns: 50, Every: time.Hour,
			Overlap: agentrunner.OverlapAllow, CatchUp: agentrunner.CatchUpOne, CatchUpMax: 10,
			EveryInputs:     map[string]any{"topic": "nightly", "rounds": 2.0},
			InputSchemaPath: c.Abs("inputs.schema.json"), Where: at("25"),
			Steps: map[string]*agentrunner.Step{
				"draft": {ID: "draft", Kind: "agent", Next: "review", Retry: def, Timeout: 10 * time.Minute, Where: at("32")},
				"review": {ID: "review", Kind: "agent", Label: &agentrunner.LabelSource{Pointer: "/verdict"},
					Routes:    []agentrunner.Route{{When: "APPROVE", To: "end"}, {To: "fix", Otherwise: true}},
					MaxVisits: 3, OnCap: agentrunner.CapAction{To: "escalate"}, Retry: def, Timeout: 5 * time.Minute, Where: at("33")},
				"fix": {ID: "fix", Kind: "agent", Next: "review", MaxVisits: 3, OnCap: agentrunner.CapAction{Halt: true},
					Retry: noRetry, Timeout: 2 * time.Minute, Where: at("41")},
				"escalate": {ID: "escalate", Kind: "gate", Routes: []agentrunner.Route{{When: "approve", To: "end"}, {When: "reject", To: "end"}},
					Gate: &agentrunner.GateSpec{Timeout: 24 * time.Hour, Default: agentrunner.DecisionReject}, Retry: def, Timeout: 10 * time.Minute, Where: at("46")},
			}},
		"research": {Name: "research", Start: "lead", RunID: agentrunner.RunIDSeq, Where: at("52"),
			Steps: map[string]*agentrunner.Step{
				"lead":   {ID: "lead", Kind: "agent", Then: []string{"web", "papers", "code"}, Retry: def, Timeout: 10 * time.Minute, Where: at("55")},
				"web":    {ID: "web", Kind: "agent", Next: "merge", Retry: def, Timeout: 10 * time.Minute, Where: at("56")},
				"papers": {ID: "papers", Kind: "agent", Next: "merge", Retry: five, OnFailure: agentrunner.SkipStep, Timeout: 10 * time.Minute, Where: at("57")},
				"code":   {ID: "code", Kind: "agent", Next: "merge", Retry: def, Timeout: 10 * time.Minute, Where: at("58")},
				"merge":  {ID: "merge", Kind: "agent", Join: agentrunner.JoinAll, Next: "end", Retry: def, OnFailure: agentrunner.HaltRun, Timeout: 10 * time.Minute, Where: at("59")},
			}},
		"signal": {Name: "signal", Start: "route", RunID: agentrunner.RunIDSeq, Where: at("60"),
			Steps: map[string]*agentrunner.Step{
				"route": {ID: "route", Kind: "agent", Label: &agentrunner.LabelSource{Parser: "signal"},
					Routes:    []agentrunner.Route{{When: "WRITE", To: "write"}, {When: "REVIEW", To: "check"}, {When: "STOP", To: "end"}},
					MaxVisits: 10, OnCap: agentrunner.CapAction{End: true}, Retry: def, Timeout: 10 * time.Minute, Where: at("63")},
				"write": {ID: "write", Kind: "agent", Next: "route", MaxVisits: 10, OnCap: agentrunner.CapAction{Halt: true}, Retry: def, Timeout: 10 * time.Minute, Where: at("72")},
				"check": {ID: "check", Kind: "agent", Next: "route", MaxVisits: 10, OnCap: agentrunner.CapAction{To: "write"}, Retry: def, Timeout: 5 * time.Minute, Where: at("73")},
			}},
	}
	got := c.Graphs()
	if got[c.Name] == nil || !got[c.Name].Serial {
		t.Errorf("Graphs lacks the learning loop %s beside the graphs", c.Name)
	}
	delete(got, c.Name)
	if diff := cmp.Diff(want, got, cmpopts.IgnoreFields(agentrunner.Step{}, "Config"), cmpopts.EquateEmpty()); diff != "" {
		t.Errorf("Graphs (-want +got):\n%s", diff)
	}
	for name, p := range got {
		for id, s := range p.Steps {
			if s.Config != c.Pipelines[name].Steps[id] {
				t.Errorf("%s.%s: Config is %v, want the *config.Step", name, id, s.Config)
			}
		}
	}
	if every := c.Pipelines["review"].Schedule.Every.D(); every != time.Hour {
		t.Errorf("review's schedule.every = %v, want 1h", every)
	}
	if steps := c.LoopSteps(); !slices.Equal(steps, []string{"write"}) {
		t.Errorf("the learning loop's pipeline: beside the graphs: %v", steps)
	}
}

// TestGraphsOnly: a workspace of graphs alone, without the learning loop's
// pipeline:, is valid, and a gate with next has its way out.
func TestGraphsOnly(t *testing.T) {
	c, err := Load("testdata/graphs/graphs-only/agentrunner.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if got := slices.Sorted(maps.Keys(c.Graphs())); !slices.Equal(got, []string{"approve"}) {
		t.Errorf("Graphs = %v, want [approve]", got)
	}
}

// TestLearningLoopUnchanged: the shipped learning loop, written with
// pipeline:, loads as before, and is one pipeline of Graphs: a chain of
// serial runs called cycles, on its schedule and time bounds.
func TestLearningLoopUnchanged(t *testing.T) {
	c, err := Load("../examples/crypton/agentrunner.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if got := slices.Sorted(maps.Keys(c.Graphs())); !slices.Equal(got, []string{c.Name}) || len(c.Pipelines) != 0 {
		t.Errorf("Graphs = %v, want the loop alone", got)
	}
	want := []string{"plan", "research", "analyze", "synthesize", "execute", "evaluate"}
	if diff := cmp.Diff(want, c.LoopSteps()); diff != "" {
		t.Errorf("steps (-want +got):\n%s", diff)
	}
	loop := c.Loop()
	if !loop.Serial || loop.Noun != "cycle" || loop.RunID != agentrunner.RunIDTimestamp || loop.MaxConcurrentRuns != 1 ||
		loop.Every != 6*time.Hour || loop.MaxDuration != c.Schedule.MaxCycle.D() || loop.Final != "evaluate" {
		t.Errorf("loop pipeline: %+v", loop)
	}
	if p := loop.Steps["research"].OnFailure; p != agentrunner.FailurePolicy(c.Escalation.Policy) {
		t.Errorf("research's failure policy %q, want escalation.policy %q", p, c.Escalation.Policy)
	}
	if loop.Steps["evaluate"].Next != agentrunner.EndStep || loop.Steps["execute"].Kind != agentrunner.KindExecution {
		t.Errorf("steps: evaluate %+v, execute %+v", loop.Steps["evaluate"], loop.Steps["execute"])
	}
	if c.Pipeline.Name != c.Name {
		t.Errorf("pipeline: is named %q, want the workspace's name %q", c.Pipeline.Name, c.Name)
	}
}

// TestLoopParallel: the learning loop's pipeline: may fan out (then) and
// join; its steps come in an order where each follows the steps that lead
// to it, and the loop's root Pipeline keeps the branches and the join.
func TestLoopParallel(t *testing.T) {
	c, err := Load("testdata/graphs/loop-parallel/agentrunner.yaml")
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"plan", "research", "analyze", "synthesize", "execute", "evaluate"}
	if diff := cmp.Diff(want, c.LoopSteps()); diff != "" {
		t.Errorf("steps (-want +got):\n%s", diff)
	}
	stages := [][]string{{"plan"}, {"research", "analyze"}, {"synthesize"}, {"execute"}, {"evaluate"}}
	if diff := cmp.Diff(stages, c.LoopStages()); diff != "" {
		t.Errorf("stages (-want +got):\n%s", diff)
	}
	loop := c.Loop()
	if got := loop.Steps["plan"].Then; !slices.Equal(got, []string{"research", "analyze"}) {
		t.Errorf("plan's then = %v", got)
	}
	if got := loop.Steps["synthesize"].Join; got != agentrunner.JoinAll {
		t.Errorf("synthesize's join = %q, want all", got)
	}
}

// TestLoopStepsOrder: LoopSteps puts a join after all its branches, however
// long they are, and walks a loop of a Config built by hand once around;
// LoopStages groups the steps that run in parallel.
func TestLoopStepsOrder(t *testing.T) {
	step := func(next string, then ...string) *Step { return &Step{Next: next, Then: then} }
	for _, tt := range []struct {
		name   string
		start  string
		steps  map[string]*Step
		want   []string
		stages [][]string
	}{
		{"chain", "a", map[string]*Step{"a": step("b"), "b": step("c"), "c": step("end")},
			[]string{"a", "b", "c"}, [][]string{{"a"}, {"b"}, {"c"}}},
		{"long branch", "a", map[string]*Step{
			"a": step("", "b", "c"), "b": step("b2"), "b2": step("b3"), "b3": step("j"), "c": step("j"), "j": step("end"),
		}, []string{"a", "b", "c", "b2", "b3", "j"}, [][]string{{"a"}, {"b", "c"}, {"b2"}, {"b3"}, {"j"}}},
		{"nested", "a", map[string]*Step{
			"a": step("", "b", "c"), "b": step("", "d", "e"), "c": step("j"), "d": step("k"), "e": step("k"), "k": step("j"), "j": step("end"),
		}, []string{"a", "b", "c", "d", "e", "k", "j"}, [][]string{{"a"}, {"b", "c"}, {"d", "e"}, {"k"}, {"j"}}},
		{"hand-built loop", "a", map[string]*Step{"a": step("b"), "b": step("c"), "c": step("b")},
			[]string{"a", "b", "c"}, [][]string{{"a"}, {"b"}, {"c"}}},
		{"no start", "x", map[string]*Step{"a": step("end")}, nil, nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c := &Config{Pipeline: Pipeline{Start: tt.start, Steps: tt.steps}}
			if diff := cmp.Diff(tt.want, c.LoopSteps()); diff != "" {
				t.Errorf("LoopSteps (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.stages, c.LoopStages()); diff != "" {
				t.Errorf("LoopStages (-want +got):\n%s", diff)
			}
		})
	}
}

// TestCheckInputs: a run's inputs are checked against its pipeline's
// inputs_schema, and the error names the pipeline and what is wrong.
func TestCheckInputs(t *testing.T) {
	c, err := Load("testdata/graphs/shapes/agentrunner.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name     string
		pipeline string
		inputs   map[string]any
		want     string
	}{
		{"valid", "review", map[string]any{"topic": "graphs", "rounds": 2}, ""},
		{"missing required", "review", map[string]any{"rounds": 2},
			`inputs of pipeline review do not satisfy inputs.schema.json: at "": missing property 'topic'`},
		{"wrong type", "review", map[string]any{"topic": "graphs", "rounds": "two"},
			`inputs of pipeline review do not satisfy inputs.schema.json: at "/rounds": got string, want integer`},
		{"none", "review", nil, `inputs of pipeline review do not satisfy inputs.schema.json: at "": missing property 'topic'`},
		{"no schema", "research", map[string]any{"anything": true}, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			err := c.CheckInputs(tt.pipeline, tt.inputs)
			if got := errString(err); got != tt.want {
				t.Errorf("CheckInputs = %q, want %q", got, tt.want)
			}
			if err != nil && agentrunner.ErrorCode(err) != agentrunner.EINVALID {
				t.Errorf("code %q, want %q", agentrunner.ErrorCode(err), agentrunner.EINVALID)
			}
			if strings.Contains(errString(err), c.Dir) {
				t.Errorf("the error names a path of the server: %v", err)
			}
		})
	}
}

// graphDoc is a pipelines: section over the agents of valid, with every
// kind of edge.
const graphDoc = `pipelines:
  review:
    start: draft
    run_id: timestamp
    max_concurrent_runs: 2
    schedule: {every: 30m}
    max_duration: 6h
    final: join
    steps:
      draft: {agent: strategist, then: [check, report]}
      check:
        agent: strategist
        label: {pointer: /verdict}
        routes: [{when: OK, to: join}, {otherwise: fix}]
        max_visits: 3
        on_cap: {gate: decide}
      fix: {agent: plan, next: check, max_visits: 3, on_cap: halt}
      report: {agent: report, next: join}
      join: {agent: report, join: any, next: end}
      decide:
        kind: gate
        gate: {timeout: 1h, default: approve}
        routes: [{when: approve, to: join}, {otherwise: end}]
`

// TestParseGraphs: a pipelines: section parses with the learning loop and
// keeps the properties of every parse (the fuzz corpus starts from it).
func TestParseGraphs(t *testing.T) {
	c, ps := checkParse(t, []byte(valid+graphDoc), nil)
	if len(ps) > 0 {
		t.Fatal(ps)
	}
	if got := c.Graphs()["review"].Steps["check"].OnCap; got != (agentrunner.CapAction{To: "decide"}) {
		t.Errorf("check's on_cap = %+v, want to decide", got)
	}
	if g := c.Graphs()["review"]; g.MaxDuration != 6*time.Hour || g.Final != "join" {
		t.Errorf("max_duration %s, final %q; want 6h and join", g.MaxDuration, g.Final)
	}
}

// TestGraphEnvOverrides: keys of pipelines: are overridden by name, like
// those of agents, and the override is located at its variable.
func TestGraphEnvOverrides(t *testing.T) {
	c, err := parse(t, valid+graphDoc, map[string]string{
		"AGENTRUNNER_PIPELINES_REVIEW_STEPS_FIX_MAX_VISITS": "5",
		"AGENTRUNNER_PIPELINES_REVIEW_MAX_CONCURRENT_RUNS":  "7",
	})
	if err != nil {
		t.Fatal(err)
	}
	g := c.Graphs()["review"]
	if g.Steps["fix"].MaxVisits != 5 || g.MaxConcurrentRuns != 7 {
		t.Errorf("max_visits %d, max_concurrent_runs %d, want 5 and 7", g.Steps["fix"].MaxVisits, g.MaxConcurrentRuns)
	}
	if w := c.Where("pipelines.review.steps.fix.max_visits"); w != "environment variable AGENTRUNNER_PIPELINES_REVIEW_STEPS_FIX_MAX_VISITS" {
		t.Errorf("located at %q", w)
	}
}

// TestOnCapMarshal: on_cap is shown (GET /api/config) as it is written.
func TestOnCapMarshal(t *testing.T) {
	for _, tt := range []struct {
		in   OnCap
		want string
	}{
		{OnCap{Halt: true}, "halt\n"},
		{OnCap{To: "fix"}, "to: fix\n"},
		{OnCap{Gate: "decide"}, "gate: decide\n"},
	} {
		got, err := yaml.Marshal(tt.in)
		if err != nil || string(got) != tt.want {
			t.Errorf("Marshal(%+v) = %q, %v; want %q", tt.in, got, err, tt.want)
		}
	}
}
