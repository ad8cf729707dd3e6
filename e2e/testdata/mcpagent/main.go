// Command mcpagent is a stand-in for a coding-agent CLI in tests: it reads
// the MCP configuration agentrunner wrote for its attempt, starts the MCP
// server named there, calls a tool through it, and writes an output that
// satisfies its template.
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/agentrunner/agentrunner/runtime/mock"
	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "mcpagent:", err)
		os.Exit(1)
	}
}

func run() error {
	// What the agent was given, for the test to look for the runner's secrets.
	if err := os.WriteFile("env.txt", []byte(strings.Join(os.Environ(), "\n")), 0o600); err != nil {
		return err
	}
	var cfg struct {
		MCPServers map[string]struct {
			Command string            `json:"command"`
			Args    []string          `json:"args"`
			Env     map[string]string `json:"env"`
		} `json:"mcpServers"`
	}
	data, err := os.ReadFile(os.Getenv("AGENTRUNNER_MCP_CONFIG"))
	if err != nil {
		return err
	}
	if err := json.Unmarshal(data, &cfg); err != nil {
		return err
	}
	srv, ok := cfg.MCPServers["agentrunner"]
	if !ok {
		return fmt.Errorf("no agentrunner server in %s", data)
	}
	cmd := exec.Command(srv.Command, srv.Args...)
	cmd.Env = os.Environ()
	for k, v := range srv.Env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	cmd.Stderr = os.Stderr
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	client := mcpsdk.NewClient(&mcpsdk.Implementation{Name: "mcpagent", Version: "1"}, nil)
	session, err := client.Connect(ctx, &mcpsdk.CommandTransport{Command: cmd}, nil)
	if err != nil {
		return err
	}
	defer session.Close()
	tools, err := session.ListTools(ctx, nil)
	if err != nil {
		return err
	}
	var names []string
	for _, t := range tools.Tools {
		names = append(names, t.Name)
	}
	res, err := session.CallTool(ctx, &mcpsdk.CallToolParams{Name: "technical_indicators", Arguments: map[string]any{"asset": "BTC", "timeframe": "1d"}})
	if err != nil {
		return err
	}
	if res.IsError {
		return fmt.Errorf("technical_indicators failed: %v", res.Content)
	}
	text := res.Content[0].(*mcpsdk.TextContent).Text
	tmpl, err := os.ReadFile(os.Getenv("AGENTRUNNER_TEMPLATE"))
	if err != nil {
		return err
	}
	out := mock.Generate(tmpl, filepath.Ext(os.Getenv("AGENTRUNNER_TEMPLATE")), os.Getenv("AGENTRUNNER_CYCLE_ID"), os.Getenv("AGENTRUNNER_AGENT"), time.Now().UTC())
	if err := os.WriteFile(os.Getenv("AGENTRUNNER_OUTPUT"), out, 0o644); err != nil {
		return err
	}
	fmt.Printf("tools offered: %s\nindicators: %.200s\n", strings.Join(names, ","), text)
	return nil
}
