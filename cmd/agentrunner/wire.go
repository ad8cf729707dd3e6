package main

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"slices"
	"time"

	"github.com/agentrunner/agentrunner"
	"github.com/agentrunner/agentrunner/config"
	"github.com/agentrunner/agentrunner/engine"
	"github.com/agentrunner/agentrunner/execsvc"
	"github.com/agentrunner/agentrunner/llm"
	"github.com/agentrunner/agentrunner/llm/anthropic"
	"github.com/agentrunner/agentrunner/llm/openai"
	"github.com/agentrunner/agentrunner/metrics"
	"github.com/agentrunner/agentrunner/runtime/mock"
	"github.com/agentrunner/agentrunner/runtime/model"
	"github.com/agentrunner/agentrunner/runtime/process"
	"github.com/agentrunner/agentrunner/secrets"
	"github.com/agentrunner/agentrunner/sqlite"
	"github.com/agentrunner/agentrunner/step/execution"
	"github.com/agentrunner/agentrunner/step/stateagent"
	"github.com/agentrunner/agentrunner/subagent"
	"github.com/agentrunner/agentrunner/tool"
	"github.com/agentrunner/agentrunner/toolbox"
	"github.com/agentrunner/agentrunner/webhook"
	"github.com/agentrunner/agentrunner/workspace"
)

// loadConfig reads the configuration with the settings of the tool kinds
// this program builds.
func loadConfig(path string) (*config.Config, error) { return toolbox.Builtin().Load(path) }

// loadWorkspace reads the configuration and every file it names.
func loadWorkspace(path string) (*workspace.Workspace, error) {
	cfg, err := loadConfig(path)
	if err != nil {
		return nil, err
	}
	return workspace.Load(cfg)
}

// problem makes a located problem of an error about a configuration key.
func problem(cfg *config.Config, key string, err error) config.Problem {
	return config.Problem{Where: cfg.Where(key), Key: key, Message: err.Error()}
}

// usedProviders returns the providers some agent uses, sorted.
func usedProviders(cfg *config.Config) []string {
	used := map[string]bool{}
	for _, a := range cfg.Agents {
		if a != nil {
			used[a.Provider] = true
		}
	}
	if cfg.Backlog != nil {
		used[cfg.BacklogProvider()] = true // the state agents'
	}
	return slices.Sorted(maps.Keys(used))
}

// providerKeys reads the API keys of the model providers agents use. A
// provider with its own base URL (a local OpenAI-compatible server), from
// its base_url or from OPENAI_BASE_URL / ANTHROPIC_BASE_URL, may have none;
// otherwise a missing key is a problem naming the variable (FR-139).
func providerKeys(cfg *config.Config, lookupEnv func(string) (string, bool)) (map[string]string, config.Problems) {
	keys := map[string]string{}
	var problems config.Problems
	for _, name := range usedProviders(cfg) {
		p := cfg.Providers[name]
		if p == nil || (p.Kind != config.ProviderOpenAI && p.Kind != config.ProviderAnthropic) {
			continue
		}
		key, _ := lookupEnv(p.APIKeyEnv)
		if key == "" && baseURL(p, lookupEnv) == "" {
			problems = append(problems, problem(cfg, "providers."+name+".api_key_env",
				fmt.Errorf("%s: the %s provider needs its API key", missing(lookupEnv, p.APIKeyEnv), p.Kind)))
			continue
		}
		keys[name] = key
	}
	return keys, problems
}

// baseURL is the base URL a model provider's client will use, other than
// the vendor's: its base_url, else the variable its client reads (the
// clients read it themselves; this only tells whether one is set).
func baseURL(p *config.Provider, lookupEnv func(string) (string, bool)) string {
	if p.BaseURL != "" {
		return p.BaseURL
	}
	env := openai.BaseURLEnv
	if p.Kind == config.ProviderAnthropic {
		env = anthropic.BaseURLEnv
	}
	v, _ := lookupEnv(env)
	return v
}

// tellTurns makes the model runtimes tell onEvent each attempt's usage
// after each turn (eventModelTurn), for the live progress line.
func tellTurns(runtimes map[string]agentrunner.Runtime, onEvent func(*agentrunner.Event)) {
	if onEvent == nil {
		return
	}
	for _, rt := range runtimes {
		if m, ok := rt.(*model.Runtime); ok {
			m.OnTurn(func(t model.Turn) { onEvent(turnEvent(t)) })
		}
	}
}

// missing says why the secret named name is not set: where it was
// looked for, or the NAME_FILE that cannot be read.
func missing(lookupEnv func(string) (string, bool), name string) error {
	if path, ok := lookupEnv(name + secrets.FileSuffix); ok && path != "" {
		return fmt.Errorf("%s%s names %s, which cannot be read", name, secrets.FileSuffix, path)
	}
	return fmt.Errorf("environment variable %s is not set (nor %s%s, nor in the secrets file)", name, name, secrets.FileSuffix)
}

// secretFrom returns a function reading the secret named name at each
// call: what a client keeps instead of the value, so that a key rotated
// and reloaded is used from its next request on.
func secretFrom(lookupEnv func(string) (string, bool), name string) func() string {
	return func() string {
		v, _ := lookupEnv(name)
		return v
	}
}

// buildModel makes the LLM client of a model provider; it reads the key
// again at each request.
func buildModel(cfg *config.Config, name, key string, lookupEnv func(string) (string, bool)) (llm.Model, error) {
	p := cfg.Providers[name]
	keyFrom := secretFrom(lookupEnv, p.APIKeyEnv)
	if p.Kind == config.ProviderAnthropic {
		return anthropic.New(anthropic.Config{BaseURL: p.BaseURL, APIKey: key, KeyFrom: keyFrom, RequestTimeout: p.RequestTimeout.D()})
	}
	return openai.New(openai.Config{BaseURL: p.BaseURL, APIKey: key, KeyFrom: keyFrom, RequestTimeout: p.RequestTimeout.D()})
}

// buildRuntimes makes the runtime of every provider an agent uses, with the
// model providers' keys from providerKeys. tools may be nil to only check
// the providers (validate). The model runtimes checkpoint their agents'
// conversations in conversations, when it is not nil, after every turn,
// and an attempt after one that died resumes from the last.
func buildRuntimes(cfg *config.Config, tools *tool.Executor, clock agentrunner.Clock, keys map[string]string, lookupEnv func(string) (string, bool), conversations agentrunner.ConversationStore) (map[string]agentrunner.Runtime, config.Problems) {
	runtimes := map[string]agentrunner.Runtime{}
	var problems config.Problems
	for _, name := range usedProviders(cfg) {
		p := cfg.Providers[name]
		if p == nil {
			continue // reported by the configuration's validation
		}
		switch p.Kind {
		case config.ProviderMock:
			runtimes[name] = mock.New(mock.Options{Now: clock.Now})
		case config.ProviderProcess:
			problems = append(problems, processToolKeys(cfg, name)...)
			rt, err := process.New(processConfig(cfg, name, lookupEnv))
			if err != nil {
				problems = append(problems, problem(cfg, "providers."+name, err))
				continue
			}
			runtimes[name] = rt
		case config.ProviderOpenAI, config.ProviderAnthropic:
			key, ok := keys[name]
			if !ok {
				continue // its missing key is a problem of providerKeys
			}
			m, err := buildModel(cfg, name, key, lookupEnv)
			if err != nil {
				problems = append(problems, problem(cfg, "providers."+name, err))
				continue
			}
			current := secretFrom(lookupEnv, p.APIKeyEnv)
			rt := model.New(m, tools, key).SecretsFrom(func() []string { return []string{current()} })
			if conversations != nil {
				rt.Checkpoint(conversations)
			}
			runtimes[name] = rt
		}
	}
	return runtimes, problems
}

// processConfig is the runtime configuration of a process provider: its
// command, and the environment its agents get, the provider's and each
// agent's own, with the passed variables read through lookup (the
// runner's secrets) at each start.
func processConfig(cfg *config.Config, provider string, lookup func(string) (string, bool)) process.Config {
	p := cfg.Providers[provider]
	pc := process.Config{Command: p.Command, Env: process.Env(p.Env), KillGrace: p.KillGrace.D(), Agents: map[string]process.Env{}, Lookup: lookup}
	for name, a := range cfg.Agents {
		if a != nil && a.Provider == provider {
			pc.Agents[name] = process.Env(a.Env)
		}
	}
	return pc
}

// processToolKeys checks that each agent on a process provider is passed
// the keys its tools need: its CLI starts `agentrunner mcp`, which runs the
// tools in the agent's environment, so a key the agent is not passed would
// keep the server, and every tool of the agent, from starting.
func processToolKeys(cfg *config.Config, provider string) config.Problems {
	var problems config.Problems
	passed := cfg.Providers[provider].Env.Pass
	for _, name := range slices.Sorted(maps.Keys(cfg.Agents)) {
		a := cfg.Agents[name]
		if a == nil || a.Provider != provider {
			continue
		}
		for i, t := range a.Tools {
			for _, need := range toolbox.Needs(cfg, nil, t) {
				if !slices.Contains(passed, need) && !slices.Contains(a.Env.Pass, need) {
					problems = append(problems, problem(cfg, fmt.Sprintf("agents.%s.tools[%d]", name, i), fmt.Errorf(
						"%s needs %s, which this process agent's env does not pass: its tools run in its environment; "+
							"pass %s (which gives the agent the key too) or drop the tool", t, need, need)))
				}
			}
		}
	}
	return problems
}

// stateAgentServers are the MCP servers spec 5's agents name when they
// run on a model provider: they get every tool of those servers.
func stateAgentServers(ws *workspace.Workspace) []string {
	cfg := ws.Config
	if ws.StateAgents == nil || cfg.Backlog == nil || !stateagent.CallsTools(cfg) {
		return nil
	}
	seen := map[string]bool{}
	for _, a := range ws.StateAgents.Agents() {
		for _, s := range a.MCPServers {
			seen[s] = true
		}
	}
	return slices.Sorted(maps.Keys(seen))
}

// buildExec returns the Execution Service client, or nil when none is
// configured. A configured token variable must be set (FR-139).
func buildExec(cfg *config.Config, lookupEnv func(string) (string, bool)) (*execsvc.Client, error) {
	if cfg.ExecutionService.URL == "" {
		return nil, nil
	}
	var token string
	if name := cfg.ExecutionService.TokenEnv; name != "" {
		token, _ = lookupEnv(name)
		if token == "" {
			return nil, config.Problems{problem(cfg, "execution_service.token_env", missing(lookupEnv, name))}
		}
	}
	c, err := execsvc.NewClient(cfg.ExecutionService.URL, token, cfg.ExecutionService.RequestTimeout.D())
	if err != nil {
		return nil, config.Problems{problem(cfg, "execution_service.url", err)}
	}
	if name := cfg.ExecutionService.TokenEnv; name != "" {
		c.TokenFrom(secretFrom(lookupEnv, name))
	}
	return c, nil
}

// toolSecrets reads the secrets of the tools and MCP servers in use, so
// they are redacted wherever a call would show them.
func toolSecrets(cfg *config.Config, lookupEnv func(string) (string, bool)) []string {
	var secrets []string
	for _, name := range slices.Sorted(maps.Keys(cfg.Tools)) {
		for _, need := range toolbox.Needs(cfg, nil, name) {
			if v, _ := lookupEnv(need); v != "" {
				secrets = append(secrets, v)
			}
		}
	}
	for _, m := range cfg.MCPServers {
		if v, _ := lookupEnv(m.BearerEnv); m.BearerEnv != "" && v != "" {
			secrets = append(secrets, v)
		}
	}
	if name := cfg.ExecutionService.TokenEnv; name != "" {
		if v, _ := lookupEnv(name); v != "" {
			secrets = append(secrets, v)
		}
	}
	return secrets
}

// runner is a workspace opened for running: locked, with its store, its
// tools and its engine.
type runner struct {
	ws    *workspace.Workspace
	store *sqlite.Store
	lock  *workspace.Lock
	box   *toolbox.Box
	tools *tool.Executor
	// engine runs every pipeline of the workspace.
	engine *engine.Engine
	// es is the Execution Service, nil when none is configured.
	es *execsvc.Client
	// dispatcher delivers webhooks and safe-mode orders from the outbox.
	dispatcher *engine.Dispatcher
	// secrets resolves every secret the clients read at each request; a
	// reload refreshes it, then runs onRefresh (serve's authenticator).
	secrets   *secrets.Resolver
	onRefresh []func() error
	// metrics are derived from every event of this process.
	metrics *metrics.Metrics
	log     *slog.Logger
}

func (r *runner) Close() {
	if r.box != nil {
		r.box.Close()
	}
	if r.store != nil {
		r.store.Close()
	}
	r.lock.Release()
}

// openRunner locks the workspace, opens its store, builds the tools the
// agents may call and the runtimes of the providers they use, and the
// engine. exec overrides the Execution Service (the demo's mock).
func openRunner(ctx context.Context, ws *workspace.Workspace, clock agentrunner.Clock, log *slog.Logger, onEvent func(*agentrunner.Event)) (_ *runner, err error) {
	cfg := ws.Config
	res, err := secrets.ForConfig(cfg, os.LookupEnv)
	if err != nil {
		return nil, failureError(err)
	}
	lookupEnv := res.Lookup
	es, err := buildExec(cfg, lookupEnv)
	if err != nil {
		return nil, err
	}
	lock, err := ws.Layout.Acquire()
	if err != nil {
		return nil, failureError(err)
	}
	r := &runner{ws: ws, lock: lock, es: es, log: log, secrets: res}
	observe := func(ev *agentrunner.Event) {
		r.metrics.Observe(ev)
		if onEvent != nil {
			onEvent(ev)
		}
	}
	defer func() {
		if err != nil {
			r.Close()
		}
	}()
	if r.store, err = openStore(ctx, cfg); err != nil {
		return nil, err
	}
	r.metrics = metrics.New(metrics.Options{
		Pipeline: cfg.Name, Logger: log,
		Tools: func() map[string]tool.Stats { return r.tools.Stats() },
		OutboxBacklog: func(ctx context.Context) (int, error) {
			pending, err := r.store.Outbox(ctx, agentrunner.OutboxFilter{Due: time.Now().AddDate(100, 0, 0)})
			return len(pending), err
		},
		WaitingGates: func(ctx context.Context) (int, error) {
			counts, err := r.store.RunCounts(ctx)
			return counts.WaitingGates, err
		},
		Store: r.store, Pipelines: slices.Collect(maps.Keys(cfg.Graphs())), PipelineNames: r.pipelineNames,
		Build: metricsBuild(),
	})
	keys, problems := providerKeys(cfg, lookupEnv)
	if len(problems) > 0 {
		return nil, problems
	}
	// The sub-agents' launcher is bound to the engine once it is built,
	// after the tools.
	subagents := subagent.NewLauncher()
	deps := toolbox.Deps{LookupEnv: lookupEnv, Now: clock.Now, Capsules: r.store, Todos: r.store, Subagents: subagents,
		Servers: stateAgentServers(ws)}
	if es != nil {
		deps.Account = es
	}
	if deps.Memory, err = memoryLog(ws, r.store, clock); err != nil {
		return nil, err
	}
	if r.box, err = toolbox.Build(ctx, cfg, toolbox.InUse(cfg), deps); err != nil {
		return nil, err
	}
	known := append(toolSecrets(cfg, lookupEnv), slices.Collect(maps.Values(keys))...)
	record := engine.EventRecorder(r.store, log)
	// The tools' calls are told to onEvent too, once recorded: a demo
	// follows a lead's to-do list by them. Secrets rotated since are
	// redacted too.
	current := func() []string {
		return append(toolSecrets(cfg, lookupEnv), res.Values(providerKeyNames(r.liveConfig())...)...)
	}
	r.tools = tool.NewExecutor(r.box.Registry, tool.Options{Clock: clock, Secrets: known, SecretsFrom: current, Record: func(ev *agentrunner.Event) {
		record(ev)
		r.metrics.Observe(ev)
		if onEvent != nil {
			onEvent(ev)
		}
	}})
	runtimes, problems := buildRuntimes(cfg, r.tools, clock, keys, lookupEnv, r.store)
	if len(problems) > 0 {
		return nil, problems
	}
	tellTurns(runtimes, onEvent)
	self, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("find the agentrunner executable for process agents' MCP server: %w", err)
	}
	opts := engine.Options{
		Workspace: ws, Store: r.store, Runtimes: runtimes, Clock: clock, Logger: log, OnEvent: observe, MCPCommand: self,
		Reload: func() (*workspace.Workspace, error) {
			if err := r.refreshSecrets(); err != nil {
				return nil, err
			}
			return loadWorkspace(cfg.Path)
		},
		BuildRuntimes: func(next *config.Config) (map[string]agentrunner.Runtime, error) {
			return r.rebuildRuntimes(next, clock, lookupEnv, onEvent)
		},
		ToolNames: r.box.Registry.Names,
	}
	if es != nil {
		opts.Exec = es
	}
	if r.engine, err = engine.New(opts); err != nil {
		return nil, err
	}
	subagents.Bind(r.engine, r.store)
	deliver, err := deliverers(cfg, es, lookupEnv)
	if err != nil {
		return nil, err
	}
	r.dispatcher = &engine.Dispatcher{Store: r.store, Clock: clock, Log: log, Deliver: deliver, OnEvent: observe}
	return r, nil
}

// rebuildRuntimes builds the runtimes of a configuration read again by a
// reload, as openRunner built the first ones: on the same tool executor,
// conversation store and secrets, telling onEvent of each model turn.
// The tool registry was built at the start, so an agent may only take
// tools it holds; a missing key or an unknown tool refuses the reload.
func (r *runner) rebuildRuntimes(cfg *config.Config, clock agentrunner.Clock, lookupEnv func(string) (string, bool), onEvent func(*agentrunner.Event)) (map[string]agentrunner.Runtime, error) {
	problems := unregisteredTools(cfg, r.box.Registry)
	keys, kp := providerKeys(cfg, lookupEnv)
	runtimes, bp := buildRuntimes(cfg, r.tools, clock, keys, lookupEnv, r.store)
	if problems = slices.Concat(problems, kp, bp); len(problems) > 0 {
		return nil, problems
	}
	tellTurns(runtimes, onEvent)
	return runtimes, nil
}

// unregisteredTools lists the tools agents that call tools (those not on
// the mock provider, as toolbox.InUse) name but the registry does not
// hold: the registry is built once, from the tools in use at the start.
func unregisteredTools(cfg *config.Config, reg *tool.Registry) config.Problems {
	var problems config.Problems
	for _, name := range slices.Sorted(maps.Keys(cfg.Agents)) {
		a := cfg.Agents[name]
		if a == nil || cfg.Providers[a.Provider] == nil || cfg.Providers[a.Provider].Kind == config.ProviderMock {
			continue
		}
		for i, t := range a.Tools {
			if _, ok := reg.Spec(t); !ok {
				problems = append(problems, problem(cfg, fmt.Sprintf("agents.%s.tools[%d]", name, i), fmt.Errorf(
					"tool %s is not registered: the tools are built when the runner starts, from those agents use then; using it needs a restart", t)))
			}
		}
	}
	return problems
}

// pipelineNames names the pipelines the engine runs now (a reload may
// add or remove some), or those of the configuration the runner opened
// before the engine is built.
func (r *runner) pipelineNames() []string {
	if r.engine == nil {
		return slices.Collect(maps.Keys(r.ws.Config.Graphs()))
	}
	return slices.Collect(maps.Keys(r.engine.Scheduler().Pipelines()))
}

// liveConfig is the configuration the engine runs with now, or the one
// the runner opened before the engine is built.
func (r *runner) liveConfig() *config.Config {
	if r.engine == nil {
		return r.ws.Config
	}
	return r.engine.Config()
}

// refreshSecrets reads the secrets again (the secrets file, NAME_FILE
// files) for a reload, and rebuilds what checks them (serve's
// authenticator). When one refuses the new values, the old ones stay and
// the reload is refused. It never logs a value.
func (r *runner) refreshSecrets() error {
	undo, err := r.secrets.Refresh()
	if err != nil {
		return fmt.Errorf("reading the secrets again: %w", err)
	}
	for _, f := range r.onRefresh {
		if err := f(); err != nil {
			undo()
			return fmt.Errorf("the secrets read again are refused, the old ones stay: %w", err)
		}
	}
	r.log.Info("secrets read again: clients use them from their next request")
	return nil
}

// providerKeyNames are the variables of the model providers' keys.
func providerKeyNames(cfg *config.Config) []string {
	var names []string
	for _, name := range usedProviders(cfg) {
		if p := cfg.Providers[name]; p != nil && p.APIKeyEnv != "" {
			names = append(names, p.APIKeyEnv)
		}
	}
	return names
}

// run runs the engine until ctx ends (nil) or it fails.
func (r *runner) run(ctx context.Context) error { return r.engine.Run(ctx) }

// wake tells the engine that a command was written.
func (r *runner) wake() { r.engine.Wake() }

// outboxAlert adds an operators' webhook notification to the change that
// records what it is about: the outbox delivers it, signed, with retries.
// One that breaks the webhook contract is logged and dropped: the event
// the change records says the same.
func outboxAlert(log *slog.Logger) func(*agentrunner.Change, webhook.Event) {
	return func(ch *agentrunner.Change, ev webhook.Event) {
		body, err := ev.Body()
		if err != nil {
			log.Error("building a webhook notification", "id", ev.ID, "error", err)
			return
		}
		ch.Outbox = append(ch.Outbox, &agentrunner.OutboxMessage{
			Key: ev.ID, Kind: agentrunner.OutboxWebhook, CycleID: ev.CycleID, Payload: body, CreatedAt: ev.Time,
		})
	}
}

// deliverers are how the outbox reaches its receivers: the operators'
// webhook and the Execution Service's safe mode.
func deliverers(cfg *config.Config, es *execsvc.Client, lookupEnv func(string) (string, bool)) (map[string]engine.Deliver, error) {
	deliver := map[string]engine.Deliver{}
	if w := cfg.Escalation.Webhook; w.URL != "" {
		secret, _ := lookupEnv(w.SecretEnv)
		if secret == "" {
			return nil, config.Problems{problem(cfg, "escalation.webhook.secret_env", missing(lookupEnv, w.SecretEnv))}
		}
		sender, err := webhook.NewSender(w.URL, []byte(secret), w.Timeout.D())
		if err != nil {
			return nil, config.Problems{problem(cfg, "escalation.webhook", err)}
		}
		current := secretFrom(lookupEnv, w.SecretEnv)
		sender.SecretFrom(func() []byte { return []byte(current()) })
		deliver[agentrunner.OutboxWebhook] = func(ctx context.Context, m *agentrunner.OutboxMessage, now time.Time) ([]byte, error) {
			var head struct{ Kind string }
			if err := json.Unmarshal(m.Payload, &head); err != nil {
				return nil, fmt.Errorf("stored webhook %s: %w", m.Key, err)
			}
			return nil, sender.Deliver(ctx, m.Key, head.Kind, m.Payload, now)
		}
	}
	if es != nil {
		deliver[execution.OutboxSafeMode] = func(ctx context.Context, m *agentrunner.OutboxMessage, now time.Time) ([]byte, error) {
			req, err := execsvc.ParseSafeModeRequest(m.Payload)
			if err != nil {
				return nil, fmt.Errorf("stored safe-mode order %s: %w", m.Key, err)
			}
			state, err := es.EnterSafeMode(ctx, m.Key, req)
			if err != nil {
				return nil, err
			}
			return json.Marshal(state)
		}
	}
	return deliver, nil
}

// background runs what goes on beside the engine loop until ctx ends: the
// outbox's deliveries, the strategy's expiry check, the heartbeats to the
// Execution Service, the archive of old runs and the watchdog.
func (r *runner) background(ctx context.Context) {
	cfg := r.ws.Config
	go r.dispatcher.Run(ctx, outboxInterval)
	if cfg.ExecutionStep() != "" {
		go r.watchStrategy(ctx)
	}
	if r.es != nil && cfg.ExecutionService.HeartbeatInterval > 0 {
		watcher := execution.NewWatcher(execution.WatcherOptions{Logger: r.log})
		go watcher.Heartbeats(ctx, r.es, cfg.Name, cfg.ExecutionService.HeartbeatInterval.D())
	}
	if keep := cfg.Events.Retention.D(); keep > 0 {
		go r.pruneHistory(ctx, keep)
	}
	go r.archiveInBackground(ctx)
	go engine.Watchdog(ctx, r.engine, cfg.Watchdog.StallGrace.D(), watchdogInterval, func(late time.Duration) {
		r.log.Error("the engine loop is stalled: exiting so that a supervisor restarts the runner", "late", late.String())
		os.Exit(exitStalled)
	})
}

// watchStrategy checks the validity of the strategy handed over last, now
// and every strategyInterval, until ctx ends.
func (r *runner) watchStrategy(ctx context.Context) {
	for {
		if _, err := r.engine.CheckStrategy(ctx); err != nil && ctx.Err() == nil {
			r.log.Error("checking the strategy's validity", "error", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(strategyInterval):
		}
	}
}

// pruneHistory prunes what is older than keep, now and every
// pruneInterval.
func (r *runner) pruneHistory(ctx context.Context, keep time.Duration) {
	for {
		r.prune(ctx, time.Now().Add(-keep), keep)
		select {
		case <-ctx.Done():
			return
		case <-time.After(pruneInterval):
		}
	}
}

// prunedKinds are the stored files events.retention prunes with the
// events: the prompts and validation reports, kept for an operator's
// inspection as the events are. Stored artifacts are kept.
var prunedKinds = []agentrunner.FileKind{agentrunner.FilePrompt, agentrunner.FileValidation}

// prune deletes the events and the stored prompts and validation reports
// made before before; keep is the retention, for the log.
func (r *runner) prune(ctx context.Context, before time.Time, keep time.Duration) {
	if n, err := r.store.PruneEvents(ctx, before); err != nil && ctx.Err() == nil {
		r.log.Error("pruning old events", "error", err)
	} else if n > 0 {
		r.log.Info("pruned old events", "deleted", n, "retention", keep.String())
	}
	if n, err := r.store.PruneFiles(ctx, before, prunedKinds...); err != nil && ctx.Err() == nil {
		r.log.Error("pruning old stored prompts and validation reports", "error", err)
	} else if n > 0 {
		r.log.Info("pruned old stored prompts and validation reports", "deleted", n, "retention", keep.String())
	}
}

// Intervals of the background work.
const (
	outboxInterval   = 5 * time.Second
	pruneInterval    = time.Hour
	strategyInterval = 30 * time.Second
	watchdogInterval = 10 * time.Second
)

// exitStalled is the exit status of a runner the watchdog stopped.
const exitStalled = 3

// flush delivers what the outbox holds and checks the strategy once, for
// run --once, which has no background work. After a shutdown it does
// not: the outbox keeps what is due for the next start.
func (r *runner) flush(ctx context.Context) {
	if ctx.Err() != nil {
		return
	}
	if r.ws.Config.ExecutionStep() != "" {
		if _, err := r.engine.CheckStrategy(ctx); err != nil {
			r.log.Error("checking the strategy's validity", "error", err)
		}
	}
	if _, err := r.dispatcher.DeliverDue(ctx); err != nil {
		r.log.Error("delivering the outbox", "error", err)
	}
}

// memoryLog is the agents' memories of a workspace on its store.
var memoryLog = engine.MemoryLog
