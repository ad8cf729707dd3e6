package model

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/agentrunner/agentrunner"
	"github.com/agentrunner/agentrunner/llm"
	"github.com/google/go-cmp/cmp"
)

// TestOnTurnTellsTheUsageSoFar: after each model turn the attempt's usage
// so far is told, with the attempt it is of; the last equals the result's.
func TestOnTurnTellsTheUsageSoFar(t *testing.T) {
	e := setup(t, nil)
	m := &scripted{replies: []func(*llm.Request) (*llm.Response, error){
		calls(llm.ToolCall{ID: "c1", Name: "sleepy", Arguments: json.RawMessage(`{"ms":1}`)},
			llm.ToolCall{ID: "c2", Name: "sleepy", Arguments: json.RawMessage(`{"ms":1}`)}),
		answer(e.valid),
	}}
	var told []Turn
	res, err := New(m, e.exec).OnTurn(func(tu Turn) { told = append(told, tu) }).Run(context.Background(), e.inv)
	if err != nil {
		t.Fatal(err)
	}
	turn := func(u agentrunner.Usage) Turn {
		return Turn{CycleID: "20261122_140000", Step: "research", Agent: "research", Attempt: 1, Usage: u}
	}
	want := []Turn{
		turn(agentrunner.Usage{InputTokens: 80, OutputTokens: 20, CachedTokens: 40, Turns: 1, ToolCalls: 2}),
		turn(agentrunner.Usage{InputTokens: 180, OutputTokens: 70, CachedTokens: 40, Turns: 2, ToolCalls: 2}),
	}
	if diff := cmp.Diff(want, told); diff != "" {
		t.Errorf("turns told (-want +got):\n%s", diff)
	}
	if res.Usage != want[1].Usage {
		t.Errorf("result usage %+v, want the last told %+v", res.Usage, want[1].Usage)
	}
}
