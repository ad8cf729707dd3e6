// Package agent is the agent step kind: one attempt of an agent step
// resolves the agent's inputs, assembles its prompt, runs it on its
// provider's runtime within the attempt's time limit, checks the artifact
// against its contract and hands it, with the prompt and the step's
// mailbox messages, to the scheduler, which commits them with the
// outcome and then writes their files. The scheduler runs every agent
// step through it.
package agent

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/agentrunner/agentrunner"
	"github.com/agentrunner/agentrunner/config"
	"github.com/agentrunner/agentrunner/internal/fileop"
	"github.com/agentrunner/agentrunner/mailbox"
	"github.com/agentrunner/agentrunner/memory"
	"github.com/agentrunner/agentrunner/view"
	"github.com/agentrunner/agentrunner/workspace"
)

// The kind's own file operations, by the names that the fault hook
// (Options.Faults) and the resource.exhausted event give them.
const (
	OpMemory       = "create memory"
	OpMCPConfig    = "write MCP configuration"
	OpPrompt       = "write prompt"
	OpReadArtifact = "read artifact"
	// OpMailbox checks the agent's mailbox file against the store, and
	// rewrites it, before the agent reads it.
	OpMailbox = "check mailbox"
)

// Store is what the kind reads of the store: earlier runs and their
// stored artifacts for inputs and for a skipped step's fallback, the run's attempts for its
// token budget, and the tool calls a process agent's MCP server committed.
type Store interface {
	Cycles(ctx context.Context, f agentrunner.CycleFilter) ([]*agentrunner.Cycle, error)
	Runs(ctx context.Context, f agentrunner.RunFilter) ([]*agentrunner.Run, error)
	// Run gives a run by id: a sub-agent's run's ancestors, whose root's
	// memory/ folder it writes in.
	Run(ctx context.Context, id string) (*agentrunner.Run, error)
	Attempts(ctx context.Context, cycleID string) ([]*agentrunner.Attempt, error)
	Events(ctx context.Context, f agentrunner.EventFilter) ([]*agentrunner.Event, error)
	// Files gives the stored artifacts that the files agents read are
	// views of.
	Files(ctx context.Context, f agentrunner.FileFilter) ([]*agentrunner.StoredFile, error)
	// Mailbox gives the messages an agent's mailbox file is a view of.
	Mailbox(ctx context.Context, agent string) ([][]byte, error)
}

// Options wires the kind. A reload builds a new Kind with the new
// workspace and mailboxes; a Kind never changes.
type Options struct {
	// Workspace holds the agents, their files and the layout.
	Workspace *workspace.Workspace
	// Mailboxes are the agents' mailboxes, sized by the configuration:
	// they make the step's deposits, and check the agent's mailbox file
	// against the store before it runs.
	Mailboxes *mailbox.Mailboxes
	// Runtimes runs agents, by provider name.
	Runtimes map[string]agentrunner.Runtime
	Store    Store
	// Views, if set, writes views in the background: the kind settles
	// the views an agent is about to read (view.Writer.Settle).
	Views *view.Writer
	// Memory, if set, is the agents' memory log: before an agent reads a
	// memory file, the entries the file lacks are added to it.
	Memory *memory.Log
	// Clock defaults to the system clock.
	Clock agentrunner.Clock
	// Logger defaults to discarding.
	Logger *slog.Logger
	// OnEvent, if set, is given the tool calls a process agent made
	// through its MCP server, which that server committed itself.
	OnEvent func(*agentrunner.Event)
	// MCPCommand is the executable process agents start as their MCP
	// server; empty: no MCP for them.
	MCPCommand string
	// Faults, if set, is asked before each of the kind's file operations
	// with its name (OpPrompt …); an error it returns is that operation's
	// error, as if the system had returned it. It is for tests.
	Faults func(op string) error
	// Busy, if set, is told before the runtime runs how long the attempt
	// may take from now (its time limit and the provider's kill grace),
	// for a watchdog.
	Busy func(d time.Duration)
}

// Kind runs the attempts of agent steps.
type Kind struct {
	opts  Options
	ws    *workspace.Workspace
	cfg   *config.Config
	clock agentrunner.Clock
	log   *slog.Logger
}

var _ agentrunner.StepKind = (*Kind)(nil)

// New returns the kind for opts; Workspace, Mailboxes, Runtimes and Store
// are required.
func New(opts Options) (*Kind, error) {
	if opts.Workspace == nil || opts.Mailboxes == nil || opts.Store == nil {
		return nil, errors.New("agent step kind: a workspace, mailboxes and a store are required")
	}
	k := &Kind{opts: opts, ws: opts.Workspace, cfg: opts.Workspace.Config, clock: opts.Clock, log: opts.Logger}
	if k.clock == nil {
		k.clock = agentrunner.SystemClock{}
	}
	if k.log == nil {
		k.log = slog.New(slog.DiscardHandler)
	}
	return k, nil
}

// Run runs one attempt of an agent step whose Config is its *config.Step.
// The result, with its events, comes back even when the attempt failed.
func (k *Kind) Run(ctx context.Context, a *agentrunner.StepAttempt) (*agentrunner.StepResult, error) {
	at := &attempt{k: k, sa: a, res: &agentrunner.StepResult{}}
	if err := at.resolve(); err != nil {
		return at.res, err
	}
	if err := at.prepare(ctx); err != nil {
		return at.res, err
	}
	if err := at.run(ctx); err != nil {
		return at.res, err
	}
	data, spans, err := at.accept()
	if err != nil {
		return at.res, err
	}
	err = k.deliver(at.res, &delivery{run: a.Run, dir: a.RunDir, step: at.step, data: data, spans: spans})
	return at.res, err
}

// Assigned is an agent that a kind of its own chose for one attempt,
// with the prompt it assembled: spec 5's state agents. The agent step
// runs it as it runs a configured agent (its runtime, time limit, MCP
// tools, output check and commit), but reads no mailbox, inputs or
// template for it.
type Assigned struct {
	Agent *workspace.Agent
	// Prompt is the whole prompt.
	Prompt string
	// WorkDir, if set, is the folder the agent works in (a task's git
	// worktree) instead of the attempt's folder.
	WorkDir string
}

// RunAssigned runs one attempt of a step with an assigned agent, and
// returns the accepted artifact's bytes with the result.
func (k *Kind) RunAssigned(ctx context.Context, a *agentrunner.StepAttempt, as Assigned) (*agentrunner.StepResult, []byte, error) {
	at := &attempt{k: k, sa: a, res: &agentrunner.StepResult{}, assigned: &as}
	if err := at.resolve(); err != nil {
		return at.res, nil, err
	}
	if err := at.prepare(ctx); err != nil {
		return at.res, nil, err
	}
	if err := at.run(ctx); err != nil {
		return at.res, nil, err
	}
	data, _, err := at.accept()
	return at.res, data, err
}

// attempt is one run of Kind.Run: what it resolved and what it produced.
type attempt struct {
	k     *Kind
	sa    *agentrunner.StepAttempt
	step  *config.Step
	agent *workspace.Agent
	inv   *agentrunner.Invocation
	res   *agentrunner.StepResult
	// inMemory: the agent's runtime is an OutputReturner, so the attempt
	// makes no file before its commit; returned is what the agent returned.
	inMemory bool
	returned []byte
	// assigned, if set, is the agent and prompt another kind chose.
	assigned *Assigned
}

// resolve finds the step's configuration and its agent.
func (at *attempt) resolve() error {
	s, ok := at.sa.Step.Config.(*config.Step)
	if !ok || s == nil {
		return agentrunner.Fail(agentrunner.ClassConfig, "step %s: an agent step's configuration is a *config.Step, not %T", at.sa.Step.ID, at.sa.Step.Config)
	}
	a := at.k.ws.Agents[s.Agent]
	if at.assigned != nil {
		a = at.assigned.Agent
	}
	if a == nil {
		return agentrunner.Fail(agentrunner.ClassConfig, "step %s: agent %q is not in the workspace", s.ID, s.Agent)
	}
	if at.k.opts.Runtimes[a.Provider] == nil {
		return agentrunner.Fail(agentrunner.ClassConfig, "step %s: agent %s uses provider %q, which has no runtime", s.ID, a.Name, a.Provider)
	}
	_, at.inMemory = at.k.opts.Runtimes[a.Provider].(agentrunner.OutputReturner)
	at.step, at.agent = s, a
	return nil
}

// timeout is the attempt's time limit: the one it was given, else the
// step's own.
func (at *attempt) timeout() time.Duration {
	if at.sa.Timeout > 0 {
		return at.sa.Timeout
	}
	return at.k.cfg.StepTimeout(at.step)
}

// run runs the agent on its provider's runtime within the time limit.
func (at *attempt) run(ctx context.Context) error {
	k, inv := at.k, at.inv
	var lastEvent int64 // a child's tool calls are its events after this one
	if inv.MCPConfig != "" {
		lastEvent = k.lastEventID(ctx)
	}
	runCtx, cancel := context.WithTimeout(ctx, inv.Timeout)
	defer cancel()
	if k.opts.Busy != nil {
		k.opts.Busy(inv.Timeout + k.cfg.Providers[at.agent.Provider].KillGrace.D())
	}
	res, err := k.opts.Runtimes[at.agent.Provider].Run(runCtx, inv)
	if inv.MCPConfig != "" {
		k.reportChildToolCalls(ctx, at.sa.Run, at.step.ID, lastEvent)
	}
	if res != nil {
		at.res.ExitCode, at.res.Usage = res.ExitCode, res.Usage
		at.returned = res.Output
	}
	if err != nil && errors.Is(runCtx.Err(), context.DeadlineExceeded) && ctx.Err() == nil && agentrunner.ClassOf(err) != agentrunner.ClassTimeout {
		err = agentrunner.Fail(agentrunner.ClassTimeout, "agent timed out after %s: %v", inv.Timeout, err)
	}
	return err
}

// fileOp does one of the kind's file operations, named op, unless the
// fault hook fails it first.
func (k *Kind) fileOp(op string, fn func() error) error {
	return fileop.Do(k.opts.Faults, op, fn)
}

// event makes an event of the run; step, when set, names the step and
// its agent.
func (k *Kind) event(run *agentrunner.Run, step *config.Step, typ string, level agentrunner.Level, details map[string]any) *agentrunner.Event {
	ev := &agentrunner.Event{Timestamp: k.clock.Now(), Type: typ, CycleID: run.ID, Level: level, Details: details}
	if step != nil {
		ev.Step, ev.Agent = step.ID, step.Agent
	}
	return ev
}

func (at *attempt) event(step *config.Step, typ string, level agentrunner.Level, details map[string]any) {
	at.res.Events = append(at.res.Events, at.k.event(at.sa.Run, step, typ, level, details))
}
