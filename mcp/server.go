// Package mcp connects agentrunner's tools with the Model Context Protocol
// in both directions: Serve offers an agent's tools to a process agent (a
// coding-agent CLI) over MCP, WriteConfig tells such a CLI how to start
// that server for one attempt, and Connect imports the tools of external
// MCP servers into the registry.
//
// Calls in either direction go through the runner's tool executor, so
// timeouts, retries, circuit breakers and the audit log are the same as
// for the runtimes that call tools directly.
package mcp

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"

	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentrunner/agentrunner"
	"github.com/agentrunner/agentrunner/tool"
)

// ServerName is the name agentrunner's MCP server and client announce to
// their peers, and the key of the server in WriteConfig's file.
const ServerName = "agentrunner"

// Version is the implementation version agentrunner announces over MCP,
// so a peer's logs show which build it talked to.
const Version = "0.1.0"

// Tools is what Serve offers: the tools one agent attempt may call and the
// executor that runs them (a scoped tool executor implements it).
type Tools interface {
	Specs() []tool.Spec
	Execute(ctx context.Context, call agentrunner.ToolCall) agentrunner.ToolResult
}

// namePattern is the registry's rule for tool names (OpenAI's, the
// strictest provider's), so every name crossing MCP is one all providers accept.
var namePattern = regexp.MustCompile(`^[a-zA-Z0-9_-]{1,64}$`)

// noArguments is the schema of a tool declared without parameters, as in
// the registry.
var noArguments = json.RawMessage(`{"type":"object","properties":{}}`)

// Serve serves tools over MCP on t until ctx ends or the client
// disconnects; both are a normal end and return nil. Every call goes
// through tools.Execute with the call's identity taken from caller (agent,
// step, cycle, attempt), so timeouts, breakers and the audit log are the
// runner's. Each tool is offered with its name, description and parameter
// schema; a result is one text content holding the ToolResult's message,
// with isError set from it, so an MCP client sees exactly the
// {"isError", "message"} contract the other runtimes see.
func Serve(ctx context.Context, t mcpsdk.Transport, tools Tools, caller agentrunner.ToolCall) error {
	if t == nil {
		return errors.New("mcp serve: transport is nil")
	}
	srv, err := newServer(tools, caller)
	if err != nil {
		return err
	}
	err = srv.Run(ctx, t)
	if err == nil || ctx.Err() != nil {
		// The client went away or the runner asked us to stop: both end a
		// session normally.
		return nil
	}
	return fmt.Errorf("mcp serve: %w", err)
}

// newServer builds the MCP server of tools, refusing specs an MCP client
// or a provider could not use rather than letting the SDK panic on them.
func newServer(tools Tools, caller agentrunner.ToolCall) (*mcpsdk.Server, error) {
	if tools == nil {
		return nil, errors.New("mcp serve: tools is nil")
	}
	if err := checkCaller(caller); err != nil {
		return nil, fmt.Errorf("mcp serve: %w", err)
	}
	srv := mcpsdk.NewServer(&mcpsdk.Implementation{Name: ServerName, Version: Version}, &mcpsdk.ServerOptions{
		// Advertise tools even when the agent has none, so tools/list
		// answers with an empty list instead of "method not found"; the
		// list never changes during a session.
		Capabilities: &mcpsdk.ServerCapabilities{Tools: &mcpsdk.ToolCapabilities{}},
	})
	seen := map[string]bool{}
	for _, spec := range tools.Specs() {
		if !namePattern.MatchString(spec.Name) {
			return nil, fmt.Errorf("mcp serve: tool %q: invalid name: use 1 to 64 letters, digits, '_' or '-'", spec.Name)
		}
		if seen[spec.Name] {
			return nil, fmt.Errorf("mcp serve: tool %q is offered twice", spec.Name)
		}
		seen[spec.Name] = true
		schema, err := inputSchema(spec.Parameters)
		if err != nil {
			return nil, fmt.Errorf("mcp serve: tool %q: %w", spec.Name, err)
		}
		srv.AddTool(&mcpsdk.Tool{
			Name:        spec.Name,
			Description: spec.Description,
			InputSchema: schema,
		}, handler(tools, caller, spec.Name))
	}
	return srv, nil
}

// checkCaller makes sure every call can be attributed in the audit log.
func checkCaller(c agentrunner.ToolCall) error {
	switch {
	case c.Agent == "":
		return errors.New("caller has no agent")
	case c.Step == "":
		return errors.New("caller has no step")
	case c.CycleID == "":
		return errors.New("caller has no cycle")
	case c.Attempt < 1:
		return fmt.Errorf("caller attempt must be 1 or more, got %d", c.Attempt)
	}
	return nil
}

// inputSchema returns the parameter schema as MCP requires it: a JSON
// object with "type": "object" (the SDK panics on anything else).
func inputSchema(params json.RawMessage) (json.RawMessage, error) {
	if len(bytes.TrimSpace(params)) == 0 {
		return noArguments, nil
	}
	var obj map[string]any
	if err := json.Unmarshal(params, &obj); err != nil || obj == nil {
		return nil, errors.New("parameters are not a JSON object")
	}
	if obj["type"] != "object" {
		return nil, errors.New(`parameters must be a JSON Schema with "type": "object" at the top`)
	}
	return bytes.Clone(params), nil
}

// handler runs one MCP tool call through the executor as the caller.
func handler(tools Tools, caller agentrunner.ToolCall, name string) mcpsdk.ToolHandler {
	return func(ctx context.Context, req *mcpsdk.CallToolRequest) (*mcpsdk.CallToolResult, error) {
		call := caller
		call.ID = "mcp_" + rand.Text()[:16]
		call.Name = name
		call.Arguments = nil
		if req != nil && req.Params != nil {
			call.Arguments = req.Params.Arguments
		}
		res := tools.Execute(ctx, call)
		return &mcpsdk.CallToolResult{
			Content: []mcpsdk.Content{&mcpsdk.TextContent{Text: res.Message}},
			IsError: res.IsError,
		}, nil
	}
}
