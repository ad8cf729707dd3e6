package todo

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/agentrunner/agentrunner"
	"github.com/agentrunner/agentrunner/tool"
)

// The to-do tools' names, which are also their kinds in tools:.
const (
	ToolRead  = "todo_list_read"
	ToolWrite = "todo_list_write"
)

// ReadSpec and WriteSpec are what a model is offered.
var (
	ReadSpec = tool.Spec{
		Name: ToolRead,
		Description: "Reads your to-do list: the plan of this run, as you last wrote it. " +
			`Returns {"version": N, "todos": [{"id", "title", "status", "note"}]}; version 0 and no to-dos before the first write. ` +
			"Pass the version to todo_list_write, so that a write never undoes a change you did not read.",
		Parameters: json.RawMessage(`{"type":"object","properties":{},"additionalProperties":false}`),
		Timeout:    10 * time.Second,
	}
	WriteSpec = tool.Spec{
		Name: ToolWrite,
		Description: "Writes your whole to-do list for this run: the high-level steps of your plan, each with a short id you keep " +
			"across writes, a title and a status (pending, in_progress, done, cancelled), and an optional note. " +
			"The list given replaces the one before; each write is a new version. Give version, the version todo_list_read " +
			"returned: if the list changed since, the write is refused and you read it again. Returns the list as stored, with its new version.",
		Parameters: json.RawMessage(`{"type":"object","properties":{` +
			`"todos":{"type":"array","maxItems":100,"items":{"type":"object","properties":{` +
			`"id":{"type":"string","minLength":1,"maxLength":64,"description":"short and unique in the list (t1, t2 …)"},` +
			`"title":{"type":"string","minLength":1,"maxLength":500},` +
			`"status":{"type":"string","enum":["pending","in_progress","done","cancelled"]},` +
			`"note":{"type":"string","maxLength":2000,"description":"optional: what was found, why it was cancelled"}},` +
			`"required":["id","title","status"],"additionalProperties":false}},` +
			`"version":{"type":"integer","minimum":0,"description":"the version todo_list_read returned; none: write over whatever the list is at"}},` +
			`"required":["todos"],"additionalProperties":false}`),
		Timeout: 10 * time.Second,
	}
)

// View is a version of a list as the tools show it.
type View struct {
	Version int                `json:"version"`
	Todos   []agentrunner.Todo `json:"todos"`
}

// ViewOf is l as the tools show it: never a null list.
func ViewOf(l *agentrunner.TodoList) View {
	v := View{Version: l.Version, Todos: l.Todos}
	if v.Todos == nil {
		v.Todos = []agentrunner.Todo{}
	}
	return v
}

// errNoRun refuses a call that comes from no run. The executor puts the
// tool's name (which a configuration may change) before it.
var errNoRun = errors.New("the to-do list is the one of the run whose agent calls the tool, and this call comes from no run: call it from an agent's step in a run")

// runOf is the call of the agent that calls a tool, from its run.
func runOf(ctx context.Context) (agentrunner.ToolCall, error) {
	call, ok := tool.CallOf(ctx)
	if !ok || call.CycleID == "" {
		return call, errNoRun
	}
	return call, nil
}

// ReadHandler reads the to-do list of the caller's run.
func (s *Service) ReadHandler() tool.Handler {
	return tool.HandlerFunc(func(ctx context.Context, raw json.RawMessage) (string, error) {
		var args struct{}
		if err := tool.DecodeArgs(raw, &args); err != nil {
			return "", err
		}
		call, err := runOf(ctx)
		if err != nil {
			return "", err
		}
		l, err := s.Current(ctx, call.CycleID)
		if err != nil {
			return "", err
		}
		return message(l)
	})
}

// WriteHandler writes the to-do list of the caller's run.
func (s *Service) WriteHandler() tool.Handler {
	return tool.HandlerFunc(func(ctx context.Context, raw json.RawMessage) (string, error) {
		var args struct {
			Todos   []agentrunner.Todo `json:"todos"`
			Version *int               `json:"version"`
		}
		if err := tool.DecodeArgs(raw, &args); err != nil {
			return "", err
		}
		if args.Todos == nil {
			return "", errors.New("todos is required: give the whole list, [] for an empty one")
		}
		call, err := runOf(ctx)
		if err != nil {
			return "", err
		}
		expected := 0
		if args.Version != nil {
			expected = *args.Version
		}
		l, err := s.Write(ctx, agentrunner.TodoList{RunID: call.CycleID, Todos: args.Todos, Agent: call.Agent, Step: call.Step}, expected)
		if err != nil {
			return "", err
		}
		return message(l)
	})
}

func message(l *agentrunner.TodoList) (string, error) {
	data, err := json.Marshal(ViewOf(l))
	return string(data), err
}
