package config

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestBacklogSteps: the backlog section and its state and tasks steps are
// checked key by key, each problem at its place.
func TestBacklogSteps(t *testing.T) {
	for _, tt := range []struct {
		dir  string
		want []string
	}{
		{"backlog-steps", []string{
			`:14:7: pipelines.items.steps.refine.state: is required: the state whose agent the step runs (Planning, Implementing …)`,
			`:14:42: pipelines.items.steps.refine.gate: set timeout and default together: the decision taken for the operator when the timeout passes`,
			`:15:46: pipelines.items.steps.split.agent: a state step runs the agent of its state, chosen from agents/defaults and agents/variants: remove agent:`,
			`:17:45: pipelines.items.steps.stray.tasks: applies to tasks steps (kind: tasks) only`,
			`:16:35: pipelines.items.steps.work.tasks.pipeline: pipeline "taks" is not under pipelines: (did you mean "task"?)`,
			`:16:51: pipelines.items.steps.work.tasks.from: is required: a state step of this pipeline whose agent splits the item (output type task_split), got "refine2"`,
			`:16:66: pipelines.items.steps.work.tasks.max_parallel: must not be negative, got -1`,
			`:6:3: backlog.provider: provider "nowhere" is not under providers: (known keys: mock)`,
			`:7:30: backlog.confidence.Planning: must be 0-100 (0: no threshold), got -1`,
			`:7:16: backlog.confidence.default: must be 0-100 (0: no threshold), got 101`,
			`:8:3: backlog.max_turns: must not be negative, got -2`,
			`:9:15: backlog.worktrees.remove: unknown policy "sometimes" (supported: on_success, always, never)`,
		}},
		{"backlog-missing", []string{
			`:8:14: pipelines.task.steps.plan.kind: state steps belong to a backlog pipeline: add backlog: {pipeline: NAME} (see the README's "Agent pipelines")`,
		}},
	} {
		t.Run(tt.dir, func(t *testing.T) {
			f := "testdata/graphs/" + tt.dir + "/agentrunner.yaml"
			var want []string
			for _, w := range tt.want {
				want = append(want, f+w)
			}
			if diff := cmp.Diff(want, loadProblems(t, tt.dir)); diff != "" {
				t.Errorf("problems (-want +got):\n%s", diff)
			}
		})
	}
}
