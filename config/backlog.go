package config

import (
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"time"
)

// Step kinds of spec 5's agent pipeline (pipelines: only).
const (
	// StepState runs the agent of a state (agents/defaults and
	// agents/variants), chosen for the run's repository.
	StepState = "state"
	// StepTasks starts the tasks of a task_split artifact as child runs,
	// each in its own git worktree, and waits for them.
	StepTasks = "tasks"
)

// Worktree removal policies.
const (
	// RemoveOnSuccess removes a task's worktree when the task succeeded
	// and keeps it, for a person to look at, when it did not.
	RemoveOnSuccess = "on_success"
	RemoveAlways    = "always"
	RemoveNever     = "never"
)

// DefaultTasksTimeout bounds a tasks step's attempt, which waits for
// every task of its item (gates included) unless its timeout: says
// otherwise.
const DefaultTasksTimeout = 7 * 24 * time.Hour

// DefaultWorktreesDir is where tasks' worktrees go unless backlog.worktrees.dir
// says otherwise, relative to the artifacts directory.
const DefaultWorktreesDir = "worktrees"

// Backlog configures spec 5's agent pipeline: backlog items, each a run of
// Pipeline, refined and split into tasks, each a child run. It is spec 5's
// PipelineConfiguration: the provider, the confidence thresholds and the
// worktrees. Retry limits are the steps' own (retries:), as in every
// pipeline.
type Backlog struct {
	// Pipeline is the pipeline a backlog item runs (required).
	Pipeline string `yaml:"pipeline"`
	// Provider runs the state agents; empty: defaults.provider.
	Provider string `yaml:"provider"`
	// Confidence holds the thresholds, 0-100, by state; the key "default"
	// is the threshold of the states not listed. Below its state's
	// threshold an agent's output waits at a human gate.
	Confidence map[string]int `yaml:"confidence"`
	// Timeout of one state agent's attempt; 0: defaults.timeout.
	Timeout Duration `yaml:"timeout"`
	// MaxTurns bounds a model agent's turns when its YAML sets none.
	MaxTurns  int       `yaml:"max_turns"`
	Worktrees Worktrees `yaml:"worktrees"`
}

// Worktrees says where tasks' git worktrees go and when they are removed.
type Worktrees struct {
	// Dir holds one worktree per task; relative paths are relative to
	// agentrunner.yaml. Empty: DefaultWorktreesDir under artifacts_dir.
	Dir string `yaml:"dir"`
	// Remove is on_success (the default), always or never.
	Remove string `yaml:"remove"`
}

// TasksStep configures a tasks step.
type TasksStep struct {
	// Pipeline is the pipeline each task runs (required).
	Pipeline string `yaml:"pipeline"`
	// From is the state step of this pipeline whose task_split artifact
	// lists the tasks (required).
	From string `yaml:"from"`
	// MaxParallel bounds the tasks that run at once; 0: 1, one after the
	// other in their execution order.
	MaxParallel int `yaml:"max_parallel"`
}

// ConfidenceDefault is the key of Backlog.Confidence for the states it
// does not list.
const ConfidenceDefault = "default"

// WorktreesDir is the absolute folder of tasks' worktrees.
func (c *Config) WorktreesDir() string {
	if c.Backlog == nil || c.Backlog.Worktrees.Dir == "" {
		return filepath.Join(c.Abs(c.ArtifactsDir), DefaultWorktreesDir)
	}
	return c.Abs(c.Backlog.Worktrees.Dir)
}

// BacklogProvider is the provider state agents run on.
func (c *Config) BacklogProvider() string {
	if c.Backlog != nil && c.Backlog.Provider != "" {
		return c.Backlog.Provider
	}
	return c.Defaults.Provider
}

// StateSteps returns the state of each state step of pipeline, by step.
func (c *Config) StateSteps(pipeline string) map[string]string {
	p := c.Pipelines[pipeline]
	if p == nil {
		return nil
	}
	out := map[string]string{}
	for id, s := range p.Steps {
		if s != nil && s.Kind == StepState {
			out[id] = s.State
		}
	}
	return out
}

// backlog checks the backlog: section and that state and tasks steps
// have one to work with.
func (v *validator) backlog() {
	b := v.c.Backlog
	if b == nil {
		v.stepsNeedBacklog()
		return
	}
	p := v.c.Pipelines[b.Pipeline]
	switch {
	case b.Pipeline == "":
		v.add("backlog.pipeline", "is required: the pipeline under pipelines: that a backlog item runs")
	case p == nil:
		v.add("backlog.pipeline", "pipeline %q is not under pipelines:%s", b.Pipeline, SuggestKey(b.Pipeline, slices.Sorted(maps.Keys(v.c.Pipelines))))
	}
	if p := b.Provider; p != "" && v.c.Providers[p] == nil {
		v.add("backlog.provider", "provider %q is not under providers:%s", p, SuggestKey(p, slices.Sorted(maps.Keys(v.c.Providers))))
	}
	for _, state := range slices.Sorted(maps.Keys(b.Confidence)) {
		if n := b.Confidence[state]; n < 0 || n > 100 {
			v.add("backlog.confidence."+state, "must be 0-100 (0: no threshold), got %d", n)
		}
	}
	if b.MaxTurns < 0 {
		v.add("backlog.max_turns", "must not be negative, got %d", b.MaxTurns)
	}
	if r := b.Worktrees.Remove; r != "" && r != RemoveOnSuccess && r != RemoveAlways && r != RemoveNever {
		v.add("backlog.worktrees.remove", "unknown policy %q (supported: on_success, always, never)", r)
	}
}

// stepsNeedBacklog reports state and tasks steps in a workspace without
// a backlog: section.
func (v *validator) stepsNeedBacklog() {
	for _, name := range slices.Sorted(maps.Keys(v.c.Pipelines)) {
		p := v.c.Pipelines[name]
		if p == nil {
			continue
		}
		for _, id := range slices.Sorted(maps.Keys(p.Steps)) {
			if s := p.Steps[id]; s != nil && (s.Kind == StepState || s.Kind == StepTasks) {
				v.add(fmt.Sprintf("pipelines.%s.steps.%s.kind", name, id), "%s steps belong to a backlog pipeline: add backlog: {pipeline: NAME} (see the README's \"Agent pipelines\")", s.Kind)
			}
		}
	}
}

// stateStep checks a state step: it names its state and nothing of the
// agent steps' own keys; which agent runs is the agents/ folder's choice.
func (v *validator) stateStep(key string, s *Step) {
	if s.State == "" {
		v.add(key+".state", "is required: the state whose agent the step runs (Planning, Implementing …)")
	}
	if s.Agent != "" {
		v.add(key+".agent", "a state step runs the agent of its state, chosen from agents/defaults and agents/variants: remove agent:")
	}
	if s.Artifact != "" || s.Validity != (Validity{}) || len(s.Deliver) > 0 {
		v.add(key, "artifact, validity and deliver apply to other steps: a state step's artifact is its agent's output.type")
	}
	v.gateSettings(key, s.Gate)
}

// tasksStep checks a tasks step.
func (v *validator) tasksStep(key string, p *Pipeline, s *Step) {
	if s.Agent != "" || s.State != "" {
		v.add(key, "a tasks step runs no agent: it starts the tasks of a split as runs of tasks.pipeline")
	}
	if s.Label != nil || len(s.Routes) > 0 {
		v.add(key+".routes", "a tasks step goes on by next: it has no routing label")
	}
	t := s.Tasks
	if t == nil {
		v.add(key+".tasks", "is required: {pipeline: the tasks' pipeline, from: the step that splits}")
		return
	}
	if t.Pipeline == "" {
		v.add(key+".tasks.pipeline", "is required: the pipeline each task runs")
	} else if v.c.Pipelines[t.Pipeline] == nil {
		v.add(key+".tasks.pipeline", "pipeline %q is not under pipelines:%s", t.Pipeline, SuggestKey(t.Pipeline, slices.Sorted(maps.Keys(v.c.Pipelines))))
	}
	if from := p.Steps[t.From]; from == nil || from.Kind != StepState {
		v.add(key+".tasks.from", "is required: a state step of this pipeline whose agent splits the item (output type task_split), got %q", t.From)
	}
	if t.MaxParallel < 0 {
		v.add(key+".tasks.max_parallel", "must not be negative, got %d", t.MaxParallel)
	}
}
