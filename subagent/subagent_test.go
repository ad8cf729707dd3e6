package subagent_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentrunner/agentrunner"
	"github.com/agentrunner/agentrunner/config"
	"github.com/agentrunner/agentrunner/subagent"
	"github.com/agentrunner/agentrunner/tool"
)

func TestParseTaskNamesTheFieldAtFault(t *testing.T) {
	long := strings.Repeat("x", subagent.MaxTaskNameChars+1)
	for _, tc := range []struct {
		name, args, want string
	}{
		{"no task", `{}`, "task is required"},
		{"null task", `{"task": null}`, "task is required"},
		{"missing fields", `{"task": {"task_name": "a"}}`, "task.prompt, task.description, task.tool_budget: required"},
		{"empty prompt", `{"task": {"task_name": "a", "prompt": "  ", "description": "d", "tool_budget": 3}}`, "task.prompt is empty"},
		{"long name", `{"task": {"task_name": "` + long + `", "prompt": "p", "description": "d", "tool_budget": 3}}`, "task.task_name is 201 characters"},
		{"budget zero", `{"task": {"task_name": "a", "prompt": "p", "description": "d", "tool_budget": 0}}`, "task.tool_budget: 0 is not an integer from 1 to 200"},
		{"budget fraction", `{"task": {"task_name": "a", "prompt": "p", "description": "d", "tool_budget": 2.5}}`, "task.tool_budget: 2.5"},
		{"budget too big", `{"task": {"task_name": "a", "prompt": "p", "description": "d", "tool_budget": 201}}`, "task.tool_budget: 201"},
		{"budget a string", `{"task": {"task_name": "a", "prompt": "p", "description": "d", "tool_budget": "3"}}`, "tool_budget"},
		{"unknown field", `{"task": {"task_name": "a", "prompt": "p", "description": "d", "tool_budget": 3, "colour": "red"}}`, "colour"},
		{"unknown argument", `{"task": {}, "extra": 1}`, "extra"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := subagent.ParseTask(json.RawMessage(tc.args))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("ParseTask(%s) = %v; want an error saying %q", tc.args, err, tc.want)
			}
		})
	}
}

func TestParseTaskTrimsAndKeepsTheOptionalOutput(t *testing.T) {
	task, err := subagent.ParseTask(json.RawMessage(`{"task": {"task_name": " btc ", "prompt": "Research BTC.\n", "description": "d", "tool_budget": 4}}`))
	if err != nil {
		t.Fatal(err)
	}
	want := subagent.Task{TaskName: "btc", Prompt: "Research BTC.", Description: "d", ToolBudget: 4}
	if task != want {
		t.Errorf("task = %+v; want %+v", task, want)
	}
	if got := string(task.Canonical()); got != `{"task_name":"btc","prompt":"Research BTC.","description":"d","tool_budget":4}` {
		t.Errorf("canonical = %s", got)
	}
	task, err = subagent.ParseTask(json.RawMessage(`{"task": {"task_name": "a", "prompt": "p", "description": "d", "tool_budget": 1, "expected_output": "a table"}}`))
	if err != nil || task.ExpectedOutput != "a table" {
		t.Errorf("expected_output: %+v, %v", task, err)
	}
}

func TestKeyIsStableAndTellsTasksApart(t *testing.T) {
	task := subagent.Task{TaskName: "btc", Prompt: "p", Description: "d", ToolBudget: 4}
	// The key of a task does not depend on how the model spelt its JSON.
	a, _ := subagent.ParseTask(json.RawMessage(`{"task": {"tool_budget": 4, "description": "d", "prompt": "p", "task_name": "btc"}}`))
	b, _ := subagent.ParseTask(json.RawMessage(`{"task":{"task_name":" btc","prompt":"p ","description":"d","tool_budget":4.0}}`))
	k := subagent.Key("research-000001", "lead", task)
	if len(k) != 64 || strings.Trim(k, "0123456789abcdef") != "" {
		t.Fatalf("key %q is not hex SHA-256", k)
	}
	if subagent.Key("research-000001", "lead", a) != k || subagent.Key("research-000001", "lead", b) != k {
		t.Error("the same task spelt two ways has two keys")
	}
	// A golden value: a key that changes between versions loses the
	// children of the runs that crashed under the older one.
	if golden := "5c0ef3753a2b9195b01f5a56b52759031b9df4b4f4db5769ca5ba55ce96a1abe"; k != golden {
		t.Errorf("key = %s; want %s", k, golden)
	}
	other := task
	other.ToolBudget = 5
	for name, k2 := range map[string]string{
		"another run":  subagent.Key("research-000002", "lead", task),
		"another step": subagent.Key("research-000001", "lead2", task),
		"another task": subagent.Key("research-000001", "lead", other),
		"parts moved":  subagent.Key("research-000001l", "ead", task),
	} {
		if k2 == k {
			t.Errorf("%s has the same key", name)
		}
	}
}

func TestSettingsCheck(t *testing.T) {
	cfg := &config.Config{Pipelines: map[string]*config.Pipeline{"research-task": {}}}
	for _, tc := range []struct {
		s    subagent.Settings
		want string
	}{
		{subagent.Settings{Pipeline: "research-task", MaxParallel: 3}, ""},
		{subagent.Settings{Pipeline: "research-task"}, ""},
		{subagent.Settings{}, "pipeline: is required"},
		{subagent.Settings{Pipeline: "nope"}, `pipeline: no pipeline "nope" under pipelines: (there are research-task)`},
		{subagent.Settings{Pipeline: "research-task", MaxParallel: -1}, "max_parallel: must be from 1 to 64"},
	} {
		var got []string
		report := func(key, format string, args ...any) {
			got = append(got, key+": "+strings.TrimSpace(fmt.Sprintf(format, args...)))
		}
		tc.s.Check(report)
		tc.s.CheckIn(cfg, report)
		if joined := strings.Join(got, "; "); (tc.want == "") != (joined == "") || !strings.Contains(joined, tc.want) {
			t.Errorf("%+v: problems %q; want %q", tc.s, joined, tc.want)
		}
	}
}

// fakeRuns is a store and a scheduler of child runs: a started child
// ends at once with the result given, or as end says.
type fakeRuns struct {
	mu      sync.Mutex
	runs    map[string]*agentrunner.Run
	files   map[string][]byte
	started []string
	end     func(r *agentrunner.Run) // nil: completed with a result
}

func newFakeRuns() *fakeRuns {
	return &fakeRuns{runs: map[string]*agentrunner.Run{}, files: map[string][]byte{}}
}

func (f *fakeRuns) StartChild(_ context.Context, pipeline string, inputs map[string]any, parent string) (string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	id := pipeline + "-" + string(rune('0'+len(f.runs)+1))
	r := &agentrunner.Run{ID: id, Pipeline: pipeline, Parent: parent, Inputs: inputs, Status: agentrunner.RunCompleted}
	task := inputs["task"].(map[string]any)
	f.files[id] = []byte(`{"summary": "did ` + task["task_name"].(string) + `"}`)
	if f.end != nil {
		f.end(r)
	}
	f.runs[id] = r
	f.started = append(f.started, id)
	return id, nil
}

func (f *fakeRuns) Run(_ context.Context, id string) (*agentrunner.Run, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	r, ok := f.runs[id]
	if !ok {
		return nil, agentrunner.Errorf(agentrunner.ENOTFOUND, "no run %s", id)
	}
	cp := *r
	return &cp, nil
}

func (f *fakeRuns) Runs(_ context.Context, flt agentrunner.RunFilter) ([]*agentrunner.Run, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []*agentrunner.Run
	for _, r := range f.runs {
		if flt.Parent == "" || r.Parent == flt.Parent {
			cp := *r
			out = append(out, &cp)
		}
	}
	return out, nil
}

func (f *fakeRuns) Files(_ context.Context, flt agentrunner.FileFilter) ([]*agentrunner.StoredFile, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if data, ok := f.files[flt.RunID]; ok {
		return []*agentrunner.StoredFile{{RunID: flt.RunID, Kind: agentrunner.FileArtifact, Name: "result.json", Data: data}}, nil
	}
	return nil, nil
}

// execute runs one call of the tool as the agent of run's step does.
func execute(t *testing.T, h tool.Handler, run string, args string) agentrunner.ToolResult {
	t.Helper()
	reg := tool.NewRegistry()
	spec := subagent.Spec
	if err := reg.Register(spec, h); err != nil {
		t.Fatal(err)
	}
	scope := tool.NewExecutor(reg, tool.Options{}).Scope([]string{spec.Name})
	return scope.Execute(context.Background(), agentrunner.ToolCall{ID: "c1", Name: spec.Name, Arguments: json.RawMessage(args), CycleID: run, Step: "lead", Agent: "lead", Attempt: 1})
}

const btcTask = `{"task": {"task_name": "btc", "prompt": "Research BTC.", "description": "BTC", "tool_budget": 3}}`

func TestHandlerStartsAChildOnceAndReturnsItsResult(t *testing.T) {
	runs := newFakeRuns()
	l := subagent.NewLauncher()
	l.Poll = time.Millisecond
	h := l.Handler(subagent.Kind, "research-task", 2)
	if res := execute(t, h, "research-1", btcTask); !res.IsError || !strings.Contains(res.Message, "not running sub-agents") {
		t.Errorf("before Bind: %+v", res)
	}
	l.Bind(runs, runs)
	for range 2 {
		res := execute(t, h, "research-1", btcTask)
		if res.IsError || res.Message != `{"summary":"did btc"}` {
			t.Errorf("result: %+v", res)
		}
	}
	if len(runs.started) != 1 {
		t.Fatalf("started %v; want one child for one task", runs.started)
	}
	r := runs.runs[runs.started[0]]
	task := subagent.Task{TaskName: "btc", Prompt: "Research BTC.", Description: "BTC", ToolBudget: 3}
	if r.Parent != "research-1" || r.Inputs["subagent_key"] != subagent.Key("research-1", "lead", task) {
		t.Errorf("child %+v", r)
	}
	// Another lead run's same task is another child.
	execute(t, h, "research-2", btcTask)
	if len(runs.started) != 2 {
		t.Errorf("started %v; want a child of each lead run", runs.started)
	}
	if res := execute(t, h, "", btcTask); !res.IsError || !strings.Contains(res.Message, "comes from no run") {
		t.Errorf("outside a run: %+v", res)
	}
}

func TestHandlerSaysHowAChildEnded(t *testing.T) {
	runs := newFakeRuns()
	l := subagent.NewLauncher()
	l.Poll = time.Millisecond
	l.Bind(runs, runs)
	h := l.Handler(subagent.Kind, "research-task", 2)
	runs.end = func(r *agentrunner.Run) { r.Status, r.Error = agentrunner.RunFailed, "step research failed: timeout" }
	if res := execute(t, h, "research-1", btcTask); !res.IsError || !strings.Contains(res.Message, "ended failed: step research failed: timeout") {
		t.Errorf("failed child: %+v", res)
	}
	runs.end = func(r *agentrunner.Run) { runs.files[r.ID] = []byte(`# not JSON`) }
	if res := execute(t, h, "research-2", btcTask); !res.IsError || !strings.Contains(res.Message, "is not a SubagentResult") {
		t.Errorf("bad output: %+v", res)
	}
	if res := execute(t, h, "research-1", `{"task": {"task_name": "x", "prompt": "p", "description": "d", "tool_budget": 0}}`); !res.IsError || !strings.Contains(res.Message, "tool_budget") {
		t.Errorf("bad task: %+v", res)
	}
}

func TestHandlerWaitsForARunningChild(t *testing.T) {
	runs := newFakeRuns()
	runs.end = func(r *agentrunner.Run) { r.Status = agentrunner.RunRunning }
	l := subagent.NewLauncher()
	l.Poll = time.Millisecond
	l.Bind(runs, runs)
	h := l.Handler(subagent.Kind, "research-task", 1)
	done := make(chan agentrunner.ToolResult)
	go func() { done <- execute(t, h, "research-1", btcTask) }()
	deadline := time.After(5 * time.Second)
	for {
		runs.mu.Lock()
		n := len(runs.started)
		runs.mu.Unlock()
		if n == 1 {
			break
		}
		select {
		case <-deadline:
			t.Fatal("no child started")
		case <-time.After(time.Millisecond):
		}
	}
	select {
	case res := <-done:
		t.Fatalf("returned before the child ended: %+v", res)
	case <-time.After(20 * time.Millisecond):
	}
	runs.mu.Lock()
	runs.runs[runs.started[0]].Status = agentrunner.RunCompleted
	runs.mu.Unlock()
	if res := <-done; res.IsError || res.Message != `{"summary":"did btc"}` {
		t.Errorf("result: %+v", res)
	}
}

// TestArtifactPathIsRelativeToTheLeadsRun: the artifact_path of a result
// names the report from the lead's run directory, memory/….
func TestArtifactPathIsRelativeToTheLeadsRun(t *testing.T) {
	for in, want := range map[string]string{
		"":                     "",
		"memory/report.md":     "memory/report.md",
		"report.md":            "memory/report.md",
		" ./research//btc.md ": "memory/research/btc.md",
		"memory/a/../b.json":   "memory/b.json",
		"/etc/passwd":          "/etc/passwd",
		"../other/run/x.md":    "../other/run/x.md",
		"memory/../../x.md":    "memory/../../x.md",
	} {
		data, _ := json.Marshal(map[string]string{"summary": "s", "artifact_path": in})
		r, err := subagent.ParseResult(data)
		if err != nil || r.ArtifactPath != want {
			t.Errorf("artifact_path %q: %q, %v; want %q", in, r.ArtifactPath, err, want)
		}
	}
}
