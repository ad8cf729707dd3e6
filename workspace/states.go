package workspace

import (
	"errors"
	"fmt"
	"maps"
	"slices"

	"github.com/agentrunner/agentrunner/agentdef"
	"github.com/agentrunner/agentrunner/agentout"
	"github.com/agentrunner/agentrunner/config"
)

// stateAgents loads the agents of spec 5 (agents/defaults and
// agents/variants next to agentrunner.yaml) for a workspace with a
// backlog, and checks that every state step has an agent and that a
// tasks step's split is made by agents whose output is a task_split.
func (l *loader) stateAgents(cfg *config.Config) *agentdef.Set {
	if cfg.Backlog == nil {
		return nil
	}
	set, err := agentdef.Load(cfg.Dir)
	var ps config.Problems
	switch {
	case errors.As(err, &ps):
		l.problems = append(l.problems, ps...)
		return nil
	case err != nil:
		l.add("backlog", "cannot read the agents: %v", err)
		return nil
	}
	for _, name := range slices.Sorted(maps.Keys(cfg.Pipelines)) {
		l.stateSteps(set, name, cfg.Pipelines[name])
	}
	for _, a := range set.Agents() {
		for _, m := range a.MCPServers {
			if cfg.MCPServers[m] == nil {
				l.add("backlog", "agent %s (%s) names the MCP server %q, which is not under mcp_servers:%s", a.ID, a.File, m, config.SuggestKey(m, slices.Sorted(maps.Keys(cfg.MCPServers))))
			}
		}
	}
	return set
}

// stateSteps checks the state and tasks steps of one pipeline against set.
func (l *loader) stateSteps(set *agentdef.Set, name string, p *config.Pipeline) {
	if p == nil {
		return
	}
	for _, id := range slices.Sorted(maps.Keys(p.Steps)) {
		s, key := p.Steps[id], fmt.Sprintf("pipelines.%s.steps.%s", name, id)
		switch {
		case s == nil:
		case s.Kind == config.StepState:
			if !slices.ContainsFunc(set.Agents(), func(a *agentdef.Agent) bool { return a.StateName() == s.State }) {
				l.add(key+".state", "no agent of agents/ handles the state %q%s", s.State, config.SuggestKey(s.State, States(set)))
			}
		case s.Kind == config.StepTasks && s.Tasks != nil:
			l.splitAgents(set, key, p.Steps[s.Tasks.From])
		}
	}
}

// splitAgents checks that every agent of the split step's state writes a
// task_split.
func (l *loader) splitAgents(set *agentdef.Set, key string, from *config.Step) {
	if from == nil {
		return
	}
	for _, a := range set.Agents() {
		if a.StateName() == from.State && OutputKind(a) != agentout.KindTaskSplit {
			l.add(key+".tasks.from", "agent %s (%s) of state %s writes %s, and the tasks come from a task_split: set its output.type to task_split", a.ID, a.File, from.State, OutputKind(a))
		}
	}
}

// States lists the states the agents of set handle, sorted.
func States(set *agentdef.Set) []string {
	var out []string
	for _, a := range set.Agents() {
		if s := a.StateName(); !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	slices.Sort(out)
	return out
}

// OutputKind is the artifact kind an agent writes: its output.type, or
// general when it sets none.
func OutputKind(a *agentdef.Agent) agentout.Kind {
	if a.Output == nil || a.Output.Type == "" {
		return agentout.KindGeneral
	}
	return agentout.Kind(a.Output.Type)
}
