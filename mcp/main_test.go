package mcp

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"testing"

	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentrunner/agentrunner"
	"github.com/agentrunner/agentrunner/tool"
)

// The test binary doubles as the MCP processes the tests talk to: when
// modeEnv is set, TestMain runs that process instead of the tests.
const (
	modeEnv       = "MCPTEST_MODE"
	callerEnv     = "MCPTEST_CALLER"     // serve: the caller as JSON
	pidFileEnv    = "MCPTEST_PIDFILE"    // upstream: write own pid here
	grandchildEnv = "MCPTEST_GRANDCHILD" // upstream: start a sleeper, write its pid here
	stubbornEnv   = "MCPTEST_STUBBORN"   // upstream: ignore stdin EOF and SIGTERM
	greetingEnv   = "MCPTEST_GREETING"   // upstream: returned by the env tool
	dumpEnv       = "MCPTEST_DUMPENV"    // upstream: the env tool returns the whole environment, values in hex
	leakEnv       = "MCPTEST_LEAK"       // upstream, badstart: print the value of this variable
)

func TestMain(m *testing.M) {
	if mode := os.Getenv(modeEnv); mode != "" {
		os.Exit(helperMain(mode))
	}
	os.Exit(m.Run())
}

func helperMain(mode string) int {
	ctx := context.Background()
	switch mode {
	case "serve":
		var caller agentrunner.ToolCall
		if err := json.Unmarshal([]byte(os.Getenv(callerEnv)), &caller); err != nil {
			fmt.Fprintln(os.Stderr, "bad caller:", err)
			return 2
		}
		if err := Serve(ctx, &mcpsdk.StdioTransport{}, fakeTools{}, caller); err != nil {
			fmt.Fprintln(os.Stderr, "serve:", err)
			return 1
		}
		return 0
	case "upstream":
		return upstreamMain(ctx)
	case "badstart":
		if name := os.Getenv(leakEnv); name != "" {
			fmt.Fprintf(os.Stderr, "fatal: upstream refused key %s\n", os.Getenv(name))
			return 1
		}
		fmt.Fprintln(os.Stderr, "fatal: missing API key for upstream")
		return 1
	case "sleep":
		select {}
	}
	fmt.Fprintln(os.Stderr, "unknown mode", mode)
	return 2
}

func upstreamMain(ctx context.Context) int {
	fmt.Fprintln(os.Stderr, "upstream ready")
	if name := os.Getenv(leakEnv); name != "" {
		fmt.Fprintf(os.Stderr, "using key %s\n", os.Getenv(name))
	}
	if f := os.Getenv(pidFileEnv); f != "" {
		if err := os.WriteFile(f, []byte(strconv.Itoa(os.Getpid())), 0o600); err != nil {
			return 2
		}
	}
	if f := os.Getenv(grandchildEnv); f != "" {
		cmd := exec.Command(os.Args[0])
		cmd.Env = append(os.Environ(), modeEnv+"=sleep")
		if err := cmd.Start(); err != nil {
			return 2
		}
		if err := os.WriteFile(f, []byte(strconv.Itoa(cmd.Process.Pid)), 0o600); err != nil {
			return 2
		}
	}
	if os.Getenv(stubbornEnv) != "" {
		signal.Ignore(syscall.SIGTERM)
	}
	err := upstreamServer().Run(ctx, &mcpsdk.StdioTransport{})
	if os.Getenv(stubbornEnv) != "" {
		select {} // only SIGKILL ends this one
	}
	if err != nil {
		return 1
	}
	return 0
}

// fakeTools is what Serve offers in the tests. whoami echoes the call it
// got, so the test sees the caller context that reached the executor.
type fakeTools struct{}

func (fakeTools) Specs() []tool.Spec {
	return []tool.Spec{
		{Name: "fail", Description: "Always fails."},
		{Name: "whoami", Description: "Says who called.", Parameters: json.RawMessage(`{"type":"object","properties":{"greeting":{"type":"string"}},"required":["greeting"]}`)},
	}
}

// seenCall is what whoami reports.
type seenCall struct {
	IDPrefix  string          `json:"id_prefix"`
	IDLen     int             `json:"id_len"`
	Name      string          `json:"name"`
	Arguments json.RawMessage `json:"arguments"`
	Agent     string          `json:"agent"`
	Step      string          `json:"step"`
	CycleID   string          `json:"cycle"`
	Attempt   int             `json:"attempt"`
}

func (fakeTools) Execute(_ context.Context, call agentrunner.ToolCall) agentrunner.ToolResult {
	switch call.Name {
	case "whoami":
		b, _ := json.Marshal(seenCall{
			IDPrefix: call.ID[:min(4, len(call.ID))], IDLen: len(call.ID), Name: call.Name,
			Arguments: call.Arguments, Agent: call.Agent, Step: call.Step, CycleID: call.CycleID, Attempt: call.Attempt,
		})
		return agentrunner.ToolResult{Message: string(b)}
	case "fail":
		return agentrunner.ToolResult{IsError: true, Message: "fail: the market is closed"}
	}
	return agentrunner.ToolResult{IsError: true, Message: "unknown tool " + call.Name}
}

// upstreamServer is the external MCP server of the client tests, built
// with the SDK as a third party would.
func upstreamServer() *mcpsdk.Server {
	srv := mcpsdk.NewServer(&mcpsdk.Implementation{Name: "upstream", Version: "1"}, nil)
	text := func(s string) *mcpsdk.CallToolResult {
		return &mcpsdk.CallToolResult{Content: []mcpsdk.Content{&mcpsdk.TextContent{Text: s}}}
	}
	obj := map[string]any{"type": "object"}
	srv.AddTool(&mcpsdk.Tool{
		Name:        "echo",
		Description: "Echoes text.",
		InputSchema: map[string]any{"type": "object", "properties": map[string]any{"text": map[string]any{"type": "string"}}, "required": []string{"text"}},
	}, func(_ context.Context, req *mcpsdk.CallToolRequest) (*mcpsdk.CallToolResult, error) {
		var in struct{ Text string }
		if err := json.Unmarshal(req.Params.Arguments, &in); err != nil {
			return nil, err
		}
		return text("echo: " + in.Text), nil
	})
	srv.AddTool(&mcpsdk.Tool{Name: "boom", InputSchema: obj}, func(context.Context, *mcpsdk.CallToolRequest) (*mcpsdk.CallToolResult, error) {
		r := text("boom: disk full")
		r.IsError = true
		return r, nil
	})
	srv.AddTool(&mcpsdk.Tool{Name: "mixed", Description: "Many kinds of content.", InputSchema: obj}, func(context.Context, *mcpsdk.CallToolRequest) (*mcpsdk.CallToolResult, error) {
		return &mcpsdk.CallToolResult{Content: []mcpsdk.Content{
			&mcpsdk.TextContent{Text: "chart follows"},
			&mcpsdk.ImageContent{Data: []byte("png"), MIMEType: "image/png"},
			&mcpsdk.AudioContent{Data: []byte("wav"), MIMEType: "audio/wav"},
			&mcpsdk.ResourceLink{URI: "file:///data/report.csv", Name: "report"},
			&mcpsdk.EmbeddedResource{Resource: &mcpsdk.ResourceContents{URI: "mem://notes", MIMEType: "text/plain", Text: "note one"}},
			&mcpsdk.EmbeddedResource{Resource: &mcpsdk.ResourceContents{URI: "mem://blob", MIMEType: "application/octet-stream", Blob: []byte{1, 2}}},
			&mcpsdk.TextContent{Text: "end"},
		}}, nil
	})
	srv.AddTool(&mcpsdk.Tool{Name: "slow", InputSchema: obj}, func(ctx context.Context, _ *mcpsdk.CallToolRequest) (*mcpsdk.CallToolResult, error) {
		<-ctx.Done()
		return nil, ctx.Err()
	})
	srv.AddTool(&mcpsdk.Tool{Name: "crash", InputSchema: obj}, func(context.Context, *mcpsdk.CallToolRequest) (*mcpsdk.CallToolResult, error) {
		os.Exit(3)
		return nil, nil
	})
	srv.AddTool(&mcpsdk.Tool{Name: "pid", InputSchema: obj}, func(context.Context, *mcpsdk.CallToolRequest) (*mcpsdk.CallToolResult, error) {
		return text(strconv.Itoa(os.Getpid())), nil
	})
	srv.AddTool(&mcpsdk.Tool{Name: "env", InputSchema: obj}, func(context.Context, *mcpsdk.CallToolRequest) (*mcpsdk.CallToolResult, error) {
		if os.Getenv(dumpEnv) != "" {
			// In hex: the client redacts the credentials it passed
			// wherever they appear in plain.
			var lines []string
			for _, kv := range os.Environ() {
				k, v, _ := strings.Cut(kv, "=")
				lines = append(lines, k+"="+hex.EncodeToString([]byte(v)))
			}
			return text(strings.Join(lines, "\n")), nil
		}
		if name := os.Getenv(leakEnv); name != "" {
			return text("the key is " + os.Getenv(name)), nil
		}
		return text(os.Getenv(greetingEnv)), nil
	})
	srv.AddTool(&mcpsdk.Tool{Name: "bad.name", InputSchema: obj}, func(context.Context, *mcpsdk.CallToolRequest) (*mcpsdk.CallToolResult, error) {
		return text("unreachable"), nil
	})
	// The SDK refuses to serve unusable schemas, so they are slipped into
	// the tools/list answer on the wire, as a sloppy server would send them.
	srv.AddReceivingMiddleware(func(next mcpsdk.MethodHandler) mcpsdk.MethodHandler {
		return func(ctx context.Context, method string, req mcpsdk.Request) (mcpsdk.Result, error) {
			res, err := next(ctx, method, req)
			if r, ok := res.(*mcpsdk.ListToolsResult); ok && err == nil && method == "tools/list" {
				r.Tools = append(r.Tools,
					&mcpsdk.Tool{Name: "stringy", InputSchema: map[string]any{"type": "string"}},
					&mcpsdk.Tool{Name: "remote", InputSchema: map[string]any{"type": "object", "properties": map[string]any{"a": map[string]any{"$ref": "https://schemas.invalid/a.json"}}}},
				)
			}
			return res, err
		}
	})
	return srv
}

// helperCmd is the test binary started in a helper mode.
func helperCmd(mode string, env ...string) *exec.Cmd {
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(append(os.Environ(), modeEnv+"="+mode), env...)
	return cmd
}

// textOf returns the text of a result with one text content.
func textOf(t *testing.T, res *mcpsdk.CallToolResult) string {
	t.Helper()
	var b strings.Builder
	for _, c := range res.Content {
		tc, ok := c.(*mcpsdk.TextContent)
		if !ok {
			t.Fatalf("content %T, want text", c)
		}
		b.WriteString(tc.Text)
	}
	return b.String()
}
