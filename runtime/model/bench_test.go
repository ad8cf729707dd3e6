package model

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/agentrunner/agentrunner"
	"github.com/agentrunner/agentrunner/llm"
	"github.com/agentrunner/agentrunner/llm/fake"
	"github.com/agentrunner/agentrunner/llm/openai"
	"github.com/agentrunner/agentrunner/tool"
)

const benchTurns = 10

// conversationScript is benchTurns-1 turns of one tool call each, then the
// final answer.
func conversationScript(final string) []func(*llm.Request) (*llm.Response, error) {
	var rs []func(*llm.Request) (*llm.Response, error)
	for i := 0; i < benchTurns-1; i++ {
		rs = append(rs, calls(llm.ToolCall{ID: fmt.Sprint("c", i), Name: "sleepy", Arguments: json.RawMessage(`{"ms":0}`)}))
	}
	return append(rs, answer(final))
}

// BenchmarkTurn measures the runner's own work per model turn: building
// the request, dispatching the turn's tool call through the executor,
// feeding the result back and, on the last turn, validating and writing
// the answer. The model answers instantly (in process), so the time is the
// runner's alone.
//
//	go test -run '^$' -bench 'BenchmarkTurn|BenchmarkToolDispatch' -count 10 ./runtime/model/
func BenchmarkTurn(b *testing.B) {
	e := setup(b, nil)
	rt := New(nil, e.exec)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		rt.model = &scripted{replies: conversationScript(e.valid)}
		if _, err := rt.Run(context.Background(), e.inv); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*benchTurns), "ns/turn")
}

// BenchmarkToolDispatch measures one tool call through the executor: the
// scope lookup, argument decoding and schema validation, the call with
// its timeout, the breaker, the audit event and the counters.
func BenchmarkToolDispatch(b *testing.B) {
	reg := tool.NewRegistry()
	reg.Register(tool.Spec{Name: "echo", Parameters: []byte(`{"type":"object","properties":{"asset":{"type":"string"},"timeframe":{"enum":["1h","4h","1d","1w"]}},"required":["asset"]}`), Timeout: time.Second, BreakerFailures: 5, BreakerOpenFor: time.Minute},
		tool.HandlerFunc(func(ctx context.Context, args json.RawMessage) (string, error) { return "ok", nil }))
	events := 0
	scope := tool.NewExecutor(reg, tool.Options{Record: func(*agentrunner.Event) { events++ }}).Scope([]string{"echo"})
	call := agentrunner.ToolCall{ID: "c", Name: "echo", Arguments: json.RawMessage(`{"asset":"BTC","timeframe":"1d"}`), Agent: "plan"}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if res := scope.Execute(context.Background(), call); res.IsError {
			b.Fatal(res.Message)
		}
	}
	if events != b.N {
		b.Fatalf("%d events for %d calls", events, b.N)
	}
}

// BenchmarkTurnOverHTTP is BenchmarkTurn through the real OpenAI adapter
// against the fake OpenAI-compatible server on loopback: it adds the SDK,
// the JSON encoding of the growing conversation, HTTP, and the fake's own
// work, for comparison with BenchmarkTurn.
func BenchmarkTurnOverHTTP(b *testing.B) {
	e := setup(b, nil)
	var replies []fake.OpenAIReply
	for i := 0; i < b.N; i++ {
		for j := 0; j < benchTurns-1; j++ {
			replies = append(replies, fake.OpenAIReply{ToolCalls: []llm.ToolCall{{ID: fmt.Sprint("c", j), Name: "sleepy", Arguments: json.RawMessage(`{"ms":0}`)}}, FinishReason: "tool_calls"})
		}
		replies = append(replies, fake.OpenAIReply{Text: e.valid, FinishReason: "stop"})
	}
	srv := fake.NewOpenAI(b, "k", replies...)
	m, err := openai.New(openai.Config{BaseURL: srv.URL(), APIKey: "k"})
	if err != nil {
		b.Fatal(err)
	}
	rt := New(m, e.exec)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := rt.Run(context.Background(), e.inv); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*benchTurns), "ns/turn")
}
