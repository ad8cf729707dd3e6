// Package workspace loads everything a configuration names (identity
// prompts, tools.md, output templates and schemas) and knows the layout of
// the artifacts dir. Loading checks every file and reports every problem,
// so a runner refuses to start its first cycle with a missing or broken
// file (FR-148..153) and names each one.
package workspace

import (
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/agentrunner/agentrunner/agentdef"
	"github.com/agentrunner/agentrunner/artifact"
	"github.com/agentrunner/agentrunner/config"
)

// Workspace is a loaded configuration with its files.
type Workspace struct {
	Config *config.Config
	Layout Layout
	// Agents holds each agent's loaded files, by agent name.
	Agents map[string]*Agent
	// Tools holds each tool's tools.md section, by tool name.
	Tools map[string]string
	// MemoryTemplate seeds memory files; nil when no agent keeps one.
	MemoryTemplate []byte
	// StateAgents are spec 5's agents by state (agents/defaults and
	// agents/variants); nil without a backlog: section.
	StateAgents *agentdef.Set
	// Files are the absolute paths of the files the configuration names
	// that Load read (prompts, templates, schemas, tools.md): what a
	// reload.watch watches, with the configuration file.
	Files []string
}

// Agent is an agent's configuration with its loaded files.
type Agent struct {
	*config.Agent
	// Identity is the text of the identity prompt.
	Identity string
	// TemplatePath and SchemaPath are absolute.
	TemplatePath string
	SchemaPath   string
	Template     []byte
	// Schema is the JSON Schema file's content; nil without one.
	Schema []byte
	// Contract checks the agent's output artifact.
	Contract artifact.Contract
}

// Producer returns the agent whose output is the artifact file, if any.
func (w *Workspace) Producer(file string) *Agent {
	for _, name := range slices.Sorted(maps.Keys(w.Agents)) {
		if a := w.Agents[name]; a.Output.File == file {
			return a
		}
	}
	return nil
}

type loader struct {
	cfg      *config.Config
	problems config.Problems
	// files are those read, absolute.
	files []string
}

func (l *loader) add(key, format string, args ...any) {
	l.problems = append(l.problems, config.Problem{Where: l.cfg.Where(key), Key: key, Message: fmt.Sprintf(format, args...)})
}

// read returns a file named by the configuration key, or records why not.
// An empty path was already reported by the configuration's validation.
func (l *loader) read(key, path string) []byte {
	if path == "" {
		return nil
	}
	abs := l.cfg.Abs(path)
	if a, err := filepath.Abs(abs); err == nil && !slices.Contains(l.files, a) {
		l.files = append(l.files, a)
	}
	data, err := os.ReadFile(abs)
	switch {
	case os.IsNotExist(err):
		l.add(key, "file %s does not exist", path)
		return nil
	case err != nil:
		l.add(key, "cannot read %s: %v", path, err)
		return nil
	case len(strings.TrimSpace(string(data))) == 0:
		l.add(key, "file %s is empty", path)
		return nil
	}
	return data
}

// Load reads and checks every file of the configuration. The error, if
// any, is a config.Problems listing each missing or broken file.
func Load(cfg *config.Config) (*Workspace, error) {
	l := &loader{cfg: cfg}
	root, err := filepath.Abs(cfg.Abs(cfg.ArtifactsDir))
	if err != nil {
		return nil, config.Problems{{Where: cfg.Where("artifacts_dir"), Key: "artifacts_dir", Message: err.Error()}}
	}
	w := &Workspace{Config: cfg, Layout: Layout{Root: root}, Agents: map[string]*Agent{}}
	for _, name := range slices.Sorted(maps.Keys(cfg.Agents)) {
		if slices.Contains(ReservedNames, name) {
			l.add("agents."+name, "%q is reserved for a folder of the artifacts dir; choose another agent name", name)
		}
		if a := cfg.Agents[name]; a != nil {
			w.Agents[name] = l.agent(name, a)
		}
	}
	w.Tools = l.tools(cfg)
	for _, a := range w.Agents {
		if a.Memory && w.MemoryTemplate == nil {
			w.MemoryTemplate = l.read("memory_template", cfg.MemoryTemplate)
		}
	}
	l.deliveries(w)
	w.StateAgents = l.stateAgents(cfg)
	if len(l.problems) > 0 {
		return nil, l.problems
	}
	w.Files = l.files
	slices.Sort(w.Files)
	return w, nil
}

func (l *loader) agent(name string, a *config.Agent) *Agent {
	key := "agents." + name
	out := &Agent{Agent: a, TemplatePath: l.cfg.Abs(a.Output.Template), SchemaPath: l.cfg.Abs(a.Output.Schema)}
	out.Identity = string(l.read(key+".identity", a.Identity))
	out.Template = l.read(key+".output.template", a.Output.Template)
	if a.Output.Schema != "" {
		if out.Schema = l.read(key+".output.schema", a.Output.Schema); out.Schema == nil {
			return out
		}
	}
	if out.Template == nil {
		return out
	}
	c, err := artifact.Load(out.TemplatePath, out.SchemaPath)
	if err != nil {
		l.add(key+".output", "%v", err)
		return out
	}
	out.Contract = c
	if filepath.Ext(a.Output.File) == ".json" {
		l.checkJSONTemplate(key, out)
	}
	return out
}

// checkJSONTemplate fills a JSON template as an agent would and checks the
// result against the contract, so a template and a schema that disagree
// are caught before any agent is asked to follow both.
func (l *loader) checkJSONTemplate(key string, a *Agent) {
	if !json.Valid(a.Template) {
		l.add(key+".output.template", "%s is not valid JSON", a.Output.Template)
		return
	}
	filled := artifact.ExpandPlaceholders(a.Template, artifact.SampleValues("20260101_000000", a.Name, time.Now().UTC()))
	for _, p := range a.Contract.Validate(filled) {
		l.add(key+".output.template", "%s filled with sample values breaks %s: %s", a.Output.Template, a.Output.Schema, p)
	}
}

// tools reads tools.md and checks that every tool an agent may use has a
// "## <tool>" section there (FR-149).
func (l *loader) tools(cfg *config.Config) map[string]string {
	var used []string
	for _, a := range cfg.Agents {
		if a != nil {
			used = append(used, a.Tools...)
		}
	}
	if len(used) == 0 {
		return map[string]string{}
	}
	data := l.read("tools_file", cfg.ToolsFile)
	if data == nil {
		return nil
	}
	sections := map[string]string{}
	for _, s := range artifact.MarkdownSections(data) {
		if s.Level == 2 {
			sections[strings.TrimSpace(s.Title)] = strings.TrimSpace(string(data[s.Start:s.End]))
		}
	}
	for _, name := range slices.Sorted(maps.Keys(cfg.Agents)) {
		if cfg.Agents[name] == nil {
			continue
		}
		for i, t := range cfg.Agents[name].Tools {
			if cfg.Tools[t] == nil {
				continue // imported from an MCP server, which describes it
			}
			if _, ok := sections[t]; !ok {
				l.add(fmt.Sprintf("agents.%s.tools[%d]", name, i), "tool %q has no \"## %s\" section in %s", t, t, cfg.ToolsFile)
			}
		}
	}
	return sections
}

// deliveries checks that each section a delivery quotes is a section of the
// producing agent's template, so the quote can never come up empty.
func (l *loader) deliveries(w *Workspace) {
	for _, id := range slices.Sorted(maps.Keys(w.Config.Pipeline.Steps)) {
		s := w.Config.Pipeline.Steps[id]
		if s == nil {
			continue
		}
		a := w.Agents[s.Agent]
		if a == nil || a.Template == nil {
			continue
		}
		for i, d := range s.Deliver {
			if d.Section == "" {
				continue
			}
			if _, ok := artifact.FindSection(a.Template, d.Section); !ok {
				l.add(fmt.Sprintf("pipeline.steps.%s.deliver[%d].section", id, i), "%s has no section %q", a.Output.Template, d.Section)
			}
		}
	}
}

// Memory is what the memory file of agent starts with: the workspace's
// memory template with {{agent}} filled in, or a heading naming the agent
// when no agent keeps a memory that the template was read for.
func (w *Workspace) Memory(agent string) []byte {
	if w.MemoryTemplate == nil {
		return []byte("# Memory of " + agent + "\n")
	}
	return artifact.ExpandPlaceholders(w.MemoryTemplate, func(name string) string {
		if name == "agent" {
			return agent
		}
		return "{{" + name + "}}"
	})
}
