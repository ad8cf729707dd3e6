// Package todo is the lead agent's to-do list (spec 4): the checks a list
// must pass, the service that reads and writes a run's list on a
// TodoStore, every write a new version, and the tools todo_list_read and
// todo_list_write that give it to the agent of the run. The REST API and
// the CLI read through the same service.
package todo

import (
	"context"
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/agentrunner/agentrunner"
)

// The limits of a list. A to-do list is a plan of high-level steps, not a
// log: a hundred items is far more than a plan needs.
const (
	MaxTodos      = 100
	MaxIDBytes    = 64
	MaxTitleChars = 500
	MaxNoteChars  = 2000
)

// maxProblems bounds the problems one error names.
const maxProblems = 10

// statusList is the statuses as a message lists them.
var statusList = func() string {
	names := make([]string, len(agentrunner.TodoStatuses))
	for i, s := range agentrunner.TodoStatuses {
		names[i] = string(s)
	}
	return strings.Join(names, ", ")
}()

// Check checks a list and returns it as it is stored: each id, title and
// note trimmed of surrounding space. The error, EINVALID, names each
// problem by the to-do's index and field, as a model can fix it in one
// go: `todos[2].status: "later" is not one of pending, in_progress, done,
// cancelled`.
func Check(todos []agentrunner.Todo) ([]agentrunner.Todo, error) {
	if len(todos) > MaxTodos {
		return nil, agentrunner.Errorf(agentrunner.EINVALID,
			"todos: %d to-dos, more than %d: keep the list to the high-level steps of the plan", len(todos), MaxTodos)
	}
	var problems []string
	add := func(i int, field, format string, args ...any) {
		problems = append(problems, fmt.Sprintf("todos[%d].%s: ", i, field)+fmt.Sprintf(format, args...))
	}
	out := make([]agentrunner.Todo, len(todos))
	first := map[string]int{}
	for i, t := range todos {
		t.ID, t.Title, t.Note = strings.TrimSpace(t.ID), strings.TrimSpace(t.Title), strings.TrimSpace(t.Note)
		out[i] = t
		switch j, dup := first[t.ID]; {
		case t.ID == "":
			add(i, "id", "is empty: give each to-do a short id, unique in the list (t1, t2 …)")
		case len(t.ID) > MaxIDBytes:
			add(i, "id", "is %d bytes, more than %d: keep ids short", len(t.ID), MaxIDBytes)
		case dup:
			add(i, "id", "%q is the id of todos[%d] too: ids must be unique in the list", clip(t.ID), j)
		default:
			first[t.ID] = i
		}
		if p := control(t.ID, false); p != "" {
			add(i, "id", "%s", p)
		}
		switch n := utf8.RuneCountInString(t.Title); {
		case n == 0:
			add(i, "title", "is empty: say what the step of the plan is")
		case n > MaxTitleChars:
			add(i, "title", "is %d characters, more than %d: put the detail in the note", n, MaxTitleChars)
		}
		if p := control(t.Title, false); p != "" {
			add(i, "title", "%s", p)
		}
		if !t.Status.Known() {
			add(i, "status", "%q is not one of %s", clip(string(t.Status)), statusList)
		}
		if n := utf8.RuneCountInString(t.Note); n > MaxNoteChars {
			add(i, "note", "is %d characters, more than %d: keep the note short", n, MaxNoteChars)
		}
		if p := control(t.Note, true); p != "" {
			add(i, "note", "%s", p)
		}
	}
	if len(problems) == 0 {
		return out, nil
	}
	if len(problems) > maxProblems {
		problems = append(problems[:maxProblems], fmt.Sprintf("and %d more", len(problems)-maxProblems))
	}
	return nil, agentrunner.Errorf(agentrunner.EINVALID, "%s", strings.Join(problems, "; "))
}

// control says where s has a control character, or is not UTF-8; "" when
// neither. A note may span lines: newlines and tabs are its text.
func control(s string, lines bool) string {
	for i, r := range s {
		switch {
		case r == utf8.RuneError && invalidAt(s, i):
			return fmt.Sprintf("is not valid UTF-8 (at byte %d)", i)
		case lines && (r == '\n' || r == '\t'):
		case unicode.IsControl(r):
			return fmt.Sprintf("has a control character (%U) at byte %d", r, i)
		}
	}
	return ""
}

// invalidAt reports whether the rune at byte i of s is an invalid byte
// rather than a U+FFFD written as such.
func invalidAt(s string, i int) bool {
	_, size := utf8.DecodeRuneInString(s[i:])
	return size == 1
}

// clip shortens a value quoted in a message.
func clip(s string) string {
	const most = 80
	if len(s) <= most {
		return s
	}
	cut := most
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}

// Service reads and writes the runs' to-do lists, checked, on a store.
// Every surface (the tools, REST, the CLI) goes through it.
type Service struct {
	store agentrunner.TodoStore
	clock agentrunner.Clock
}

// Options configure a Service.
type Options struct {
	// Clock stamps the writes; nil: the system clock.
	Clock agentrunner.Clock
}

// NewService returns the to-do lists on store.
func NewService(store agentrunner.TodoStore, opts Options) *Service {
	if opts.Clock == nil {
		opts.Clock = agentrunner.SystemClock{}
	}
	return &Service{store: store, clock: opts.Clock}
}

// Write stores l's todos, once they pass Check, as the next version of
// its run's list, written now by l's agent and step. expected is the
// version the writer read (0: whatever the list is at); when the list
// moved on since, the write is ECONFLICT and stores nothing.
func (s *Service) Write(ctx context.Context, l agentrunner.TodoList, expected int) (*agentrunner.TodoList, error) {
	if l.RunID == "" {
		return nil, agentrunner.Errorf(agentrunner.EINVALID, "a to-do list needs the run it belongs to")
	}
	if expected < 0 {
		return nil, agentrunner.Errorf(agentrunner.EINVALID, "version: give the version read, or none, got %d", expected)
	}
	todos, err := Check(l.Todos)
	if err != nil {
		return nil, err
	}
	l.Todos, l.Version, l.WrittenAt = todos, 0, s.clock.Now().UTC()
	return s.store.WriteTodos(ctx, &l, expected)
}

// Current returns the newest version of a run's list; a run without a
// list has an empty one, at version 0.
func (s *Service) Current(ctx context.Context, runID string) (*agentrunner.TodoList, error) {
	l, err := s.store.Todos(ctx, runID, 0)
	if agentrunner.ErrorCode(err) == agentrunner.ENOTFOUND {
		return &agentrunner.TodoList{RunID: runID}, nil
	}
	return l, err
}

// Version returns one version of a run's list; ENOTFOUND when the run has
// no such version.
func (s *Service) Version(ctx context.Context, runID string, version int) (*agentrunner.TodoList, error) {
	if version < 1 {
		return nil, agentrunner.Errorf(agentrunner.EINVALID, "a to-do list version is 1 or more, got %d", version)
	}
	return s.store.Todos(ctx, runID, version)
}

// History lists every version of a run's list, oldest first; none when
// the run has no list.
func (s *Service) History(ctx context.Context, runID string) ([]*agentrunner.TodoList, error) {
	return s.store.TodoHistory(ctx, runID)
}
