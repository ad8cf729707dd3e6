// Package agentdef reads the agent configuration of spec 5: one YAML file
// per agent, the defaults in agents/defaults/*.yml (required, one agent
// per state) and the variants in agents/variants/*.yml (optional), and
// picks the agent that handles a state for a repository.
//
// # Files
//
// Each file is one agent with these keys:
//
//	id             required, unique over all files
//	name           required (a variant may inherit it)
//	state          the task state the agent handles, or
//	backlog_state  the backlog item state it handles: exactly one of the two
//	description    optional
//	prompt         required (a variant may inherit it); its template
//	               variables are checked (see Prompts)
//	output         {type, schema}: type is one of OutputTypes
//	mcp_servers    a list of MCP server names
//	max_turns      a positive integer
//	extends        the id of the agent this one inherits from
//	match          variants only: {framework, language, files}
//
// Decoding is strict: an unknown key, a duplicate key, a value of the wrong
// type and a missing required key are each reported as
// "file:line:col: key: message", and Load reports the problems of every
// file at once (Problems).
//
// # Inheritance (extends)
//
// extends names the id of any agent, default or variant; the chain must
// end, so a cycle is an error that names its path. An agent inherits every
// key it does not set from the agent it extends, after that agent has
// inherited from its own parent. The merge rules:
//
//   - scalars (name, description, prompt, max_turns) replace the parent's;
//   - state and backlog_state are one setting: an agent that sets either
//     sets both, so a variant can move to a backlog state;
//   - output replaces the parent's as a whole (type and schema together);
//   - mcp_servers replaces the parent's list, it does not add to it (write
//     mcp_servers: [] to use none);
//   - id, extends and match are never inherited.
//
// # Prompts
//
// A prompt's template variables ({task.title}, {artifacts.plan} …, package
// taskprompt) are checked as the agent is loaded, for the kind of agent it
// is: a backlog item agent (backlog_state) has no task, so {task.…} is an
// error in its prompt, and an unknown variable is an error in any prompt,
// with the nearest known name. Each problem is placed at the variable's
// file:line:col when the file holds the prompt line for line, as in a
// literal block (prompt: |) or a one-line value; else (a folded block, a
// value with escapes) at the prompt key, with the variable's line and
// column within the prompt. An agent that moves to a backlog state and
// inherits a task agent's prompt is told which {task.…} variables it
// inherited, and where they are written.
//
// # Resolution
//
// Resolve picks, among the agents that handle a state (by state or
// backlog_state), the variant whose match fits the repository's Context,
// else the default agent of the state (the one from agents/defaults). A
// match fits when every key it sets fits: framework and language compare
// equal ignoring case, and every entry of files matches some
// repository-relative path of the Context (an entry is a path.Match
// pattern on the whole slash-separated path, so "angular.json" means the
// file at the root and "*.csproj" a project file at the root).
//
// When several variants fit, the most specific wins, in this order:
//
//  1. a variant that matches files beats one that does not;
//  2. then one that matches a framework beats one that does not;
//  3. then one that matches a language beats one that does not;
//  4. then the one with more conditions (framework, language and each
//     listed file count one each);
//  5. then the smaller id (byte order), so the choice never depends on
//     the order the files were read.
package agentdef

import (
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"

	"github.com/agentrunner/agentrunner/config"
)

// Output is the artifact an agent produces.
type Output struct {
	Type   string `yaml:"type"`
	Schema string `yaml:"schema,omitempty"`
}

// Match says which repositories a variant is for.
type Match struct {
	Framework string   `yaml:"framework,omitempty"`
	Language  string   `yaml:"language,omitempty"`
	Files     []string `yaml:"files,omitempty"`
}

// conditions counts the conditions of a match: framework, language and
// each file.
func (m *Match) conditions() int {
	n := len(m.Files)
	if m.Framework != "" {
		n++
	}
	if m.Language != "" {
		n++
	}
	return n
}

// Agent is one agent, with everything it inherits filled in.
type Agent struct {
	ID           string   `yaml:"id"`
	Name         string   `yaml:"name"`
	State        string   `yaml:"state,omitempty"`
	BacklogState string   `yaml:"backlog_state,omitempty"`
	Description  string   `yaml:"description,omitempty"`
	Prompt       string   `yaml:"prompt"`
	Output       *Output  `yaml:"output,omitempty"`
	MCPServers   []string `yaml:"mcp_servers,omitempty"`
	MaxTurns     int      `yaml:"max_turns,omitempty"`
	Extends      string   `yaml:"extends,omitempty"`
	Match        *Match   `yaml:"match,omitempty"`

	// File is the file the agent is read from.
	File string `yaml:"-"`
	// Variant is true for an agent of agents/variants.
	Variant bool `yaml:"-"`
}

// StateName is the state the agent handles, task or backlog item.
func (a *Agent) StateName() string {
	if a.State != "" {
		return a.State
	}
	return a.BacklogState
}

// Set is every agent of a configuration.
type Set struct {
	agents map[string]*Agent
	ids    []string // sorted
}

// Agent returns the agent with this id, or nil.
func (s *Set) Agent(id string) *Agent { return s.agents[id] }

// Agents returns every agent, by id.
func (s *Set) Agents() []*Agent {
	out := make([]*Agent, len(s.ids))
	for i, id := range s.ids {
		out[i] = s.agents[id]
	}
	return out
}

// Load reads dir/agents/defaults/*.yml and dir/agents/variants/*.yml. It
// returns Problems listing everything wrong with any of them.
func Load(dir string) (*Set, error) {
	var problems Problems
	defaultsDir := filepath.Join(dir, "agents", "defaults")
	variantsDir := filepath.Join(dir, "agents", "variants")
	defaults, err := ymlFiles(defaultsDir)
	switch {
	case errors.Is(err, os.ErrNotExist):
		problems = append(problems, Problem{Where: defaultsDir, Message: "the folder is missing; it holds the default agent of each state, one .yml file each"})
	case err != nil:
		return nil, err
	case len(defaults) == 0:
		problems = append(problems, Problem{Where: defaultsDir, Message: "the folder has no .yml files; it holds the default agent of each state, one .yml file each"})
	}
	variants, err := ymlFiles(variantsDir)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, err
	}

	var entries []*entry
	read := func(files []string, variant bool) error {
		for _, f := range files {
			data, err := os.ReadFile(f)
			if err != nil {
				return err
			}
			e, ps := decodeFile(f, data)
			problems = append(problems, ps...)
			if e != nil {
				e.agent.File = f
				e.agent.Variant = variant
				entries = append(entries, e)
			}
		}
		return nil
	}
	if err := read(defaults, false); err != nil {
		return nil, err
	}
	if err := read(variants, true); err != nil {
		return nil, err
	}

	byID := map[string]*entry{}
	var ok []*entry
	for _, e := range entries {
		a := &e.agent
		if a.ID == "" {
			if !e.bad["id"] {
				problems = append(problems, Problem{Where: e.at("id"), Key: "id", Message: "missing required key"})
			}
			continue
		}
		if prev, dup := byID[a.ID]; dup {
			problems = append(problems, Problem{Where: e.at("id"), Key: "id", Message: fmt.Sprintf("duplicate id %q (first at %s)", a.ID, prev.at("id"))})
			continue
		}
		byID[a.ID] = e
		ok = append(ok, e)
		if a.Variant && !e.set["match"] && !e.bad["match"] {
			problems = append(problems, Problem{Where: e.where, Key: "match", Message: "missing required key: a variant says which repositories it is for"})
		}
		if !a.Variant && e.pos["match"] != "" {
			problems = append(problems, Problem{Where: e.pos["match"], Key: "match",
				Message: "only variants (agents/variants) have match; a default agent is the one used when no variant matches"})
		}
	}

	// extends: the parent must exist and the chains must end.
	for _, e := range ok {
		if x := e.agent.Extends; x != "" && byID[x] == nil {
			problems = append(problems, Problem{Where: e.at("extends"), Key: "extends", Message: fmt.Sprintf("no agent has id %q%s", x, suggestID(x, byID))})
		}
	}
	inCycle := map[string]bool{}
	for _, e := range ok {
		if inCycle[e.agent.ID] {
			continue
		}
		seen := map[string]int{}
		var chain []string
		for cur := e; cur != nil; cur = byID[cur.agent.Extends] {
			id := cur.agent.ID
			if i, again := seen[id]; again {
				cycle := append(slices.Clone(chain[i:]), id)
				// Name the cycle once, from its smallest id.
				start := slices.Index(cycle, slices.Min(cycle[:len(cycle)-1]))
				cycle = append(slices.Clone(cycle[start:len(cycle)-1]), cycle[:start+1]...)
				for _, c := range cycle {
					inCycle[c] = true
				}
				first := byID[cycle[0]]
				problems = append(problems, Problem{Where: first.at("extends"), Key: "extends", Message: "extends forms a cycle: " + strings.Join(cycle, " → ")})
				break
			}
			if inCycle[id] {
				break
			}
			seen[id] = len(chain)
			chain = append(chain, id)
		}
	}

	// Inherit, parents first.
	merged := map[string]*Agent{}
	var resolve func(e *entry) *Agent
	resolve = func(e *entry) *Agent {
		if a, done := merged[e.agent.ID]; done {
			return a
		}
		a := e.agent
		a.MCPServers = slices.Clone(a.MCPServers)
		if p := byID[a.Extends]; p != nil && !inCycle[a.ID] {
			inherit(&a, e.set, resolve(p))
		}
		merged[a.ID] = &a
		return &a
	}
	set := &Set{agents: map[string]*Agent{}}
	defaultOf := map[string]*entry{}
	for _, e := range ok {
		a := resolve(e)
		if inCycle[a.ID] {
			continue
		}
		// An agent that extends another lacks a key only when its parent
		// does, and the parent (or the unknown extends) is reported.
		var missing []string
		if a.Extends == "" {
			if a.Name == "" {
				missing = append(missing, "name")
			}
			if a.Prompt == "" {
				missing = append(missing, "prompt")
			}
			if a.State == "" && a.BacklogState == "" {
				missing = append(missing, "state")
			}
		}
		for _, k := range missing {
			msg := "missing required key"
			if k == "state" {
				msg = "missing: an agent has a state (a task agent) or a backlog_state (a backlog item agent)"
			}
			if !e.bad[k] && (k != "state" || !e.bad["backlog_state"]) {
				problems = append(problems, Problem{Where: e.at(k), Key: k, Message: msg})
			}
		}
		if !a.Variant && a.StateName() != "" {
			st := a.StateName()
			if prev := defaultOf[st]; prev != nil {
				problems = append(problems, Problem{Where: e.where, Key: stateKey(a),
					Message: fmt.Sprintf("state %q already has the default agent %q (%s); put other agents for it in agents/variants", st, prev.agent.ID, prev.where)})
			} else {
				defaultOf[st] = e
			}
		}
		set.agents[a.ID] = a
		set.ids = append(set.ids, a.ID)
	}
	problems = append(problems, promptProblems(ok, set, byID)...)
	if len(problems) > 0 {
		sortProblems(problems)
		return nil, problems
	}
	slices.Sort(set.ids)
	return set, nil
}

func stateKey(a *Agent) string {
	if a.State != "" {
		return "state"
	}
	return "backlog_state"
}

// inherit fills the keys the agent does not set from its parent.
func inherit(a *Agent, set map[string]bool, p *Agent) {
	if !set["name"] {
		a.Name = p.Name
	}
	if !set["state"] && !set["backlog_state"] {
		a.State, a.BacklogState = p.State, p.BacklogState
	}
	if !set["description"] {
		a.Description = p.Description
	}
	if !set["prompt"] {
		a.Prompt = p.Prompt
	}
	if !set["output"] && p.Output != nil {
		o := *p.Output
		a.Output = &o
	}
	if !set["mcp_servers"] {
		a.MCPServers = slices.Clone(p.MCPServers)
	}
	if !set["max_turns"] {
		a.MaxTurns = p.MaxTurns
	}
}

func suggestID(id string, byID map[string]*entry) string {
	best, bestDist := "", 4
	for other := range byID {
		if d := config.EditDistance(id, other); d < bestDist || d == bestDist && other < best {
			best, bestDist = other, d
		}
	}
	if best == "" {
		return ""
	}
	return fmt.Sprintf(" (did you mean %q?)", best)
}

// ymlFiles lists the .yml files of a folder, sorted.
func ymlFiles(dir string) ([]string, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, e := range ents {
		if !e.IsDir() && strings.HasSuffix(e.Name(), ".yml") {
			out = append(out, filepath.Join(dir, e.Name()))
		}
	}
	return out, nil
}

func validPattern(p string) bool {
	_, err := path.Match(p, "")
	return err == nil
}

// sortProblems orders problems by file, line and column, keeping the
// order of those at the same place.
func sortProblems(ps Problems) {
	type place struct {
		file      string
		line, col int
	}
	at := func(p Problem) place {
		var pl place
		file, rest, _ := strings.Cut(p.Where, ":")
		pl.file = file
		fmt.Sscanf(rest, "%d:%d", &pl.line, &pl.col)
		return pl
	}
	slices.SortStableFunc(ps, func(a, b Problem) int {
		pa, pb := at(a), at(b)
		if c := strings.Compare(pa.file, pb.file); c != 0 {
			return c
		}
		if pa.line != pb.line {
			return pa.line - pb.line
		}
		return pa.col - pb.col
	})
}
