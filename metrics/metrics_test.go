package metrics

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentrunner/agentrunner"
	"github.com/agentrunner/agentrunner/scheduler"
	"github.com/agentrunner/agentrunner/sqlite"
	"github.com/agentrunner/agentrunner/tool"
	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
)

// snapshot returns the agentrunner_* samples of a registry by series:
// counters and gauges by name{labels}, histograms as name_count{labels} and
// name_sum{labels}. Labels are sorted, as Prometheus prints them.
func snapshot(t *testing.T, reg prometheus.Gatherer) map[string]float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatalf("gather: %v", err)
	}
	out := map[string]float64{}
	for _, mf := range mfs {
		if !strings.HasPrefix(mf.GetName(), "agentrunner_") {
			continue
		}
		for _, m := range mf.GetMetric() {
			var ls []string
			for _, l := range m.GetLabel() {
				ls = append(ls, fmt.Sprintf("%s=%q", l.GetName(), l.GetValue()))
			}
			sort.Strings(ls)
			labels := "{" + strings.Join(ls, ",") + "}"
			switch mf.GetType() {
			case dto.MetricType_COUNTER:
				out[mf.GetName()+labels] = m.GetCounter().GetValue()
			case dto.MetricType_GAUGE:
				out[mf.GetName()+labels] = m.GetGauge().GetValue()
			case dto.MetricType_HISTOGRAM:
				out[mf.GetName()+"_count"+labels] = float64(m.GetHistogram().GetSampleCount())
				out[mf.GetName()+"_sum"+labels] = m.GetHistogram().GetSampleSum()
			default:
				t.Fatalf("%s: unexpected type %v", mf.GetName(), mf.GetType())
			}
		}
	}
	return out
}

// roundTrip returns the event as read back from JSON, as the store and the
// events API hand it on: every number a float64.
func roundTrip(t *testing.T, ev *agentrunner.Event) *agentrunner.Event {
	t.Helper()
	b, err := json.Marshal(ev.Details)
	if err != nil {
		t.Fatal(err)
	}
	out := *ev
	out.Details = nil
	if err := json.Unmarshal(b, &out.Details); err != nil {
		t.Fatal(err)
	}
	return &out
}

func ev(typ, step, agent string, details map[string]any) *agentrunner.Event {
	return &agentrunner.Event{Type: typ, Step: step, Agent: agent, Details: details}
}

// TestObserve feeds the events of each kind, as written and after a JSON
// round trip, and checks every sample they produce and no other.
func TestObserve(t *testing.T) {
	const p = `pipeline="news"`
	tests := []struct {
		name   string
		events []*agentrunner.Event
		want   map[string]float64
	}{
		{
			name: "cycles",
			events: []*agentrunner.Event{
				ev(agentrunner.EventCycleCompleted, "", "", map[string]any{"duration_ms": int64(90_000)}),
				ev(agentrunner.EventCycleCompleted, "", "", map[string]any{"duration_ms": 30_000}),
				ev(agentrunner.EventCycleFailed, "write", "", map[string]any{"duration_ms": float64(3_600_000)}),
				ev(agentrunner.EventCycleFailed, "write", "", map[string]any{"step": "write", "error": "boom"}),
				ev(agentrunner.EventCycleAborted, "", "", map[string]any{"duration_ms": "12"}),
			},
			want: map[string]float64{
				`agentrunner_cycles_total{outcome="completed",` + p + `}`:                 2,
				`agentrunner_cycles_total{outcome="failed",` + p + `}`:                    2,
				`agentrunner_cycles_total{outcome="aborted",` + p + `}`:                   1,
				`agentrunner_cycle_duration_seconds_count{outcome="completed",` + p + `}`: 2,
				`agentrunner_cycle_duration_seconds_sum{outcome="completed",` + p + `}`:   120,
				`agentrunner_cycle_duration_seconds_count{outcome="failed",` + p + `}`:    1,
				`agentrunner_cycle_duration_seconds_sum{outcome="failed",` + p + `}`:      3600,
			},
		},
		{
			name: "attempts and tokens",
			events: []*agentrunner.Event{
				ev(agentrunner.EventAttemptSucceeded, "write", "writer", map[string]any{
					"attempt": 1, "duration_ms": int64(2500), "model": "openai/gpt-4.1", "input_tokens": 1000, "output_tokens": int64(200),
				}),
				ev(agentrunner.EventAttemptFailed, "write", "writer", map[string]any{
					"attempt": 2, "error_class": "timeout", "error": "deadline", "duration_ms": int64(500), "retryable": true, "retries_left": 1,
					"model": "openai/gpt-4.1", "input_tokens": 300, "output_tokens": 0,
				}),
				ev(agentrunner.EventAttemptInterrupted, "fetch", "fetcher", map[string]any{
					"attempt": 1, "error_class": "interrupted", "duration_ms": int64(1000),
				}),
				// A process agent: no model, no tokens.
				ev(agentrunner.EventAttemptSucceeded, "fetch", "fetcher", map[string]any{"attempt": 2, "duration_ms": int64(4000), "output": "x.json"}),
			},
			want: map[string]float64{
				`agentrunner_step_outcomes_total{agent="writer",error_class="",outcome="succeeded",` + p + `,step="write"}`:          1,
				`agentrunner_step_outcomes_total{agent="writer",error_class="timeout",outcome="failed",` + p + `,step="write"}`:      1,
				`agentrunner_step_outcomes_total{agent="fetcher",error_class="interrupted",outcome="failed",` + p + `,step="fetch"}`: 1,
				`agentrunner_step_outcomes_total{agent="fetcher",error_class="",outcome="succeeded",` + p + `,step="fetch"}`:         1,
				`agentrunner_step_duration_seconds_count{agent="writer",outcome="succeeded",` + p + `,step="write"}`:                 1,
				`agentrunner_step_duration_seconds_sum{agent="writer",outcome="succeeded",` + p + `,step="write"}`:                   2.5,
				`agentrunner_step_duration_seconds_count{agent="writer",outcome="failed",` + p + `,step="write"}`:                    1,
				`agentrunner_step_duration_seconds_sum{agent="writer",outcome="failed",` + p + `,step="write"}`:                      0.5,
				`agentrunner_step_duration_seconds_count{agent="fetcher",outcome="failed",` + p + `,step="fetch"}`:                   1,
				`agentrunner_step_duration_seconds_sum{agent="fetcher",outcome="failed",` + p + `,step="fetch"}`:                     1,
				`agentrunner_step_duration_seconds_count{agent="fetcher",outcome="succeeded",` + p + `,step="fetch"}`:                1,
				`agentrunner_step_duration_seconds_sum{agent="fetcher",outcome="succeeded",` + p + `,step="fetch"}`:                  4,
				`agentrunner_tokens_total{agent="writer",direction="input",model="openai/gpt-4.1",` + p + `}`:                        1300,
				`agentrunner_tokens_total{agent="writer",direction="output",model="openai/gpt-4.1",` + p + `}`:                       200,
			},
		},
		{
			name: "runs, step transitions and gate decisions of the graph scheduler",
			events: []*agentrunner.Event{
				ev(agentrunner.EventAttemptSucceeded, "draft", "writer", map[string]any{"pipeline": "review", "attempt": 1, "visit": 1}),
				ev(agentrunner.EventAttemptSucceeded, "draft", "writer", map[string]any{"pipeline": "review", "attempt": 1, "visit": 2}),
				ev(agentrunner.EventAttemptFailed, "draft", "writer", map[string]any{"pipeline": "review", "attempt": 2, "error_class": "timeout"}),
				ev(agentrunner.EventAttemptInterrupted, "fetch", "", map[string]any{"pipeline": "triage", "attempt": 1, "error_class": "interrupted"}),
				ev(scheduler.EventGateDecided, "signoff", "", map[string]any{"pipeline": "review", "visit": 1, "action": "approve", "operator": "alice"}),
				ev(scheduler.EventGateDecided, "signoff", "", map[string]any{"pipeline": "review", "visit": 1, "action": "reject", "operator": "timeout"}),
				ev(scheduler.EventGateDecided, "signoff", "", map[string]any{"pipeline": "review", "visit": 2, "action": "approve"}),
				ev(scheduler.EventRunCompleted, "", "", map[string]any{"pipeline": "review", "duration_ms": 100}),
				ev(scheduler.EventRunCompleted, "", "", map[string]any{"pipeline": "review", "duration_ms": 200}),
				ev(scheduler.EventRunFailed, "", "", map[string]any{"pipeline": "review", "error": "gate signoff#1 rejected"}),
				ev(scheduler.EventRunAborted, "", "", map[string]any{"pipeline": "triage"}),
				ev(scheduler.EventRunHalted, "", "", map[string]any{"pipeline": "triage"}),
				// Events that name no pipeline are not a graph run's.
				ev(scheduler.EventRunCompleted, "", "", map[string]any{"duration_ms": 100}),
				ev(scheduler.EventGateDecided, "signoff", "", map[string]any{"action": "approve"}),
				// Events the metrics leave alone.
				ev(scheduler.EventRunStarted, "", "", map[string]any{"pipeline": "review"}),
				ev(scheduler.EventGateOpened, "signoff", "", map[string]any{"pipeline": "review", "visit": 1}),
			},
			want: map[string]float64{
				`agentrunner_step_transitions_total{outcome="succeeded",` + p + `,run_pipeline="review"}`:                       2,
				`agentrunner_step_transitions_total{outcome="failed",` + p + `,run_pipeline="review"}`:                          1,
				`agentrunner_step_transitions_total{outcome="failed",` + p + `,run_pipeline="triage"}`:                          1,
				`agentrunner_step_outcomes_total{agent="writer",error_class="",outcome="succeeded",` + p + `,step="draft"}`:     2,
				`agentrunner_step_outcomes_total{agent="writer",error_class="timeout",outcome="failed",` + p + `,step="draft"}`: 1,
				`agentrunner_step_outcomes_total{agent="",error_class="interrupted",outcome="failed",` + p + `,step="fetch"}`:   1,
				`agentrunner_gate_decisions_total{action="approve",` + p + `,run_pipeline="review"}`:                            2,
				`agentrunner_gate_decisions_total{action="reject",` + p + `,run_pipeline="review"}`:                             1,
				`agentrunner_runs_ended_total{` + p + `,run_pipeline="review",status="completed"}`:                              2,
				`agentrunner_runs_ended_total{` + p + `,run_pipeline="review",status="failed"}`:                                 1,
				`agentrunner_runs_ended_total{` + p + `,run_pipeline="triage",status="aborted"}`:                                1,
				`agentrunner_runs_ended_total{` + p + `,run_pipeline="triage",status="halted"}`:                                 1,
			},
		},
		{
			name: "retries, escalations and tool calls",
			events: []*agentrunner.Event{
				ev(agentrunner.EventRetryScheduled, "write", "writer", map[string]any{"attempt": 2, "wait": "30s", "schedule": []string{"30s", "2m0s"}}),
				ev(agentrunner.EventRetryScheduled, "write", "writer", map[string]any{"attempt": 3, "wait": "2m0s"}),
				ev("escalation", "write", "writer", map[string]any{"step": "write", "policy": "halt"}),
				ev("escalation", "", "", map[string]any{"step": "fetch", "policy": "skip"}),
				ev(tool.EventToolCall, "write", "writer", map[string]any{"tool": "web_fetch", "duration_ms": int64(250), "is_error": false, "tries": 1}),
				ev(tool.EventToolCall, "write", "writer", map[string]any{"tool": "web_fetch", "duration_ms": int64(1750), "is_error": true, "tries": 3}),
				ev(tool.EventToolCall, "", "", map[string]any{"tool": "calc", "duration_ms": 5}),
			},
			want: map[string]float64{
				`agentrunner_retries_total{agent="writer",` + p + `,step="write"}`:                       2,
				`agentrunner_escalations_total{` + p + `,policy="halt",step="write"}`:                    1,
				`agentrunner_escalations_total{` + p + `,policy="skip",step="fetch"}`:                    1,
				`agentrunner_tool_calls_total{agent="writer",` + p + `,result="ok",tool="web_fetch"}`:    1,
				`agentrunner_tool_calls_total{agent="writer",` + p + `,result="error",tool="web_fetch"}`: 1,
				`agentrunner_tool_calls_total{agent="",` + p + `,result="ok",tool="calc"}`:               1,
				`agentrunner_tool_call_duration_seconds_count{` + p + `,tool="web_fetch"}`:               2,
				`agentrunner_tool_call_duration_seconds_sum{` + p + `,tool="web_fetch"}`:                 2,
				`agentrunner_tool_call_duration_seconds_count{` + p + `,tool="calc"}`:                    1,
				`agentrunner_tool_call_duration_seconds_sum{` + p + `,tool="calc"}`:                      0.005,
			},
		},
	}
	for _, tt := range tests {
		for _, viaJSON := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/json=%v", tt.name, viaJSON), func(t *testing.T) {
				m := New(Options{Pipeline: "news"})
				for _, e := range tt.events {
					if viaJSON {
						e = roundTrip(t, e)
					}
					m.Observe(e)
				}
				if diff := cmp.Diff(tt.want, snapshot(t, m.Registry()), cmpFloat); diff != "" {
					t.Errorf("samples (-want +got):\n%s", diff)
				}
			})
		}
	}
}

// cmpFloat compares sums of durations that went through float division.
var cmpFloat = cmp.Comparer(func(a, b float64) bool { return math.Abs(a-b) <= 1e-9*math.Max(1, math.Abs(a)) })

// TestObserveBuckets checks that durations land in the buckets they
// belong to, with testutil's own text comparison.
func TestObserveBuckets(t *testing.T) {
	m := New(Options{})
	for _, ms := range []int64{3, 40, 40, 7000, 120_000} {
		m.Observe(ev(tool.EventToolCall, "", "a", map[string]any{"tool": "t", "duration_ms": ms, "is_error": false}))
	}
	want := `
# HELP agentrunner_tool_call_duration_seconds How long tool calls took, retries included.
# TYPE agentrunner_tool_call_duration_seconds histogram
agentrunner_tool_call_duration_seconds_bucket{tool="t",le="0.005"} 1
agentrunner_tool_call_duration_seconds_bucket{tool="t",le="0.01"} 1
agentrunner_tool_call_duration_seconds_bucket{tool="t",le="0.025"} 1
agentrunner_tool_call_duration_seconds_bucket{tool="t",le="0.05"} 3
agentrunner_tool_call_duration_seconds_bucket{tool="t",le="0.1"} 3
agentrunner_tool_call_duration_seconds_bucket{tool="t",le="0.25"} 3
agentrunner_tool_call_duration_seconds_bucket{tool="t",le="0.5"} 3
agentrunner_tool_call_duration_seconds_bucket{tool="t",le="1"} 3
agentrunner_tool_call_duration_seconds_bucket{tool="t",le="2.5"} 3
agentrunner_tool_call_duration_seconds_bucket{tool="t",le="5"} 3
agentrunner_tool_call_duration_seconds_bucket{tool="t",le="10"} 4
agentrunner_tool_call_duration_seconds_bucket{tool="t",le="30"} 4
agentrunner_tool_call_duration_seconds_bucket{tool="t",le="60"} 4
agentrunner_tool_call_duration_seconds_bucket{tool="t",le="+Inf"} 5
agentrunner_tool_call_duration_seconds_sum{tool="t"} 127.083
agentrunner_tool_call_duration_seconds_count{tool="t"} 5
`
	if err := testutil.GatherAndCompare(m.Registry(), strings.NewReader(want), "agentrunner_tool_call_duration_seconds"); err != nil {
		t.Error(err)
	}
}

// TestObserveOddEvents feeds events that are missing details, carry them
// with the wrong types or impossible values, or are of no interest: none
// panics, each is counted as far as it can be, and nothing else appears.
func TestObserveOddEvents(t *testing.T) {
	m := New(Options{})
	for _, e := range []*agentrunner.Event{
		nil,
		{Type: "runner.started"},
		{Type: "no.such.type", Details: map[string]any{"duration_ms": 5}},
		{Type: agentrunner.EventCycleCompleted}, // nil details
		{Type: agentrunner.EventCycleCompleted, Details: map[string]any{"duration_ms": -5}},
		{Type: agentrunner.EventCycleCompleted, Details: map[string]any{"duration_ms": math.NaN()}},
		{Type: agentrunner.EventCycleCompleted, Details: map[string]any{"duration_ms": math.Inf(1)}},
		{Type: agentrunner.EventAttemptSucceeded, Step: "s", Agent: "a", Details: map[string]any{
			"duration_ms": []int{1}, "model": 42, "input_tokens": "100", "output_tokens": -3,
		}},
		{Type: agentrunner.EventAttemptFailed, Step: "s", Agent: "a", Details: map[string]any{
			"error_class": 7, "duration_ms": json.Number("1500"), "input_tokens": uint32(10),
		}},
		{Type: tool.EventToolCall, Agent: "a", Details: map[string]any{"tool": []string{"x"}, "is_error": "yes", "duration_ms": nil}},
		{Type: "escalation", Details: map[string]any{"policy": 1}},
		{Type: agentrunner.EventRetryScheduled},
	} {
		m.Observe(e)
	}
	want := map[string]float64{
		`agentrunner_cycles_total{outcome="completed"}`:                                          4,
		`agentrunner_step_outcomes_total{agent="a",error_class="",outcome="succeeded",step="s"}`: 1,
		`agentrunner_step_outcomes_total{agent="a",error_class="",outcome="failed",step="s"}`:    1,
		`agentrunner_step_duration_seconds_count{agent="a",outcome="failed",step="s"}`:           1,
		`agentrunner_step_duration_seconds_sum{agent="a",outcome="failed",step="s"}`:             1.5,
		`agentrunner_tokens_total{agent="a",direction="input",model=""}`:                         10,
		`agentrunner_tool_calls_total{agent="a",result="ok",tool=""}`:                            1,
		`agentrunner_escalations_total{policy="",step=""}`:                                       1,
		`agentrunner_retries_total{agent="",step=""}`:                                            1,
	}
	if diff := cmp.Diff(want, snapshot(t, m.Registry()), cmpFloat); diff != "" {
		t.Errorf("samples (-want +got):\n%s", diff)
	}
}

// TestLabelBounds checks that label values from events cannot grow the
// series without bound: odd or long values and values past the limit
// become "other", while good ones, model names with "/" among them, stay.
func TestLabelBounds(t *testing.T) {
	long := strings.Repeat("x", maxLabelLen+1)
	tests := []struct {
		name, tool, agent, step, model string
		want                           map[string]float64
	}{
		{"good", "mcp.search:v1-x_y", "writer", "draft-1", "anthropic/claude-sonnet-4.5", map[string]float64{
			`agentrunner_tool_calls_total{agent="writer",result="ok",tool="mcp.search:v1-x_y"}`:              1,
			`agentrunner_tokens_total{agent="writer",direction="input",model="anthropic/claude-sonnet-4.5"}`: 1,
		}},
		{"longest", strings.Repeat("t", maxLabelLen), "a", "s", strings.Repeat("m", maxLabelLen), map[string]float64{
			`agentrunner_tool_calls_total{agent="a",result="ok",tool="` + strings.Repeat("t", maxLabelLen) + `"}`:    1,
			`agentrunner_tokens_total{agent="a",direction="input",model="` + strings.Repeat("m", maxLabelLen) + `"}`: 1,
		}},
		{"too long", long, long, long, long, map[string]float64{
			`agentrunner_tool_calls_total{agent="other",result="ok",tool="other"}`:    1,
			`agentrunner_tokens_total{agent="other",direction="input",model="other"}`: 1,
		}},
		{"odd characters", "rm -rf /", "a/b", "s\n", "gpt 4", map[string]float64{
			`agentrunner_tool_calls_total{agent="other",result="ok",tool="other"}`:    1,
			`agentrunner_tokens_total{agent="other",direction="input",model="other"}`: 1,
		}},
		{"not UTF-8", "\xff", "é", "s", "\xfe", map[string]float64{
			`agentrunner_tool_calls_total{agent="other",result="ok",tool="other"}`:    1,
			`agentrunner_tokens_total{agent="other",direction="input",model="other"}`: 1,
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := New(Options{})
			m.Observe(&agentrunner.Event{Type: tool.EventToolCall, Agent: tt.agent, Details: map[string]any{"tool": tt.tool, "is_error": false}})
			m.Observe(&agentrunner.Event{Type: agentrunner.EventAttemptSucceeded, Agent: tt.agent, Step: tt.step, Details: map[string]any{"model": tt.model, "input_tokens": 1}})
			got := snapshot(t, m.Registry())
			for k := range got {
				if strings.HasPrefix(k, "agentrunner_step_outcomes_total") {
					delete(got, k) // checked through the agent label of the others
				}
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("samples (-want +got):\n%s", diff)
			}
		})
	}

	t.Run("distinct values", func(t *testing.T) {
		m := New(Options{})
		for i := range maxLabelValues + 50 {
			m.Observe(&agentrunner.Event{Type: tool.EventToolCall, Agent: "a", Details: map[string]any{"tool": fmt.Sprintf("t%d", i)}})
		}
		// A value seen before the limit keeps its series afterwards.
		m.Observe(&agentrunner.Event{Type: tool.EventToolCall, Agent: "a", Details: map[string]any{"tool": "t0"}})
		if n := testutil.CollectAndCount(m.toolCalls); n != maxLabelValues+1 {
			t.Errorf("%d tool call series, want %d and other", n, maxLabelValues)
		}
		for tool, want := range map[string]float64{"t0": 2, fmt.Sprintf("t%d", maxLabelValues-1): 1, "other": 50} {
			if got := testutil.ToFloat64(m.toolCalls.WithLabelValues(tool, "a", "ok")); got != want {
				t.Errorf("calls of %s: %v, want %v", tool, got, want)
			}
		}
		// Each label has its own budget.
		m.Observe(&agentrunner.Event{Type: tool.EventToolCall, Agent: "fresh", Details: map[string]any{"tool": "t0"}})
		if got := testutil.ToFloat64(m.toolCalls.WithLabelValues("t0", "fresh", "ok")); got != 1 {
			t.Errorf("calls by a new agent: %v, want 1", got)
		}
	})
}

// TestHandler scrapes the handler over HTTP: Prometheus text format, with
// the agentrunner families labelled with the pipeline and the Go runtime
// and process families unlabelled.
func TestHandler(t *testing.T) {
	m := New(Options{Pipeline: "news", Tools: func() map[string]tool.Stats {
		return map[string]tool.Stats{"calc": {BreakerState: tool.BreakerClosed}}
	}, OutboxBacklog: func(context.Context) (int, error) { return 3, nil }})
	m.Observe(ev(agentrunner.EventCycleCompleted, "", "", map[string]any{"duration_ms": 60_000}))
	m.Observe(ev(tool.EventToolCall, "s", "a", map[string]any{"tool": "calc", "duration_ms": 1, "is_error": false}))
	srv := httptest.NewServer(m.Handler())
	defer srv.Close()

	resp, err := http.Get(srv.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d: %s", resp.StatusCode, body)
	}
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/plain; version=0.0.4") {
		t.Errorf("content type %q, want the Prometheus text format", ct)
	}
	want := []string{
		"# TYPE agentrunner_cycles_total counter",
		`agentrunner_cycles_total{outcome="completed",pipeline="news"} 1`,
		"# TYPE agentrunner_cycle_duration_seconds histogram",
		`agentrunner_cycle_duration_seconds_count{outcome="completed",pipeline="news"} 1`,
		"# TYPE agentrunner_tool_calls_total counter",
		"# TYPE agentrunner_tool_call_duration_seconds histogram",
		`agentrunner_tool_breaker_state{pipeline="news",state="closed",tool="calc"} 1`,
		`agentrunner_outbox_backlog{pipeline="news"} 3`,
		`agentrunner_scrape_errors_total{pipeline="news",source="outbox_backlog"} 0`,
		"# TYPE go_goroutines gauge",
		"\ngo_goroutines ",
		"promhttp_metric_handler_requests_total",
	}
	if runtime.GOOS == "linux" {
		want = append(want, "\nprocess_cpu_seconds_total ")
	}
	for _, w := range want {
		if !strings.Contains(string(body), w) {
			t.Errorf("scrape lacks %q", w)
		}
	}
	if t.Failed() {
		t.Logf("scrape:\n%s", body)
	}
	// Parses as the text format, and only families with data appear.
	if err := testutil.ScrapeAndCompare(srv.URL, strings.NewReader(`
# HELP agentrunner_cycles_total Cycles that ended, by outcome (completed, failed, aborted).
# TYPE agentrunner_cycles_total counter
agentrunner_cycles_total{outcome="completed",pipeline="news"} 1
`), "agentrunner_cycles_total", "agentrunner_retries_total"); err != nil {
		t.Error(err)
	}
}

// TestPipelineLabel checks the constant label: absent when no pipeline is
// named, and a name that is not UTF-8 does not break registration.
func TestPipelineLabel(t *testing.T) {
	for _, tt := range []struct{ pipeline, want string }{
		{"", `agentrunner_cycles_total{outcome="completed"}`},
		{"a\xffb", "agentrunner_cycles_total{outcome=\"completed\",pipeline=\"a\ufffdb\"}"},
	} {
		m := New(Options{Pipeline: tt.pipeline})
		m.Observe(ev(agentrunner.EventCycleCompleted, "", "", nil))
		if diff := cmp.Diff(map[string]float64{tt.want: 1}, snapshot(t, m.Registry())); diff != "" {
			t.Errorf("pipeline %q: samples (-want +got):\n%s", tt.pipeline, diff)
		}
	}
}

// TestBreakerState checks the breaker gauge: one sample per tool and state,
// 1 for the current one; tools whose names become "other" are added up.
func TestBreakerState(t *testing.T) {
	stats := map[string]tool.Stats{
		"calc":     {BreakerState: tool.BreakerClosed},
		"web":      {BreakerState: tool.BreakerOpen, Calls: 9, Errors: 9},
		"mcp.slow": {BreakerState: tool.BreakerHalfOpen},
		"bad name": {BreakerState: tool.BreakerOpen},
		"worse/1":  {BreakerState: tool.BreakerOpen},
		"also bad": {BreakerState: tool.BreakerClosed},
	}
	var mu sync.Mutex
	m := New(Options{Pipeline: "p", Tools: func() map[string]tool.Stats {
		mu.Lock()
		defer mu.Unlock()
		return stats
	}})
	want := `
# HELP agentrunner_tool_breaker_state Circuit breaker state of each tool: 1 for the current state (closed, open, half-open), 0 for the others; for tool="other" the number of such tools in each state.
# TYPE agentrunner_tool_breaker_state gauge
agentrunner_tool_breaker_state{pipeline="p",state="closed",tool="calc"} 1
agentrunner_tool_breaker_state{pipeline="p",state="open",tool="calc"} 0
agentrunner_tool_breaker_state{pipeline="p",state="half-open",tool="calc"} 0
agentrunner_tool_breaker_state{pipeline="p",state="closed",tool="mcp.slow"} 0
agentrunner_tool_breaker_state{pipeline="p",state="open",tool="mcp.slow"} 0
agentrunner_tool_breaker_state{pipeline="p",state="half-open",tool="mcp.slow"} 1
agentrunner_tool_breaker_state{pipeline="p",state="closed",tool="other"} 1
agentrunner_tool_breaker_state{pipeline="p",state="open",tool="other"} 2
agentrunner_tool_breaker_state{pipeline="p",state="half-open",tool="other"} 0
agentrunner_tool_breaker_state{pipeline="p",state="closed",tool="web"} 0
agentrunner_tool_breaker_state{pipeline="p",state="open",tool="web"} 1
agentrunner_tool_breaker_state{pipeline="p",state="half-open",tool="web"} 0
`
	if err := testutil.GatherAndCompare(m.Registry(), strings.NewReader(want), "agentrunner_tool_breaker_state"); err != nil {
		t.Error(err)
	}
	// Read at each scrape: a breaker that closes shows as closed.
	mu.Lock()
	stats = map[string]tool.Stats{"web": {BreakerState: tool.BreakerClosed}}
	mu.Unlock()
	got := snapshot(t, m.Registry())
	if v, ok := got[`agentrunner_tool_breaker_state{pipeline="p",state="closed",tool="web"}`]; !ok || v != 1 {
		t.Errorf("web closed = %v (present %v), want 1 after the breaker closed", v, ok)
	}
	if n, err := testutil.GatherAndCount(m.Registry(), "agentrunner_tool_breaker_state"); err != nil || n != 3 {
		t.Errorf("%d breaker samples (%v), want 3 for the one tool left", n, err)
	}
}

// TestBreakerStateFromExecutor runs a real tool executor with the metrics
// as its Record hook and its Stats as the breaker source: the events it
// writes are the ones Observe understands.
func TestBreakerStateFromExecutor(t *testing.T) {
	reg := tool.NewRegistry()
	if err := reg.Register(tool.Spec{Name: "echo", Description: "echoes"}, tool.HandlerFunc(func(_ context.Context, args json.RawMessage) (string, error) {
		return string(args), nil
	})); err != nil {
		t.Fatal(err)
	}
	var exec *tool.Executor
	m := New(Options{Tools: func() map[string]tool.Stats { return exec.Stats() }})
	exec = tool.NewExecutor(reg, tool.Options{Record: m.Observe})
	scope := exec.Scope([]string{"echo"})
	if err := scope.Err(); err != nil {
		t.Fatal(err)
	}
	call := agentrunner.ToolCall{ID: "1", Name: "echo", Arguments: json.RawMessage(`{}`), Agent: "writer", Step: "write"}
	if res := scope.Execute(context.Background(), call); res.IsError {
		t.Fatalf("echo failed: %+v", res)
	}
	call.Name = "no_such_tool"
	if res := scope.Execute(context.Background(), call); !res.IsError {
		t.Fatalf("unknown tool succeeded: %+v", res)
	}
	got := snapshot(t, m.Registry())
	want := map[string]float64{
		`agentrunner_tool_calls_total{agent="writer",result="ok",tool="echo"}`:            1,
		`agentrunner_tool_calls_total{agent="writer",result="error",tool="no_such_tool"}`: 1,
		`agentrunner_tool_breaker_state{state="closed",tool="echo"}`:                      1,
		`agentrunner_tool_breaker_state{state="open",tool="echo"}`:                        0,
		`agentrunner_tool_breaker_state{state="half-open",tool="echo"}`:                   0,
	}
	for k, v := range want {
		if g, ok := got[k]; !ok || g != v {
			t.Errorf("%s = %v (present %v), want %v", k, g, ok, v)
		}
	}
	if got[`agentrunner_tool_call_duration_seconds_count{tool="echo"}`] != 1 {
		t.Errorf("echo duration not observed once: %v", got)
	}
}

// TestOutboxBacklog checks the backlog gauge and that a failed read leaves
// the sample out and counts the failure, whether the function errs, gives
// a negative count, panics or does not answer in time.
func TestOutboxBacklog(t *testing.T) {
	stuck := make(chan struct{})
	defer close(stuck)
	tests := []struct {
		name    string
		backlog func(context.Context) (int, error)
		want    map[string]float64
	}{
		{"ok", func(context.Context) (int, error) { return 7, nil }, map[string]float64{
			`agentrunner_outbox_backlog{pipeline="p"}`:                              7,
			`agentrunner_scrape_errors_total{pipeline="p",source="outbox_backlog"}`: 0,
		}},
		{"empty", func(context.Context) (int, error) { return 0, nil }, map[string]float64{
			`agentrunner_outbox_backlog{pipeline="p"}`:                              0,
			`agentrunner_scrape_errors_total{pipeline="p",source="outbox_backlog"}`: 0,
		}},
		{"error", func(context.Context) (int, error) { return 5, errors.New("database is locked") }, map[string]float64{
			`agentrunner_scrape_errors_total{pipeline="p",source="outbox_backlog"}`: 1,
		}},
		{"negative", func(context.Context) (int, error) { return -1, nil }, map[string]float64{
			`agentrunner_scrape_errors_total{pipeline="p",source="outbox_backlog"}`: 1,
		}},
		{"panic", func(context.Context) (int, error) { panic("bug") }, map[string]float64{
			`agentrunner_scrape_errors_total{pipeline="p",source="outbox_backlog"}`: 1,
		}},
		{"honours the timeout", func(ctx context.Context) (int, error) {
			<-ctx.Done()
			return 0, ctx.Err()
		}, map[string]float64{
			`agentrunner_scrape_errors_total{pipeline="p",source="outbox_backlog"}`: 1,
		}},
		{"ignores the timeout", func(context.Context) (int, error) {
			<-stuck
			return 1, nil
		}, map[string]float64{
			`agentrunner_scrape_errors_total{pipeline="p",source="outbox_backlog"}`: 1,
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := New(Options{Pipeline: "p", OutboxBacklog: tt.backlog, BacklogTimeout: 20 * time.Millisecond})
			if diff := cmp.Diff(tt.want, snapshot(t, m.Registry())); diff != "" {
				t.Errorf("samples (-want +got):\n%s", diff)
			}
		})
	}

	t.Run("passes a deadline", func(t *testing.T) {
		var left time.Duration
		m := New(Options{OutboxBacklog: func(ctx context.Context) (int, error) {
			d, ok := ctx.Deadline()
			if !ok {
				return 0, errors.New("no deadline")
			}
			left = time.Until(d)
			return 1, nil
		}})
		if got := snapshot(t, m.Registry())["agentrunner_outbox_backlog{}"]; got != 1 {
			t.Fatalf("backlog %v, want 1", got)
		}
		if left <= 0 || left > DefaultBacklogTimeout {
			t.Errorf("deadline %v away, want within the default %v", left, DefaultBacklogTimeout)
		}
	})
}

// TestConcurrentObserve observes from many goroutines while scraping:
// under -race, and with exact totals at the end.
func TestConcurrentObserve(t *testing.T) {
	const workers, each = 16, 300
	m := New(Options{Pipeline: "p", OutboxBacklog: func(context.Context) (int, error) { return 1, nil }})
	srv := httptest.NewServer(m.Handler())
	defer srv.Close()
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := range each {
				m.Observe(ev(agentrunner.EventAttemptSucceeded, "s", "a", map[string]any{"duration_ms": 1000, "model": "m", "input_tokens": 2}))
				m.Observe(ev(tool.EventToolCall, "s", "a", map[string]any{"tool": fmt.Sprintf("t%d", (w*each+i)%(maxLabelValues+10)), "duration_ms": 1.0}))
			}
		})
	}
	scrapes := make(chan error, 1)
	go func() {
		var err error
		for range 5 {
			var resp *http.Response
			if resp, err = http.Get(srv.URL); err != nil {
				break
			}
			_, err = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if err == nil && resp.StatusCode != http.StatusOK {
				err = fmt.Errorf("status %d", resp.StatusCode)
			}
			if err != nil {
				break
			}
		}
		scrapes <- err
	}()
	wg.Wait()
	if err := <-scrapes; err != nil {
		t.Errorf("scrape during Observe: %v", err)
	}
	got := snapshot(t, m.Registry())
	for k, want := range map[string]float64{
		`agentrunner_step_duration_seconds_count{agent="a",outcome="succeeded",pipeline="p",step="s"}`: workers * each,
		`agentrunner_step_duration_seconds_sum{agent="a",outcome="succeeded",pipeline="p",step="s"}`:   workers * each,
		`agentrunner_tokens_total{agent="a",direction="input",model="m",pipeline="p"}`:                 2 * workers * each,
	} {
		if got[k] != want {
			t.Errorf("%s = %v, want %v", k, got[k], want)
		}
	}
	var calls, series float64
	for k, v := range got {
		if strings.HasPrefix(k, "agentrunner_tool_calls_total{") {
			calls += v
			series++
		}
	}
	if calls != workers*each || series != maxLabelValues+1 {
		t.Errorf("%v tool calls in %v series, want %d in %d", calls, series, workers*each, maxLabelValues+1)
	}
}

// TestObserveResourceExhausted: resource.exhausted events are counted by
// the resource they name, as a label identifier; a strange name is "other".
func TestObserveResourceExhausted(t *testing.T) {
	m := New(Options{})
	for _, r := range []any{"file descriptors", "file descriptors", "disk space", "memory", "processes", "a{b}", 7} {
		m.Observe(&agentrunner.Event{Type: agentrunner.EventResourceExhausted, Level: agentrunner.LevelWarn,
			Details: map[string]any{"resource": r, "operation": "write prompt"}})
	}
	got := map[string]float64{}
	for k, v := range snapshot(t, m.Registry()) {
		if strings.HasPrefix(k, "agentrunner_resource_exhausted_total") {
			got[k] = v
		}
	}
	want := map[string]float64{
		`agentrunner_resource_exhausted_total{resource="file_descriptors"}`: 2,
		`agentrunner_resource_exhausted_total{resource="disk_space"}`:       1,
		`agentrunner_resource_exhausted_total{resource="memory"}`:           1,
		`agentrunner_resource_exhausted_total{resource="processes"}`:        1,
		`agentrunner_resource_exhausted_total{resource="other"}`:            1,
		`agentrunner_resource_exhausted_total{resource=""}`:                 1,
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("agentrunner_resource_exhausted_total (-want +got):\n%s", diff)
	}
}

func TestObserveBackups(t *testing.T) {
	m := New(Options{})
	at := time.Date(2026, 11, 24, 3, 0, 0, 0, time.UTC)
	m.Observe(&agentrunner.Event{Type: agentrunner.EventBackupFailed, Timestamp: at.Add(-time.Hour), Level: agentrunner.LevelError})
	m.Observe(&agentrunner.Event{Type: agentrunner.EventBackupCompleted, Timestamp: at, Level: agentrunner.LevelInfo})
	m.Observe(&agentrunner.Event{Type: agentrunner.EventBackupFailed, Timestamp: at.Add(time.Hour), Level: agentrunner.LevelError})
	got := map[string]float64{}
	for k, v := range snapshot(t, m.Registry()) {
		if strings.Contains(k, "backup") {
			got[k] = v
		}
	}
	want := map[string]float64{
		`agentrunner_backups_total{outcome="completed"}`: 1,
		`agentrunner_backups_total{outcome="failed"}`:    2,
		// A failure after a success leaves the success's time: its age is
		// what an alert watches.
		`agentrunner_last_backup_timestamp_seconds{}`: float64(at.Unix()),
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("backup metrics (-want +got):\n%s", diff)
	}
}

// TestWaitingGates: the gauge of waiting gates is read from the store at
// each scrape, so it follows the gates that a run's end cancels without a
// decision too; a failed read leaves the sample out and is counted.
func TestWaitingGates(t *testing.T) {
	store, err := sqlite.Open(t.Context(), filepath.Join(t.TempDir(), "state.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	started := time.Date(2026, 11, 24, 0, 0, 0, 0, time.UTC)
	gate := func(runID string, st agentrunner.StepRunStatus) *agentrunner.StepRun {
		return &agentrunner.StepRun{RunID: runID, Step: "signoff", Visit: 1, Status: st, OpenedAt: started}
	}
	var runs []*agentrunner.Run
	for _, id := range []string{"review-000001", "review-000002", "review-000003"} {
		runs = append(runs, &agentrunner.Run{ID: id, Pipeline: "review", Status: agentrunner.RunRunning, Dir: t.TempDir(), StartedAt: started})
	}
	apply := func(ch *agentrunner.Change) {
		t.Helper()
		if err := store.ApplyAll(t.Context(), ch); err != nil {
			t.Fatal(err)
		}
	}
	apply(&agentrunner.Change{Runs: runs, StepRuns: []*agentrunner.StepRun{gate(runs[0].ID, agentrunner.StepRunWaiting),
		gate(runs[1].ID, agentrunner.StepRunWaiting), gate(runs[2].ID, agentrunner.StepRunOpen)}})
	m := New(Options{Pipeline: "p", WaitingGates: func(ctx context.Context) (int, error) {
		c, err := store.RunCounts(ctx)
		return c.WaitingGates, err
	}})
	want := map[string]float64{
		`agentrunner_gates_waiting{pipeline="p"}`:                              2,
		`agentrunner_scrape_errors_total{pipeline="p",source="waiting_gates"}`: 0,
	}
	if diff := cmp.Diff(want, snapshot(t, m.Registry())); diff != "" {
		t.Errorf("two gates wait (-want +got):\n%s", diff)
	}
	aborted := *runs[1]
	aborted.Status, aborted.EndedAt = agentrunner.RunAborted, started.Add(time.Minute)
	apply(&agentrunner.Change{Runs: []*agentrunner.Run{&aborted}, StepRuns: []*agentrunner.StepRun{gate(aborted.ID, agentrunner.StepRunCanceled)}})
	want[`agentrunner_gates_waiting{pipeline="p"}`] = 1
	if diff := cmp.Diff(want, snapshot(t, m.Registry())); diff != "" {
		t.Errorf("after a run with a waiting gate was aborted (-want +got):\n%s", diff)
	}

	failing := New(Options{Pipeline: "p", WaitingGates: func(context.Context) (int, error) { return 0, errors.New("database is locked") }})
	if diff := cmp.Diff(map[string]float64{`agentrunner_scrape_errors_total{pipeline="p",source="waiting_gates"}`: 1},
		snapshot(t, failing.Registry())); diff != "" {
		t.Errorf("a failed read (-want +got):\n%s", diff)
	}
}

// TestObserveSignals: each SIGNAL BLOCK counts by its agent and risk, and
// its confidence goes into the agent's histogram, whether the event comes
// from this process (an int) or from the store (a float).
func TestObserveSignals(t *testing.T) {
	m := New(Options{})
	for _, s := range []struct {
		agent, risk string
		confidence  any
	}{{"comparator", "low", 4}, {"comparator", "high", 2.0}, {"verifier", "low", 5}} {
		m.Observe(&agentrunner.Event{Type: "signal.received", Agent: s.agent, Level: agentrunner.LevelInfo,
			Details: map[string]any{"agent": s.agent, "risk": s.risk, "confidence": s.confidence, "next": "STOP"}})
	}
	got := map[string]float64{}
	for k, v := range snapshot(t, m.Registry()) {
		if strings.HasPrefix(k, "agentrunner_signal") {
			got[k] = v
		}
	}
	want := map[string]float64{
		`agentrunner_signals_total{agent="comparator",risk="low"}`:  1,
		`agentrunner_signals_total{agent="comparator",risk="high"}`: 1,
		`agentrunner_signals_total{agent="verifier",risk="low"}`:    1,
		`agentrunner_signal_confidence_count{agent="comparator"}`:   2,
		`agentrunner_signal_confidence_sum{agent="comparator"}`:     6,
		`agentrunner_signal_confidence_count{agent="verifier"}`:     1,
		`agentrunner_signal_confidence_sum{agent="verifier"}`:       5,
	}
	for k := range got {
		if strings.Contains(k, "_bucket") {
			delete(got, k)
		}
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("signal metrics (-want +got):\n%s", diff)
	}
}
