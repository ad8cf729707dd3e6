package agentrunner

import (
	"context"
	"time"
)

// TodoStatus is where a to-do stands. The lead agent moves its to-dos
// along as it works (spec 4); the runner only checks that the status is
// one of these.
type TodoStatus string

// The statuses of a to-do.
const (
	TodoPending    TodoStatus = "pending"
	TodoInProgress TodoStatus = "in_progress"
	TodoDone       TodoStatus = "done"
	TodoCancelled  TodoStatus = "cancelled"
)

// TodoStatuses lists the statuses in the order a to-do goes through them,
// for messages and documentation.
var TodoStatuses = []TodoStatus{TodoPending, TodoInProgress, TodoDone, TodoCancelled}

// Known reports whether s is one of TodoStatuses.
func (s TodoStatus) Known() bool {
	switch s {
	case TodoPending, TodoInProgress, TodoDone, TodoCancelled:
		return true
	}
	return false
}

// Todo is one item of a lead agent's to-do list: a high-level plan step.
// Its JSON is the shape the agent writes and reads with its tools.
type Todo struct {
	// ID is short and given by the agent, unique in its list, so that the
	// agent can follow an item from one version of the list to the next.
	ID     string     `json:"id"`
	Title  string     `json:"title"`
	Status TodoStatus `json:"status"`
	// Note is optional: what was found, why it was cancelled.
	Note string `json:"note,omitempty"`
}

// TodoList is one version of a run's to-do list. The agent writes the
// whole list each time (spec 4's todo_list_write); every write is a new
// version, and the earlier ones are kept, so an operator can follow how
// the plan changed.
type TodoList struct {
	RunID string
	// Version counts the run's writes from 1; 0 is a run without a list.
	Version   int
	Todos     []Todo
	WrittenAt time.Time
	// Agent and Step say who wrote it.
	Agent, Step string
}

// TodoStore keeps the runs' to-do lists, every version of them.
type TodoStore interface {
	// WriteTodos stores l's todos as the next version of its run's list
	// and returns it with its Version. expected is the version the writer
	// read: when the list is at another one (it changed since, or there
	// is none and expected is not 0) the write is an ECONFLICT error;
	// 0 writes whatever the list is at.
	WriteTodos(ctx context.Context, l *TodoList, expected int) (*TodoList, error)
	// Todos returns one version of a run's list, the newest when version
	// is 0; ENOTFOUND when the run has no list, or not that version.
	Todos(ctx context.Context, runID string, version int) (*TodoList, error)
	// TodoHistory lists every version of a run's list, oldest first; none
	// when the run has no list.
	TodoHistory(ctx context.Context, runID string) ([]*TodoList, error)
}
