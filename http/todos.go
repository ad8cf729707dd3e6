package http

import (
	"net/http"
	"strconv"
	"time"

	"github.com/agentrunner/agentrunner"
	"github.com/agentrunner/agentrunner/internal/clip"
	"github.com/agentrunner/agentrunner/todo"
)

// A lead agent's to-do list (spec 4) is read through the same service as
// its tools: the newest version, one version, or every version. The API
// only reads it; the agent of the run writes it.

// TodoList is one version of a run's to-do list as the API shows it. A
// run without a list has an empty one at version 0, without WrittenAt.
type TodoList struct {
	RunID     string             `json:"run_id"`
	Version   int                `json:"version"`
	Todos     []agentrunner.Todo `json:"todos"`
	WrittenAt *time.Time         `json:"written_at,omitempty"`
	// Agent and Step say who wrote it.
	Agent string `json:"agent,omitempty"`
	Step  string `json:"step,omitempty"`
}

// TodoHistory is every version of a run's to-do list, oldest first.
type TodoHistory struct {
	RunID    string     `json:"run_id"`
	Versions []TodoList `json:"versions"`
}

// TodoListOf shows a version of a list.
func TodoListOf(l *agentrunner.TodoList) TodoList {
	var at *time.Time
	if !l.WrittenAt.IsZero() {
		t := l.WrittenAt.UTC()
		at = &t
	}
	return TodoList{RunID: l.RunID, Version: l.Version, Todos: orEmpty(l.Todos), WrittenAt: at, Agent: l.Agent, Step: l.Step}
}

// TodoHistoryOf shows every version of a run's list.
func TodoHistoryOf(runID string, ls []*agentrunner.TodoList) TodoHistory {
	out := TodoHistory{RunID: runID, Versions: make([]TodoList, len(ls))}
	for i, l := range ls {
		out.Versions[i] = TodoListOf(l)
	}
	return out
}

// handleTodos shows a run's to-do list: the newest version (an empty list
// at version 0 when the agent has written none), the version ?version=
// names, or with ?history=true every version, oldest first.
func (s *Server) handleTodos(w http.ResponseWriter, r *http.Request) {
	q, err := strictQuery(r, nil, "version", "history")
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	version, history := 0, false
	if v := q.Get("version"); v != "" {
		if version, err = strconv.Atoi(v); err != nil || version < 1 {
			s.writeError(w, r, agentrunner.Errorf(agentrunner.EINVALID, "query parameter version: want a version, 1 or more, got %q", clip.String(v, maxQuoted)))
			return
		}
	}
	if v := q.Get("history"); v != "" {
		if history, err = strconv.ParseBool(v); err != nil {
			s.writeError(w, r, agentrunner.Errorf(agentrunner.EINVALID, "query parameter history: want true or false, got %q", clip.String(v, maxQuoted)))
			return
		}
	}
	if history && version != 0 {
		s.writeError(w, r, agentrunner.Errorf(agentrunner.EINVALID, "query parameters version and history: give one, not both"))
		return
	}
	run := s.runOf(w, r)
	if run == nil {
		return
	}
	svc := todo.NewService(s.store, todo.Options{Clock: s.clock})
	ctx := r.Context()
	switch {
	case history:
		ls, err := svc.History(ctx, run.ID)
		if err != nil {
			s.writeError(w, r, err)
			return
		}
		writeJSON(w, http.StatusOK, TodoHistoryOf(run.ID, ls))
		return
	case version != 0:
		l, err := svc.Version(ctx, run.ID, version)
		if err != nil {
			s.writeError(w, r, err)
			return
		}
		writeJSON(w, http.StatusOK, TodoListOf(l))
		return
	}
	l, err := svc.Current(ctx, run.ID)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, TodoListOf(l))
}
