package config

import (
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
)

// CapsuleStep configures a capsule step: the capsule (spec 3) it stores,
// made from the run's committed artifacts, as the next version of the
// live capsule of the same name.
type CapsuleStep struct {
	// Name is the capsule's name; {run_id} and {visit} are replaced.
	Name string `yaml:"name"`
	// Workspace is the capsule's workspace; default: the workspace's name.
	Workspace string `yaml:"workspace"`
	// Phase, Role and Tags are the capsule's, for finding it later.
	Phase string   `yaml:"phase"`
	Role  string   `yaml:"role"`
	Tags  []string `yaml:"tags"`
	// Text is the template of the capsule's text, a path relative to the
	// workspace; see CapsulePlaceholders.
	Text string `yaml:"text"`
	// File is the artifact the text is published as in the run's
	// directory; default: STEP.capsule.md. Several steps that keep one
	// capsule may share it, so that its readers find its latest text.
	File string `yaml:"file"`
}

// capsuleSuffix makes the default name of a capsule step's artifact.
const capsuleSuffix = ".capsule.md"

// CapsuleFile is the artifact a capsule step publishes, "" for other
// steps.
func (s *Step) CapsuleFile() string {
	switch {
	case s.Kind != StepCapsule || s.Capsule == nil:
		return ""
	case s.Capsule.File != "":
		return s.Capsule.File
	}
	return s.ID + capsuleSuffix
}

// CapsulePlaceholders finds the placeholders of a capsule step's text:
// {{run_id}}, {{visit}}, {{artifact:NAME}} (the run's latest committed
// artifact NAME) and {{artifact:NAME#SECTION}} (the body of a markdown
// section of it, a "##" one before a title of the same words). The first
// group is what is between the braces.
var CapsulePlaceholders = regexp.MustCompile(`\{\{\s*([^{}]*?)\s*\}\}`)

// CapsuleRef is one placeholder of a capsule step's text.
type CapsuleRef struct {
	// Var is run_id or visit; empty for an artifact.
	Var string
	// Artifact and Section name what an artifact placeholder takes.
	Artifact, Section string
}

// ParseCapsuleRef reads what is between a placeholder's braces.
func ParseCapsuleRef(inner string) (CapsuleRef, error) {
	if inner == "run_id" || inner == "visit" {
		return CapsuleRef{Var: inner}, nil
	}
	name, ok := strings.CutPrefix(inner, "artifact:")
	if !ok {
		return CapsuleRef{}, fmt.Errorf("unknown placeholder {{%s}} (known: {{run_id}}, {{visit}}, {{artifact:NAME}}, {{artifact:NAME#SECTION}})", inner)
	}
	name, section, _ := strings.Cut(strings.TrimSpace(name), "#")
	name, section = strings.TrimSpace(name), strings.TrimSpace(section)
	if !filepath.IsLocal(filepath.FromSlash(name)) {
		return CapsuleRef{}, fmt.Errorf("{{%s}}: want an artifact's name in the run's directory", inner)
	}
	return CapsuleRef{Artifact: name, Section: section}, nil
}

// nameVars are the placeholders of a capsule's name.
var nameVars = regexp.MustCompile(`\{[^{}]*\}`)

// capsuleStep checks a capsule step: it runs no agent, goes on by next
// or then, and names its capsule and the template of its text.
func (v *validator) capsuleStep(key string, s *Step) {
	if s.Agent != "" {
		v.add(key+".agent", "a capsule step runs no agent: it stores a capsule made from the run's artifacts")
	}
	if s.Artifact != "" || s.Validity != (Validity{}) || len(s.Deliver) > 0 {
		v.add(key, "a capsule step hands nothing over: artifact, validity and deliver apply to other steps")
	}
	if s.Label != nil || len(s.Routes) > 0 {
		v.add(key+".routes", "a capsule step goes on by next (or then): its capsule has no routing label")
	}
	c := s.Capsule
	if c == nil {
		v.add(key+".capsule", "is required: the capsule the step stores ({name, text})")
		return
	}
	v.capsuleName(key+".capsule.name", c.Name)
	for _, f := range []struct{ k, path string }{{"text", c.Text}, {"file", c.File}} {
		if f.path != "" && !filepath.IsLocal(filepath.FromSlash(f.path)) {
			v.add(key+".capsule."+f.k, "want a path inside the workspace, relative to agentrunner.yaml, got %q", f.path)
		}
	}
	if c.Text == "" {
		v.add(key+".capsule.text", "is required: the template of the capsule's text, with {{artifact:NAME}} for the run's artifacts")
	}
	for i, t := range c.Tags {
		if strings.TrimSpace(t) == "" {
			v.add(fmt.Sprintf("%s.capsule.tags[%d]", key, i), "is empty")
		}
	}
}

// capsuleName checks a capsule's name and its placeholders.
func (v *validator) capsuleName(key, name string) {
	if strings.TrimSpace(name) == "" {
		v.add(key, "is required: the capsule's name, e.g. \"feature-{run_id}\"")
		return
	}
	for _, p := range nameVars.FindAllString(name, -1) {
		if p != "{run_id}" && p != "{visit}" {
			v.add(key, "unknown placeholder %s (known: {run_id}, {visit})", p)
		}
	}
}

// capsuleFiles are the artifacts the capsule steps of a pipeline publish.
func capsuleFiles(p *Pipeline) []string {
	var out []string
	for _, s := range p.Steps {
		if s != nil && s.CapsuleFile() != "" {
			out = append(out, s.CapsuleFile())
		}
	}
	return out
}

// checkCapsuleTexts reads the text template of each capsule step of the
// pipelines under pipelines: and checks its placeholders: each is known,
// and each artifact it takes is produced by a step of the pipeline. Load
// calls it, not Parse: it reads files.
func (c *Config) checkCapsuleTexts() Problems {
	var ps Problems
	for _, name := range slices.Sorted(maps.Keys(c.Pipelines)) {
		p := c.Pipelines[name]
		if p == nil {
			continue
		}
		for _, id := range slices.Sorted(maps.Keys(p.Steps)) {
			s := p.Steps[id]
			if s == nil || s.Kind != StepCapsule || s.Capsule == nil || !filepath.IsLocal(filepath.FromSlash(s.Capsule.Text)) {
				continue // validate said what is wrong
			}
			key := "pipelines." + name + ".steps." + id + ".capsule.text"
			for _, msg := range c.capsuleText(p, s.Capsule.Text) {
				ps = append(ps, Problem{Where: c.Where(key), Key: key, Message: msg})
			}
		}
	}
	return ps
}

// capsuleText checks one text template of pipeline p.
func (c *Config) capsuleText(p *Pipeline, path string) []string {
	data, err := os.ReadFile(c.Abs(path))
	switch {
	case errors.Is(err, os.ErrNotExist):
		return []string{fmt.Sprintf("file %s does not exist", path)}
	case err != nil:
		return []string{fmt.Sprintf("cannot read %s: %v", path, err)}
	}
	produced := map[string]bool{}
	for _, f := range capsuleFiles(p) {
		produced[f] = true
	}
	for _, s := range p.Steps {
		if s != nil && s.Kind == StepAgent && c.Agents[s.Agent] != nil {
			produced[c.Agents[s.Agent].Output.File] = true
		}
	}
	var out []string
	for _, m := range CapsulePlaceholders.FindAllStringSubmatch(string(data), -1) {
		ref, err := ParseCapsuleRef(m[1])
		switch {
		case err != nil:
			out = append(out, fmt.Sprintf("%s: %v", path, err))
		case ref.Artifact != "" && !produced[ref.Artifact]:
			out = append(out, fmt.Sprintf("%s takes the artifact %q, which no step of the pipeline produces", path, ref.Artifact))
		}
	}
	return out
}
