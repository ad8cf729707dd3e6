package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/agentrunner/agentrunner"
	arhttp "github.com/agentrunner/agentrunner/http"
	"github.com/spf13/cobra"
)

func newResumeCommand() *cobra.Command {
	var path, operator, note, server string
	cmd := &cobra.Command{
		Use:   "resume",
		Short: "Resume a loop halted by a step that failed for good",
		Long: `resume records an operator's order to resume the halted cycle: its step gets a new attempt
and a new round of retries. A running serve applies it within a second; otherwise the next
run applies it. The order is durable and applied exactly once.

With --server or $AGENTRUNNER_SERVER the order goes through that server's API, with the
API key in $AGENTRUNNER_API_KEY, and the operator is the key's name.`,
		Args: usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if s, from := explicitServer(server); s != "" {
				if cmd.Flags().Changed("operator") {
					return usageError(errors.New("--operator is for the local workspace; through a server the operator is the API key's name"))
				}
				return resumeRemote(cmd, s, from, note)
			}
			cfg, err := loadConfig(path)
			if err != nil {
				return err
			}
			store, err := openStore(cmd.Context(), cfg)
			if err != nil {
				return failureError(err)
			}
			defer store.Close()
			c, err := store.UnfinishedCycle(cmd.Context(), cfg.Name)
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
	serverFlag(cmd, &server)
	configFlag(cmd, &path)
	return cmd
}

// resumeRemote orders the resume through the server's API, after checking
// that the loop is halted, as the local resume does.
func resumeRemote(cmd *cobra.Command, server, from, note string) error {
	c, err := newAPIClient(cmd, server, from)
	if err != nil {
		return err
	}
	list, err := call(cmd, c, func(ctx context.Context) (*arhttp.CycleList, error) { return c.Cycles(ctx, 1, "") })
	if err != nil {
		return err
	}
	if len(list.Cycles) == 0 || list.Cycles[0].Status != agentrunner.CycleHalted {
		state := "no unfinished cycle"
		if len(list.Cycles) == 1 && !list.Cycles[0].Status.Finished() {
			state = list.Cycles[0].Step
		}
		return failureError(fmt.Errorf("the loop is not halted (status: %s)", state))
	}
	cy := list.Cycles[0]
	order, err := call(cmd, c, func(ctx context.Context) (*arhttp.Command, error) {
		return c.Override(ctx, agentrunner.CommandResume, arhttp.OverrideRequest{Reason: note})
	})
	if err != nil {
		return err
	}
	fmt.Fprintf(cmd.OutOrStdout(), "resume of cycle %s at step %s requested (command %d by %s)\n", cy.ID, cy.Step, order.ID, order.Operator)
	return nil
}

func stateOf(c *agentrunner.Cycle) string {
	if c == nil {
		return "no unfinished cycle"
	}
	return string(c.State())
}
