package agentrunner

import (
	"context"
	"encoding/json"
)

// ToolCall is one call of a tool by an agent, as the model (or an MCP
// client) made it.
type ToolCall struct {
	// ID is the provider's id of the call, echoed in its result.
	ID   string
	Name string
	// Arguments is the JSON object the model sent; it may be invalid.
	Arguments json.RawMessage

	// Who made the call, for scoping and the audit log.
	Agent   string
	Step    string
	CycleID string
	Attempt int
}

// ToolResult is what a tool call returns to the model, in the contract of
// spec 4: {"isError": false, "message": result} on success and
// {"isError": true, "message": what went wrong} on failure. A model never
// sees a Go error or a stack.
type ToolResult struct {
	IsError bool   `json:"isError"`
	Message string `json:"message"`
}

// ToolExecutor runs tool calls for every runtime: the model runtime's
// loop, the MCP server that process agents use, and operators' `tools
// call`. It never returns a Go error: a failure is a result with IsError.
type ToolExecutor interface {
	Execute(ctx context.Context, call ToolCall) ToolResult
}
