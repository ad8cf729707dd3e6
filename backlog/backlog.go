// Package backlog is the domain of spec 5's agent pipeline: backlog items,
// refined and split into tasks, and tasks, planned and implemented each
// in its own git worktree. An item is a run of the backlog pipeline
// (backlog.pipeline), a task a child run of the item's run (a tasks step's
// tasks.pipeline); both carry what they are about in their run inputs,
// which this package reads and writes, so the store's runs are the only
// record and a crash can never leave an item and its run apart.
package backlog

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/agentrunner/agentrunner"
)

// EventJudged is the event of a state agent's output judged: its
// confidence, its question for a person, and whether it waits at a gate
// (details: state, agent, confidence, gate, why, question, options).
const EventJudged = "state.judged"

// Context is what was detected of an item's repository when the item was
// added, cached in its inputs and inherited by its tasks.
type Context struct {
	Language  string `json:"language"`
	Framework string `json:"framework"`
	// RepoPath is the repository's absolute path.
	RepoPath string `json:"repoPath"`
}

// Item is a backlog item, as its run's inputs hold it.
type Item struct {
	Title              string `json:"title"`
	Description        string `json:"description,omitempty"`
	AcceptanceCriteria string `json:"acceptance_criteria,omitempty"`
	Priority           string `json:"priority,omitempty"`
	// Repo is the repository's absolute path; BaseBranch the branch its
	// tasks' branches start from.
	Repo       string  `json:"repo"`
	BaseBranch string  `json:"base_branch"`
	Context    Context `json:"context"`
}

// ItemRef is what a task knows of its item.
type ItemRef struct {
	ID                 string `json:"id"`
	Title              string `json:"title"`
	Description        string `json:"description,omitempty"`
	AcceptanceCriteria string `json:"acceptance_criteria,omitempty"`
}

// InputTaskKey is the run input that holds a task's Key.
const InputTaskKey = "task_key"

// Task is a task of a backlog item, as its run's inputs hold it.
type Task struct {
	// Key names the task within its item's run, so that a tasks step run
	// again after a crash finds the child it started instead of starting
	// another.
	Key                string  `json:"task_key"`
	Title              string  `json:"title"`
	Description        string  `json:"description,omitempty"`
	AcceptanceCriteria string  `json:"acceptance_criteria,omitempty"`
	Priority           string  `json:"priority,omitempty"`
	ExecutionOrder     int     `json:"executionOrder"`
	DependsOn          []int   `json:"dependsOn,omitempty"`
	Item               ItemRef `json:"item"`
	Context            Context `json:"context"`
	Repo               string  `json:"repo"`
	BaseBranch         string  `json:"base_branch"`
	// Branch and Worktree are the task's own branch and worktree folder.
	Branch   string `json:"branch"`
	Worktree string `json:"worktree"`
}

// Inputs are the run inputs of an item's run.
func (it *Item) Inputs() map[string]any { return toInputs(it) }

// Inputs are the run inputs of a task's run.
func (t *Task) Inputs() map[string]any { return toInputs(t) }

// Check reports what an item lacks, in one sentence naming the fields.
func (it *Item) Check() error {
	var missing []string
	if strings.TrimSpace(it.Title) == "" {
		missing = append(missing, "title")
	}
	if strings.TrimSpace(it.Repo) == "" {
		missing = append(missing, "repo")
	}
	if len(missing) > 0 {
		return agentrunner.Errorf(agentrunner.EINVALID, "a backlog item needs %s", strings.Join(missing, " and "))
	}
	return nil
}

// ItemOf reads the item a run of the backlog pipeline is about.
func ItemOf(r *agentrunner.Run) (*Item, error) {
	it := &Item{}
	if err := fromInputs(r, it); err != nil {
		return nil, err
	}
	if err := it.Check(); err != nil {
		return nil, fmt.Errorf("run %s is not a backlog item: %w", r.ID, err)
	}
	return it, nil
}

// TaskOf reads the task a run of a tasks pipeline is about.
func TaskOf(r *agentrunner.Run) (*Task, error) {
	t := &Task{}
	if err := fromInputs(r, t); err != nil {
		return nil, err
	}
	if t.Key == "" || t.Worktree == "" || t.Branch == "" {
		return nil, agentrunner.Errorf(agentrunner.EINVALID, "run %s is not a task of a backlog item: its inputs have no task_key, branch and worktree", r.ID)
	}
	return t, nil
}

// IsTask reports whether a run's inputs are a task's.
func IsTask(r *agentrunner.Run) bool {
	_, ok := r.Inputs[InputTaskKey]
	return ok && r.Parent != ""
}

func toInputs(v any) map[string]any {
	data, _ := json.Marshal(v) // plain structs of strings and ints always marshal
	var m map[string]any
	_ = json.Unmarshal(data, &m)
	return m
}

func fromInputs(r *agentrunner.Run, v any) error {
	data, err := json.Marshal(r.Inputs)
	if err == nil {
		err = json.Unmarshal(data, v)
	}
	if err != nil {
		return agentrunner.Errorf(agentrunner.EINVALID, "the inputs of run %s: %v", r.ID, err)
	}
	return nil
}
