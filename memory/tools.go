package memory

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/agentrunner/agentrunner"
	"github.com/agentrunner/agentrunner/tool"
)

// The memory tools' names, which are also their kinds in tools:.
const (
	ToolAppend = "memory_append"
	ToolSearch = "memory_search"
)

// AppendSpec and SearchSpec are what a model is offered.
var (
	AppendSpec = tool.Spec{
		Name: ToolAppend,
		Description: "Appends a note to your own memory, which you and later cycles read (your memory file) and which memory_search finds. " +
			"Write what a later cycle should know: a lesson, a result, a decision and why. Returns the entry's id.",
		Parameters: json.RawMessage(`{"type":"object","properties":{"text":{"type":"string","minLength":1,"maxLength":8000}},"required":["text"],"additionalProperties":false}`),
		Timeout:    10 * time.Second,
	}
	SearchSpec = tool.Spec{
		Name: ToolSearch,
		Description: "Searches the memory entries of every agent, or of the agents named, best match first, with a snippet of each. " +
			`Words match their stems; quote a phrase ("stop loss"); use OR, NOT and prefix* as in SQLite FTS5.`,
		Parameters: json.RawMessage(`{"type":"object","properties":{"query":{"type":"string","minLength":1},` +
			`"agents":{"type":"array","items":{"type":"string"},"description":"whose memories; none: every agent's"},` +
			`"limit":{"type":"integer","minimum":1,"maximum":100}},"required":["query"],"additionalProperties":false}`),
		Timeout: 10 * time.Second,
	}
)

// AppendHandler appends to the memory of the agent that calls it.
func (l *Log) AppendHandler() tool.Handler {
	return tool.HandlerFunc(func(ctx context.Context, raw json.RawMessage) (string, error) {
		var args struct {
			Text string `json:"text"`
		}
		if err := tool.DecodeArgs(raw, &args); err != nil {
			return "", err
		}
		call, ok := tool.CallOf(ctx)
		if !ok || call.Agent == "" {
			return "", errors.New("memory_append appends to the memory of the agent that calls it: call it from an agent")
		}
		e, err := l.Append(ctx, agentrunner.MemoryEntry{Agent: call.Agent, RunID: call.CycleID, Step: call.Step, Attempt: call.Attempt, Text: args.Text})
		if err != nil && e == nil {
			return "", err
		}
		return fmt.Sprintf("appended entry %d to the memory of %s", e.ID, call.Agent), nil
	})
}

// SearchHandler searches the memories.
func (l *Log) SearchHandler() tool.Handler {
	return tool.HandlerFunc(func(ctx context.Context, raw json.RawMessage) (string, error) {
		var args struct {
			Query  string   `json:"query"`
			Agents []string `json:"agents"`
			Limit  int      `json:"limit"`
		}
		if err := tool.DecodeArgs(raw, &args); err != nil {
			return "", err
		}
		hits, err := l.Search(ctx, args.Query, args.Agents, args.Limit)
		if err != nil {
			return "", err
		}
		type hit struct {
			ID      int64     `json:"id"`
			Agent   string    `json:"agent"`
			RunID   string    `json:"cycle_id,omitempty"`
			Time    time.Time `json:"time"`
			Rank    float64   `json:"rank"`
			Snippet string    `json:"snippet"`
			Text    string    `json:"text"`
		}
		out := make([]hit, len(hits))
		for i, h := range hits {
			out[i] = hit{h.Entry.ID, h.Entry.Agent, h.Entry.RunID, h.Entry.CreatedAt, h.Rank, h.Snippet, h.Entry.Text}
		}
		data, err := json.Marshal(out)
		return string(data), err
	})
}
