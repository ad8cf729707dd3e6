// Package toolbox builds the tool registry from configuration: each
// declared tool's built-in implementation, with the timeouts, retries and
// breaker the configuration gives it, and the tools of external MCP
// servers (FR-102/103). Builtin is the table of tool kinds: a new kind's
// package owns its settings type, and one entry there joins it to the
// configuration and to the runner.
package toolbox

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/agentrunner/agentrunner"
	"github.com/agentrunner/agentrunner/capsule"
	"github.com/agentrunner/agentrunner/config"
	"github.com/agentrunner/agentrunner/internal/childenv"
	"github.com/agentrunner/agentrunner/mcp"
	"github.com/agentrunner/agentrunner/memory"
	"github.com/agentrunner/agentrunner/subagent"
	"github.com/agentrunner/agentrunner/todo"
	"github.com/agentrunner/agentrunner/tool"
	"github.com/agentrunner/agentrunner/tool/bird"
	"github.com/agentrunner/agentrunner/tool/fstool"
	"github.com/agentrunner/agentrunner/tool/indicators"
	"github.com/agentrunner/agentrunner/tool/position"
	"github.com/agentrunner/agentrunner/tool/webfetch"
	"github.com/agentrunner/agentrunner/tool/websearch"
)

// Deps are what built-in tools need besides their configuration.
type Deps struct {
	// LookupEnv reads secrets (os.LookupEnv).
	LookupEnv func(string) (string, bool)
	// Account is the Execution Service client, nil when none is configured.
	Account position.AccountReader
	Now     func() time.Time
	// Kinds are the kinds of tool that can be built; nil: Builtin().
	Kinds Kinds
	// Capsules is the capsule store the capsule tools work on; nil: they
	// are built, and a call says the store is not open.
	Capsules agentrunner.CapsuleStore
	// Memory is the agents' memories the memory tools work on; nil: they
	// are built, and a call says the memories are not open.
	Memory *memory.Log
	// Todos is the store of the runs' to-do lists the to-do tools work on;
	// nil: they are built, and a call says the store is not open.
	Todos agentrunner.TodoStore
	// Subagents starts and awaits the sub-agent runs of subagent_run; it
	// is bound to the engine once that is built. Nil: the tool is built,
	// and a call says that sub-agents do not run in this process (a
	// process agent's tools over agentrunner mcp).
	Subagents *subagent.Launcher
	// Servers are MCP servers to connect even when no wanted tool comes
	// from them: spec 5's agents name servers, whose tools they all get.
	Servers []string
}

// Kind is one kind of tool: what its section in the configuration holds,
// how it is built and what it needs from the environment. Its package
// owns its settings; this table only joins them to the runner.
type Kind struct {
	// Config decodes and checks the kind's keys of a tool's section.
	Config config.ToolKind
	// Build makes a declared tool, whose Name is its key in tools.
	Build func(cfg *config.Config, t *config.Tool, d Deps) (tool.Spec, tool.Handler, error)
	// Needs lists the environment variables the tool cannot work without;
	// nil: none.
	Needs func(cfg *config.Config, t *config.Tool) []string
	// Programs lists the programs the tool runs, which must be on PATH;
	// nil: none.
	Programs func(cfg *config.Config, t *config.Tool) []Program
}

// Program is a program a tool runs, and how to install it.
type Program struct {
	Name    string
	Install string
}

// Kinds are tool kinds by name.
type Kinds map[string]Kind

// Builtin returns the kinds of tool agentrunner has: the one place a kind
// is registered.
func Builtin() Kinds {
	k := Kinds{
		websearch.Kind:  {Config: websearch.ToolKind(), Build: buildWebSearch, Needs: webSearchNeeds},
		webfetch.Kind:   {Config: webfetch.ToolKind(), Build: buildWebFetch},
		bird.Kind:       {Config: bird.ToolKind(), Build: buildBird, Programs: birdPrograms},
		position.Kind:   {Config: position.ToolKind(), Build: buildPosition, Needs: positionNeeds},
		indicators.Kind: {Config: indicators.ToolKind(), Build: buildIndicators},

		fstool.WriteName:  {Config: fstool.WriteToolKind(), Build: buildWrite},
		tool.ParallelName: {Config: config.ToolKind{Timeout: tool.ParallelTimeout}, Build: buildParallel},
		subagent.Kind:     {Config: subagent.ToolKind(), Build: buildSubagent},
	}
	capsuleKinds(k)
	k[memory.ToolAppend] = Kind{Config: config.ToolKind{Timeout: memory.AppendSpec.Timeout}, Build: buildMemory(memory.AppendSpec, (*memory.Log).AppendHandler)}
	k[memory.ToolSearch] = Kind{Config: config.ToolKind{Timeout: memory.SearchSpec.Timeout}, Build: buildMemory(memory.SearchSpec, (*memory.Log).SearchHandler)}
	k[todo.ToolRead] = Kind{Config: config.ToolKind{Timeout: todo.ReadSpec.Timeout}, Build: buildTodo(todo.ReadSpec, (*todo.Service).ReadHandler)}
	k[todo.ToolWrite] = Kind{Config: config.ToolKind{Timeout: todo.WriteSpec.Timeout}, Build: buildTodo(todo.WriteSpec, (*todo.Service).WriteHandler)}
	return k
}

// Config returns what configuration loading needs of the kinds.
func (k Kinds) Config() config.ToolKinds {
	out := config.ToolKinds{}
	for name, kind := range k {
		out[name] = kind.Config
	}
	return out
}

// Names lists the kinds, sorted.
func (k Kinds) Names() []string { return slices.Sorted(maps.Keys(k)) }

// Load reads the configuration at path with the kinds' settings.
func (k Kinds) Load(path string) (*config.Config, error) {
	return config.LoadWith(path, config.Options{ToolKinds: k.Config()})
}

// settingsOf returns a tool's settings as its kind's type: nil (the
// kind's defaults) when it has none, an error when they are of another
// kind (a configuration built in code).
func settingsOf[S config.ToolSettings](t *config.Tool) (S, error) {
	var zero S
	if t.Settings == nil {
		return zero, nil
	}
	s, ok := t.Settings.(S)
	if !ok {
		return zero, fmt.Errorf("tool %q: settings are %T, not %T", t.Name, t.Settings, zero)
	}
	return s, nil
}

func buildWebSearch(_ *config.Config, t *config.Tool, d Deps) (tool.Spec, tool.Handler, error) {
	s, err := settingsOf[*websearch.Settings](t)
	if err != nil {
		return tool.Spec{}, nil, err
	}
	return websearch.New(t, s, d.LookupEnv)
}

func webSearchNeeds(_ *config.Config, t *config.Tool) []string {
	s, _ := settingsOf[*websearch.Settings](t)
	return []string{s.KeyEnv()}
}

func buildWebFetch(_ *config.Config, t *config.Tool, d Deps) (tool.Spec, tool.Handler, error) {
	s, err := settingsOf[*webfetch.Settings](t)
	if err != nil {
		return tool.Spec{}, nil, err
	}
	return webfetch.New(t, s, d.LookupEnv)
}

func buildBird(_ *config.Config, t *config.Tool, d Deps) (tool.Spec, tool.Handler, error) {
	s, err := settingsOf[*bird.Settings](t)
	if err != nil {
		return tool.Spec{}, nil, err
	}
	if err := bird.Check(s); err != nil {
		return tool.Spec{}, nil, err
	}
	return bird.New(t, s, d.LookupEnv)
}

func birdPrograms(_ *config.Config, t *config.Tool) []Program {
	s, _ := settingsOf[*bird.Settings](t)
	return []Program{{Name: bird.Program(s), Install: bird.Install}}
}

func buildPosition(_ *config.Config, t *config.Tool, d Deps) (tool.Spec, tool.Handler, error) {
	if d.Account == nil {
		return tool.Spec{}, nil, errors.New("current_position reads the Execution Service: set execution_service.url")
	}
	s, err := settingsOf[*position.Settings](t)
	if err != nil {
		return tool.Spec{}, nil, err
	}
	return position.New(t, s, d.Account, d.Now)
}

// positionNeeds: the tool reads the Execution Service with its token.
func positionNeeds(cfg *config.Config, _ *config.Tool) []string {
	if cfg.ExecutionService.TokenEnv == "" {
		return nil
	}
	return []string{cfg.ExecutionService.TokenEnv}
}

// buildIndicators resolves data_dir against the configuration's directory.
func buildIndicators(cfg *config.Config, t *config.Tool, d Deps) (tool.Spec, tool.Handler, error) {
	s, err := settingsOf[*indicators.Settings](t)
	if err != nil || s == nil {
		return tool.Spec{}, nil, err
	}
	resolved := *s
	resolved.DataDir = cfg.Abs(s.DataDir)
	return indicators.New(t, &resolved, d.Now)
}

func buildWrite(_ *config.Config, t *config.Tool, _ Deps) (tool.Spec, tool.Handler, error) {
	s, err := settingsOf[*fstool.WriteSettings](t)
	if err != nil {
		return tool.Spec{}, nil, err
	}
	return fstool.NewWrite(t, s)
}

func buildParallel(_ *config.Config, t *config.Tool, _ Deps) (tool.Spec, tool.Handler, error) {
	return tool.NewParallel(t)
}

// named returns the tool under its key, which the constructor's spec
// takes (a configuration built in code may not have set Name).
func named(name string, t *config.Tool) *config.Tool {
	cp := *t
	cp.Name = name
	return &cp
}

// InUse returns the tools that agents able to call tools (model and process
// agents) may use: only these are built, so an offline workspace on mock
// agents needs no API key.
func InUse(cfg *config.Config) []string {
	seen := map[string]bool{}
	for _, a := range cfg.Agents {
		if a == nil {
			continue
		}
		if p := cfg.Providers[a.Provider]; p != nil && p.Kind != config.ProviderMock {
			for _, t := range a.Tools {
				seen[t] = true
			}
		}
	}
	// Never nil: nil asks Build for every tool.
	return append([]string{}, slices.Sorted(maps.Keys(seen))...)
}

// Box is a built registry with the MCP sessions behind it.
type Box struct {
	Registry *tool.Registry
	clients  []*mcp.Client
}

// Close ends the MCP sessions (and their server processes).
func (b *Box) Close() error {
	var errs []error
	for _, c := range b.clients {
		errs = append(errs, c.Close())
	}
	return errors.Join(errs...)
}

// Build builds the tools named in only (every declared tool and MCP server
// when only is nil). Every declared tool must have an implementation and a
// schema that compiles, used or not; a problem names the tool's key in the
// configuration. The error is config.Problems.
func Build(ctx context.Context, cfg *config.Config, only []string, d Deps) (*Box, error) {
	kinds := d.kinds()
	box := &Box{Registry: tool.NewRegistry()}
	var problems config.Problems
	add := func(key string, err error) {
		problems = append(problems, config.Problem{Where: cfg.Where(key), Key: key, Message: err.Error()})
	}
	wanted := func(name string) bool { return only == nil || slices.Contains(only, name) }
	check := tool.NewRegistry() // schemas of declared tools that are not built
	for _, name := range slices.Sorted(maps.Keys(cfg.Tools)) {
		t := cfg.Tools[name]
		key := "tools." + name
		if t == nil {
			continue // reported by the configuration's validation
		}
		kind, ok := kinds[t.Kind]
		if !ok {
			add(key+".kind", fmt.Errorf("no implementation of kind %q (built-in kinds: %s)", t.Kind, strings.Join(kinds.Names(), ", ")))
			continue
		}
		if !wanted(name) {
			if len(t.Parameters) > 0 {
				spec := tool.Spec{Name: name, Parameters: []byte(t.Parameters), Timeout: t.Timeout.D()}
				if err := check.Register(spec, notBuilt(name)); err != nil {
					add(key+".parameters", err)
				}
			}
			continue
		}
		spec, h, err := kind.Build(cfg, named(name, t), d)
		if err != nil {
			add(key, err)
			continue
		}
		if err := box.Registry.Register(spec, h); err != nil {
			add(key, err)
		}
	}
	for _, name := range slices.Sorted(maps.Keys(cfg.MCPServers)) {
		m := cfg.MCPServers[name]
		if m == nil || !usedServer(m, only) && !slices.Contains(d.Servers, name) {
			continue
		}
		if err := box.connect(ctx, m, d); err != nil {
			add("mcp_servers."+name, err)
		}
	}
	if len(problems) > 0 {
		box.Close()
		return nil, problems
	}
	return box, nil
}

// kinds returns the kinds to build with.
func (d Deps) kinds() Kinds {
	if d.Kinds == nil {
		return Builtin()
	}
	return d.Kinds
}

func notBuilt(name string) tool.Handler {
	return tool.HandlerFunc(func(context.Context, json.RawMessage) (string, error) {
		return "", fmt.Errorf("tool %s is not built in this process", name)
	})
}

// usedServer reports whether any wanted tool comes from the server.
func usedServer(m *config.MCPServer, only []string) bool {
	if only == nil {
		return true
	}
	for _, t := range only {
		if strings.HasPrefix(t, m.Prefix) {
			return true
		}
	}
	return false
}

func (b *Box) connect(ctx context.Context, m *config.MCPServer, d Deps) error {
	sc := mcp.ServerConfig{Name: m.Name, Command: m.Command, Env: childenv.Spec{Pass: m.Env.Pass, Set: m.Env.Set}, Lookup: d.LookupEnv,
		URL: m.URL, Prefix: m.Prefix, Tools: m.Tools, Timeout: m.Timeout.D()}
	if m.BearerEnv != "" {
		token, ok := d.LookupEnv(m.BearerEnv)
		if !ok || token == "" {
			return fmt.Errorf("environment variable %s is not set", m.BearerEnv)
		}
		sc.BearerToken = token
		name := m.BearerEnv
		sc.BearerFrom = func() string { v, _ := d.LookupEnv(name); return v } // a rotated token, from its next request
	}
	c, err := mcp.Connect(ctx, sc)
	if err != nil {
		return err
	}
	b.clients = append(b.clients, c)
	for _, imp := range c.Tools() {
		if err := b.Registry.Register(imp.Spec, imp.Handler); err != nil {
			return err
		}
	}
	return nil
}

// Info describes one tool for operators: its declaration, the agents that
// may use it and whether it can be built here.
type Info struct {
	Name   string
	Kind   string // a built-in kind, or "mcp:<server>"
	Spec   tool.Spec
	Agents []string
	// Err is why the tool cannot be built (a missing key, a server down).
	Err error
}

// Describe builds every declared tool and MCP server one by one and
// reports each, so one broken tool does not hide the others.
func Describe(ctx context.Context, cfg *config.Config, d Deps) []Info {
	users := map[string][]string{}
	for _, name := range slices.Sorted(maps.Keys(cfg.Agents)) {
		for _, t := range cfg.Agents[name].Tools {
			users[t] = append(users[t], name)
		}
	}
	var out []Info
	for _, name := range slices.Sorted(maps.Keys(cfg.Tools)) {
		t := cfg.Tools[name]
		info := Info{Name: name, Kind: t.Kind, Agents: users[name]}
		box, err := Build(ctx, cfg, []string{name}, d)
		if err != nil {
			info.Err = err
		} else {
			info.Spec, _ = box.Registry.Spec(name)
			box.Close()
		}
		out = append(out, info)
	}
	for _, name := range slices.Sorted(maps.Keys(cfg.MCPServers)) {
		m := cfg.MCPServers[name]
		box := &Box{Registry: tool.NewRegistry()}
		if err := box.connect(ctx, m, d); err != nil {
			out = append(out, Info{Name: m.Prefix + "*", Kind: "mcp:" + name, Err: err})
			continue
		}
		for _, spec := range box.Registry.Specs() {
			out = append(out, Info{Name: spec.Name, Kind: "mcp:" + name, Spec: spec, Agents: users[spec.Name]})
		}
		box.Close()
	}
	return out
}

// Needs returns the environment variables a tool cannot work without: its
// API key, the Execution Service token, an MCP server's bearer token. A
// process agent's tools run in the agent's environment (its CLI starts
// `agentrunner mcp`), so each must be passed to the agent.
func Needs(cfg *config.Config, kinds Kinds, name string) []string {
	if t := cfg.Tools[name]; t != nil {
		if kinds == nil {
			kinds = Builtin()
		}
		if k, ok := kinds[t.Kind]; ok && k.Needs != nil {
			return k.Needs(cfg, t)
		}
		return nil
	}
	for _, server := range slices.Sorted(maps.Keys(cfg.MCPServers)) {
		m := cfg.MCPServers[server]
		if m != nil && m.Prefix != "" && strings.HasPrefix(name, m.Prefix) && m.BearerEnv != "" {
			return []string{m.BearerEnv}
		}
	}
	return nil
}

// Programs returns the programs a declared tool runs (the bird CLI), for
// the hints of init: what must be on PATH before an agent may use it.
func Programs(cfg *config.Config, kinds Kinds, name string) []Program {
	t := cfg.Tools[name]
	if t == nil {
		return nil
	}
	if kinds == nil {
		kinds = Builtin()
	}
	if k, ok := kinds[t.Kind]; ok && k.Programs != nil {
		return k.Programs(cfg, t)
	}
	return nil
}

// capsuleKinds are the capsule tools, a kind each: a tool is declared as
// tools: {capsule_store: {kind: capsule_store}, …}.
func capsuleKinds(k Kinds) {
	for _, name := range capsule.Names {
		k[name] = Kind{Config: config.ToolKind{Timeout: 30 * time.Second}, Build: buildCapsule(name)}
	}
}

// buildCapsule builds the capsule tool of a kind on the store Deps gives.
// Without one (validate, which opens no store) the tool is built, and a
// call says that it has no store.
func buildCapsule(kind string) func(cfg *config.Config, t *config.Tool, d Deps) (tool.Spec, tool.Handler, error) {
	return func(cfg *config.Config, t *config.Tool, d Deps) (tool.Spec, tool.Handler, error) {
		var svc *capsule.Service
		if d.Capsules != nil {
			svc = capsule.NewService(d.Capsules, capsule.Options{MaxChars: cfg.Capsules.MaxChars, Clock: clockOf(d.Now)})
		}
		for _, ct := range capsule.Tools(svc, cfg.Name) {
			if ct.Spec.Name != kind {
				continue
			}
			spec, err := tool.FromConfig(ct.Spec, t)
			if err != nil || svc != nil {
				return spec, ct.Handler, err
			}
			return spec, unavailable(kind, "the capsule store is not open in this process"), nil
		}
		return tool.Spec{}, nil, fmt.Errorf("no capsule tool %q", kind)
	}
}

// clockOf is a Clock reading now (nil: the system clock).
func clockOf(now func() time.Time) agentrunner.Clock {
	if now == nil {
		return agentrunner.SystemClock{}
	}
	return funcClock(now)
}

type funcClock func() time.Time

func (f funcClock) Now() time.Time { return f() }

func (f funcClock) After(d time.Duration) <-chan time.Time { return time.After(d) }

// buildMemory builds a memory tool with the handler of the Log that Deps
// gives, or one that says the memories are not open.
func buildMemory(defaults tool.Spec, handler func(*memory.Log) tool.Handler) func(*config.Config, *config.Tool, Deps) (tool.Spec, tool.Handler, error) {
	return func(_ *config.Config, t *config.Tool, d Deps) (tool.Spec, tool.Handler, error) {
		spec, err := tool.FromConfig(defaults, t)
		switch {
		case err != nil:
			return tool.Spec{}, nil, err
		case d.Memory == nil:
			return spec, unavailable(defaults.Name, "the memories are not open in this process"), nil
		}
		return spec, handler(d.Memory), nil
	}
}

// buildTodo builds a to-do tool with the handler of a Service on the
// store Deps gives, or one that says the store is not open.
func buildTodo(defaults tool.Spec, handler func(*todo.Service) tool.Handler) func(*config.Config, *config.Tool, Deps) (tool.Spec, tool.Handler, error) {
	return func(_ *config.Config, t *config.Tool, d Deps) (tool.Spec, tool.Handler, error) {
		spec, err := tool.FromConfig(defaults, t)
		switch {
		case err != nil:
			return tool.Spec{}, nil, err
		case d.Todos == nil:
			return spec, unavailable(defaults.Name, "the store of the to-do lists is not open in this process"), nil
		}
		return spec, handler(todo.NewService(d.Todos, todo.Options{Clock: clockOf(d.Now)})), nil
	}
}

// buildSubagent builds subagent_run on the launcher Deps gives, or one
// that says sub-agents do not run in this process.
func buildSubagent(_ *config.Config, t *config.Tool, d Deps) (tool.Spec, tool.Handler, error) {
	s, err := settingsOf[*subagent.Settings](t)
	if err != nil {
		return tool.Spec{}, nil, err
	}
	spec, err := tool.FromConfig(subagent.Spec, t)
	switch {
	case err != nil:
		return tool.Spec{}, nil, err
	case s == nil || s.Pipeline == "":
		return tool.Spec{}, nil, fmt.Errorf("tool %q: pipeline is required: the pipeline whose runs are the sub-agents' runs", t.Name)
	case d.Subagents == nil:
		return spec, unavailable(spec.Name, "sub-agents run inside the runner (run, serve), and this process runs none: "+
			"a process agent's tools over agentrunner mcp cannot start them"), nil
	}
	return spec, d.Subagents.Handler(spec.Name, s.Pipeline, s.Parallel()), nil
}

// unavailable is the handler of a tool whose backing is not open here.
func unavailable(name, why string) tool.Handler {
	return tool.HandlerFunc(func(context.Context, json.RawMessage) (string, error) {
		return "", fmt.Errorf("%s: %s", name, why)
	})
}
