package subagent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/agentrunner/agentrunner"
	"github.com/agentrunner/agentrunner/internal/childrun"
	"github.com/agentrunner/agentrunner/tool"
)

// DefaultTimeout bounds one call: the whole sub-agent run it waits for.
const DefaultTimeout = time.Hour

// DefaultPoll is how often a call looks at the store for its child's end.
const DefaultPoll = 50 * time.Millisecond

// InputKey is the run input of a child run that holds its key (Key); the
// task is the input InputTask.
const (
	InputKey  = "subagent_key"
	InputTask = "task"
)

// Starter starts a run that another run started: the scheduler running in
// the process (the engine's StartChild).
type Starter interface {
	StartChild(ctx context.Context, pipeline string, inputs map[string]any, parent string) (string, error)
}

// Store is what a launcher reads of the runs: the children of a lead run,
// a child's status and its output artifact.
type Store interface {
	Run(ctx context.Context, id string) (*agentrunner.Run, error)
	Runs(ctx context.Context, f agentrunner.RunFilter) ([]*agentrunner.Run, error)
	Files(ctx context.Context, f agentrunner.FileFilter) ([]*agentrunner.StoredFile, error)
}

// Launcher starts sub-agent runs and waits for them. It is made before the
// tools are built, which happens before the engine exists, and bound to
// the engine's scheduler and the store once it does (Bind); a call before
// that says the process runs no sub-agents. It is safe for concurrent use.
type Launcher struct {
	// Poll is how often a call looks for its child's end; 0: DefaultPoll.
	Poll time.Duration

	mu      sync.Mutex
	starter Starter
	store   Store
	// slots bound the children of one lead run that run at once, by lead
	// run and tool.
	slots map[string]*slots
	// starting is held from looking a child up to starting it, so two
	// calls of one task at once start one child.
	starting sync.Mutex
}

// slots is a semaphore shared by the calls of one lead run's tool.
type slots struct {
	ch    chan struct{}
	users int
}

// NewLauncher returns a launcher that is not bound yet.
func NewLauncher() *Launcher { return &Launcher{} }

// Bind makes the launcher start children with starter and read them from
// store.
func (l *Launcher) Bind(starter Starter, store Store) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.starter, l.store = starter, store
}

func (l *Launcher) bound() (Starter, Store) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.starter, l.store
}

// errNoRun refuses a call that comes from no run.
var errNoRun = errors.New("a sub-agent runs as a child of the run whose agent calls the tool, and this call comes from no run: call it from an agent's step in a run")

// errUnbound refuses a call before Bind.
var errUnbound = errors.New("the runner is not running sub-agents in this process")

// Handler is the handler of a subagent_run tool named name whose children
// are runs of pipeline, at most parallel of one lead run at once.
//
// A call checks the task, then looks among the lead run's children for
// the one with the task's key: if there is none, it starts one, with the
// inputs {"task": the task, "subagent_key": the key}. It waits for the
// child to end and returns its output, a Result, as compact JSON; a child
// that failed, was aborted or ended incomplete is an error with its
// reason. A child that ended is never run again: the same call made
// again (the lead's attempt run again after a crash) returns its result.
func (l *Launcher) Handler(name, pipeline string, parallel int) tool.Handler {
	if parallel <= 0 {
		parallel = DefaultMaxParallel
	}
	return tool.HandlerFunc(func(ctx context.Context, raw json.RawMessage) (string, error) {
		task, err := ParseTask(raw)
		if err != nil {
			return "", err
		}
		call, ok := tool.CallOf(ctx)
		if !ok || call.CycleID == "" {
			return "", errNoRun
		}
		starter, store := l.bound()
		if starter == nil || store == nil {
			return "", errUnbound
		}
		key := Key(call.CycleID, call.Step, task)
		release, err := l.acquire(ctx, call.CycleID+"\x00"+name, parallel)
		if err != nil {
			return "", stopped(err)
		}
		defer release()
		id, err := l.child(ctx, starter, store, pipeline, call.CycleID, key, task)
		if err != nil {
			return "", err
		}
		run, err := l.wait(ctx, store, id)
		if err != nil {
			return "", err
		}
		return result(ctx, store, run)
	})
}

// acquire takes one of the lead run's slots, waiting for one to be free.
func (l *Launcher) acquire(ctx context.Context, lead string, n int) (release func(), err error) {
	l.mu.Lock()
	if l.slots == nil {
		l.slots = map[string]*slots{}
	}
	s := l.slots[lead]
	if s == nil {
		s = &slots{ch: make(chan struct{}, n)}
		l.slots[lead] = s
	}
	s.users++
	l.mu.Unlock()
	done := func() {
		l.mu.Lock()
		if s.users--; s.users == 0 {
			delete(l.slots, lead)
		}
		l.mu.Unlock()
	}
	select {
	case s.ch <- struct{}{}:
		return func() { <-s.ch; done() }, nil
	case <-ctx.Done():
		done()
		return nil, ctx.Err()
	}
}

// child returns the id of the lead run's child with key: the one that
// exists, else one it starts.
func (l *Launcher) child(ctx context.Context, starter Starter, store Store, pipeline, lead, key string, task Task) (string, error) {
	l.starting.Lock()
	defer l.starting.Unlock()
	id, err := childrun.Find(ctx, store, lead, InputKey, key)
	if err != nil {
		return "", storeError(ctx, err)
	}
	if id != "" {
		return id, nil
	}
	inputs := map[string]any{InputKey: key, InputTask: taskInput(task)}
	id, err = starter.StartChild(ctx, pipeline, inputs, lead)
	if err != nil {
		if ctx.Err() != nil {
			return "", stopped(ctx.Err())
		}
		return "", fmt.Errorf("the sub-agent's run could not start: %v", err)
	}
	return id, nil
}

// taskInput is the task as a run input: its canonical JSON as an object.
func taskInput(t Task) map[string]any {
	in := map[string]any{"task_name": t.TaskName, "prompt": t.Prompt, "description": t.Description, "tool_budget": t.ToolBudget}
	if t.ExpectedOutput != "" {
		in["expected_output"] = t.ExpectedOutput
	}
	return in
}

// wait waits for run id to end. A halted child waits for an operator, and
// so does the call.
func (l *Launcher) wait(ctx context.Context, store Store, id string) (*agentrunner.Run, error) {
	poll := l.Poll
	if poll <= 0 {
		poll = DefaultPoll
	}
	r, err := childrun.Wait(ctx, store, id, poll)
	switch {
	case errors.Is(err, childrun.ErrStopped):
		return nil, fmt.Errorf("the sub-agent's run %s had not ended: %s", id, stopped(ctx.Err()))
	case err != nil:
		return nil, storeError(ctx, err)
	}
	return r, nil
}

// result is the message of an ended child: its output as a Result in
// compact JSON, or an error saying how it ended.
func result(ctx context.Context, store Store, r *agentrunner.Run) (string, error) {
	if r.Status != agentrunner.RunCompleted {
		why := r.Error
		if why == "" {
			why = "no reason recorded"
		}
		return "", fmt.Errorf("the sub-agent's run %s ended %s: %s", r.ID, r.Status, why)
	}
	files, err := store.Files(ctx, agentrunner.FileFilter{RunID: r.ID, Kind: agentrunner.FileArtifact, Latest: true})
	if err != nil {
		return "", storeError(ctx, err)
	}
	if len(files) == 0 {
		return "", fmt.Errorf("the sub-agent's run %s completed without an output", r.ID)
	}
	out := files[len(files)-1]
	res, err := ParseResult(out.Data)
	if err != nil {
		return "", fmt.Errorf("the sub-agent's output %s (run %s) %v", out.Name, r.ID, err)
	}
	data, err := json.Marshal(res)
	return string(data), err
}

// storeError is what a call says of a store failure: its details are
// internals, not the model's business.
func storeError(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return stopped(ctx.Err())
	}
	return tool.Transient(fmt.Errorf("the runs could not be read (%s)", agentrunner.ErrorCode(err)))
}

func stopped(err error) error {
	if errors.Is(err, context.DeadlineExceeded) {
		return errors.New("the call ran out of time")
	}
	return errors.New("the call was cancelled")
}
