package http_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/agentrunner/agentrunner"
	arhttp "github.com/agentrunner/agentrunner/http"
	"github.com/agentrunner/agentrunner/internal/runtest"
)

// apiRuns are the runs of the OpenAPI tests, on a server with a real
// scheduler over the world's store: one completed, one waiting at its
// gate, one held at its first step, one halted.
type apiRuns struct {
	srv                      *arhttp.Server
	done, gate, held, halted string
}

// apiRunsWorkspace has the pipelines of runtest.LoadPipeline (its inputs
// an integer n and a boolean hold), runtest.ReviewPipeline and
// runtest.HaltPipeline.
const apiRunsWorkspace = `version: 1
name: runs
defaults: {provider: mock}
agents:
  writer: {identity: p.md, output: {file: draft.md, template: t.md}}
pipelines:
  load:
    start: a
    inputs_schema: load.inputs.json
    steps:
      a: {agent: writer, next: b}
      b: {agent: writer, next: end}
  review:
    start: draft
    steps:
      draft: {agent: writer, next: signoff}
      signoff:
        kind: gate
        gate: {timeout: 1h, default: reject}
        routes: [{when: approve, to: publish}, {when: reject, to: end}]
      publish: {agent: writer, next: end}
  halt:
    start: a
    steps:
      a: {agent: writer, next: b}
      b: {agent: writer, next: end, on_failure: halt, retries: {max: 0}}
`

func startAPIRuns(t *testing.T, w *apiWorld) *apiRuns {
	t.Helper()
	cfg := runtest.Workspace(t, t.TempDir(), apiRunsWorkspace, map[string]string{
		"load.inputs.json": `{"type": "object", "properties": {"n": {"type": "integer"}, "hold": {"type": "boolean"}}, "additionalProperties": false}`,
	})
	cfg.Server.MaxBodyBytes = 1 << 20
	kind := &runtest.HoldKind{Hold: runtest.HeldInputs, Fail: runtest.FailedInputs}
	t.Cleanup(kind.Release)
	ps := cfg.Graphs()
	// The world's loop is paused, which holds every run of the workspace:
	// the scheduler starts unpaused, and the store says paused again once
	// the runs are where the tests want them.
	paused, err := w.store.Control(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if err := w.store.Apply(t.Context(), &agentrunner.Change{Control: &agentrunner.Control{}}); err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := w.store.Apply(t.Context(), &agentrunner.Change{Control: paused}); err != nil {
			t.Fatal(err)
		}
	}()
	sched := runtest.Start(t, w.store, cfg.Dir, kind, ps)
	r := &apiRuns{srv: w.server(t, func(o *arhttp.Options) { o.Config, o.Pipelines, o.Runs = cfg, ps, sched })}
	r.done = r.start(t, "load", `{"inputs": {"n": 1}}`)
	r.gate = r.start(t, "review", "")
	r.held = r.start(t, "load", `{"inputs": {"hold": true}}`)
	r.halted = r.start(t, "halt", `{"inputs": {"fail": true}}`)
	waitStepRun(t, w.store, r.done, "b", agentrunner.StepRunSucceeded)
	waitStepRun(t, w.store, r.gate, "signoff", agentrunner.StepRunWaiting)
	waitStepRun(t, w.store, r.held, "a", agentrunner.StepRunOpen)
	waitStepRun(t, w.store, r.halted, "b", agentrunner.StepRunFailed)
	return r
}

// start starts a run through the server and returns its id.
func (r *apiRuns) start(t *testing.T, pipeline, body string) string {
	t.Helper()
	rec := httptest.NewRecorder()
	r.srv.Handler().ServeHTTP(rec, localRequest(http.MethodPost, "/api/pipelines/"+pipeline+"/runs", strings.NewReader(body)))
	var v arhttp.StartedRun
	if err := json.Unmarshal(rec.Body.Bytes(), &v); rec.Code != http.StatusCreated || err != nil || v.Run == nil {
		t.Fatalf("start %s: %d %v\n%s", pipeline, rec.Code, err, rec.Body)
	}
	return v.Run.ID
}

// waitStepRun polls the store until the run's step run of step has status.
func waitStepRun(t *testing.T, store agentrunner.RunStore, run, step string, status agentrunner.StepRunStatus) {
	t.Helper()
	end := time.Now().Add(30 * time.Second)
	for {
		srs, err := store.StepRuns(t.Context(), agentrunner.StepRunFilter{RunID: run})
		if err != nil {
			t.Fatal(err)
		}
		for _, sr := range srs {
			if sr.Step == step && sr.Status == status {
				return
			}
		}
		if time.Now().After(end) {
			t.Fatalf("run %s: step %s not %s within 30s", run, step, status)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
