package main

import (
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/agentrunner/agentrunner"
	"github.com/agentrunner/agentrunner/config"
	"github.com/agentrunner/agentrunner/engine"
	"github.com/agentrunner/agentrunner/mcp"
	"github.com/agentrunner/agentrunner/sqlite"
	"github.com/agentrunner/agentrunner/tool"
	"github.com/agentrunner/agentrunner/tool/position"
	"github.com/agentrunner/agentrunner/toolbox"
	"github.com/agentrunner/agentrunner/workspace"
	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/spf13/cobra"
)

func newMCPCommand() *cobra.Command {
	var path string
	var call agentrunner.ToolCall
	cmd := &cobra.Command{
		Use:   "mcp --agent NAME",
		Short: "Serve an agent's tools over MCP on stdio (for process agents such as coding-agent CLIs)",
		Long: `mcp serves the tools an agent may use over the Model Context Protocol on stdin/stdout,
through the same executor HTTP agents use: schema validation, timeouts, retries, circuit
breakers, and a tool.call event per call in the workspace's state database. The runner starts
it for process agents through the MCP configuration it writes for each attempt ({mcp_config});
--cycle, --step and --attempt say which attempt the calls belong to.`,
		Args: usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := loadConfig(path)
			if err != nil {
				return err
			}
			agent := cfg.Agents[call.Agent]
			if agent == nil {
				return usageError(fmt.Errorf("--agent %q is not an agent of %s", call.Agent, path))
			}
			// stdout is the protocol; everything else goes to stderr.
			log := cmdLogger(cmd, logJSON, slog.LevelWarn)
			deps, err := agentToolDeps(cfg, agent.Tools)
			if err != nil {
				return err
			}
			// The runner that started this attempt checked the database's
			// pages when it started; an attempt does not pay for it again.
			store, err := openStoreWith(cmd.Context(), cfg, sqlite.OpenChecked)
			if err != nil {
				return failureError(err)
			}
			defer store.Close()
			ws, err := workspace.Load(cfg)
			if err != nil {
				return failureError(err)
			}
			deps.Capsules, deps.Todos = store, store
			if deps.Memory, err = memoryLog(ws, store, agentrunner.SystemClock{}); err != nil {
				return failureError(err)
			}
			box, err := toolbox.Build(cmd.Context(), cfg, agent.Tools, deps)
			if err != nil {
				return failureError(fmt.Errorf("%w (this server runs in the environment of agent %s: a key one of its tools needs must be in the env pass list of the agent or its provider)", err, call.Agent))
			}
			defer box.Close()
			exec := tool.NewExecutor(box.Registry, tool.Options{Record: engine.EventRecorder(store, log), Secrets: toolSecrets(cfg, os.LookupEnv)})
			scope := exec.Scope(agent.Tools)
			if err := scope.Err(); err != nil {
				return failureError(err)
			}
			return failureError(mcp.Serve(cmd.Context(), &mcpsdk.StdioTransport{}, scope, call))
		},
	}
	cmd.Flags().StringVar(&call.Agent, "agent", "", "the agent whose tools to serve")
	cmd.Flags().StringVar(&call.CycleID, "cycle", "", "the cycle the calls belong to")
	cmd.Flags().StringVar(&call.Step, "step", "", "the step the calls belong to")
	cmd.Flags().IntVar(&call.Attempt, "attempt", 0, "the attempt the calls belong to")
	cmd.MarkFlagRequired("agent")
	configFlag(cmd, &path)
	return cmd
}

// agentToolDeps are the dependencies of one agent's tools. The Execution
// Service client, which needs the service's token, is built only when one
// of them reads the service: this server runs in a process agent's
// environment, which holds only what the agent's configuration passes.
func agentToolDeps(cfg *config.Config, tools []string) (toolbox.Deps, error) {
	for _, name := range tools {
		if t := cfg.Tools[name]; t != nil && t.Kind == position.Kind {
			return toolDeps(cfg)
		}
	}
	return toolbox.Deps{LookupEnv: os.LookupEnv, Now: time.Now}, nil
}
