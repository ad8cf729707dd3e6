package tasks

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strconv"

	"github.com/agentrunner/agentrunner"
	"github.com/agentrunner/agentrunner/agentout"
	"github.com/agentrunner/agentrunner/backlog"
	"github.com/agentrunner/agentrunner/config"
	"github.com/agentrunner/agentrunner/internal/childrun"
	"github.com/agentrunner/agentrunner/worktree"
)

// runOne runs one task to its end and records what became of it in out.
func (k *Kind) runOne(ctx context.Context, a *agentrunner.StepAttempt, s *config.Step, item *backlog.Item, t agentout.Task, out *Outcome) {
	task := k.task(a, item, t)
	out.Branch, out.Worktree = task.Branch, task.Worktree
	if _, _, err := k.opts.Worktrees.Ensure(ctx, item.Repo, task.Worktree, task.Branch, item.BaseBranch); err != nil {
		out.Status, out.Error = agentrunner.RunFailed, "its worktree: "+err.Error()
		return
	}
	id, err := k.child(ctx, a.Run.ID, s.Tasks.Pipeline, task)
	if err != nil {
		out.Status, out.Error = agentrunner.RunFailed, err.Error()
		return
	}
	out.Run = id
	run, err := k.wait(ctx, id)
	if err != nil {
		out.Status, out.Error = agentrunner.RunRunning, err.Error()
		return
	}
	out.Status, out.Error = run.Status, run.Error
	out.Kept = !removes(k.opts.Config.Backlog.Worktrees.Remove, run.Status == agentrunner.RunCompleted)
	if !out.Kept {
		if err := k.opts.Worktrees.Remove(ctx, item.Repo, task.Worktree); err != nil {
			out.Kept, out.Error = true, "its worktree could not be removed: "+err.Error()
		}
	}
}

// removes says whether a task's worktree goes when the task ended.
func removes(policy string, succeeded bool) bool {
	switch policy {
	case config.RemoveAlways:
		return true
	case config.RemoveNever:
		return false
	}
	return succeeded
}

// task is the task t of item, as its run's inputs hold it: its key,
// branch and worktree follow from the item's run and the task's order,
// so an attempt run again names the same ones.
func (k *Kind) task(a *agentrunner.StepAttempt, item *backlog.Item, t agentout.Task) *backlog.Task {
	order := strconv.Itoa(t.ExecutionOrder)
	return &backlog.Task{
		Key:   a.Run.ID + "/" + a.Step.ID + "/" + order,
		Title: t.Title, Description: t.Description, ExecutionOrder: t.ExecutionOrder, DependsOn: t.DependsOn,
		Priority: item.Priority,
		Item:     backlog.ItemRef{ID: a.Run.ID, Title: item.Title, Description: item.Description, AcceptanceCriteria: item.AcceptanceCriteria},
		Context:  item.Context, Repo: item.Repo, BaseBranch: item.BaseBranch,
		Branch:   "task/" + worktree.BranchName(a.Run.ID, order, t.Title),
		Worktree: filepath.Join(k.opts.Config.WorktreesDir(), a.Run.ID+"-"+order),
	}
}

// child finds the item's child run of task, or starts it.
func (k *Kind) child(ctx context.Context, item, pipeline string, task *backlog.Task) (string, error) {
	id, err := childrun.Find(ctx, k.opts.Store, item, backlog.InputTaskKey, task.Key)
	if err != nil {
		return "", fmt.Errorf("read the runs of %s: %w", item, err)
	}
	if id != "" {
		return id, nil
	}
	if id, err = k.opts.Starter.StartChild(ctx, pipeline, task.Inputs(), item); err != nil {
		return "", fmt.Errorf("its run could not start: %w", err)
	}
	return id, nil
}

// wait waits for the run id to end.
func (k *Kind) wait(ctx context.Context, id string) (*agentrunner.Run, error) {
	r, err := childrun.Wait(ctx, k.opts.Store, id, k.opts.Poll)
	switch {
	case errors.Is(err, childrun.ErrStopped):
		return nil, fmt.Errorf("run %s had not ended: %w", id, ctx.Err())
	case err != nil:
		return nil, fmt.Errorf("read run %s: %w", id, err)
	}
	return r, nil
}
