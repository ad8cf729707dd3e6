// Package toolbox builds the tool registry from configuration: each
// declared tool's built-in implementation, with the timeouts, retries and
// breaker the configuration gives it, and the tools of external MCP
// servers (FR-102/103).
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

	"github.com/agentrunner/agentrunner/config"
	"github.com/agentrunner/agentrunner/internal/childenv"
	"github.com/agentrunner/agentrunner/mcp"
	"github.com/agentrunner/agentrunner/tool"
	"github.com/agentrunner/agentrunner/tool/bird"
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
}

type builder func(cfg *config.Tool, d Deps) (tool.Spec, tool.Handler, error)

// builtins are the implementations a declared tool's kind can name.
var builtins = map[string]builder{
	websearch.Kind: func(c *config.Tool, d Deps) (tool.Spec, tool.Handler, error) { return websearch.New(c, d.LookupEnv) },
	webfetch.Kind:  func(c *config.Tool, d Deps) (tool.Spec, tool.Handler, error) { return webfetch.New(c, d.LookupEnv) },
	bird.Kind: func(c *config.Tool, d Deps) (tool.Spec, tool.Handler, error) {
		if err := bird.Check(c); err != nil {
			return tool.Spec{}, nil, err
		}
		return bird.New(c)
	},
	position.Kind: func(c *config.Tool, d Deps) (tool.Spec, tool.Handler, error) {
		if d.Account == nil {
			return tool.Spec{}, nil, errors.New("current_position reads the Execution Service: set execution_service.url")
		}
		return position.New(c, d.Account, d.Now)
	},
	indicators.Kind: func(c *config.Tool, d Deps) (tool.Spec, tool.Handler, error) { return indicators.New(c, d.Now) },
}

// resolve makes the paths a tool's configuration names absolute, relative
// to the configuration file, and names the tool after its key, which the
// constructor's spec takes (a configuration built in code may not have
// set Name).
func resolve(cfg *config.Config, name string, t *config.Tool) *config.Tool {
	resolved := *t
	resolved.Name = name
	resolved.DataDir = cfg.Abs(t.DataDir)
	return &resolved
}

// Kinds lists the built-in tool kinds.
func Kinds() []string { return slices.Sorted(maps.Keys(builtins)) }

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
		build, ok := builtins[t.Kind]
		if !ok {
			add(key+".kind", fmt.Errorf("no implementation of kind %q (built-in kinds: %s)", t.Kind, strings.Join(Kinds(), ", ")))
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
		spec, h, err := build(resolve(cfg, name, t), d)
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
		if m == nil || !usedServer(m, only) {
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
	sc := mcp.ServerConfig{Name: m.Name, Command: m.Command, Env: childenv.Spec{Pass: m.Env.Pass, Set: m.Env.Set}, URL: m.URL, Prefix: m.Prefix, Tools: m.Tools, Timeout: m.Timeout.D()}
	if m.BearerEnv != "" {
		token, ok := d.LookupEnv(m.BearerEnv)
		if !ok || token == "" {
			return fmt.Errorf("environment variable %s is not set", m.BearerEnv)
		}
		sc.BearerToken = token
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
func Needs(cfg *config.Config, name string) []string {
	if t := cfg.Tools[name]; t != nil {
		var needs []string
		switch {
		case t.APIKeyEnv != "":
			needs = append(needs, t.APIKeyEnv)
		case t.Kind == websearch.Kind:
			needs = append(needs, websearch.DefaultAPIKeyEnv)
		}
		if t.Kind == position.Kind && cfg.ExecutionService.TokenEnv != "" {
			needs = append(needs, cfg.ExecutionService.TokenEnv)
		}
		return needs
	}
	for _, server := range slices.Sorted(maps.Keys(cfg.MCPServers)) {
		m := cfg.MCPServers[server]
		if m != nil && m.Prefix != "" && strings.HasPrefix(name, m.Prefix) && m.BearerEnv != "" {
			return []string{m.BearerEnv}
		}
	}
	return nil
}
