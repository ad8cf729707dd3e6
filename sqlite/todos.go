package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	"github.com/agentrunner/agentrunner"
)

var _ agentrunner.TodoStore = (*Store)(nil)

// The statements of the to-do lists.
const (
	todoColumns     = `run_id, version, todos, written_at, agent, step`
	sqlTodoVersion  = `SELECT COALESCE(MAX(version), 0) FROM todo_lists WHERE run_id = ?`
	sqlInsertTodos  = `INSERT INTO todo_lists (` + todoColumns + `) VALUES (?, ?, ?, ?, ?, ?)`
	sqlNewestTodos  = `SELECT ` + todoColumns + ` FROM todo_lists WHERE run_id = ? ORDER BY version DESC LIMIT 1`
	sqlTodosVersion = `SELECT ` + todoColumns + ` FROM todo_lists WHERE run_id = ? AND version = ?`
	sqlTodoHistory  = `SELECT ` + todoColumns + ` FROM todo_lists WHERE run_id = ? ORDER BY version`
)

// storedTodo is a to-do as the todos column holds it: the column's shape
// is the store's own, whatever the domain type's JSON becomes.
type storedTodo struct {
	ID     string `json:"id"`
	Title  string `json:"title"`
	Status string `json:"status"`
	Note   string `json:"note,omitempty"`
}

func encodeTodos(todos []agentrunner.Todo) (string, error) {
	out := make([]storedTodo, len(todos))
	for i, t := range todos {
		out[i] = storedTodo{ID: t.ID, Title: t.Title, Status: string(t.Status), Note: t.Note}
	}
	b, err := json.Marshal(out)
	return string(b), err
}

// decodeTodos reads the todos column; an empty list is nil.
func decodeTodos(runID string, version int, data string) ([]agentrunner.Todo, error) {
	var in []storedTodo
	if err := json.Unmarshal([]byte(data), &in); err != nil {
		return nil, fmt.Errorf("to-do list %d of run %s: %w", version, runID, err)
	}
	if len(in) == 0 {
		return nil, nil
	}
	out := make([]agentrunner.Todo, len(in))
	for i, t := range in {
		out[i] = agentrunner.Todo{ID: t.ID, Title: t.Title, Status: agentrunner.TodoStatus(t.Status), Note: t.Note}
	}
	return out, nil
}

// WriteTodos stores the next version of a run's to-do list, in one
// transaction that reads the version the list is at, checks it against
// expected and inserts the next one. Writes are serialized on the write
// connection, so two writers that read the same version cannot both
// write on it: the second finds the list moved on.
func (s *Store) WriteTodos(ctx context.Context, l *agentrunner.TodoList, expected int) (*agentrunner.TodoList, error) {
	what := fmt.Sprintf("the to-do list of run %q", l.RunID)
	switch {
	case l.RunID == "":
		return nil, agentrunner.Errorf(agentrunner.EINVALID, "a to-do list needs the run it belongs to")
	case expected < 0:
		return nil, agentrunner.Errorf(agentrunner.EINVALID, "%s: the expected version must be a version read, or 0 for any, got %d", what, expected)
	case l.WrittenAt.IsZero():
		return nil, agentrunner.Errorf(agentrunner.EINVALID, "%s: a write time is required", what)
	}
	todos, err := encodeTodos(l.Todos)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	var out *agentrunner.TodoList
	err = s.inTx(ctx, func(ctx context.Context, w *writer) (bool, error) {
		var current int
		if err := w.queryRow(ctx, sqlTodoVersion, []any{l.RunID}, &current); err != nil {
			return false, translate(err, what, "")
		}
		switch {
		case expected == 0 || expected == current:
		case current == 0:
			return false, agentrunner.Errorf(agentrunner.ECONFLICT,
				"run %q has no to-do list yet, so it is not at version %d: write it with version 0", l.RunID, expected)
		default:
			return false, agentrunner.Errorf(agentrunner.ECONFLICT,
				"%s is at version %d, not %d: it changed since it was read; read it again and write the change on version %d",
				what, current, expected, current)
		}
		next := current + 1
		if _, err := w.exec(ctx, sqlInsertTodos, l.RunID, next, todos, encodeTime(l.WrittenAt), l.Agent, l.Step); err != nil {
			return false, translate(err, what, fmt.Sprintf("version %d was written by another writer first", next))
		}
		out = &agentrunner.TodoList{RunID: l.RunID, Version: next, WrittenAt: l.WrittenAt.UTC(), Agent: l.Agent, Step: l.Step}
		if len(l.Todos) > 0 {
			out.Todos = slices.Clone(l.Todos)
		}
		return true, nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// Todos returns one version of a run's to-do list, the newest when
// version is 0.
func (s *Store) Todos(ctx context.Context, runID string, version int) (*agentrunner.TodoList, error) {
	if version < 0 {
		return nil, agentrunner.Errorf(agentrunner.EINVALID, "a to-do list version is 1 or more (0: the newest), got %d", version)
	}
	var l *agentrunner.TodoList
	var err error
	if version == 0 {
		l, err = scanTodoList(s.read.QueryRowContext(ctx, sqlNewestTodos, runID))
	} else {
		l, err = scanTodoList(s.read.QueryRowContext(ctx, sqlTodosVersion, runID, version))
	}
	if !errors.Is(err, sql.ErrNoRows) {
		return l, err
	}
	var newest int
	if version > 0 {
		if err := s.read.QueryRowContext(ctx, sqlTodoVersion, runID).Scan(&newest); err != nil {
			return nil, err
		}
	}
	if newest == 0 {
		return nil, agentrunner.Errorf(agentrunner.ENOTFOUND, "run %q has no to-do list", runID)
	}
	return nil, agentrunner.Errorf(agentrunner.ENOTFOUND, "run %q has no to-do list version %d: its versions are 1 to %d", runID, version, newest)
}

// TodoHistory lists every version of a run's to-do list, oldest first.
func (s *Store) TodoHistory(ctx context.Context, runID string) ([]*agentrunner.TodoList, error) {
	return queryAll(ctx, s.read, scanTodoList, sqlTodoHistory, runID)
}

func scanTodoList(row scanner) (*agentrunner.TodoList, error) {
	var l agentrunner.TodoList
	var todos string
	var written sql.NullString
	if err := row.Scan(&l.RunID, &l.Version, &todos, &written, &l.Agent, &l.Step); err != nil {
		return nil, err
	}
	var err error
	if l.WrittenAt, err = decodeTime(written); err != nil {
		return nil, err
	}
	if l.Todos, err = decodeTodos(l.RunID, l.Version, todos); err != nil {
		return nil, err
	}
	return &l, nil
}
