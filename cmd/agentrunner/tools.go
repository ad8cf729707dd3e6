package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/agentrunner/agentrunner"
	"github.com/agentrunner/agentrunner/config"
	"github.com/agentrunner/agentrunner/engine"
	"github.com/agentrunner/agentrunner/secrets"
	"github.com/agentrunner/agentrunner/tool"
	"github.com/agentrunner/agentrunner/toolbox"
	"github.com/spf13/cobra"
)

func newToolsCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "tools",
		Short: "List the tools agents may call, or call one",
		Args:  usageArgs(cobra.NoArgs),
		RunE:  func(cmd *cobra.Command, _ []string) error { return cmd.Help() },
	}
	cmd.AddCommand(newToolsListCommand(), newToolsCallCommand())
	return cmd
}

// toolDeps are the tools' dependencies for operator commands; secrets
// come from the environment, NAME_FILE files and the secrets file.
func toolDeps(cfg *config.Config) (toolbox.Deps, error) {
	res, err := secrets.ForConfig(cfg, os.LookupEnv)
	if err != nil {
		return toolbox.Deps{}, err
	}
	deps := toolbox.Deps{LookupEnv: res.Lookup, Now: time.Now}
	es, err := buildExec(cfg, res.Lookup)
	if err != nil {
		return deps, err
	}
	if es != nil {
		deps.Account = es
	}
	return deps, nil
}

func newToolsListCommand() *cobra.Command {
	var path string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List every declared tool and every tool of the MCP servers, and whether each can be built",
		Args:  usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := loadConfig(path)
			if err != nil {
				return err
			}
			deps, err := toolDeps(cfg)
			if err != nil {
				return err
			}
			infos := toolbox.Describe(cmd.Context(), cfg, deps)
			out := cmd.OutOrStdout()
			if asJSON {
				type row struct {
					Name        string          `json:"name"`
					Kind        string          `json:"kind"`
					Description string          `json:"description,omitempty"`
					Parameters  json.RawMessage `json:"parameters,omitempty"`
					Timeout     string          `json:"timeout,omitempty"`
					Agents      []string        `json:"agents"`
					Error       string          `json:"error,omitempty"`
				}
				rows := []row{}
				for _, in := range infos {
					r := row{Name: in.Name, Kind: in.Kind, Description: in.Spec.Description, Parameters: in.Spec.Parameters, Agents: in.Agents}
					if in.Spec.Timeout > 0 {
						r.Timeout = in.Spec.Timeout.String()
					}
					if in.Err != nil {
						r.Error = in.Err.Error()
					}
					rows = append(rows, r)
				}
				enc := json.NewEncoder(out)
				enc.SetIndent("", "  ")
				return enc.Encode(rows)
			}
			tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "TOOL\tKIND\tTIMEOUT\tAGENTS\tSTATUS")
			for _, in := range infos {
				status := "ok"
				if in.Err != nil {
					status = "unavailable: " + strings.ReplaceAll(in.Err.Error(), "\n", "; ")
				}
				timeout := "-"
				if in.Spec.Timeout > 0 {
					timeout = in.Spec.Timeout.String()
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", in.Name, in.Kind, timeout, orNone(strings.Join(in.Agents, ",")), status)
			}
			return tw.Flush()
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON (with descriptions and schemas)")
	configFlag(cmd, &path)
	return cmd
}

func newToolsCallCommand() *cobra.Command {
	var path, agent string
	cmd := &cobra.Command{
		Use:   "call NAME [JSON]",
		Short: "Call a tool as an agent would, through the executor; print its {isError, message} result",
		Long: `call runs one tool with the given JSON arguments (default {}) through the same executor agents
use: schema validation, timeout, retries, circuit breaker. The call is recorded as an event in
the workspace's state database. Exit status 1 when the result is an error.`,
		Args: usageArgs(cobra.RangeArgs(1, 2)),
		RunE: func(cmd *cobra.Command, args []string) error {
			cfg, err := loadConfig(path)
			if err != nil {
				return err
			}
			name, arguments := args[0], "{}"
			if len(args) == 2 {
				arguments = args[1]
			}
			deps, err := toolDeps(cfg)
			if err != nil {
				return err
			}
			box, err := toolbox.Build(cmd.Context(), cfg, []string{name}, deps)
			if err != nil {
				return failureError(err)
			}
			defer box.Close()
			if _, ok := box.Registry.Spec(name); !ok {
				return usageError(fmt.Errorf("no tool %q (see agentrunner tools list)", name))
			}
			store, err := openStore(cmd.Context(), cfg)
			if err != nil {
				return failureError(err)
			}
			defer store.Close()
			log := cmdLogger(cmd, logText, slog.LevelWarn)
			exec := tool.NewExecutor(box.Registry, tool.Options{Record: engine.EventRecorder(store, log), Secrets: toolSecrets(cfg, deps.LookupEnv)})
			res := exec.Scope([]string{name}).Execute(cmd.Context(), agentrunner.ToolCall{
				ID: "operator", Name: name, Arguments: json.RawMessage(arguments), Agent: agent,
			})
			enc := json.NewEncoder(cmd.OutOrStdout())
			enc.SetIndent("", "  ")
			enc.Encode(res)
			if res.IsError {
				return failureError(errors.New("the tool returned an error"))
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&agent, "agent", "operator", "the agent the call is recorded for")
	configFlag(cmd, &path)
	return cmd
}
