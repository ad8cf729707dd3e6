package backlog

import (
	"context"
	"path/filepath"
	"slices"
	"time"

	"github.com/agentrunner/agentrunner"
	"github.com/agentrunner/agentrunner/config"
	"github.com/agentrunner/agentrunner/repoctx"
)

// Git is what adding an item asks of git (worktree.Git).
type Git interface {
	IsRepo(ctx context.Context, path string) (string, error)
	CurrentBranch(ctx context.Context, repo string) (string, error)
}

// Prepare completes an item before its run starts: the repository's
// top-level folder, its base branch (the branch checked out there when
// none is given) and the detected language and framework, which the
// item's tasks inherit. An item that cannot be worked on is refused
// here, before anything is written.
func Prepare(ctx context.Context, git Git, it *Item) error {
	if err := it.Check(); err != nil {
		return err
	}
	if !filepath.IsAbs(it.Repo) {
		return agentrunner.Errorf(agentrunner.EINVALID, "repo %q: want an absolute path, as the runner resolves it from its own folder", it.Repo)
	}
	top, err := git.IsRepo(ctx, it.Repo)
	if err != nil {
		return agentrunner.Errorf(agentrunner.EINVALID, "repo %s: %v", it.Repo, err)
	}
	it.Repo = top
	if it.BaseBranch == "" {
		if it.BaseBranch, err = git.CurrentBranch(ctx, top); err != nil {
			return agentrunner.Errorf(agentrunner.EINVALID, "repo %s: no base_branch given and %v", top, err)
		}
	}
	rc, err := repoctx.Detect(ctx, top)
	if err != nil {
		return agentrunner.Errorf(agentrunner.EINVALID, "repo %s: %v", top, err)
	}
	it.Context = Context{Language: rc.Language, Framework: rc.Framework, RepoPath: top}
	return nil
}

// Store is what the views read.
type Store interface {
	Run(ctx context.Context, id string) (*agentrunner.Run, error)
	Runs(ctx context.Context, f agentrunner.RunFilter) ([]*agentrunner.Run, error)
	StepRuns(ctx context.Context, f agentrunner.StepRunFilter) ([]*agentrunner.StepRun, error)
}

// ItemView is an item as the API and the CLI show it.
type ItemView struct {
	ID string `json:"id"`
	Item
	Progress
	// Tasks are the item's tasks, in execution order (Item only).
	Tasks []*TaskView `json:"tasks,omitempty"`
}

// TaskView is a task as the API and the CLI show it.
type TaskView struct {
	ID string `json:"id"`
	Task
	Progress
}

// Progress is where a run stands.
type Progress struct {
	Status agentrunner.RunStatus `json:"status"`
	// States are the states the run is in now (Planning …; a step that
	// is not a state step by its name), empty once it ended.
	States []string `json:"states,omitempty"`
	// Waiting: a step waits at a gate for a person.
	Waiting   bool       `json:"waiting,omitempty"`
	StartedAt time.Time  `json:"started_at"`
	EndedAt   *time.Time `json:"ended_at,omitempty"`
	Error     string     `json:"error,omitempty"`
}

// Views reads items and tasks from the runs of a configuration's backlog.
type Views struct {
	Store  Store
	Config *config.Config
}

// Filter selects items or tasks, newest first.
type Filter struct {
	Status agentrunner.RunStatus // empty: any
	// Item selects the tasks of one item.
	Item  string
	Limit int
}

// Items lists the backlog's items, newest first.
func (v Views) Items(ctx context.Context, f Filter) ([]*ItemView, error) {
	b, err := v.Backlog()
	if err != nil {
		return nil, err
	}
	runs, err := v.Store.Runs(ctx, agentrunner.RunFilter{Pipeline: b.Pipeline, Status: f.Status, Limit: f.Limit})
	if err != nil {
		return nil, err
	}
	out := make([]*ItemView, 0, len(runs))
	for _, r := range runs {
		it, err := v.itemView(ctx, r)
		if err != nil {
			return nil, err
		}
		out = append(out, it)
	}
	return out, nil
}

// Item returns one item with its tasks, or ENOTFOUND.
func (v Views) Item(ctx context.Context, id string) (*ItemView, error) {
	b, err := v.Backlog()
	if err != nil {
		return nil, err
	}
	r, err := v.Store.Run(ctx, id)
	if agentrunner.ErrorCode(err) == agentrunner.ENOTFOUND {
		return nil, agentrunner.Errorf(agentrunner.ENOTFOUND, "no backlog item %s", id)
	}
	if err != nil {
		return nil, err
	}
	if r.Pipeline != b.Pipeline {
		return nil, agentrunner.Errorf(agentrunner.ENOTFOUND, "run %s is a run of %s, not a backlog item (pipeline %s)", id, r.Pipeline, b.Pipeline)
	}
	it, err := v.itemView(ctx, r)
	if err != nil {
		return nil, err
	}
	if it.Tasks, err = v.Tasks(ctx, Filter{Item: id}); err != nil {
		return nil, err
	}
	slices.SortFunc(it.Tasks, func(a, b *TaskView) int { return a.ExecutionOrder - b.ExecutionOrder })
	return it, nil
}

// Tasks lists tasks, newest first: one item's, or every item's.
func (v Views) Tasks(ctx context.Context, f Filter) ([]*TaskView, error) {
	if _, err := v.Backlog(); err != nil {
		return nil, err
	}
	rf := agentrunner.RunFilter{Parent: f.Item, Status: f.Status}
	var runs []*agentrunner.Run
	for _, p := range v.taskPipelines(f.Item) {
		rf.Pipeline = p
		rs, err := v.Store.Runs(ctx, rf)
		if err != nil {
			return nil, err
		}
		runs = append(runs, rs...)
	}
	out := []*TaskView{}
	for _, r := range runs {
		if !IsTask(r) || f.Limit > 0 && len(out) == f.Limit {
			continue
		}
		t, err := v.taskView(ctx, r)
		if err != nil {
			return nil, err
		}
		out = append(out, t)
	}
	return out, nil
}

// Task returns one task, or ENOTFOUND.
func (v Views) Task(ctx context.Context, id string) (*TaskView, error) {
	if _, err := v.Backlog(); err != nil {
		return nil, err
	}
	r, err := v.Store.Run(ctx, id)
	if agentrunner.ErrorCode(err) == agentrunner.ENOTFOUND {
		return nil, agentrunner.Errorf(agentrunner.ENOTFOUND, "no task %s", id)
	}
	if err != nil {
		return nil, err
	}
	if !IsTask(r) {
		return nil, agentrunner.Errorf(agentrunner.ENOTFOUND, "run %s is not a task of a backlog item", id)
	}
	return v.taskView(ctx, r)
}

// Backlog returns the workspace's backlog: section, or ENOTFOUND saying
// how to add one, so that every caller refuses a workspace without one
// in the same words.
func (v Views) Backlog() (*config.Backlog, error) {
	if v.Config.Backlog == nil {
		return nil, agentrunner.Errorf(agentrunner.ENOTFOUND, "the workspace has no backlog: add backlog: {pipeline: NAME} to agentrunner.yaml (see the dev-pipeline example)")
	}
	return v.Config.Backlog, nil
}

// taskPipelines are the pipelines the backlog's tasks steps start; with
// an item, the empty name (any pipeline) as its children are few.
func (v Views) taskPipelines(item string) []string {
	if item != "" {
		return []string{""}
	}
	var out []string
	if p := v.Config.Pipelines[v.Config.Backlog.Pipeline]; p != nil {
		for _, s := range p.Steps {
			if s != nil && s.Kind == config.StepTasks && s.Tasks != nil && !slices.Contains(out, s.Tasks.Pipeline) {
				out = append(out, s.Tasks.Pipeline)
			}
		}
	}
	slices.Sort(out)
	return out
}

func (v Views) itemView(ctx context.Context, r *agentrunner.Run) (*ItemView, error) {
	it, err := ItemOf(r)
	if err != nil {
		it = &Item{} // a run started by hand without an item's inputs is still listed
	}
	p, err := v.progress(ctx, r)
	if err != nil {
		return nil, err
	}
	return &ItemView{ID: r.ID, Item: *it, Progress: p}, nil
}

func (v Views) taskView(ctx context.Context, r *agentrunner.Run) (*TaskView, error) {
	t, err := TaskOf(r)
	if err != nil {
		return nil, err
	}
	p, err := v.progress(ctx, r)
	if err != nil {
		return nil, err
	}
	return &TaskView{ID: r.ID, Task: *t, Progress: p}, nil
}

// progress is where run r stands: its open and waiting step runs, named
// by their states.
func (v Views) progress(ctx context.Context, r *agentrunner.Run) (Progress, error) {
	p := Progress{Status: r.Status, StartedAt: r.StartedAt, Error: r.Error}
	if !r.EndedAt.IsZero() {
		p.EndedAt = &r.EndedAt
	}
	if r.Status.Finished() {
		return p, nil
	}
	srs, err := v.Store.StepRuns(ctx, agentrunner.StepRunFilter{RunID: r.ID})
	if err != nil {
		return p, err
	}
	states := v.Config.StateSteps(r.Pipeline)
	for _, sr := range srs {
		if sr.Status != agentrunner.StepRunOpen && sr.Status != agentrunner.StepRunWaiting {
			continue
		}
		name := states[sr.Step]
		if name == "" {
			name = sr.Step
		}
		p.States = append(p.States, name)
		p.Waiting = p.Waiting || sr.Status == agentrunner.StepRunWaiting
	}
	return p, nil
}
