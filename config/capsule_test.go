package config

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestCapsuleSteps: capsule steps are checked like gates (no agent, no
// hand-over, no routes, their own keys whole), their text templates are
// read at load, and the artifacts they publish count as produced for the
// agents that read them (b reads keep.capsule.md and shared.md).
func TestCapsuleSteps(t *testing.T) {
	const f = "testdata/graphs/capsule-steps/agentrunner.yaml"
	want := []string{
		f + `:13:24: pipeline.steps.x.capsule: capsule is a key of graphs, and pipeline: is the learning loop, a chain (with parallel branches at most: then and join): move the pipeline under pipelines: (pipelines: {NAME: {start, steps}}) to use it`,
		f + `:13:9: pipeline.steps.x.kind: capsule steps run in graphs, and pipeline: is the learning loop, a chain: move the pipeline under pipelines: (pipelines: {NAME: {start, steps}}) to use them`,
		f + `:24:9: pipelines.p.steps.bad.agent: a capsule step runs no agent: it stores a capsule made from the run's artifacts`,
		f + `:26:9: pipelines.p.steps.bad.routes: a capsule step goes on by next (or then): its capsule has no routing label`,
		f + `:27:19: pipelines.p.steps.bad.capsule.name: unknown placeholder {id} (known: {run_id}, {visit})`,
		f + `:27:35: pipelines.p.steps.bad.capsule.text: want a path inside the workspace, relative to agentrunner.yaml, got "../outside.md"`,
		f + `:27:63: pipelines.p.steps.bad.capsule.tags[0]: is empty`,
		f + `:28:7: pipelines.p.steps.none.capsule: is required: the capsule the step stores ({name, text})`,
		f + `:31:30: pipelines.p.steps.notcapsule.capsule: applies to capsule steps (kind: capsule) only`,
		f + `:29:51: pipelines.p.steps.missing.capsule.text: file missing.md does not exist`,
		f + `:30:51: pipelines.p.steps.unknown.capsule.text: unknown.md: unknown placeholder {{input:goal}} (known: {{run_id}}, {{visit}}, {{artifact:NAME}}, {{artifact:NAME#SECTION}})`,
		f + `:30:51: pipelines.p.steps.unknown.capsule.text: unknown.md takes the artifact "nobody.md", which no step of the pipeline produces`,
	}
	if diff := cmp.Diff(want, loadProblems(t, "capsule-steps")); diff != "" {
		t.Errorf("problems (-want +got):\n%s", diff)
	}
}

// TestCapsuleFile: a capsule step publishes STEP.capsule.md unless it
// names its file; other steps publish none.
func TestCapsuleFile(t *testing.T) {
	for _, tt := range []struct {
		step *Step
		want string
	}{
		{&Step{ID: "checkpoint", Kind: StepCapsule, Capsule: &CapsuleStep{Name: "n"}}, "checkpoint.capsule.md"},
		{&Step{ID: "record", Kind: StepCapsule, Capsule: &CapsuleStep{Name: "n", File: "feature.capsule.md"}}, "feature.capsule.md"},
		{&Step{ID: "decide", Kind: StepGate}, ""},
	} {
		if got := tt.step.CapsuleFile(); got != tt.want {
			t.Errorf("step %s: CapsuleFile() = %q, want %q", tt.step.ID, got, tt.want)
		}
	}
}
