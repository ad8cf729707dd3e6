// Package tasks is the step kind that turns a backlog item's split into
// its tasks: each task of the task_split artifact becomes a child run of
// the tasks' pipeline, in its own git worktree on its own branch made
// from the item's base branch, started in execution order; the step waits
// for them and ends with a summary of each (tasks.json).
//
// Everything it does can be done again: a child is found by its task's
// key before one is started, a worktree that exists is reused, so an
// attempt run again after a crash starts no second child and makes no
// second worktree.
package tasks

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/agentrunner/agentrunner"
	"github.com/agentrunner/agentrunner/agentout"
	"github.com/agentrunner/agentrunner/backlog"
	"github.com/agentrunner/agentrunner/config"
	"github.com/agentrunner/agentrunner/worktree"
)

// File is the step's artifact: the summary of the tasks.
const File = "tasks.json"

// DefaultPoll is how often the step looks at its children.
const DefaultPoll = 200 * time.Millisecond

// Starter starts a child run (the engine's StartChild).
type Starter interface {
	StartChild(ctx context.Context, pipeline string, inputs map[string]any, parent string) (string, error)
}

// Store is what the kind reads: the split, the children and their status.
type Store interface {
	Run(ctx context.Context, id string) (*agentrunner.Run, error)
	Runs(ctx context.Context, f agentrunner.RunFilter) ([]*agentrunner.Run, error)
	Files(ctx context.Context, f agentrunner.FileFilter) ([]*agentrunner.StoredFile, error)
}

// Worktrees makes and removes the tasks' git worktrees.
type Worktrees interface {
	Ensure(ctx context.Context, repo, dir, branch, base string) (worktree.Worktree, bool, error)
	Remove(ctx context.Context, repo, dir string) error
}

// Options are what a Kind needs; Config, Starter, Store and Worktrees are
// required.
type Options struct {
	Config    *config.Config
	Starter   Starter
	Store     Store
	Worktrees Worktrees
	// Poll is how often the step looks at its children; 0: DefaultPoll.
	Poll time.Duration
}

// Kind runs tasks steps.
type Kind struct{ opts Options }

var _ agentrunner.StepKind = (*Kind)(nil)

// New returns the kind.
func New(opts Options) (*Kind, error) {
	if opts.Config == nil || opts.Starter == nil || opts.Store == nil || opts.Worktrees == nil {
		return nil, errors.New("tasks step kind: a configuration, a starter, a store and worktrees are required")
	}
	if opts.Poll <= 0 {
		opts.Poll = DefaultPoll
	}
	return &Kind{opts: opts}, nil
}

// Outcome is what became of one task: the summary's entry.
type Outcome struct {
	Order    int                   `json:"executionOrder"`
	Title    string                `json:"title"`
	Run      string                `json:"run,omitempty"`
	Status   agentrunner.RunStatus `json:"status"`
	Branch   string                `json:"branch"`
	Worktree string                `json:"worktree"`
	// Kept says the worktree was left in place (by the removal policy).
	Kept  bool   `json:"worktree_kept"`
	Error string `json:"error,omitempty"`
}

// Run starts the item's tasks, waits for them and summarizes them.
func (k *Kind) Run(ctx context.Context, a *agentrunner.StepAttempt) (*agentrunner.StepResult, error) {
	res := &agentrunner.StepResult{}
	s, ok := a.Step.Config.(*config.Step)
	if !ok || s == nil || s.Tasks == nil {
		return res, agentrunner.Fail(agentrunner.ClassConfig, "step %s: a tasks step's configuration is a *config.Step with tasks:, not %T", a.Step.ID, a.Step.Config)
	}
	item, err := backlog.ItemOf(a.Run)
	if err != nil {
		return res, agentrunner.Fail(agentrunner.ClassConfig, "%v", err)
	}
	split, err := k.split(ctx, a.Run.ID, s.Tasks.From)
	if err != nil {
		return res, err
	}
	outs := k.runAll(ctx, a, s, item, split)
	if ctx.Err() != nil {
		return res, agentrunner.Fail(agentrunner.ClassInterrupted, "the tasks of %s were still running: %v", a.Run.ID, ctx.Err())
	}
	data, _ := json.MarshalIndent(map[string]any{"tasks": outs}, "", "  ")
	data = append(data, '\n')
	res.Output, res.Path = data, filepath.Join(a.RunDir, File)
	res.Files = []*agentrunner.StoredFile{{Kind: agentrunner.FileArtifact, Name: File, Data: data}}
	return res, failed(a.Run.ID, outs)
}

// failed is the error of a step whose tasks did not all succeed.
func failed(item string, outs []*Outcome) error {
	var bad []string
	for _, o := range outs {
		if o.Status != agentrunner.RunCompleted {
			bad = append(bad, fmt.Sprintf("task %d %q (%s): %s", o.Order, o.Title, o.Status, o.Error))
		}
	}
	if len(bad) == 0 {
		return nil
	}
	return agentrunner.Fail(agentrunner.ClassConfig, "%d of the %d tasks of %s did not complete: %s", len(bad), len(outs), item, strings.Join(bad, "; "))
}

// split reads the tasks of the latest task_split the from step committed,
// in execution order.
func (k *Kind) split(ctx context.Context, run, from string) ([]agentout.Task, error) {
	files, err := k.opts.Store.Files(ctx, agentrunner.FileFilter{RunID: run, Kind: agentrunner.FileArtifact, Step: from, Name: string(agentout.KindTaskSplit) + ".md", Latest: true})
	if err != nil {
		return nil, agentrunner.Fail(agentrunner.ClassInternal, "read the split of %s: %w", run, err)
	}
	if len(files) == 0 {
		return nil, agentrunner.Fail(agentrunner.ClassConfig, "step %s of run %s committed no task_split.md: its agent's output.type must be task_split", from, run)
	}
	art, err := agentout.Parse(agentout.KindTaskSplit, files[len(files)-1].Data)
	if err != nil {
		return nil, agentrunner.Fail(agentrunner.ClassInvalidOutput, "the split of %s: %v", run, err)
	}
	ts := slices.Clone(art.Tasks)
	slices.SortFunc(ts, func(x, y agentout.Task) int { return x.ExecutionOrder - y.ExecutionOrder })
	return ts, nil
}

// runAll runs the tasks, at most max_parallel at once, each after the
// tasks it depends on (in a sequence, the ones before it) completed; a
// task whose dependency did not complete is not started.
func (k *Kind) runAll(ctx context.Context, a *agentrunner.StepAttempt, s *config.Step, item *backlog.Item, split []agentout.Task) []*Outcome {
	n := max(s.Tasks.MaxParallel, 1)
	slots := make(chan struct{}, n)
	outs := make([]*Outcome, len(split))
	done := map[int]chan struct{}{}
	for _, t := range split {
		done[t.ExecutionOrder] = make(chan struct{})
	}
	var wg sync.WaitGroup
	for i, t := range split {
		outs[i] = &Outcome{Order: t.ExecutionOrder, Title: t.Title, Status: agentrunner.RunQueued}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer close(done[t.ExecutionOrder])
			deps := dependencies(split, i, n)
			if why := k.waitFor(ctx, deps, done, outs, split); why != "" {
				outs[i].Error = why
				return
			}
			select {
			case slots <- struct{}{}:
			case <-ctx.Done():
				return
			}
			defer func() { <-slots }()
			k.runOne(ctx, a, s, item, t, outs[i])
		}()
	}
	wg.Wait()
	return outs
}

// dependencies are the execution orders task i waits for: its dependsOn,
// and when tasks run one at a time, every task before it.
func dependencies(split []agentout.Task, i, parallel int) []int {
	deps := slices.Clone(split[i].DependsOn)
	if parallel == 1 {
		for _, t := range split[:i] {
			deps = append(deps, t.ExecutionOrder)
		}
	}
	return deps
}

// waitFor waits until the tasks deps are done, and says why the task
// cannot start when one of them did not complete.
func (k *Kind) waitFor(ctx context.Context, deps []int, done map[int]chan struct{}, outs []*Outcome, split []agentout.Task) string {
	for _, d := range deps {
		select {
		case <-done[d]:
		case <-ctx.Done():
			return "not started: " + ctx.Err().Error()
		}
		for i, t := range split {
			if t.ExecutionOrder == d && outs[i].Status != agentrunner.RunCompleted {
				return fmt.Sprintf("not started: task %d, which it follows, did not complete", d)
			}
		}
	}
	return ""
}
