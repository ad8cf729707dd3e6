package capsule

import (
	"context"
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/agentrunner/agentrunner"
	"github.com/agentrunner/agentrunner/artifact"
	"github.com/agentrunner/agentrunner/config"
)

// renderer fills one template's placeholders for one attempt, reading
// each artifact from the store once.
type renderer struct {
	k     *Kind
	ctx   context.Context
	a     *agentrunner.StepAttempt
	files map[string][]byte
}

// render reads the template at path and fills its placeholders
// (config.CapsulePlaceholders).
func (r *renderer) render(path string) (string, error) {
	tmpl, err := os.ReadFile(r.k.opts.Config.Abs(path))
	if err != nil {
		return "", agentrunner.Fail(agentrunner.ClassConfig, "step %s: read the capsule's text template %s: %w", r.a.Step.ID, path, err)
	}
	src := string(tmpl)
	var b strings.Builder
	last := 0
	for _, m := range config.CapsulePlaceholders.FindAllStringSubmatchIndex(src, -1) {
		v, err := r.value(src[m[2]:m[3]])
		if err != nil {
			return "", err
		}
		b.WriteString(src[last:m[0]])
		b.WriteString(v)
		last = m[1]
	}
	b.WriteString(src[last:])
	return b.String(), nil
}

// value is what one placeholder stands for.
func (r *renderer) value(inner string) (string, error) {
	ref, err := config.ParseCapsuleRef(inner)
	switch {
	case err != nil:
		return "", agentrunner.Fail(agentrunner.ClassConfig, "step %s: %v", r.a.Step.ID, err)
	case ref.Var == "run_id":
		return r.a.Run.ID, nil
	case ref.Var == "visit":
		return strconv.Itoa(r.a.StepRun.Visit), nil
	}
	data, err := r.artifact(ref.Artifact)
	switch {
	case err != nil:
		return "", err
	case data == nil && r.a.Late:
		// A run forced to its end stores what it has, saying what it lacks.
		return "(missing: the run ran out of time before " + ref.Artifact + " was produced)", nil
	case data == nil:
		return "", agentrunner.Fail(agentrunner.ClassConfig, "step %s: the capsule's text takes the artifact %s, which run %s has not produced: put the capsule step after the step that produces it",
			r.a.Step.ID, ref.Artifact, r.a.Run.ID)
	case ref.Section == "":
		return strings.TrimSpace(string(data)), nil
	}
	return r.section(ref, data)
}

// section is the body of a markdown section of an artifact, without its
// heading: of a section under the title first, as the title ("# Plan")
// often shares its words with one ("## Plan").
func (r *renderer) section(ref config.CapsuleRef, data []byte) (string, error) {
	all := artifact.MarkdownSections(data)
	sub := slices.DeleteFunc(slices.Clone(all), func(s artifact.Span) bool { return s.Level < 2 })
	s, ok := artifact.Find(sub, ref.Section)
	if !ok {
		s, ok = artifact.Find(all, ref.Section)
	}
	if !ok {
		return "", agentrunner.Fail(agentrunner.ClassInvalidOutput, "step %s: the artifact %s of run %s has no section %q, which the capsule's text takes",
			r.a.Step.ID, ref.Artifact, r.a.Run.ID, ref.Section)
	}
	body := string(data[s.Start:s.End])
	if i := strings.IndexByte(body, '\n'); i >= 0 {
		body = body[i+1:]
	} else {
		body = ""
	}
	return strings.TrimSpace(body), nil
}

// artifact is the run's latest committed copy of an artifact, nil if it
// has none.
func (r *renderer) artifact(name string) ([]byte, error) {
	if data, ok := r.files[name]; ok {
		return data, nil
	}
	fs, err := r.k.opts.Store.Files(r.ctx, agentrunner.FileFilter{RunID: r.a.Run.ID, Kind: agentrunner.FileArtifact, Name: name, Latest: true})
	if err != nil {
		return nil, agentrunner.Fail(agentrunner.ClassInternal, "step %s: read the artifact %s of run %s: %w", r.a.Step.ID, name, r.a.Run.ID, err)
	}
	var data []byte
	if len(fs) > 0 {
		data = fs[0].Data
		if data == nil {
			data = []byte{} // committed, and empty
		}
	}
	r.files[name] = data
	return data, nil
}
