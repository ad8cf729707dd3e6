package main

import (
	"fmt"
	"os"
	"time"

	"github.com/agentrunner/agentrunner"
	"github.com/agentrunner/agentrunner/config"
	"github.com/agentrunner/agentrunner/sqlite"
	"github.com/spf13/cobra"
)

func newResumeCommand() *cobra.Command {
	var path, operator, note string
	cmd := &cobra.Command{
		Use:   "resume",
		Short: "Resume a loop halted by a step that failed for good",
		Long: `resume records an operator's order to resume the halted cycle: its step gets a new attempt
and a new round of retries. A running serve applies it within a second; otherwise the next
run applies it. The order is durable and applied exactly once.`,
		Args: usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := config.Load(path)
			if err != nil {
				return err
			}
			store, err := sqlite.Open(cmd.Context(), cfg.Abs(cfg.State.Path))
			if err != nil {
				return failureError(err)
			}
			defer store.Close()
			c, err := store.UnfinishedCycle(cmd.Context())
			if err != nil || c.Status != agentrunner.CycleHalted {
				return failureError(fmt.Errorf("the loop is not halted (status: %s)", stateOf(c)))
			}
			order := &agentrunner.Command{Kind: agentrunner.CommandResume, Operator: operator, CreatedAt: time.Now().UTC()}
			if note != "" {
				order.Args = map[string]any{"note": note}
			}
			if err := store.AddCommand(cmd.Context(), order); err != nil {
				return failureError(err)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "resume of cycle %s at step %s requested (command %d)\n", c.ID, c.Step, order.ID)
			return nil
		},
	}
	cmd.Flags().StringVar(&operator, "operator", os.Getenv("USER"), "who resumes, for the audit log")
	cmd.Flags().StringVar(&note, "note", "", "why, for the audit log")
	configFlag(cmd, &path)
	return cmd
}

func stateOf(c *agentrunner.Cycle) string {
	if c == nil {
		return "no unfinished cycle"
	}
	return string(c.State())
}
