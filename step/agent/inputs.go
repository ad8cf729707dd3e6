package agent

import (
	"context"
	"fmt"
	"path/filepath"

	"github.com/agentrunner/agentrunner"
	"github.com/agentrunner/agentrunner/config"
	"github.com/agentrunner/agentrunner/memory"
)

// historyScan is how many earlier runs a history input looks at; at 4
// cycles a day, most of a year.
const historyScan = 1000

// inputs resolves the agent's inputs to paths (FR-039/151), in
// configuration order. Memory files are created from the template on
// first use (FR-176..178).
func (at *attempt) inputs(ctx context.Context) ([]agentrunner.Input, error) {
	a := at.agent
	if a.Memory {
		if err := at.ensureMemory(ctx, a.Name); err != nil {
			return nil, err
		}
	}
	var inputs []agentrunner.Input
	for _, in := range a.Inputs {
		found, err := at.input(ctx, in)
		if err != nil {
			return nil, err
		}
		inputs = append(inputs, found...)
	}
	return inputs, nil
}

// input resolves one input: an agent's memory, an artifact of this run,
// or the same artifact from earlier runs.
func (at *attempt) input(ctx context.Context, in config.Input) ([]agentrunner.Input, error) {
	switch {
	case in.Document:
		return at.document(in)
	case in.Memory != "":
		if err := at.ensureMemory(ctx, in.Memory); err != nil {
			return nil, err
		}
		return []agentrunner.Input{{Name: describe(in, "memory of the "+in.Memory+" agent"), Path: at.k.ws.Layout.Memory(in.Memory)}}, nil
	case in.History == nil:
		in, err := at.runInput(ctx, in)
		return []agentrunner.Input{in}, err
	}
	return at.history(ctx, in)
}

// runInput is an artifact of this run. A missing one fails the attempt,
// unless the run is late: a run forced to its end judges what it has
// (FR-007), and the prompt says what is missing.
func (at *attempt) runInput(ctx context.Context, in config.Input) (agentrunner.Input, error) {
	path := filepath.Join(at.sa.RunDir, in.Artifact)
	name := describe(in, in.Artifact+" of this cycle")
	ok, err := at.serve(ctx, at.sa.Run.ID, at.sa.RunDir, in.Artifact)
	if err != nil {
		return agentrunner.Input{}, err
	}
	if !ok {
		if !at.sa.Late {
			return agentrunner.Input{}, agentrunner.Fail(agentrunner.ClassInternal, "input %s is missing from the cycle directory %s", in.Artifact, at.sa.RunDir)
		}
		name += " (missing: the cycle ran out of time before it was produced)"
	}
	return agentrunner.Input{Name: name, Path: path}, nil
}

// document is the shared document of the run's pipeline, which the
// scheduler's follower rewrote from the store before this attempt began.
func (at *attempt) document(in config.Input) ([]agentrunner.Input, error) {
	p := at.k.cfg.Pipelines[at.sa.Run.Pipeline]
	if p == nil || p.Document == nil {
		return nil, agentrunner.Fail(agentrunner.ClassConfig, "agent %s reads its pipeline's document, and pipeline %s has none", at.agent.Name, at.sa.Run.Pipeline)
	}
	path := at.k.cfg.Abs(p.Document.File)
	return []agentrunner.Input{{Name: describe(in, filepath.Base(path)+", the document of this cycle"), Path: path}}, nil
}

func describe(in config.Input, def string) string {
	if in.Description != "" {
		return in.Description
	}
	return def
}

// history finds an artifact in earlier completed runs of the same
// pipeline: the most recent ones first, at most Last of them, and only
// those started Within the given time. A run that failed, was aborted or
// gave up is left out, whatever it produced before it ended: an agent
// learning from past cycles must not take a plan that led nowhere for one
// that was carried through.
func (at *attempt) history(ctx context.Context, in config.Input) ([]agentrunner.Input, error) {
	run := at.sa.Run
	runs, err := at.k.opts.Store.Cycles(ctx, agentrunner.CycleFilter{Pipeline: run.Pipeline, Status: agentrunner.CycleCompleted, Before: run.ID, Limit: historyScan})
	if err != nil {
		return nil, err
	}
	var out []agentrunner.Input
	for _, prev := range runs {
		if in.History.Last > 0 && len(out) >= in.History.Last {
			break
		}
		if in.History.Within > 0 && run.StartedAt.Sub(prev.StartedAt) > in.History.Within.D() {
			break
		}
		dir := at.priorDir(prev)
		path := filepath.Join(dir, in.Artifact)
		ok, err := at.serve(ctx, prev.ID, dir, in.Artifact)
		if err != nil {
			return nil, err
		}
		if !ok {
			continue
		}
		name := fmt.Sprintf("%s of cycle %s", in.Artifact, prev.ID)
		if in.Description != "" {
			name = fmt.Sprintf("%s (cycle %s)", in.Description, prev.ID)
		}
		out = append(out, agentrunner.Input{Name: name, Path: path})
	}
	return out, nil
}

// ensureMemory creates an agent's memory file from the template if it
// has none yet, and records that it did; then it adds the entries the
// store has and the file lacks (a crash between an append's two writes),
// so the agent reads every note it appended.
func (at *attempt) ensureMemory(ctx context.Context, agent string) error {
	k := at.k
	path := k.ws.Layout.Memory(agent)
	tmpl := k.ws.Memory(agent)
	var created bool
	err := k.fileOp(OpMemory, func() (err error) {
		created, err = memory.Ensure(path, tmpl)
		return err
	})
	if err != nil {
		return agentrunner.Fail(agentrunner.ClassInternal, "create memory of %s: %w", agent, err)
	}
	if created {
		at.event(nil, agentrunner.EventMemoryCreated, agentrunner.LevelInfo, map[string]any{"agent": agent, "path": path})
	}
	if k.opts.Memory == nil {
		return nil
	}
	if err := k.fileOp(OpMemory, func() error { return k.opts.Memory.Sync(ctx, agent) }); err != nil {
		return agentrunner.Fail(agentrunner.ClassInternal, "bring the memory of %s up to date with the store: %w", agent, err)
	}
	return nil
}

var _ agentrunner.InputLister = (*Kind)(nil)

// Inputs names the files an agent step reads: its memory and the run's
// artifacts it takes (earlier runs' are left out), for a failure's
// context.
func (k *Kind) Inputs(run *agentrunner.Run, st *agentrunner.Step) []string {
	s, ok := st.Config.(*config.Step)
	if !ok || s == nil || k.cfg.Agents[s.Agent] == nil {
		return nil
	}
	var paths []string
	for _, in := range k.cfg.Agents[s.Agent].Inputs {
		switch {
		case in.Memory != "":
			paths = append(paths, k.ws.Layout.Memory(in.Memory))
		case in.History == nil:
			paths = append(paths, filepath.Join(run.Dir, in.Artifact))
		}
	}
	return paths
}
