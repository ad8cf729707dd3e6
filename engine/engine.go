// Package engine runs a workspace's pipelines: the learning loop
// (pipeline:) and the graphs of pipelines:, all on one scheduler, with the
// agent, execution, gate and capsule step kinds. It wires the scheduler to
// the workspace (its layout, mailboxes, runtimes and Execution Service),
// runs one cycle of the loop for run --once, and answers what the API and
// the CLI ask of the loop: its status, its configuration, its strategy.
//
// The scheduler is the only writer of pipeline state; every change is one
// transaction in the store. On start it resumes every unfinished run where
// it stopped (FR-002/003).
package engine

import (
	"context"
	"errors"
	"fmt"
	"github.com/agentrunner/agentrunner/archive"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/agentrunner/agentrunner"
	capsules "github.com/agentrunner/agentrunner/capsule"
	"github.com/agentrunner/agentrunner/config"
	"github.com/agentrunner/agentrunner/document"
	"github.com/agentrunner/agentrunner/internal/eventlog"
	"github.com/agentrunner/agentrunner/internal/heartbeat"
	"github.com/agentrunner/agentrunner/mailbox"
	"github.com/agentrunner/agentrunner/memory"
	"github.com/agentrunner/agentrunner/scheduler"
	"github.com/agentrunner/agentrunner/step/agent"
	capsulestep "github.com/agentrunner/agentrunner/step/capsule"
	"github.com/agentrunner/agentrunner/step/execution"
	"github.com/agentrunner/agentrunner/step/gate"
	"github.com/agentrunner/agentrunner/step/stateagent"
	"github.com/agentrunner/agentrunner/step/tasks"
	"github.com/agentrunner/agentrunner/view"
	"github.com/agentrunner/agentrunner/workspace"
	"github.com/agentrunner/agentrunner/worktree"
)

// ExecutionService is what the execution steps need of the Execution
// Service.
type ExecutionService = execution.Service

// Options wires an engine.
type Options struct {
	Workspace *workspace.Workspace
	Store     agentrunner.Store
	// Runtimes runs agents, by provider name.
	Runtimes map[string]agentrunner.Runtime
	// BuildRuntimes, if set, builds the runtimes of a configuration read
	// again, so that a reload may change providers, agents and defaults:
	// attempts that start after it run on the new runtimes, while running
	// ones keep theirs. An error refuses the reload. nil: such a reload
	// needs a restart.
	BuildRuntimes func(cfg *config.Config) (map[string]agentrunner.Runtime, error)
	// ToolNames, if set, lists the tools registered in the runtimes' tool
	// registry: spec 5's agents get the tools of the MCP servers they name.
	ToolNames func() []string
	// Exec is the Execution Service; required when a pipeline has an
	// execution step.
	Exec ExecutionService
	// Clock defaults to the system clock.
	Clock agentrunner.Clock
	// Logger receives every event as a structured log line; default discards.
	Logger *slog.Logger
	// OnEvent, if set, is called with each event once it is committed.
	OnEvent func(*agentrunner.Event)
	// MCPCommand is the agentrunner executable that process agents start
	// as their MCP server (`agentrunner mcp`); empty: no MCP for them.
	MCPCommand string
	// Reload reads the workspace again, for an operator's reload; nil:
	// reloads are refused.
	Reload func() (*workspace.Workspace, error)
	// Faults, if set, is asked before each of the agent step kind's file
	// operations with the operation's name ("write prompt", "read
	// artifact" …); an error it returns is that operation's error, as if
	// the system had returned it. It is for tests, to cause failures such
	// as EMFILE that are hard to cause for real.
	Faults func(op string) error
	// BeforeViews, if set, is called after each commit that has views to
	// write, before they are written (scheduler.Options.BeforeViews): a
	// test stops the process there.
	BeforeViews func()
}

// Engine runs the pipelines of one workspace.
type Engine struct {
	opts  Options
	store agentrunner.Store
	clock agentrunner.Clock
	log   *slog.Logger
	// sched runs every pipeline on its schedule (Run); active is the one
	// running now (sched, or RunOnce's), which Wake wakes.
	sched  *scheduler.Scheduler
	active atomic.Pointer[scheduler.Scheduler]
	// viewsChecked: a scheduler of this engine checked the views at its
	// start; later ones (run --once, cycle after cycle) need not, as
	// nothing crashed in between.
	viewsChecked atomic.Bool
	// views writes the views of committed artifacts and the mailbox
	// files in the background, for every scheduler and kind of the engine.
	views *view.Writer
	// cfgMu guards ws, cfg, boxes and runtimes, which a reload replaces.
	cfgMu    sync.RWMutex
	ws       *workspace.Workspace
	cfg      *config.Config
	boxes    *mailbox.Mailboxes
	runtimes map[string]agentrunner.Runtime
	// watcher watches the validity of the strategy handed over.
	watcher *execution.Watcher
	// callbacks wakes execution steps waiting between polls (Wake).
	callbacks *broadcast
	// ended is told of each run that ends or halts (RunOnce).
	endedMu sync.Mutex
	ended   func(*agentrunner.Event)
}

// New checks the options and returns an engine.
func New(opts Options) (*Engine, error) {
	if opts.Workspace == nil || opts.Store == nil {
		return nil, errors.New("engine: a workspace and a store are required")
	}
	cfg := opts.Workspace.Config
	if err := checkRuntimes(cfg, opts.Runtimes); err != nil {
		return nil, fmt.Errorf("engine: %w", err)
	}
	e := &Engine{opts: opts, store: opts.Store, clock: opts.Clock, log: opts.Logger, ws: opts.Workspace, cfg: cfg, runtimes: opts.Runtimes, callbacks: newBroadcast(), views: view.NewWriter()}
	if e.clock == nil {
		e.clock = agentrunner.SystemClock{}
	}
	if e.log == nil {
		e.log = slog.New(slog.DiscardHandler)
	}
	var err error
	if e.boxes, err = mailbox.New(e.ws.Layout.Mailboxes(), cfg.Mailbox.MaxMessages); err != nil {
		return nil, err
	}
	e.watcher = execution.NewWatcher(execution.WatcherOptions{Store: e.store, Clock: e.clock, Logger: e.log, Commit: e.commit, Alert: e.alert})
	if e.sched, err = e.scheduler(cfg.Graphs()); err != nil {
		return nil, err
	}
	return e, nil
}

// scheduler builds a scheduler of pipelines on the current workspace.
func (e *Engine) scheduler(pipelines map[string]*agentrunner.Pipeline) (*scheduler.Scheduler, error) {
	return e.schedulerWith(pipelines, e.reload)
}

// schedulerWith is scheduler with the reload it applies, when the engine
// can reload.
func (e *Engine) schedulerWith(pipelines map[string]*agentrunner.Pipeline, reload func() (*scheduler.Reloaded, error)) (*scheduler.Scheduler, error) {
	ws, cfg := e.workspace()
	e.cfgMu.RLock()
	boxes, runtimes := e.boxes, e.runtimes
	e.cfgMu.RUnlock()
	kinds, err := e.kindsOn(ws, boxes, runtimes, pipelines)
	if err != nil {
		return nil, err
	}
	opts := scheduler.Options{
		Store: e.store, Pipelines: pipelines, Kinds: kinds, Clock: e.clock, Logger: e.log, OnEvent: e.observe,
		MaxAttempts: cfg.Scheduler.MaxConcurrentAttempts, MaxInterruptions: cfg.Scheduler.MaxInterruptions,
		RunDir: func(pipeline, id string) string {
			if pipeline == cfg.Name && cfg.HasLoop() {
				return ws.Layout.Cycle(id)
			}
			return ws.Layout.Run(pipeline, id)
		},
		AttemptDir:  ws.Layout.Attempt,
		ArchivePath: func(pipeline, id string) string { return archive.Path(ws.Layout.History(), pipeline, id) },
		Alert:       e.alert, Inject: e.inject, BeforeViews: e.opts.BeforeViews,
		ViewsChecked: &e.viewsChecked, Views: e.views,
		Mailboxes: boxes, Agents: slices.Sorted(maps.Keys(cfg.Agents)),
		// A reload may change the grace: it is read when a shutdown begins.
		ShutdownGrace: func() time.Duration { return e.Config().Shutdown.Grace.D() },
		Heartbeat:     heartbeat.File{Path: ws.Layout.Heartbeat()},
	}
	if opts.Followers, err = e.followers(pipelines); err != nil {
		return nil, err
	}
	if e.opts.Reload != nil {
		opts.Reload = reload
	}
	return scheduler.New(opts)
}

// followers keep the documents of the pipelines that have one.
func (e *Engine) followers(pipelines map[string]*agentrunner.Pipeline) (map[string]agentrunner.RunFollower, error) {
	out := map[string]agentrunner.RunFollower{}
	for name, p := range pipelines {
		if p.Document == nil {
			continue
		}
		f, err := document.New(*p.Document, e.store)
		if err != nil {
			return nil, err
		}
		out[name] = f
	}
	return out, nil
}

// checkRuntimes makes sure every agent's provider has a runtime.
func checkRuntimes(cfg *config.Config, runtimes map[string]agentrunner.Runtime) error {
	for _, name := range slices.Sorted(maps.Keys(cfg.Agents)) {
		if a := cfg.Agents[name]; a != nil && runtimes[a.Provider] == nil {
			return fmt.Errorf("agent %q uses provider %q, which has no runtime", name, a.Provider)
		}
	}
	return nil
}

// kindsOn are the step kinds of the workspace: agent, gate and capsule
// always, execution when a pipeline has an execution step (it needs the
// Execution Service). The agent kind runs on runtimes: an attempt keeps
// the kind it started with, hence its runtime, across a reload.
func (e *Engine) kindsOn(ws *workspace.Workspace, boxes *mailbox.Mailboxes, runtimes map[string]agentrunner.Runtime, pipelines map[string]*agentrunner.Pipeline) (map[string]agentrunner.StepKind, error) {
	agents, err := e.agentKind(ws, boxes, runtimes)
	if err != nil {
		return nil, err
	}
	caps, err := e.capsuleKind(ws)
	if err != nil {
		return nil, err
	}
	kinds := map[string]agentrunner.StepKind{
		agentrunner.KindAgent: agents,
		agentrunner.KindGate:  &gate.Kind{Notify: ws.Config.Escalation.Webhook.URL != "", Clock: e.clock},
		config.StepCapsule:    caps,
	}
	if err := e.backlogKinds(ws, agents, kinds); err != nil {
		return nil, err
	}
	for _, p := range pipelines {
		for _, st := range p.Steps {
			if st.Kind != agentrunner.KindExecution || kinds[st.Kind] != nil {
				continue
			}
			if e.opts.Exec == nil {
				return nil, fmt.Errorf("engine: step %q of pipeline %s needs the Execution Service, which is not configured", st.ID, p.Name)
			}
			if kinds[st.Kind], err = e.executionKind(ws, agents); err != nil {
				return nil, err
			}
		}
	}
	return kinds, nil
}

// backlogKinds adds the state and tasks step kinds of spec 5's agent
// pipeline to kinds, for a workspace with a backlog.
func (e *Engine) backlogKinds(ws *workspace.Workspace, agents *agent.Kind, kinds map[string]agentrunner.StepKind) error {
	if ws.Config.Backlog == nil {
		return nil
	}
	states, err := stateagent.New(stateagent.Options{Workspace: ws, Agents: agents, Store: e.store, ToolNames: e.opts.ToolNames})
	if err != nil {
		return err
	}
	tk, err := tasks.New(tasks.Options{Config: ws.Config, Starter: e, Store: e.store, Worktrees: worktree.Git{}})
	if err != nil {
		return err
	}
	kinds[config.StepState], kinds[config.StepTasks] = states, tk
	return nil
}

// agentKind is the agent step kind on ws, boxes and runtimes.
func (e *Engine) agentKind(ws *workspace.Workspace, boxes *mailbox.Mailboxes, runtimes map[string]agentrunner.Runtime) (*agent.Kind, error) {
	mem, err := MemoryLog(ws, e.store, e.clock)
	if err != nil {
		return nil, err
	}
	return agent.New(agent.Options{
		Workspace: ws, Mailboxes: boxes, Runtimes: runtimes, Store: e.store, Clock: e.clock, Logger: e.log,
		OnEvent: e.opts.OnEvent, MCPCommand: e.opts.MCPCommand, Faults: e.opts.Faults, Views: e.views, Memory: mem,
	})
}

// capsuleKind is the capsule step kind on ws: it stores capsules in the
// engine's store, under the workspace's size cap.
func (e *Engine) capsuleKind(ws *workspace.Workspace) (*capsulestep.Kind, error) {
	svc := capsules.NewService(e.store, capsules.Options{MaxChars: ws.Config.Capsules.MaxChars, Clock: e.clock})
	return capsulestep.New(capsulestep.Options{Config: ws.Config, Store: e.store, Capsules: svc, Clock: e.clock})
}

// executionKind is the execution step kind on ws; it delivers its
// outcome to mailboxes through the agent kind, and waits between polls
// until a callback wakes it.
func (e *Engine) executionKind(ws *workspace.Workspace, agents *agent.Kind) (*execution.Kind, error) {
	return execution.New(execution.Options{
		Workspace: ws, Store: e.store, Service: e.opts.Exec, Clock: e.clock, Logger: e.log,
		Commit: e.commit, Sleep: e.callbacks.sleep(e.clock), Deliver: agents.Deliver, Views: e.views,
	})
}

// workspace returns the current workspace and its configuration.
func (e *Engine) workspace() (*workspace.Workspace, *config.Config) {
	e.cfgMu.RLock()
	defer e.cfgMu.RUnlock()
	return e.ws, e.cfg
}

// Config returns the configuration the engine runs with now (a reload
// replaces it), for readers in other goroutines such as the API.
func (e *Engine) Config() *config.Config {
	_, cfg := e.workspace()
	return cfg
}

// Workspace returns the workspace the engine runs with now (a reload
// replaces it), for readers in other goroutines such as the dashboard,
// which checks artifacts against their agents' output contracts.
func (e *Engine) Workspace() *workspace.Workspace {
	ws, _ := e.workspace()
	return ws
}

// Mailboxes are the agents' mailboxes as the engine keeps them now: a
// reload that changes mailbox.max_messages replaces them, and the API
// shows what the engine keeps, not what it kept when it started.
func (e *Engine) Mailboxes() *mailbox.Mailboxes {
	e.cfgMu.RLock()
	defer e.cfgMu.RUnlock()
	return e.boxes
}

// Scheduler is the scheduler Run runs, for the API to await commands.
func (e *Engine) Scheduler() *scheduler.Scheduler { return e.sched }

// Run runs every pipeline on its schedule until ctx ends; then it returns
// nil. A context ended with agentrunner.ErrShutdown shuts down: running
// steps may finish within shutdown.grace, then they are interrupted and
// recorded as shut down, to start again at once at the next start. Any
// other end leaves running steps to be found interrupted by the next
// start, as a crash does. Any other error means the engine cannot go on
// (the store failed) and the process should exit so a supervisor
// restarts it.
func (e *Engine) Run(ctx context.Context) error {
	e.active.Store(e.sched)
	return e.sched.Run(ctx)
}

// Wake makes the engine look at new commands at once (an operator's
// override, an Execution Service callback) instead of at its next poll:
// the API calls it after writing a command.
func (e *Engine) Wake() {
	if s := e.active.Load(); s != nil {
		s.Wake()
	}
	e.callbacks.wake()
}

// Hurry cuts the grace of a shutdown short (a second signal): the running
// steps are interrupted at once.
func (e *Engine) Hurry() {
	if s := e.active.Load(); s != nil {
		s.Hurry()
	}
}

// RequestReload asks the engine to read its configuration again (SIGHUP,
// the file watcher): it writes a reload command, which the running
// scheduler applies between two passes as an operator's reload, with the
// same checks, and wakes it. operator names who asked, in the audit log.
func (e *Engine) RequestReload(ctx context.Context, operator, reason string) error {
	cmd := &agentrunner.Command{Kind: agentrunner.CommandReload, Operator: operator, CreatedAt: e.clock.Now(), Args: map[string]any{"reason": reason}}
	if err := e.store.AddCommand(ctx, cmd); err != nil {
		return fmt.Errorf("asking for a reload: %w", err)
	}
	e.Wake()
	return nil
}

// observe reports a committed event.
func (e *Engine) observe(ev *agentrunner.Event) {
	if e.opts.OnEvent != nil {
		e.opts.OnEvent(ev)
	}
	e.endedMu.Lock()
	ended := e.ended
	e.endedMu.Unlock()
	if ended != nil {
		ended(ev)
	}
}

// commit applies a change made outside the scheduler (the execution
// step's hand-off, the strategy watcher's alerts), then logs and reports
// its events.
func (e *Engine) commit(ctx context.Context, ch *agentrunner.Change) error {
	if err := e.store.Apply(ctx, ch); err != nil {
		return fmt.Errorf("commit state change: %w", err)
	}
	for _, ev := range ch.Events {
		eventlog.Write(e.log, ev)
		e.observe(ev)
	}
	return nil
}

// EventRecorder returns a function that commits an event on its own and
// logs it: for events that happen while an attempt runs, outside its
// transaction, such as tool calls. A store that fails is logged, not
// fatal: the call itself already happened.
func EventRecorder(store agentrunner.Store, log *slog.Logger) func(*agentrunner.Event) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return func(ev *agentrunner.Event) {
		if err := store.Apply(context.Background(), &agentrunner.Change{Events: []*agentrunner.Event{ev}}); err != nil {
			log.Error("recording an event", "event_type", ev.Type, "error", err)
		}
		eventlog.Write(log, ev)
	}
}

// MemoryLog is the agents' memories of a workspace on its store: the
// memory tools, the agent kind, the API and the CLI all use one of these.
func MemoryLog(ws *workspace.Workspace, store agentrunner.MemoryStore, clock agentrunner.Clock) (*memory.Log, error) {
	return memory.NewLog(store, memory.LogOptions{
		Path:     ws.Layout.Memory,
		Template: func(agent string) ([]byte, error) { return ws.Memory(agent), nil },
		Clock:    clock,
	})
}
