package tool

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentrunner/agentrunner"
	"github.com/agentrunner/agentrunner/config"
	"github.com/google/go-cmp/cmp"
)

// batchFixture is an executor whose registry holds tools, of which the
// scope is given only allowed, plus parallel_tool_call.
type batchFixture struct {
	events *recorder
	exec   *Executor
	scope  *Scope
}

func newBatchFixture(t *testing.T, opts Options, allowed []string, tools ...Local) *batchFixture {
	t.Helper()
	f := &batchFixture{events: &recorder{}}
	reg := NewRegistry()
	spec, h, err := NewParallel(nil)
	if err != nil {
		t.Fatal(err)
	}
	tools = append(tools, Local{spec, h})
	for _, l := range tools {
		if err := reg.Register(l.Spec, l.Handler); err != nil {
			t.Fatal(err)
		}
	}
	opts.Record = f.events.record
	f.exec = NewExecutor(reg, opts)
	f.scope = f.exec.Scope(append(allowed, ParallelName))
	if err := f.scope.Err(); err != nil {
		t.Fatal(err)
	}
	return f
}

// batch calls parallel_tool_call with the calls as the model gives them.
func (f *batchFixture) batch(calls string) agentrunner.ToolResult {
	return f.scope.Execute(context.Background(), agentrunner.ToolCall{
		ID: "call-1", Name: ParallelName, Arguments: json.RawMessage(`{"calls":` + calls + `}`),
		Agent: "lead", Step: "lead", CycleID: "20260101_000000", Attempt: 2,
	})
}

// results decodes a batch's answer.
func results(t *testing.T, res agentrunner.ToolResult) []batchResult {
	t.Helper()
	if res.IsError {
		t.Fatalf("the batch failed: %s", res.Message)
	}
	var out []batchResult
	if err := json.Unmarshal([]byte(res.Message), &out); err != nil {
		t.Fatalf("the batch's answer is not a JSON array of results: %v\n%s", err, res.Message)
	}
	return out
}

func TestParallelResultsInOrderEachCallAuditedAsItself(t *testing.T) {
	f := newBatchFixture(t, Options{}, []string{"price", "news", "broken"},
		Local{Spec{Name: "price", Parameters: json.RawMessage(assetSchema)}, HandlerFunc(func(_ context.Context, args json.RawMessage) (string, error) {
			var a struct{ Asset string }
			json.Unmarshal(args, &a)
			return "price of " + a.Asset, nil
		})},
		Local{Spec{Name: "news"}, HandlerFunc(func(context.Context, json.RawMessage) (string, error) { return "<b>no news</b> & quiet", nil })},
		Local{Spec{Name: "broken"}, HandlerFunc(func(context.Context, json.RawMessage) (string, error) { return "", errors.New("upstream said no") })},
		Local{Spec{Name: "secret"}, HandlerFunc(func(context.Context, json.RawMessage) (string, error) {
			t.Error("a tool outside the caller's scope ran")
			return "", nil
		})})
	res := f.batch(`[
		{"name": "price", "arguments": {"asset": "BTC"}},
		{"name": "ghost"},
		{"name": "secret", "arguments": {}},
		{"name": "price", "arguments": {"days": 0}},
		{"name": "broken"},
		{"name": "news"},
		{"name": "price", "arguments": {"asset": "ETH"}}
	]`)
	want := []batchResult{
		{Name: "price", Message: "price of BTC"},
		{Name: "ghost", IsError: true, Message: `unknown tool "ghost"; available tools: broken, news, parallel_tool_call, price`},
		{Name: "secret", IsError: true, Message: `unknown tool "secret"; available tools: broken, news, parallel_tool_call, price`},
		{Name: "price", IsError: true, Message: "price: invalid arguments:\n- at (root): missing property 'asset'\n- at /days: minimum: got 0, want 1"},
		{Name: "broken", IsError: true, Message: "broken: upstream said no"},
		{Name: "news", Message: "<b>no news</b> & quiet"},
		{Name: "price", Message: "price of ETH"},
	}
	if diff := cmp.Diff(want, results(t, res)); diff != "" {
		t.Errorf("results (-want +got):\n%s", diff)
	}
	if strings.Contains(res.Message, `\u003c`) {
		t.Errorf("the answer escapes HTML: %s", res.Message)
	}

	// One event per call, each its own tool's, then the batch's.
	evs := f.events.all()
	if len(evs) != 8 {
		t.Fatalf("%d events, want 7 calls and the batch", len(evs))
	}
	type audit struct {
		Tool, CallID, Agent, Step, Cycle string
		Attempt                          any
		IsError                          bool
	}
	got := map[string]audit{}
	for _, ev := range evs {
		if ev.Type != EventToolCall {
			t.Errorf("event type %q", ev.Type)
		}
		d := ev.Details
		got[d["call_id"].(string)] = audit{d["tool"].(string), d["call_id"].(string), ev.Agent, ev.Step, ev.CycleID, d["attempt"], d["is_error"].(bool)}
	}
	tools := []string{"price", "ghost", "secret", "price", "broken", "news", "price"}
	for i, name := range tools {
		id := fmt.Sprintf("call-1.%d", i+1)
		w := audit{name, id, "lead", "lead", "20260101_000000", 2, want[i].IsError}
		if diff := cmp.Diff(w, got[id]); diff != "" {
			t.Errorf("event of %s (-want +got):\n%s", id, diff)
		}
	}
	if last := evs[len(evs)-1]; last.Details["tool"] != ParallelName || last.Details["call_id"] != "call-1" || last.Details["is_error"] != false {
		t.Errorf("the batch's own event comes last: %+v", last.Details)
	}
	stats := f.exec.Stats()
	if stats["price"].Calls != 3 || stats["price"].Errors != 1 || stats["broken"].Errors != 1 || stats[ParallelName].Calls != 1 || stats[ParallelName].Errors != 0 {
		t.Errorf("stats: %+v", stats)
	}
}

func TestParallelRunsItsCallsConcurrently(t *testing.T) {
	const n = 4
	// Logical timestamps: a counter ticked at every start and end. Run one
	// after another, a call would end before the next starts; together,
	// every call starts before any ends, since none ends before all have
	// arrived at the barrier.
	var tick atomic.Int64
	starts, ends := make([]int64, n), make([]int64, n)
	var arrived sync.WaitGroup
	arrived.Add(n)
	all := make(chan struct{})
	go func() { arrived.Wait(); close(all) }()
	wait := HandlerFunc(func(ctx context.Context, args json.RawMessage) (string, error) {
		var a struct{ I int }
		json.Unmarshal(args, &a)
		starts[a.I] = tick.Add(1)
		arrived.Done()
		select {
		case <-all:
		case <-ctx.Done():
			return "", errors.New("the other calls never arrived at the barrier")
		}
		ends[a.I] = tick.Add(1)
		return fmt.Sprint(a.I), nil
	})
	f := newBatchFixture(t, Options{}, []string{"wait"},
		Local{Spec{Name: "wait", Timeout: 10 * time.Second, Parameters: json.RawMessage(`{"type":"object","properties":{"i":{"type":"integer"}}}`)}, wait})
	var calls []string
	for i := range n {
		calls = append(calls, fmt.Sprintf(`{"name":"wait","arguments":{"i":%d}}`, i))
	}
	got := results(t, f.batch("["+strings.Join(calls, ",")+"]"))
	for i, r := range got {
		if r.IsError || r.Message != fmt.Sprint(i) {
			t.Errorf("call %d: %+v", i, r)
		}
	}
	var lastStart, firstEnd int64 = 0, 1 << 62
	for i := range n {
		lastStart, firstEnd = max(lastStart, starts[i]), min(firstEnd, ends[i])
	}
	if lastStart >= firstEnd {
		t.Errorf("the calls did not overlap: starts %v, ends %v", starts, ends)
	}
}

func TestParallelInsideParallelIsRefused(t *testing.T) {
	ran := count(func(context.Context, json.RawMessage) (string, error) { return "ok", nil })
	// The batch tool under another name is still a batch.
	fanSpec, fan, err := NewParallel(&config.Tool{Name: "fanout"})
	if err != nil {
		t.Fatal(err)
	}
	f := newBatchFixture(t, Options{}, []string{"ok", "fanout"}, Local{Spec{Name: "ok"}, ran}, Local{fanSpec, fan})
	got := results(t, f.batch(`[
		{"name": "ok"},
		{"name": "parallel_tool_call", "arguments": {"calls": [{"name": "ok"}]}},
		{"name": "fanout", "arguments": {"calls": [{"name": "ok"}]}}
	]`))
	want := []batchResult{
		{Name: "ok", Message: "ok"},
		{Name: "parallel_tool_call", IsError: true, Message: "parallel_tool_call: a batch cannot run inside a batch; give every call in one parallel_tool_call"},
		{Name: "fanout", IsError: true, Message: "fanout: a batch cannot run inside a batch; give every call in one fanout"},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("results (-want +got):\n%s", diff)
	}
	if ran.n.Load() != 1 {
		t.Errorf("the tool ran %d times: a nested batch ran its calls", ran.n.Load())
	}
	if s := f.exec.Stats(); s[ParallelName].Calls != 2 || s[ParallelName].Errors != 1 || s["fanout"].Errors != 1 {
		t.Errorf("the refused batches are not counted as calls: %+v", s)
	}
}

func TestParallelRefusesABadBatch(t *testing.T) {
	f := newBatchFixture(t, Options{}, []string{"ok"}, Local{Spec{Name: "ok"}, echo()})
	eleven := strings.TrimSuffix(strings.Repeat(`{"name":"ok"},`, 11), ",")
	for _, tc := range []struct{ calls, want string }{
		{`[]`, "minItems"},
		{`[` + eleven + `]`, "maxItems"},
		{`[{"tool":"ok"}]`, "missing property 'name'"},
		{`[{"name":"ok","arguments":"{}"}]`, "want object"},
	} {
		res := f.batch(tc.calls)
		if !res.IsError || !strings.Contains(res.Message, tc.want) {
			t.Errorf("calls %s: %+v, want an error with %q", tc.calls, res, tc.want)
		}
	}
	if _, err := (parallelHandler{}).Call(context.Background(), json.RawMessage(`{"calls":[{"name":"ok"}]}`)); err == nil {
		t.Error("a batch ran outside an executor's scope")
	}
}

func TestParallelAnswerFitsTheResultLimit(t *testing.T) {
	long := strings.Repeat("é", 150) // 300 bytes
	f := newBatchFixture(t, Options{MaxResultBytes: 400}, []string{"long", "short"},
		Local{Spec{Name: "long"}, HandlerFunc(func(context.Context, json.RawMessage) (string, error) { return long, nil })},
		Local{Spec{Name: "short"}, HandlerFunc(func(context.Context, json.RawMessage) (string, error) { return "ok", nil })})
	res := f.batch(`[{"name":"long"},{"name":"short"},{"name":"long"}]`)
	if len(res.Message) > 400 {
		t.Errorf("the answer is %d bytes, over the limit of 400", len(res.Message))
	}
	got := results(t, res)
	if len(got) != 3 || got[1].Message != "ok" {
		t.Fatalf("results %+v", got)
	}
	for _, i := range []int{0, 2} {
		if !strings.HasPrefix(got[i].Message, "éé") || !strings.Contains(got[i].Message, "[cut to fit the batch's answer:") {
			t.Errorf("call %d: a long message is not cut with a note: %q", i, got[i].Message)
		}
	}
}

func TestNewParallelIsNeverRetried(t *testing.T) {
	two := 2
	spec, _, err := NewParallel(&config.Tool{Timeout: config.Duration(time.Minute), Retries: &config.Retries{Max: &two, Backoff: []config.Duration{config.Duration(time.Second)}}})
	if err != nil {
		t.Fatal(err)
	}
	if spec.Name != ParallelName || spec.Timeout != time.Minute || spec.Retries != 0 || spec.Backoff != 0 {
		t.Errorf("spec = %+v", spec)
	}
	if _, _, err := NewParallel(&config.Tool{Timeout: config.Duration(-time.Second)}); err == nil {
		t.Error("a negative timeout was accepted")
	}
}
