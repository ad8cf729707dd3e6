// Package stateagent is the step kind of spec 5's state agents: a step
// that runs the agent of its state (agents/defaults, or the variant of
// agents/variants that fits the run's repository best), with a prompt
// made from the agent's template and the backlog item or task the run is
// about, and that stops at a human gate when the agent is not confident
// enough or asks a person a question.
//
// The agent runs as every agent does (the agent step kind's runtime,
// time limit, output check and commit); its artifact is <type>.md, of
// its output.type, in the run's directory. An operator's answer to a gate
// is a decision to route the step to itself (agentrunner answer): the
// next visit's prompt holds the question and the answer.
package stateagent

import (
	"context"
	"errors"
	"path/filepath"
	"strings"

	"github.com/agentrunner/agentrunner"
	"github.com/agentrunner/agentrunner/agentdef"
	"github.com/agentrunner/agentrunner/agentout"
	"github.com/agentrunner/agentrunner/backlog"
	"github.com/agentrunner/agentrunner/config"
	"github.com/agentrunner/agentrunner/step/agent"
	"github.com/agentrunner/agentrunner/workspace"
)

// Store is what the kind reads: the run's item or task, the artifacts of
// the item and the task, and the decisions of earlier gates.
type Store interface {
	Run(ctx context.Context, id string) (*agentrunner.Run, error)
	Files(ctx context.Context, f agentrunner.FileFilter) ([]*agentrunner.StoredFile, error)
	StepRuns(ctx context.Context, f agentrunner.StepRunFilter) ([]*agentrunner.StepRun, error)
}

// Options are what a Kind needs; all are required but ToolNames.
type Options struct {
	Workspace *workspace.Workspace
	// Agents runs the chosen agent.
	Agents *agent.Kind
	Store  Store
	// ToolNames lists the registered tools, of which an agent gets those
	// of the MCP servers it names (by their prefix). Nil: no tool is
	// registered, and an agent that names a server cannot run.
	ToolNames func() []string
}

// Kind runs state steps.
type Kind struct {
	opts       Options
	thresholds agentout.Thresholds
}

var _ agentrunner.StepKind = (*Kind)(nil)

// Events of the kind.
const (
	// EventAgentChosen names the agent that runs a state and why.
	EventAgentChosen = "state.agent_chosen"
	// EventJudged says what the agent's output said of itself and
	// whether it waits for a person.
	EventJudged = backlog.EventJudged
)

// New returns the kind for a workspace with a backlog: section.
func New(opts Options) (*Kind, error) {
	ws := opts.Workspace
	if ws == nil || ws.StateAgents == nil || ws.Config.Backlog == nil || opts.Agents == nil || opts.Store == nil {
		return nil, errors.New("state step kind: a workspace with a backlog and its agents, the agent kind and a store are required")
	}
	t := agentout.Thresholds{PerState: map[string]int{}}
	for state, n := range ws.Config.Backlog.Confidence {
		if state == config.ConfidenceDefault {
			t.Default = n
		} else {
			t.PerState[state] = n
		}
	}
	return &Kind{opts: opts, thresholds: t}, nil
}

// Run runs one attempt of a state step.
func (k *Kind) Run(ctx context.Context, a *agentrunner.StepAttempt) (*agentrunner.StepResult, error) {
	s, ok := a.Step.Config.(*config.Step)
	if !ok || s == nil || s.Kind != config.StepState {
		return &agentrunner.StepResult{}, agentrunner.Fail(agentrunner.ClassConfig, "step %s: a state step's configuration is a state *config.Step, not %T", a.Step.ID, a.Step.Config)
	}
	sub, err := k.subject(ctx, a.Run)
	if err != nil {
		return &agentrunner.StepResult{}, err
	}
	def, why, err := k.choose(ctx, s.State, sub)
	if err != nil {
		return &agentrunner.StepResult{}, err
	}
	text, err := k.prompt(ctx, a, s.State, def, sub)
	if err != nil {
		return &agentrunner.StepResult{}, err
	}
	kind := workspace.OutputKind(def)
	assigned, err := k.agentFor(def)
	if err != nil {
		return &agentrunner.StepResult{}, err
	}
	res, data, err := k.opts.Agents.RunAssigned(ctx, a, agent.Assigned{Agent: assigned, Prompt: text, WorkDir: sub.workDir})
	res.Events = append([]*agentrunner.Event{k.event(a, def.ID, EventAgentChosen, agentrunner.LevelInfo, map[string]any{
		"state": s.State, "agent": def.ID, "variant": why.Variant, "why": why.Why, "workdir": sub.workDir,
	})}, res.Events...)
	if err != nil {
		return res, err
	}
	art, err := agentout.Parse(kind, data)
	if err != nil { // the contract passed it: only a changed parser gets here
		return res, agentrunner.Fail(agentrunner.ClassInvalidOutput, "%v", err)
	}
	k.judge(a, s.State, def.ID, art, res)
	return res, nil
}

// choose resolves the agent of state for the subject's repository.
func (k *Kind) choose(ctx context.Context, state string, sub *subject) (*agentdef.Agent, agentdef.Reason, error) {
	rc, err := sub.resolveContext(ctx)
	if err != nil {
		return nil, agentdef.Reason{}, agentrunner.Fail(agentrunner.ClassInternal, "list the files of %s to choose the agent of %s: %w", sub.ctx.RepoPath, state, err)
	}
	def, why, err := k.opts.Workspace.StateAgents.Resolve(state, rc)
	if err != nil {
		return nil, why, agentrunner.Fail(agentrunner.ClassConfig, "%v", err)
	}
	return def, why, nil
}

// judge records what the output says of itself and opens the gate when
// the agent asks a person, or is less confident than its state wants.
func (k *Kind) judge(a *agentrunner.StepAttempt, state, agentID string, art *agentout.Artifact, res *agentrunner.StepResult) {
	open, why := k.thresholds.Gate(state, art)
	details := map[string]any{"state": state, "agent": agentID, "confidence": art.Confidence, "gate": open, "why": why}
	if q := art.HumanInput; q != nil {
		details["question"] = q.Question
		if len(q.Options) > 0 {
			details["options"] = q.Options
		}
	}
	level := agentrunner.LevelInfo
	if open {
		level = agentrunner.LevelWarn
	}
	res.Events = append(res.Events, k.event(a, agentID, EventJudged, level, details))
	res.Wait = open
}

// agentFor is the workspace agent the agent kind runs for def: on the
// backlog's provider, writing <type>.md, checked by agentout, with the
// tools of the MCP servers def names.
func (k *Kind) agentFor(def *agentdef.Agent) (*workspace.Agent, error) {
	cfg := k.opts.Workspace.Config
	b := cfg.Backlog
	kind := workspace.OutputKind(def)
	ca := &config.Agent{
		Name: def.ID, Provider: cfg.BacklogProvider(), Timeout: b.Timeout, MaxTurns: def.MaxTurns,
		Output:      config.Output{File: string(kind) + ".md", MaxBytes: config.DefaultMaxArtifactBytes},
		RepairTurns: cfg.Defaults.RepairTurns, Model: cfg.Defaults.Model,
	}
	if p := cfg.Providers[ca.Provider]; ca.Model == "" && p != nil {
		ca.Model = p.Model
	}
	if ca.Timeout <= 0 {
		ca.Timeout = cfg.Defaults.Timeout
	}
	if ca.MaxTurns == 0 {
		ca.MaxTurns = max(b.MaxTurns, cfg.Defaults.MaxTurns)
	}
	tools, err := k.serverTools(def)
	ca.Tools = tools
	return &workspace.Agent{Agent: ca, Contract: contract{kind: kind}}, err
}

// CallsTools reports whether the backlog's agents run on a model provider,
// whose conversation calls the runner's tools. A mock agent calls none; a
// coding-agent CLI (the process provider) connects to the MCP servers of
// its own configuration.
func CallsTools(cfg *config.Config) bool {
	p := cfg.Providers[cfg.BacklogProvider()]
	return p != nil && (p.Kind == config.ProviderOpenAI || p.Kind == config.ProviderAnthropic)
}

// serverTools lists the registered tools of the MCP servers def names:
// those whose names carry a server's prefix. A server with none (it was
// not connected, or offers nothing this runner imported) is a
// configuration error, not an agent quietly without its tools.
func (k *Kind) serverTools(def *agentdef.Agent) ([]string, error) {
	cfg := k.opts.Workspace.Config
	if len(def.MCPServers) == 0 || !CallsTools(cfg) {
		return nil, nil
	}
	var names []string
	if k.opts.ToolNames != nil {
		names = k.opts.ToolNames()
	}
	var tools []string
	for _, server := range def.MCPServers {
		m := cfg.MCPServers[server]
		if m == nil {
			return nil, agentrunner.Fail(agentrunner.ClassConfig, "agent %s names MCP server %q, which the configuration does not declare", def.ID, server)
		}
		n := len(tools)
		for _, name := range names {
			if strings.HasPrefix(name, m.Prefix) {
				tools = append(tools, name)
			}
		}
		if len(tools) == n {
			return nil, agentrunner.Fail(agentrunner.ClassConfig, "agent %s names MCP server %q, but no tool of it is registered in this runner (prefix %q)", def.ID, server, m.Prefix)
		}
	}
	return tools, nil
}

// outputPath is where the agent kind asks a file-writing agent to write.
func outputPath(a *agentrunner.StepAttempt, def *agentdef.Agent) string {
	return filepath.Join(a.Dir, string(workspace.OutputKind(def))+".md")
}

func (k *Kind) event(a *agentrunner.StepAttempt, agentID, typ string, level agentrunner.Level, details map[string]any) *agentrunner.Event {
	return &agentrunner.Event{Timestamp: a.Attempt.StartedAt, Type: typ, CycleID: a.Run.ID, Step: a.Step.ID, Agent: agentID, Level: level, Details: details}
}

// onModel reports whether state agents run on a model provider, which
// answers with the artifact instead of writing a file.
func (k *Kind) onModel() bool {
	cfg := k.opts.Workspace.Config
	p := cfg.Providers[cfg.BacklogProvider()]
	return p != nil && (p.Kind == config.ProviderOpenAI || p.Kind == config.ProviderAnthropic)
}
