package main

import (
	"encoding/json"
	"fmt"
	"os"
	"time"

	"github.com/agentrunner/agentrunner"
	"github.com/agentrunner/agentrunner/config"
	"github.com/agentrunner/agentrunner/engine"
	"github.com/agentrunner/agentrunner/sqlite"
	"github.com/spf13/cobra"
)

func newStatusCommand() *cobra.Command {
	var path string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "status",
		Short: "Print the loop's status, read from the workspace's state database",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := config.Load(path)
			if err != nil {
				return err
			}
			now := time.Now().UTC()
			st := &engine.Status{Pipeline: cfg.Name, CurrentState: agentrunner.StateIdle, NextScheduledTime: now}
			if db := cfg.Abs(cfg.State.Path); fileExists(db) {
				store, err := sqlite.Open(cmd.Context(), db)
				if err != nil {
					return failureError(err)
				}
				defer store.Close()
				if st, err = engine.ReadStatus(cmd.Context(), store, cfg, now); err != nil {
					return failureError(err)
				}
			}
			out := cmd.OutOrStdout()
			if asJSON {
				enc := json.NewEncoder(out)
				enc.SetIndent("", "  ")
				return enc.Encode(st)
			}
			fmt.Fprintf(out, "pipeline:             %s\n", st.Pipeline)
			fmt.Fprintf(out, "current state:        %s\n", st.CurrentState)
			fmt.Fprintf(out, "current cycle:        %s\n", orNone(st.CurrentCycleID))
			fmt.Fprintf(out, "last completed step:  %s\n", orNone(st.LastCompletedStep))
			fmt.Fprintf(out, "next scheduled time:  %s\n", st.NextScheduledTime.Format(time.RFC3339))
			if c := st.LastCycle; c != nil {
				fmt.Fprintf(out, "last cycle:           %s %s", c.ID, c.Status)
				if c.Error != "" {
					fmt.Fprintf(out, " (%s)", c.Error)
				}
				fmt.Fprintln(out)
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	configFlag(cmd, &path)
	return cmd
}

func orNone(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func fileExists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}
