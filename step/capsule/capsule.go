// Package capsule is the capsule step kind: one attempt renders a capsule
// (spec 3's hand-off note) from the run's committed artifacts through the
// template the step names, checks it, and stores it as the next version
// of the live capsule of its name. Its text is also the step's artifact,
// so the run's directory shows it and later agents read it as an input.
//
// Storing the capsule is a write of its own, before the step's outcome
// commits; an attempt that repeats it after a crash finds the same text
// live and writes nothing, so a capsule's version counts its changes.
package capsule

import (
	"context"
	"errors"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/agentrunner/agentrunner"
	capsules "github.com/agentrunner/agentrunner/capsule"
	"github.com/agentrunner/agentrunner/config"
)

// EventStored is the event of a capsule step's success: the capsule's
// name, workspace, version and id, and whether this attempt changed it.
const EventStored = "capsule.stored"

// Store is what the kind reads of the store: the run's committed
// artifacts, which the capsule's text is made from.
type Store interface {
	Files(ctx context.Context, f agentrunner.FileFilter) ([]*agentrunner.StoredFile, error)
}

// Options wire the kind; all but Clock are required.
type Options struct {
	// Config is the workspace's configuration: where the templates are,
	// and its name, the capsules' default workspace.
	Config   *config.Config
	Store    Store
	Capsules *capsules.Service
	// Clock stamps the events; nil: the system clock.
	Clock agentrunner.Clock
}

// Kind runs the attempts of capsule steps.
type Kind struct {
	opts  Options
	clock agentrunner.Clock
}

var _ agentrunner.StepKind = (*Kind)(nil)

// New returns the kind for opts.
func New(opts Options) (*Kind, error) {
	if opts.Config == nil || opts.Store == nil || opts.Capsules == nil {
		return nil, errors.New("capsule step kind: a configuration, a store and the capsule service are required")
	}
	k := &Kind{opts: opts, clock: opts.Clock}
	if k.clock == nil {
		k.clock = agentrunner.SystemClock{}
	}
	return k, nil
}

// Run stores the capsule of one step run, unless the live capsule of its
// name has exactly that content already, and returns its text as the
// step's artifact.
func (k *Kind) Run(ctx context.Context, a *agentrunner.StepAttempt) (*agentrunner.StepResult, error) {
	s, ok := a.Step.Config.(*config.Step)
	if !ok || s == nil || s.Capsule == nil {
		return nil, agentrunner.Fail(agentrunner.ClassConfig, "step %s: a capsule step's configuration is a *config.Step with capsule:, not %T", a.Step.ID, a.Step.Config)
	}
	want, err := k.capsule(ctx, a, s.Capsule)
	if err != nil {
		return nil, err
	}
	got, changed, err := k.keep(ctx, a.Step.ID, want)
	if err != nil {
		return nil, err
	}
	return k.result(a, s, got, changed), nil
}

// capsule is the capsule a step run stores: its fields, and its text
// rendered from the template.
func (k *Kind) capsule(ctx context.Context, a *agentrunner.StepAttempt, spec *config.CapsuleStep) (*agentrunner.Capsule, error) {
	r := &renderer{k: k, ctx: ctx, a: a, files: map[string][]byte{}}
	text, err := r.render(spec.Text)
	if err != nil {
		return nil, err
	}
	vars := strings.NewReplacer("{run_id}", a.Run.ID, "{visit}", strconv.Itoa(a.StepRun.Visit))
	ws := spec.Workspace
	if ws == "" {
		ws = k.opts.Config.Name
	}
	return &agentrunner.Capsule{
		Workspace: ws, Name: vars.Replace(spec.Name), RunID: a.Run.ID,
		Phase: spec.Phase, Role: spec.Role, Tags: spec.Tags, Text: text,
	}, nil
}

// keep lints the capsule and stores it as the next version of the live
// one of its name, unless that one is the same already (changed false).
func (k *Kind) keep(ctx context.Context, step string, want *agentrunner.Capsule) (*agentrunner.Capsule, bool, error) {
	svc := k.opts.Capsules
	if err := capsules.Lint(want.Text, svc.MaxChars()); err != nil {
		return nil, false, agentrunner.Fail(agentrunner.ClassInvalidOutput, "step %s: the capsule %s is not one: %s", step, want.Name, agentrunner.ErrorMessage(err))
	}
	cur, err := svc.Fetch(ctx, want.Workspace, want.Name)
	switch {
	case err == nil && same(cur, want):
		return cur, false, nil
	case err != nil && agentrunner.ErrorCode(err) != agentrunner.ENOTFOUND:
		return nil, false, agentrunner.Fail(agentrunner.ClassInternal, "step %s: read the capsule %s: %w", step, want.Name, err)
	}
	got, err := svc.Put(ctx, want, true)
	switch {
	case agentrunner.ErrorCode(err) == agentrunner.EINVALID:
		return nil, false, agentrunner.Fail(agentrunner.ClassConfig, "step %s: the capsule %s cannot be stored: %s", step, want.Name, agentrunner.ErrorMessage(err))
	case err != nil:
		return nil, false, agentrunner.Fail(agentrunner.ClassInternal, "step %s: store the capsule %s: %w", step, want.Name, err)
	}
	return got, true, nil
}

// same reports whether a live capsule has what a step run would store.
func same(cur, want *agentrunner.Capsule) bool {
	return cur.Text == want.Text && cur.RunID == want.RunID && cur.Phase == want.Phase &&
		cur.Role == want.Role && slices.Equal(cur.Tags, want.Tags)
}

// result is a success: the capsule's text as the step's artifact, and
// the event that says which capsule and version it is.
func (k *Kind) result(a *agentrunner.StepAttempt, s *config.Step, c *agentrunner.Capsule, changed bool) *agentrunner.StepResult {
	file, data := s.CapsuleFile(), []byte(c.Text)
	ev := &agentrunner.Event{
		Timestamp: k.clock.Now(), Type: EventStored, Step: a.Step.ID, CycleID: a.Run.ID, Level: agentrunner.LevelInfo,
		Details: map[string]any{
			"name": c.Name, "workspace": c.Workspace, "version": c.Version, "id": c.ID, "phase": c.Phase,
			"changed": changed, "artifact": file, "visit": a.StepRun.Visit,
		},
	}
	return &agentrunner.StepResult{
		Output: data, Path: filepath.Join(a.RunDir, file),
		Files:  []*agentrunner.StoredFile{{Kind: agentrunner.FileArtifact, Name: file, Data: data}},
		Events: []*agentrunner.Event{ev},
	}
}
