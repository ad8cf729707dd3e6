package http_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/agentrunner/agentrunner"
	"github.com/agentrunner/agentrunner/config"
	arhttp "github.com/agentrunner/agentrunner/http"
	"github.com/agentrunner/agentrunner/internal/runtest"
	"github.com/agentrunner/agentrunner/scheduler"
	"github.com/agentrunner/agentrunner/sqlite"
)

var (
	_ arhttp.Runner = (*scheduler.Scheduler)(nil)
	_ arhttp.Graphs = (*scheduler.Scheduler)(nil)
)

// runsWorld is the API on 127.0.0.1 over a real store, with a real
// scheduler running the pipelines.
type runsWorld struct {
	t     *testing.T
	dir   string
	store *sqlite.Store
	kind  *runtest.HoldKind
	sched *runtest.Scheduler
	url   string
}

func newRunsWorld(t *testing.T, kind *runtest.HoldKind, edit func(*arhttp.Options), ps ...*agentrunner.Pipeline) *runsWorld {
	t.Helper()
	return startRunsWorld(t, kind, apiConfig(t), runtest.Pipelines(ps...), edit)
}

// startRunsWorld serves cfg, with the API keys of apiConfig, and runs the
// pipelines.
func startRunsWorld(t *testing.T, kind *runtest.HoldKind, cfg *config.Config, pipelines map[string]*agentrunner.Pipeline, edit func(*arhttp.Options)) *runsWorld {
	t.Helper()
	w := &runsWorld{t: t, dir: cfg.Dir, store: openStore(t), kind: kind}
	w.sched = runtest.Start(t, w.store, w.dir, kind, pipelines)
	cfg.Server.MaxBodyBytes = 1 << 20
	cfg.Server.Auth = apiConfig(t).Server.Auth
	env := map[string]string{"VIEWER_KEY": viewerKey, "OPERATOR_KEY": operatorKey, "ADMIN_KEY": adminKey}
	auth, err := arhttp.NewAuthenticator(cfg.Server.Auth, cfg.Dir, func(k string) (string, bool) { v, ok := env[k]; return v, ok }, nil)
	if err != nil {
		t.Fatal(err)
	}
	opts := arhttp.Options{Store: w.store, Config: cfg, Auth: auth, Logger: slog.New(slog.DiscardHandler),
		Pipelines: pipelines, Runs: w.sched}
	if edit != nil {
		edit(&opts)
	}
	ts := httptest.NewServer(newServer(t, opts).Handler())
	t.Cleanup(ts.Close)
	w.url = ts.URL
	return w
}

// call sends a request with key and returns the status, the headers and
// the body decoded as JSON.
func (w *runsWorld) call(method, path, key, body string) (int, http.Header, map[string]any) {
	w.t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequestWithContext(w.t.Context(), method, w.url+path, rd)
	if err != nil {
		w.t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+key)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		w.t.Fatal(err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		w.t.Fatal(err)
	}
	var v map[string]any
	if err := json.Unmarshal(data, &v); err != nil {
		w.t.Fatalf("%s %s: %d, not a JSON object: %v\n%s", method, path, resp.StatusCode, err, data)
	}
	return resp.StatusCode, resp.Header, v
}

// want calls and fails unless the status is code; it returns the body.
func (w *runsWorld) want(code int, method, path, key, body string) map[string]any {
	w.t.Helper()
	got, _, v := w.call(method, path, key, body)
	if got != code {
		w.t.Fatalf("%s %s: %d, want %d: %v", method, path, got, code, v)
	}
	return v
}

// start starts a run of pipeline through the API and returns its id.
func (w *runsWorld) start(pipeline, inputs string) string {
	w.t.Helper()
	body := ""
	if inputs != "" {
		body = `{"inputs": ` + inputs + `}`
	}
	code, h, v := w.call("POST", "/api/pipelines/"+pipeline+"/runs", operatorKey, body)
	if code != http.StatusCreated {
		w.t.Fatalf("start %s: %d, want 201: %v", pipeline, code, v)
	}
	id := v["run"].(map[string]any)["id"].(string)
	if loc := h.Get("Location"); loc != "/api/runs/"+id {
		w.t.Errorf("start %s: Location %q, want /api/runs/%s", pipeline, loc, id)
	}
	return id
}

// waitRun polls GET /api/runs/{id} until cond holds for the answer.
func (w *runsWorld) waitRun(id, what string, cond func(run map[string]any, steps []any) bool) map[string]any {
	w.t.Helper()
	var v map[string]any
	eventually(w.t, "run "+id+": "+what, func() bool {
		v = w.want(200, "GET", "/api/runs/"+id, viewerKey, "")
		return cond(v["run"].(map[string]any), v["steps"].([]any))
	})
	return v
}

func (w *runsWorld) waitStatus(id string, status agentrunner.RunStatus) map[string]any {
	w.t.Helper()
	return w.waitRun(id, "status "+string(status), func(run map[string]any, _ []any) bool { return run["status"] == string(status) })
}

// waitGate waits until the run's gate step waits.
func (w *runsWorld) waitGate(id, step string) {
	w.t.Helper()
	w.waitRun(id, "gate "+step, func(_ map[string]any, steps []any) bool {
		return slices.ContainsFunc(steps, func(s any) bool {
			m := s.(map[string]any)
			return m["step"] == step && m["status"] == "waiting"
		})
	})
}

// describeSteps is the step runs of an answer as "step#visit:status[label]".
func describeSteps(steps []any) string {
	var out []string
	for _, s := range steps {
		m := s.(map[string]any)
		d := fmt.Sprintf("%s#%v:%s", m["step"], m["visit"], m["status"])
		if l, ok := m["label"].(string); ok {
			d += "[" + l + "]"
		}
		out = append(out, d)
	}
	return strings.Join(out, " ")
}

// ids lists the ids of the runs of a GET /api/runs answer.
func ids(v map[string]any) []string {
	var out []string
	for _, r := range v["runs"].([]any) {
		out = append(out, r.(map[string]any)["id"].(string))
	}
	return out
}

// TestRunsAreStartedListedAndShown: runs started through the API run on
// the scheduler; the list filters by pipeline and status and pages; a run
// shows its step runs with their attempts.
func TestRunsAreStartedListedAndShown(t *testing.T) {
	w := newRunsWorld(t, &runtest.HoldKind{Hold: runtest.HeldInputs}, nil, runtest.ReviewPipeline(), runtest.LoadPipeline(0))
	done := []string{w.start("load", ""), w.start("load", `{"n": 2}`)}
	for _, id := range done {
		w.waitStatus(id, agentrunner.RunCompleted)
	}
	held := w.start("load", `{"hold": true}`)
	w.waitRun(held, "its step a running", func(_ map[string]any, steps []any) bool { return len(steps) == 1 })
	review := w.start("review", "")
	w.waitGate(review, "signoff")

	tests := []struct {
		query string
		want  []string
	}{
		{"", []string{review, held, done[1], done[0]}},
		{"?pipeline=load", []string{held, done[1], done[0]}},
		{"?pipeline=load&status=completed", []string{done[1], done[0]}},
		{"?status=running", []string{review, held}},
		{"?pipeline=review&status=completed", nil},
		{"?pipeline=load&limit=2", []string{held, done[1]}},
		{"?pipeline=load&limit=2&before=" + done[1], []string{done[0]}},
	}
	for _, tt := range tests {
		v := w.want(200, "GET", "/api/runs"+tt.query, viewerKey, "")
		if diff := cmp.Diff(tt.want, ids(v)); diff != "" {
			t.Errorf("GET /api/runs%s (-want +got):\n%s", tt.query, diff)
		}
	}
	if v := w.want(200, "GET", "/api/runs?pipeline=load&limit=2", viewerKey, ""); v["next_before"] != done[1] {
		t.Errorf("a full page: next_before %v, want %s", v["next_before"], done[1])
	}
	w.want(400, "GET", "/api/runs?status=sleeping", viewerKey, "")

	v := w.want(200, "GET", "/api/runs/"+done[1], viewerKey, "")
	run := v["run"].(map[string]any)
	if run["pipeline"] != "load" || run["ended_at"] == nil || !cmp.Equal(run["inputs"], map[string]any{"n": float64(2)}) {
		t.Errorf("GET /api/runs/%s: run %v", done[1], run)
	}
	want := []any{
		map[string]any{"step": "a", "visit": float64(1), "status": "succeeded", "attempts": []any{map[string]any{"number": float64(1), "status": "succeeded"}}},
		map[string]any{"step": "b", "visit": float64(1), "status": "succeeded", "from": "a#1", "attempts": []any{map[string]any{"number": float64(1), "status": "succeeded"}}},
	}
	ignoreTimes := cmp.FilterPath(func(p cmp.Path) bool {
		k := p.Last().String()
		return k == `["opened_at"]` || k == `["ended_at"]` || k == `["output"]`
	}, cmp.Ignore())
	if diff := cmp.Diff(want, v["steps"], ignoreTimes); diff != "" {
		t.Errorf("GET /api/runs/%s steps (-want +got):\n%s", done[1], diff)
	}
	steps := w.want(200, "GET", "/api/runs/"+held+"/steps?status=open", viewerKey, "")["steps"].([]any)
	if got := describeSteps(steps); got != "a#1:open" {
		t.Errorf("GET /api/runs/%s/steps?status=open: %s, want a#1:open", held, got)
	}
	w.want(404, "GET", "/api/runs/nosuchrun-000001", viewerKey, "")
	w.want(400, "GET", "/api/runs/..%2Fetc", viewerKey, "")
	w.kind.Release()
	w.waitStatus(held, agentrunner.RunCompleted)
}

// TestTwoHundredRunsAtMostFiftyAtOnce is shape (d) of the durable graph
// engine: 200 runs of one pipeline with max_concurrent_runs 50, started
// through the API, all complete, and never more than 50 run at once.
func TestTwoHundredRunsAtMostFiftyAtOnce(t *testing.T) {
	const runs, limit = 200, 50
	k := &runtest.HoldKind{Hold: func(*agentrunner.StepAttempt) bool { return true }}
	w := newRunsWorld(t, k, nil, runtest.LoadPipeline(limit))
	started := make(chan string, runs)
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range runs / 8 {
				started <- w.start("load", "")
			}
		})
	}
	wg.Wait()
	close(started)
	var all []string
	for id := range started {
		all = append(all, id)
	}
	if len(slices.Compact(slices.Sorted(slices.Values(all)))) != runs {
		t.Fatalf("%d distinct run ids of %d starts", len(slices.Compact(slices.Sorted(slices.Values(all)))), runs)
	}
	// Every attempt is held: the runs pile up at their first step.
	eventually(t, "the first attempts to start", func() bool { n, _, _ := k.Counts(); return n >= limit })
	st := w.want(200, "GET", "/api/status", viewerKey, "")
	want := map[string]any{"unfinished": map[string]any{"load": map[string]any{"running": float64(limit), "queued": float64(runs - limit)}}, "waiting_gates": float64(0)}
	if diff := cmp.Diff(want, st["runs"]); diff != "" {
		t.Errorf("GET /api/status runs (-want +got):\n%s", diff)
	}
	if st["current_state"] != "Idle" {
		t.Errorf("the loop's status changed: %v", st)
	}
	queued := w.want(200, "GET", "/api/runs?pipeline=load&status=queued&limit=500", viewerKey, "")
	if n := len(ids(queued)); n != runs-limit {
		t.Errorf("%d runs queued, want %d", n, runs-limit)
	}
	k.Release()
	for _, id := range all {
		w.waitStatus(id, agentrunner.RunCompleted)
	}
	_, peak, calls := k.Counts()
	if peak > limit || calls != 2*runs {
		t.Errorf("at most %d attempts ran at once (want at most %d), %d in all (want %d)", peak, limit, calls, 2*runs)
	}
	t.Logf("%d runs, at most %d attempts at once", runs, peak)
}

// inputSchema requires a ticker and a whole number of days.
const inputSchema = `{
  "type": "object",
  "required": ["ticker"],
  "properties": {
    "ticker": {"type": "string", "pattern": "^[A-Z]{2,6}$"},
    "window_days": {"type": "integer", "minimum": 1}
  },
  "additionalProperties": false
}`

// schemaWorkspace is a workspace whose pipeline load takes inputs checked
// against inputSchema.
const schemaWorkspace = `version: 1
name: ws
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
`

// TestStartRunChecksInputsAgainstTheSchema: inputs that fail the
// pipeline's schema are refused with 422, naming the pipeline and each
// failing field, and nothing is started; good inputs start the run with
// them.
func TestStartRunChecksInputsAgainstTheSchema(t *testing.T) {
	cfg := runtest.Workspace(t, t.TempDir(), schemaWorkspace, map[string]string{"load.inputs.json": inputSchema})
	w := startRunsWorld(t, &runtest.HoldKind{}, cfg, cfg.Graphs(), nil)
	bad := []struct {
		name, inputs string
		names        []string
	}{
		{"no inputs", ``, []string{`at "": missing property 'ticker'`}},
		{"a wrong type", `{"ticker": "BTC", "window_days": "7"}`, []string{`at "/window_days"`, "want integer"}},
		{"two fields", `{"ticker": "bitcoin", "window_days": 0}`, []string{`at "/ticker"`, `at "/window_days"`}},
		{"an unknown field", `{"ticker": "BTC", "leverage": 10}`, []string{"leverage"}},
	}
	for _, tt := range bad {
		t.Run(tt.name, func(t *testing.T) {
			body := ""
			if tt.inputs != "" {
				body = `{"inputs": ` + tt.inputs + `}`
			}
			v := w.want(422, "POST", "/api/pipelines/load/runs", operatorKey, body)
			e := v["error"].(map[string]any)
			msg, _ := e["message"].(string)
			if e["code"] != agentrunner.EUNPROCESSABLE || !strings.Contains(msg, "pipeline load") || !strings.Contains(msg, "load.inputs.json") {
				t.Errorf("error %v: want unprocessable, naming pipeline load and its schema", e)
			}
			for _, n := range tt.names {
				if !strings.Contains(msg, n) {
					t.Errorf("the message does not name %q: %s", n, msg)
				}
			}
		})
	}
	if v := w.want(200, "GET", "/api/runs", viewerKey, ""); len(ids(v)) != 0 {
		t.Errorf("refused inputs started runs: %v", ids(v))
	}
	audit := w.want(200, "GET", "/api/audit", viewerKey, "")
	if n := len(audit["commands"].([]any)); n != 0 {
		t.Errorf("refused inputs left %d commands", n)
	}
	id := w.start("load", `{"ticker": "ETH", "window_days": 7}`)
	run := w.waitStatus(id, agentrunner.RunCompleted)["run"].(map[string]any)
	if diff := cmp.Diff(map[string]any{"ticker": "ETH", "window_days": float64(7)}, run["inputs"]); diff != "" {
		t.Errorf("the run's inputs (-want +got):\n%s", diff)
	}
	w.want(404, "POST", "/api/pipelines/nosuch/runs", operatorKey, "")
	w.want(403, "POST", "/api/pipelines/load/runs", viewerKey, "")
}

// TestStartRunWithoutAnAnswerInTimeIsAccepted: when the scheduler does not
// start the run within the wait, the answer is 202 with the command, and
// the run starts when the scheduler runs.
func TestStartRunWithoutAnAnswerInTimeIsAccepted(t *testing.T) {
	w := newRunsWorld(t, &runtest.HoldKind{}, func(o *arhttp.Options) { o.StartWait = time.Millisecond }, runtest.LoadPipeline(0))
	w.sched.Stop()
	v := w.want(202, "POST", "/api/pipelines/load/runs", operatorKey, `{"inputs": {"n": 1}}`)
	cmd := v["command"].(map[string]any)
	if cmd["kind"] != agentrunner.CommandStartRun || cmd["operator"] != "alice" {
		t.Fatalf("202 with command %v", cmd)
	}
	w.sched.Restart()
	eventually(t, "the run to complete", func() bool {
		v := w.want(200, "GET", "/api/runs?status=completed", viewerKey, "")
		return len(ids(v)) == 1
	})
}

// gateDecision is the audit row of a gate decision.
type gateDecision struct {
	Operator, Target, Action, Result string
}

// decisions lists the gate.decision commands of the audit log, oldest first.
func (w *runsWorld) decisions() []gateDecision {
	w.t.Helper()
	var out []gateDecision
	for _, c := range w.want(200, "GET", "/api/audit?limit=100", viewerKey, "")["commands"].([]any) {
		m := c.(map[string]any)
		if m["kind"] != agentrunner.CommandGateDecision {
			continue
		}
		args := m["args"].(map[string]any)
		result, _ := m["result"].(string)
		out = append(out, gateDecision{Operator: m["operator"].(string), Target: m["target"].(string), Action: args["action"].(string), Result: result})
	}
	slices.Reverse(out)
	return out
}

// TestGateDecisions: a gate is decided through the API by an operator,
// audited with the operator's name; a viewer may not; a second decision
// and a decision on a gate that is not open get 409; a decision that
// cannot apply gets 422. The decided gate survives a restart.
func TestGateDecisions(t *testing.T) {
	w := newRunsWorld(t, &runtest.HoldKind{Hold: runtest.HeldInputs}, nil, runtest.ReviewPipeline(), runtest.LoadPipeline(0))
	approved, rejected := w.start("review", ""), w.start("review", "")
	w.waitGate(approved, "signoff")
	w.waitGate(rejected, "signoff")
	notYet := w.start("review", `{"hold": true}`)

	gates := w.want(200, "GET", "/api/gates", viewerKey, "")["gates"].([]any)
	if len(gates) != 2 {
		t.Fatalf("GET /api/gates: %v, want the two waiting gates", gates)
	}
	g := gates[0].(map[string]any)
	opened, _ := time.Parse(time.RFC3339Nano, g["opened_at"].(string))
	timeout, _ := time.Parse(time.RFC3339Nano, g["timeout_at"].(string))
	if g["run"] != approved || g["pipeline"] != "review" || g["step"] != "signoff" || g["visit"] != float64(1) ||
		timeout.Sub(opened) != time.Hour || g["default"] != "reject" {
		t.Errorf("GET /api/gates: first gate %v", g)
	}

	// The status page counts the same waiting gates.
	st := w.want(200, "GET", "/api/status", viewerKey, "")
	wantRuns := map[string]any{"unfinished": map[string]any{"review": map[string]any{"running": float64(3)}}, "waiting_gates": float64(2)}
	if diff := cmp.Diff(wantRuns, st["runs"]); diff != "" {
		t.Errorf("GET /api/status runs (-want +got):\n%s", diff)
	}

	for query, want := range map[string]int{"?pipeline=load": 0, "?pipeline=review&limit=1": 1, "?pipeline=review": 2} {
		if got := w.want(200, "GET", "/api/gates"+query, viewerKey, "")["gates"].([]any); len(got) != want {
			t.Errorf("GET /api/gates%s: %d gates, want %d", query, len(got), want)
		}
	}

	gatePath := func(run string) string { return "/api/runs/" + run + "/gates/signoff" }
	refused := []struct {
		name, path, key, body string
		code                  int
		says                  []string
	}{
		{"a viewer", gatePath(approved), viewerKey, `{"decision": "approve"}`, 403, []string{"role viewer"}},
		{"route without to", gatePath(approved), operatorKey, `{"decision": "route"}`, 422, []string{"route needs to"}},
		{"route to nowhere", gatePath(approved), operatorKey, `{"decision": "route", "to": "nowhere"}`, 422, []string{"pipeline review has no step \"nowhere\"", "publish"}},
		{"to with approve", gatePath(approved), operatorKey, `{"decision": "approve", "to": "publish"}`, 422, []string{"route only"}},
		{"an unknown decision", gatePath(approved), operatorKey, `{"decision": "maybe"}`, 422, []string{"approve, reject or route"}},
		{"an unknown run", gatePath("review-999999"), operatorKey, `{"decision": "approve"}`, 404, []string{"review-999999"}},
		{"an unknown step", "/api/runs/" + approved + "/gates/nosuch", operatorKey, `{"decision": "approve"}`, 404, []string{"no step \"nosuch\""}},
		{"a step that is no gate", "/api/runs/" + approved + "/gates/draft", operatorKey, `{"decision": "approve"}`, 409, []string{"draft", approved, "not a gate"}},
		{"a gate not reached", gatePath(notYet), operatorKey, `{"decision": "approve"}`, 409, []string{"signoff", notYet, "not open", "running"}},
	}
	for _, tt := range refused {
		t.Run(tt.name, func(t *testing.T) {
			v := w.want(tt.code, "POST", tt.path, tt.key, tt.body)
			msg := v["error"].(map[string]any)["message"].(string)
			for _, s := range tt.says {
				if !strings.Contains(msg, s) {
					t.Errorf("the message does not say %q: %s", s, msg)
				}
			}
		})
	}

	// Decided while the runner is down: the second decision is refused by
	// the store itself, and the gate waits across the restart.
	w.sched.Stop()
	v := w.want(202, "POST", gatePath(approved), operatorKey, `{"decision": "approve", "comment": "ship it"}`)
	if cmd := v["command"].(map[string]any); cmd["target"] != approved+"/signoff#1" || cmd["operator"] != "alice" {
		t.Errorf("the decision's command: %v", cmd)
	}
	second := w.want(409, "POST", gatePath(approved), adminKey, `{"decision": "reject", "comment": "wait"}`)
	if msg := second["error"].(map[string]any)["message"].(string); !strings.Contains(msg, "already has a decision") || !strings.Contains(msg, approved) {
		t.Errorf("second decision: %s", msg)
	}
	w.sched.Restart()
	w.want(202, "POST", gatePath(rejected), adminKey, `{"decision": "reject", "comment": "not now"}`)

	steps := w.waitStatus(approved, agentrunner.RunCompleted)["steps"].([]any)
	if got := describeSteps(steps); got != "draft#1:succeeded signoff#1:succeeded[approve] publish#1:succeeded" {
		t.Errorf("approved run: %s", got)
	}
	d := steps[1].(map[string]any)["decision"].(map[string]any)
	if d["action"] != "approve" || d["operator"] != "alice" || d["comment"] != "ship it" {
		t.Errorf("the gate's decision: %v", d)
	}
	if got := describeSteps(w.waitStatus(rejected, agentrunner.RunCompleted)["steps"].([]any)); got != "draft#1:succeeded signoff#1:succeeded[reject]" {
		t.Errorf("rejected run: %s", got)
	}
	late := w.want(409, "POST", gatePath(approved), operatorKey, `{"decision": "approve"}`)
	if msg := late["error"].(map[string]any)["message"].(string); !strings.Contains(msg, "signoff#1 is succeeded (approve by alice)") {
		t.Errorf("a decision on a decided gate: %s", msg)
	}
	want := []gateDecision{
		{Operator: "alice", Target: approved + "/signoff#1", Action: "approve", Result: "approve gate signoff#1 of run " + approved},
		{Operator: "root", Target: rejected + "/signoff#1", Action: "reject", Result: "reject gate signoff#1 of run " + rejected},
	}
	if diff := cmp.Diff(want, w.decisions()); diff != "" {
		t.Errorf("audit of the decisions (-want +got):\n%s", diff)
	}
	if gates := w.want(200, "GET", "/api/gates", viewerKey, "")["gates"].([]any); len(gates) != 0 {
		t.Errorf("gates still waiting: %v", gates)
	}
	w.kind.Release()
}

// TestTheAPIFollowsAReload: a reload removes review and adds fresh
// while a run of review waits at its gate. The API starts runs of fresh
// and refuses new runs of review, naming the pipelines it has; the
// waiting gate, which the reloaded configuration no longer has, still
// takes its decision, and the run completes on the graph it began on.
func TestTheAPIFollowsAReload(t *testing.T) {
	w := newRunsWorld(t, &runtest.HoldKind{}, nil, runtest.ReviewPipeline())
	id := w.start("review", "")
	w.waitGate(id, "signoff")
	fresh := runtest.LoadPipeline(0)
	fresh.Name = "fresh"
	w.sched.OnReload(func() map[string]*agentrunner.Pipeline { return runtest.Pipelines(fresh) })
	cmd := w.want(202, "POST", "/api/admin/reload", adminKey, "")["command"].(map[string]any)
	w.sched.Wake()
	if res, err := w.sched.Await(t.Context(), int64(cmd["id"].(float64))); err != nil || res != "reloaded reloaded" {
		t.Fatalf("reload: %q, %v", res, err)
	}
	w.waitStatus(w.start("fresh", ""), agentrunner.RunCompleted)
	msg := w.want(404, "POST", "/api/pipelines/review/runs", operatorKey, "")["error"].(map[string]any)["message"].(string)
	if !strings.Contains(msg, `no pipeline "review" (pipelines: fresh)`) {
		t.Errorf("a run of the removed pipeline: %s", msg)
	}
	gates := w.want(200, "GET", "/api/gates", viewerKey, "")["gates"].([]any)
	if len(gates) != 1 || gates[0].(map[string]any)["timeout_at"] == nil {
		t.Errorf("GET /api/gates: %v, want the waiting gate with its timeout", gates)
	}
	w.want(202, "POST", "/api/runs/"+id+"/gates/signoff", operatorKey, `{"decision": "approve"}`)
	steps := w.waitStatus(id, agentrunner.RunCompleted)["steps"].([]any)
	if got := describeSteps(steps); got != "draft#1:succeeded signoff#1:succeeded[approve] publish#1:succeeded" {
		t.Errorf("the run in flight at the reload: %s", got)
	}
}

// TestAbortRun: an operator aborts a run through the API; a finished run
// cannot be aborted, and a viewer may not.
func TestAbortRun(t *testing.T) {
	w := newRunsWorld(t, &runtest.HoldKind{Hold: runtest.HeldInputs}, nil, runtest.LoadPipeline(0))
	id := w.start("load", `{"hold": true}`)
	w.waitRun(id, "its first step running", func(_ map[string]any, steps []any) bool { return len(steps) == 1 })
	w.want(403, "POST", "/api/runs/"+id+"/abort", viewerKey, "")
	cmd := w.want(202, "POST", "/api/runs/"+id+"/abort", operatorKey, `{"reason": "wrong ticker"}`)["command"].(map[string]any)
	if cmd["kind"] != agentrunner.CommandAbortRun || cmd["operator"] != "alice" {
		t.Errorf("abort command: %v", cmd)
	}
	run := w.waitStatus(id, agentrunner.RunAborted)["run"].(map[string]any)
	if !strings.Contains(run["error"].(string), "alice") {
		t.Errorf("the aborted run's error does not name the operator: %v", run)
	}
	msg := w.want(409, "POST", "/api/runs/"+id+"/abort", operatorKey, "")["error"].(map[string]any)["message"].(string)
	if !strings.Contains(msg, id) || !strings.Contains(msg, "aborted") {
		t.Errorf("aborting an aborted run: %s", msg)
	}
	w.want(404, "POST", "/api/runs/load-999999/abort", operatorKey, "")
}

// TestResumeRun: an operator resumes a halted run through the API and it
// completes; a run that is not halted cannot be resumed, an unknown one is
// not found, and a viewer may not.
func TestResumeRun(t *testing.T) {
	w := newRunsWorld(t, &runtest.HoldKind{Fail: runtest.FailedInputs}, nil, runtest.HaltPipeline())
	id := w.start("halt", `{"fail": true}`)
	run := w.waitStatus(id, agentrunner.RunHalted)["run"].(map[string]any)
	if !strings.Contains(run["error"].(string), "waiting for an operator to resume") {
		t.Errorf("the halted run's error: %v", run)
	}
	w.want(403, "POST", "/api/runs/"+id+"/resume", viewerKey, "")
	cmd := w.want(202, "POST", "/api/runs/"+id+"/resume", operatorKey, `{"reason": "fixed the key"}`)["command"].(map[string]any)
	if cmd["kind"] != agentrunner.CommandResumeRun || cmd["operator"] != "alice" {
		t.Errorf("resume command: %v", cmd)
	}
	steps := w.waitStatus(id, agentrunner.RunCompleted)["steps"].([]any)
	if got := describeSteps(steps); got != "a#1:succeeded b#1:succeeded" {
		t.Errorf("resumed run: %s", got)
	}
	msg := w.want(409, "POST", "/api/runs/"+id+"/resume", operatorKey, "")["error"].(map[string]any)["message"].(string)
	if !strings.Contains(msg, id) || !strings.Contains(msg, "completed, not halted") {
		t.Errorf("resuming a completed run: %s", msg)
	}
	w.want(404, "POST", "/api/runs/halt-999999/resume", operatorKey, "")
}

// TestStatusHasNoRunsWithoutPipelines: a server that runs no pipelines
// answers the status as before.
func TestStatusHasNoRunsWithoutPipelines(t *testing.T) {
	srv := newServer(t, arhttp.Options{Store: openStore(t), Config: testConfig(), Logger: slog.New(slog.DiscardHandler)})
	_, _, body := get(t, srv.Handler(), "/api/status")
	if _, ok := body.(map[string]any)["runs"]; ok {
		t.Errorf("GET /api/status without pipelines has runs: %v", body)
	}
}

// TestAWorkspaceOfGraphsOnlyHasNoCycles: when the workspace has no
// learning loop, its runs are not shown as the loop's cycles, even when a
// pipeline carries the workspace's name.
func TestAWorkspaceOfGraphsOnlyHasNoCycles(t *testing.T) {
	doc := strings.Replace(schemaWorkspace, "name: ws", "name: load", 1)
	cfg := runtest.Workspace(t, t.TempDir(), doc, map[string]string{"load.inputs.json": inputSchema})
	if cfg.HasLoop() {
		t.Fatal("the workspace has a loop")
	}
	w := startRunsWorld(t, &runtest.HoldKind{}, cfg, cfg.Graphs(), nil)
	id := w.start("load", `{"ticker": "ETH", "window_days": 7}`)
	w.waitStatus(id, agentrunner.RunCompleted)
	st := w.want(200, "GET", "/api/status", viewerKey, "")
	if st["current_cycle_id"] != "" || st["last_cycle"] != nil || st["current_state"] != string(agentrunner.StateIdle) {
		t.Errorf("status shows a run of the graph as the loop's cycle: %v", st)
	}
	if cs := w.want(200, "GET", "/api/cycles", viewerKey, "")["cycles"].([]any); len(cs) != 0 {
		t.Errorf("cycles lists the graph's runs: %v", cs)
	}
}

// TestAStepRunShowsItsSignal: the SIGNAL BLOCK the agent step kind
// recorded for a step run (a signal.received event) is shown with that
// step run, and with no other.
func TestAStepRunShowsItsSignal(t *testing.T) {
	w := newRunsWorld(t, &runtest.HoldKind{Hold: runtest.HeldInputs}, nil, runtest.LoadPipeline(0))
	id := w.start("load", "")
	w.waitStatus(id, agentrunner.RunCompleted)
	ev := &agentrunner.Event{Timestamp: time.Now(), Type: "signal.received", CycleID: id, Step: "b", Level: agentrunner.LevelInfo,
		Details: map[string]any{"agent": "comparator", "cycle": id, "step": "COMPARE", "confidence": 4, "risk": "medium", "next": "STOP", "visit": 1}}
	if err := w.store.Apply(context.Background(), &agentrunner.Change{Events: []*agentrunner.Event{ev}}); err != nil {
		t.Fatal(err)
	}
	got := map[string]any{}
	for _, s := range w.want(200, "GET", "/api/runs/"+id+"/steps", viewerKey, "")["steps"].([]any) {
		st := s.(map[string]any)
		got[st["step"].(string)] = st["signal"]
	}
	want := map[string]any{"a": nil, "b": map[string]any{"agent": "comparator", "cycle": id, "step": "COMPARE", "confidence": float64(4), "risk": "medium", "next": "STOP"}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("signals of the step runs (-want +got):\n%s", diff)
	}
}
