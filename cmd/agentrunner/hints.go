package main

import (
	"fmt"
	"io"
	"maps"
	"net/url"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"

	"github.com/agentrunner/agentrunner/config"
	"github.com/agentrunner/agentrunner/llm/anthropic"
	"github.com/agentrunner/agentrunner/llm/openai"
	"github.com/agentrunner/agentrunner/toolbox"
)

// need is one thing a workspace needs from the machine before it runs: an
// environment variable or a program on PATH, with what needs it.
type need struct {
	name    string
	program bool
	// users are what needs it ("the openai provider's API key", "tool
	// web_search"), agents the agents that use those.
	users, agents map[string]bool
	// note says how to get it, or when it is not needed.
	note string
}

// needs are a workspace's needs, by name.
type needs map[string]*need

func (ns needs) add(name string, program bool, user, agent, note string) {
	n := ns[name]
	if n == nil {
		n = &need{name: name, program: program, users: map[string]bool{}, agents: map[string]bool{}, note: note}
		ns[name] = n
	}
	n.users[user] = true
	if agent != "" {
		n.agents[agent] = true
	}
}

// workspaceNeeds derives what the configuration needs from the machine:
// the keys and programs of the providers its agents use, of the tools
// those agents may call (only model and process agents call tools), of
// its MCP servers and of its Execution Service. It reads the written
// configuration rather than a list per example, so it stays true when the
// configuration changes.
func workspaceNeeds(cfg *config.Config) needs {
	ns := needs{}
	for _, name := range slices.Sorted(maps.Keys(cfg.Agents)) {
		if a := cfg.Agents[name]; a != nil {
			agentNeeds(ns, cfg, name, a.Provider, a.Tools)
		}
	}
	if cfg.Backlog != nil {
		agentNeeds(ns, cfg, "", cfg.BacklogProvider(), nil)
		ns.add("git", true, "the backlog's task worktrees", "", "")
	}
	for _, name := range slices.Sorted(maps.Keys(cfg.MCPServers)) {
		if m := cfg.MCPServers[name]; m != nil {
			if len(m.Command) > 0 {
				ns.add(m.Command[0], true, "MCP server "+name, "", "")
			}
			if m.BearerEnv != "" {
				ns.add(m.BearerEnv, false, "MCP server "+name+"'s bearer token", "", "")
			}
		}
	}
	if es := cfg.ExecutionService; es.URL != "" && es.TokenEnv != "" {
		ns.add(es.TokenEnv, false, "the Execution Service's bearer token (execution_service.token_env)", "", "")
	}
	return ns
}

// agentNeeds adds what an agent on provider needs: its provider's key or
// command, and, when it can call tools, its tools' keys and programs.
func agentNeeds(ns needs, cfg *config.Config, agent, provider string, tools []string) {
	p := cfg.Providers[provider]
	if p == nil || p.Kind == config.ProviderMock {
		return // mock agents call no tools and need nothing
	}
	switch p.Kind {
	case config.ProviderOpenAI, config.ProviderAnthropic:
		user := fmt.Sprintf("the %s provider's API key", provider)
		ns.add(p.APIKeyEnv, false, user, agent, keyNote(p))
	case config.ProviderProcess:
		if len(p.Command) > 0 {
			user := fmt.Sprintf("the %s provider's command", provider)
			ns.add(p.Command[0], true, user, agent, fmt.Sprintf("it gets only the variables providers.%s.env passes", provider))
		}
	}
	for _, t := range tools {
		for _, v := range toolbox.Needs(cfg, nil, t) {
			ns.add(v, false, "tool "+t, agent, "")
		}
		for _, prog := range toolbox.Programs(cfg, nil, t) {
			ns.add(prog.Name, true, "tool "+t, agent, "install: "+prog.Install)
		}
	}
}

// keyNote says when a model provider's key is not needed: when it talks
// to its own server, which may take none.
func keyNote(p *config.Provider) string {
	if p.BaseURL != "" {
		return "optional: base_url " + p.BaseURL + " may take none"
	}
	if p.Kind == config.ProviderAnthropic {
		return "not needed when " + anthropic.BaseURLEnv + " names a gateway that takes none"
	}
	return "not needed when " + openai.BaseURLEnv + " names a local OpenAI-compatible server (Ollama, vLLM, llama.cpp) that takes none"
}

// printNeeds says what the workspace at dir needs before its first run:
// each variable and program, and how to have an Execution Service offline.
// A configuration that does not load says so and prints nothing else:
// validate names its problems.
func printNeeds(out io.Writer, dir string) {
	cfg, err := loadConfig(filepath.Join(dir, config.FileName))
	if err != nil {
		fmt.Fprintf(out, "agentrunner validate names what the workspace needs (it does not load as written: %v)\n", err)
		return
	}
	ns := workspaceNeeds(cfg)
	if len(ns) == 0 {
		fmt.Fprintln(out, "no key or program is needed: the agents run offline")
	} else {
		fmt.Fprintln(out, "before the first run, set or install (agentrunner validate checks each):")
		for _, name := range slices.Sorted(maps.Keys(ns)) {
			fmt.Fprintf(out, "  %s\n", ns[name].line())
		}
	}
	if hint := execServiceHint(cfg); hint != "" {
		fmt.Fprintln(out, hint)
	}
}

// line is a need as printed: what it is, what needs it, for which agents.
func (n *need) line() string {
	var b strings.Builder
	if n.program {
		fmt.Fprintf(&b, "program %s on PATH", n.name)
		if _, err := exec.LookPath(n.name); err != nil {
			b.WriteString(" (not found)")
		}
	} else {
		fmt.Fprintf(&b, "variable %s", n.name)
	}
	fmt.Fprintf(&b, ": %s", strings.Join(slices.Sorted(maps.Keys(n.users)), ", "))
	if len(n.agents) > 0 {
		fmt.Fprintf(&b, " (agents %s)", strings.Join(slices.Sorted(maps.Keys(n.agents)), ", "))
	}
	if n.note != "" {
		b.WriteString("; " + n.note)
	}
	return b.String()
}

// execServiceHint says how to have the Execution Service a pipeline's
// execution steps hand strategies to, offline; "" when none is used.
func execServiceHint(cfg *config.Config) string {
	url := cfg.ExecutionService.URL
	if url == "" || !usesExecution(cfg) {
		return ""
	}
	cmd := "agentrunner execsvc mock"
	if host := hostOf(url); host != defaultMockListen {
		cmd += " --listen " + host
	}
	return fmt.Sprintf("the execute step hands strategies to the Execution Service at %s (execution_service.url): offline, run `%s` in another terminal first", url, cmd)
}

// usesExecution reports whether some pipeline has an execution step.
func usesExecution(cfg *config.Config) bool {
	pipelines := append([]*config.Pipeline{&cfg.Pipeline}, slices.Collect(maps.Values(cfg.Pipelines))...)
	for _, p := range pipelines {
		if p == nil {
			continue
		}
		for _, s := range p.Steps {
			if s != nil && s.Kind == config.StepExecution {
				return true
			}
		}
	}
	return false
}

// hostOf is the host:port of a URL, "" if it has none.
func hostOf(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return ""
	}
	return u.Host
}
