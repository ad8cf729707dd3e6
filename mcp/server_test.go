package mcp

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentrunner/agentrunner"
	"github.com/agentrunner/agentrunner/tool"
)

var testCaller = agentrunner.ToolCall{Agent: "research", Step: "research", CycleID: "20260101_000000", Attempt: 2}

// TestServeOverStdio drives Serve in a real subprocess with the SDK's own
// client, as a coding-agent CLI would.
func TestServeOverStdio(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	caller, _ := json.Marshal(testCaller)
	cmd := helperCmd("serve", callerEnv+"="+string(caller))
	client := mcpsdk.NewClient(&mcpsdk.Implementation{Name: "cli", Version: "1"}, nil)
	cs, err := client.Connect(ctx, &mcpsdk.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	closed := false
	defer func() {
		if !closed {
			cs.Close()
		}
	}()

	info := cs.InitializeResult().ServerInfo
	if info.Name != "agentrunner" || info.Version != Version {
		t.Errorf("server info = %s %s, want agentrunner %s", info.Name, info.Version, Version)
	}

	list, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatalf("list tools: %v", err)
	}
	type listed struct {
		Name, Description string
		Schema            any
	}
	var got []listed
	for _, tl := range list.Tools {
		got = append(got, listed{tl.Name, tl.Description, tl.InputSchema})
	}
	want := []listed{
		{"fail", "Always fails.", map[string]any{"type": "object", "properties": map[string]any{}}},
		{"whoami", "Says who called.", map[string]any{
			"type":       "object",
			"properties": map[string]any{"greeting": map[string]any{"type": "string"}},
			"required":   []any{"greeting"},
		}},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("tools (-want +got):\n%s", diff)
	}

	res, err := cs.CallTool(ctx, &mcpsdk.CallToolParams{Name: "whoami", Arguments: map[string]any{"greeting": "hi"}})
	if err != nil {
		t.Fatalf("call whoami: %v", err)
	}
	if res.IsError {
		t.Fatalf("whoami isError, text %q", textOf(t, res))
	}
	var seen seenCall
	if err := json.Unmarshal([]byte(textOf(t, res)), &seen); err != nil {
		t.Fatalf("whoami result: %v", err)
	}
	wantSeen := seenCall{
		IDPrefix: "mcp_", IDLen: 20, Name: "whoami", Arguments: json.RawMessage(`{"greeting":"hi"}`),
		Agent: testCaller.Agent, Step: testCaller.Step, CycleID: testCaller.CycleID, Attempt: testCaller.Attempt,
	}
	if diff := cmp.Diff(wantSeen, seen); diff != "" {
		t.Errorf("call that reached the executor (-want +got):\n%s", diff)
	}

	res, err = cs.CallTool(ctx, &mcpsdk.CallToolParams{Name: "fail"})
	if err != nil {
		t.Fatalf("call fail: %v", err)
	}
	if !res.IsError || textOf(t, res) != "fail: the market is closed" {
		t.Errorf("fail = isError %v %q, want isError true with the tool's message", res.IsError, textOf(t, res))
	}

	_, err = cs.CallTool(ctx, &mcpsdk.CallToolParams{Name: "nope"})
	var wire *jsonrpc.Error
	if !errors.As(err, &wire) || wire.Code != jsonrpc.CodeInvalidParams || !strings.Contains(wire.Message, "nope") {
		t.Errorf("unknown tool: err = %v, want an invalid-params protocol error naming it", err)
	}

	// Closing stdin is how a host ends the server; Serve returns nil then,
	// so the process exits 0.
	closed = true
	if err := cs.Close(); err != nil {
		t.Errorf("close: %v (the server should exit 0 when its client disconnects)", err)
	}
	if cmd.ProcessState == nil || cmd.ProcessState.ExitCode() != 0 {
		t.Errorf("server process state %v, want exit 0", cmd.ProcessState)
	}
}

// specTools offers fixed specs.
type specTools []tool.Spec

func (s specTools) Specs() []tool.Spec { return s }
func (specTools) Execute(context.Context, agentrunner.ToolCall) agentrunner.ToolResult {
	return agentrunner.ToolResult{Message: "ok"}
}

func TestServeRefusesBadInput(t *testing.T) {
	obj := json.RawMessage(`{"type":"object"}`)
	tests := []struct {
		name   string
		tools  Tools
		caller agentrunner.ToolCall
		want   string
	}{
		{"nil tools", nil, testCaller, "tools is nil"},
		{"bad name", specTools{{Name: "a.b", Parameters: obj}}, testCaller, `tool "a.b": invalid name`},
		{"empty name", specTools{{Name: "", Parameters: obj}}, testCaller, `tool "": invalid name`},
		{"duplicate", specTools{{Name: "a", Parameters: obj}, {Name: "a", Parameters: obj}}, testCaller, `tool "a" is offered twice`},
		{"schema not JSON", specTools{{Name: "a", Parameters: json.RawMessage(`{`)}}, testCaller, `tool "a": parameters are not a JSON object`},
		{"schema array", specTools{{Name: "a", Parameters: json.RawMessage(`[]`)}}, testCaller, `tool "a": parameters are not a JSON object`},
		{"schema not object", specTools{{Name: "a", Parameters: json.RawMessage(`{"type":"string"}`)}}, testCaller, `tool "a": parameters must be a JSON Schema with "type": "object"`},
		{"no agent", specTools{}, agentrunner.ToolCall{Step: "s", CycleID: "c", Attempt: 1}, "caller has no agent"},
		{"no step", specTools{}, agentrunner.ToolCall{Agent: "a", CycleID: "c", Attempt: 1}, "caller has no step"},
		{"no cycle", specTools{}, agentrunner.ToolCall{Agent: "a", Step: "s", Attempt: 1}, "caller has no cycle"},
		{"attempt 0", specTools{}, agentrunner.ToolCall{Agent: "a", Step: "s", CycleID: "c"}, "caller attempt must be 1 or more, got 0"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st, _ := mcpsdk.NewInMemoryTransports()
			err := Serve(t.Context(), st, tt.tools, tt.caller)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Serve = %v, want an error containing %q", err, tt.want)
			}
		})
	}
	if err := Serve(t.Context(), nil, specTools{}, testCaller); err == nil {
		t.Error("Serve with a nil transport succeeded")
	}
}

// TestServeEndsWithContext shows that a runner stopping the server is a
// normal end, and that a server with no tools still answers tools/list.
func TestServeEndsWithContext(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	st, ct := mcpsdk.NewInMemoryTransports()
	done := make(chan error, 1)
	go func() { done <- Serve(ctx, st, specTools{}, testCaller) }()

	cs, err := mcpsdk.NewClient(&mcpsdk.Implementation{Name: "cli", Version: "1"}, nil).Connect(ctx, ct, nil)
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	defer cs.Close()
	list, err := cs.ListTools(ctx, nil)
	if err != nil || len(list.Tools) != 0 {
		t.Fatalf("list tools of an agent without tools = %v, %v; want an empty list", list, err)
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("Serve after cancel = %v, want nil", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Serve did not return after its context ended")
	}
}
