package stateagent

import (
	"context"
	"strings"

	"github.com/agentrunner/agentrunner"
	"github.com/agentrunner/agentrunner/agentdef"
	"github.com/agentrunner/agentrunner/backlog"
	"github.com/agentrunner/agentrunner/repoctx"
	"github.com/agentrunner/agentrunner/taskprompt"
)

// subject is what a run is about: a backlog item, or a task of one.
type subject struct {
	item   *backlog.Item // the item's run: the item; a task's: nil
	itemID string
	task   *backlog.Task // nil for an item
	ctx    backlog.Context
	// workDir is where the agent works: the item's repository, or the
	// task's worktree.
	workDir string
	// runs are the runs whose artifacts the prompt lists: the item's,
	// then the task's.
	runs []string
}

// subject reads what run is about from its inputs.
func (k *Kind) subject(ctx context.Context, run *agentrunner.Run) (*subject, error) {
	if backlog.IsTask(run) {
		t, err := backlog.TaskOf(run)
		if err != nil {
			return nil, agentrunner.Fail(agentrunner.ClassConfig, "%v", err)
		}
		return &subject{task: t, itemID: t.Item.ID, ctx: t.Context, workDir: t.Worktree, runs: []string{t.Item.ID, run.ID}}, nil
	}
	it, err := backlog.ItemOf(run)
	if err != nil {
		return nil, agentrunner.Fail(agentrunner.ClassConfig, "%v (start items with agentrunner backlog add)", err)
	}
	return &subject{item: it, itemID: run.ID, ctx: it.Context, workDir: it.Repo, runs: []string{run.ID}}, nil
}

// resolveContext is the context variants are matched against: the
// detected language and framework, and the files of the folder the agent
// works in.
func (s *subject) resolveContext(ctx context.Context) (agentdef.Context, error) {
	files, err := repoctx.Files(ctx, s.workDir)
	return agentdef.Context{Language: s.ctx.Language, Framework: s.ctx.Framework, Files: files}, err
}

// vars are the template variables of the subject; artifacts are added
// by the caller.
func (s *subject) vars(state string, refining int) taskprompt.Vars {
	v := taskprompt.Vars{Context: taskprompt.Context{Language: s.ctx.Language, Framework: s.ctx.Framework, RepoPath: s.ctx.RepoPath}}
	if s.item != nil {
		v.Item = taskprompt.Item{Title: s.item.Title, Description: s.item.Description, AcceptanceCriteria: s.item.AcceptanceCriteria, RefiningIterations: refining}
		return v
	}
	t := s.task
	v.Item = taskprompt.Item{Title: t.Item.Title, Description: t.Item.Description, AcceptanceCriteria: t.Item.AcceptanceCriteria, RefiningIterations: refining}
	v.Task = &taskprompt.Task{
		Title: t.Title, Description: t.Description, State: state, Priority: t.Priority,
		AcceptanceCriteria: t.AcceptanceCriteria, ExecutionOrder: t.ExecutionOrder,
	}
	return v
}

// isRefining says whether a state is the refinement of items, whose
// visits {backlogItem.refiningIterations} counts.
func isRefining(state string) bool { return strings.EqualFold(state, "Refining") }
