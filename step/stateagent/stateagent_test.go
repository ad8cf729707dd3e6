package stateagent

import (
	"strings"
	"testing"
	"time"

	"github.com/agentrunner/agentrunner"
	"github.com/agentrunner/agentrunner/agentout"
	"github.com/google/go-cmp/cmp"
)

// TestJudgeOpensTheGate: an output waits for a person when its agent asks
// a question, or is less confident than its state's threshold; the
// judgement is an event with the question and its options.
func TestJudgeOpensTheGate(t *testing.T) {
	k := &Kind{thresholds: agentout.Thresholds{Default: 60, PerState: map[string]int{"Planning": 70}}}
	for _, tt := range []struct {
		name, state, output string
		wait                bool
		details             map[string]any
	}{
		{"confident", "Planning", "# Plan\n\nConfidence: 85\n", false, nil},
		{"below its state's threshold", "Planning", "# Plan\n\nConfidence: 65\n", true, nil},
		{"above the default", "Refining", "# Spec\n\nConfidence: 65\n", false, nil},
		{"no confidence", "Refining", "# Spec\n", true, nil},
		{"a question", "Planning", "# Plan\n\nConfidence: 95\n\nHUMAN INPUT NEEDED\nQuestion: Which database?\n- PostgreSQL\n- SQLite\n", true,
			map[string]any{"question": "Which database?", "options": []string{"PostgreSQL", "SQLite"}}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			art, err := agentout.Parse(agentout.KindPlan, []byte(tt.output))
			if err != nil {
				t.Fatal(err)
			}
			res := &agentrunner.StepResult{}
			a := &agentrunner.StepAttempt{Run: &agentrunner.Run{ID: "task-000001"}, Step: &agentrunner.Step{ID: "planning"}, Attempt: &agentrunner.Attempt{StartedAt: time.Unix(0, 0)}}
			k.judge(a, tt.state, "planning-default", art, res)
			if res.Wait != tt.wait || len(res.Events) != 1 || res.Events[0].Type != EventJudged {
				t.Fatalf("wait %v, events %+v; want wait %v and one %s", res.Wait, res.Events, tt.wait, EventJudged)
			}
			d := res.Events[0].Details
			if d["gate"] != tt.wait || !strings.Contains(d["why"].(string), tt.state) {
				t.Errorf("details %v", d)
			}
			for key, want := range tt.details {
				if diff := cmp.Diff(want, d[key]); diff != "" {
					t.Errorf("%s (-want +got):\n%s", key, diff)
				}
			}
		})
	}
}

// TestContract: an output that breaks the format of agent-output.md, or
// is empty, is refused with the parser's reason.
func TestContract(t *testing.T) {
	for _, tt := range []struct {
		kind   agentout.Kind
		output string
		want   string
	}{
		{agentout.KindPlan, "# Plan\n\nConfidence: 80\n", ""},
		{agentout.KindPlan, "  \n", "the output is empty"},
		{agentout.KindPlan, "# Plan\n\nConfidence: high\n", "Confidence"},
		{agentout.KindTaskSplit, "# Split\n\nConfidence: 80\n", "json"},
	} {
		ps := contract{kind: tt.kind}.Validate([]byte(tt.output))
		switch {
		case tt.want == "" && len(ps) > 0:
			t.Errorf("%s %q: %v, want valid", tt.kind, tt.output, ps)
		case tt.want != "" && (len(ps) != 1 || !strings.Contains(ps[0].Message, tt.want)):
			t.Errorf("%s %q: %v, want a problem about %q", tt.kind, tt.output, ps, tt.want)
		}
	}
}
