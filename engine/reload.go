package engine

import (
	"bytes"
	"errors"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strings"

	"github.com/agentrunner/agentrunner"
	"github.com/agentrunner/agentrunner/config"
	"github.com/agentrunner/agentrunner/scheduler"
	"go.yaml.in/yaml/v3"
)

// EventReloaded: an operator reloaded the configuration and its files.
const EventReloaded = scheduler.EventReloaded

// maxReloadProblems bounds the problems a refused reload lists.
const maxReloadProblems = 5

// reload reads the workspace again for an operator's reload command,
// which the scheduler applies between two passes: the configuration file
// and every file it names are read again and, when they are valid and
// change only what a running engine can take, replace the current ones.
// What can change: identity prompts, tools.md, the memory template, the
// content of output templates and schemas (each attempt's invocation
// carries its contract), the schedule, timeouts, retries, escalation
// policies, the mailbox size and budgets; the pipelines' graphs (steps,
// edges, routes, pipelines added or removed: runs in flight finish on the
// graph they began on, the scheduler says how); and, when the engine can
// build runtimes (Options.BuildRuntimes), providers, defaults and agents
// (their provider, model, sampling, turns, inputs, env, and which
// registered tools they use): new runtimes are built for them, and
// attempts that start from here on run on them while running ones finish
// on the old. Anything else (agents added or removed, the learning loop
// added or removed, the tool registry of tools and mcp_servers, servers,
// the state) was built into the running process and needs a restart;
// such a reload is refused with the list, and nothing changes. So is one
// whose runtimes cannot be built (a provider's key missing, a tool not
// registered), and one that changes a pipeline's document.
func (e *Engine) reload() (*scheduler.Reloaded, error) {
	ws, err := e.opts.Reload()
	if err != nil {
		return nil, errors.New("the configuration is not valid: " + summarize(err))
	}
	cur := e.Config()
	if restart := e.needsRestart(cur, ws.Config); len(restart) > 0 {
		return nil, errors.New("these changes need a restart: " + strings.Join(restart, ", "))
	}
	runtimes, err := e.runtimesFor(cur, ws.Config)
	if err != nil {
		return nil, err
	}
	boxes := e.Mailboxes()
	if ws.Config.Mailbox.MaxMessages != cur.Mailbox.MaxMessages {
		if boxes, err = boxes.WithMax(ws.Config.Mailbox.MaxMessages); err != nil {
			return nil, err
		}
	}
	pipelines := ws.Config.Graphs()
	kinds, err := e.kindsOn(ws, boxes, runtimes, pipelines)
	if err != nil {
		return nil, err
	}
	followers, err := e.followers(pipelines)
	if err != nil {
		return nil, err
	}
	apply := func() {
		e.cfgMu.Lock()
		e.ws, e.cfg, e.boxes, e.runtimes = ws, ws.Config, boxes, runtimes
		e.cfgMu.Unlock()
	}
	return &scheduler.Reloaded{Pipelines: pipelines, Kinds: kinds, Same: samePipelines(cur, ws.Config), Followers: followers, Path: ws.Config.Path, Apply: apply}, nil
}

// samePipelines names the pipelines of next that differ from old's by
// no more than what a run in flight may take (reloadable): their runs in
// flight move to the reloaded graph.
func samePipelines(old, next *config.Config) map[string]bool {
	out := map[string]bool{}
	for name, p := range next.Pipelines {
		if o := old.Pipelines[name]; o != nil && p != nil && sameYAML(reloadable(*o), reloadable(*p)) {
			out[name] = true
		}
	}
	if old.HasLoop() && next.HasLoop() && sameYAML(reloadable(old.Pipeline), reloadable(next.Pipeline)) {
		out[next.Name] = true
	}
	return out
}

// needsRestart lists what changed that this engine cannot take: the
// restart-only keys always, the runtimes' keys when it cannot build
// runtimes.
func (e *Engine) needsRestart(old, next *config.Config) []string {
	out := changedKeys(old, next, restartKeys)
	if e.opts.BuildRuntimes == nil {
		out = append(out, changedKeys(old, next, runtimeKeys)...)
	}
	return out
}

// runtimesFor returns the runtimes to run next's agents on: the current
// ones when nothing they are built from changed, else new ones. Building
// them may fail (a provider's key missing, a tool not registered): the
// reload is then refused with the problems.
func (e *Engine) runtimesFor(old, next *config.Config) (map[string]agentrunner.Runtime, error) {
	e.cfgMu.RLock()
	runtimes := e.runtimes
	e.cfgMu.RUnlock()
	if len(changedKeys(old, next, runtimeKeys)) == 0 {
		return runtimes, nil
	}
	runtimes, err := e.opts.BuildRuntimes(next)
	if err != nil {
		return nil, errors.New("the agents' runtimes cannot be built: " + summarize(err))
	}
	if err := checkRuntimes(next, runtimes); err != nil {
		return nil, errors.New("the agents' runtimes cannot be built: " + err.Error())
	}
	return runtimes, nil
}

// WatchedFiles are the files a reload reads: the configuration file and
// every file it names (prompts, templates, schemas, tools.md), absolute;
// reload.watch reloads when one of them changes.
func (e *Engine) WatchedFiles() []string {
	ws, cfg := e.workspace()
	files := slices.Clone(ws.Files)
	if path, err := filepath.Abs(cfg.Path); err == nil && cfg.Path != "" {
		files = append(files, path)
	}
	return files
}

// summarize shortens a configuration error to its first problems.
func summarize(err error) string {
	var ps config.Problems
	if !errors.As(err, &ps) || len(ps) == 0 {
		return err.Error()
	}
	var out []string
	for _, p := range ps[:min(len(ps), maxReloadProblems)] {
		out = append(out, p.String())
	}
	if len(ps) > maxReloadProblems {
		out = append(out, fmt.Sprintf("and %d more", len(ps)-maxReloadProblems))
	}
	return strings.Join(out, "; ")
}

// changedKeys lists the keys whose value changed, without the settings
// a reload may always change, which are blanked in shallow copies before
// the comparison.
func changedKeys(old, next *config.Config, keys []string) []string {
	var out []string
	for _, key := range keys {
		if !sameYAML(comparable(old, key), comparable(next, key)) {
			out = append(out, key)
		}
	}
	return out
}

// restartKeys are compared one by one, to name what changed, and need a
// restart. "agents added or removed" compares the agents' names: the
// scheduler keeps a mailbox per agent it started with.
var restartKeys = []string{
	"name", "artifacts_dir", "state", "tools_file", "memory_template", agentNames, loopKey,
	"scheduler", "execution_service", "server", "tools", "mcp_servers", "escalation", "watchdog", "events", "health",
	"secrets", // the file's place; its content is read again at every reload
}

// runtimeKeys are what the runtimes are built from: a change needs new
// runtimes (Options.BuildRuntimes), or a restart without them.
var runtimeKeys = []string{"providers", "defaults", "agents"}

// agentNames names the set of agents among the keys.
const agentNames = "agents added or removed"

// loopKey names whether the workspace has the learning loop: its runs are
// the cycles that run --once, the status and the runs' directories know.
const loopKey = "the learning loop (pipeline:) added or removed"

// comparable returns the value of a top-level key without the settings a
// reload may change.
func comparable(c *config.Config, key string) any {
	switch key {
	case "name":
		return c.Name
	case "artifacts_dir":
		return c.ArtifactsDir
	case "state":
		return c.State
	case "tools_file":
		return c.ToolsFile
	case "memory_template":
		return c.MemoryTemplate
	case "providers":
		return c.Providers
	case "defaults":
		d := c.Defaults
		d.Timeout, d.Retries = 0, config.Retries{}
		return d
	case agentNames:
		return slices.Sorted(maps.Keys(c.Agents))
	case loopKey:
		return c.HasLoop()
	case "agents":
		agents := map[string]config.Agent{}
		for name, a := range c.Agents {
			if a != nil {
				cp := *a
				cp.Timeout, cp.Retries = 0, nil
				agents[name] = cp
			}
		}
		return agents
	case "scheduler":
		return c.Scheduler
	case "execution_service":
		return c.ExecutionService
	case "server":
		return c.Server
	case "tools":
		return c.Tools
	case "mcp_servers":
		return c.MCPServers
	case "escalation":
		e := c.Escalation
		e.Policy = ""
		return e
	case "watchdog":
		return c.Watchdog
	case "events":
		return c.Events
	case "health":
		return c.Health
	case "secrets":
		return c.Secrets
	}
	panic("engine: unknown configuration key " + key)
}

func sameYAML(a, b any) bool {
	x, err1 := yaml.Marshal(a)
	y, err2 := yaml.Marshal(b)
	return err1 == nil && err2 == nil && bytes.Equal(x, y)
}

// reloadable is a pipeline without the settings a reload may change: its
// steps' timeouts, retries and failure policies, and its schedule.
func reloadable(p config.Pipeline) config.Pipeline {
	steps := map[string]*config.Step{}
	for id, s := range p.Steps {
		if s != nil {
			cp := *s
			cp.Timeout, cp.Retries, cp.OnFailure = 0, nil, ""
			steps[id] = &cp
		}
	}
	p.Steps, p.Schedule = steps, nil
	return p
}
