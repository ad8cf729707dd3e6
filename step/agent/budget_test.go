package agent

import (
	"encoding/json"
	"testing"

	"github.com/agentrunner/agentrunner"
)

// TestTaskToolBudget: a sub-agent's run works under the tool budget of
// its task, an integer input of a run with a parent; any other run, or
// input, leaves the agent's own.
func TestTaskToolBudget(t *testing.T) {
	task := func(v any) map[string]any { return map[string]any{"task": map[string]any{"tool_budget": v}} }
	for _, tc := range []struct {
		name string
		run  *agentrunner.Run
		want int
		ok   bool
	}{
		{"from the store", &agentrunner.Run{Parent: "research-000001", Inputs: task(float64(7))}, 7, true},
		{"in memory", &agentrunner.Run{Parent: "research-000001", Inputs: task(3)}, 3, true},
		{"a number", &agentrunner.Run{Parent: "research-000001", Inputs: task(json.Number("12"))}, 12, true},
		{"no parent", &agentrunner.Run{Inputs: task(7)}, 0, false},
		{"a fraction", &agentrunner.Run{Parent: "p", Inputs: task(2.5)}, 0, false},
		{"zero", &agentrunner.Run{Parent: "p", Inputs: task(0)}, 0, false},
		{"a string", &agentrunner.Run{Parent: "p", Inputs: task("7")}, 0, false},
		{"no task", &agentrunner.Run{Parent: "p", Inputs: map[string]any{"topic": "x"}}, 0, false},
		{"no run", nil, 0, false},
	} {
		if got, ok := TaskToolBudget(tc.run); got != tc.want || ok != tc.ok {
			t.Errorf("%s: TaskToolBudget = %d, %v; want %d, %v", tc.name, got, ok, tc.want, tc.ok)
		}
	}
}
