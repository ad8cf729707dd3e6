package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/agentrunner/agentrunner"
	"github.com/agentrunner/agentrunner/engine"
	"github.com/spf13/cobra"
)

func newStatusCommand() *cobra.Command {
	var path, server string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "status",
		Short: "Print the loop's status, read from the workspace's state database or a server",
		Long: `status prints the loop's status. It reads the workspace's state database (-c), or,
with --server or $AGENTRUNNER_SERVER, asks that server's API, with the API key in
$AGENTRUNNER_API_KEY.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if s, from := explicitServer(server); s != "" {
				c, err := newAPIClient(cmd, s, from)
				if err != nil {
					return err
				}
				st, err := call(cmd, c, c.Status)
				if err != nil {
					return err
				}
				return printStatus(cmd.OutOrStdout(), st, asJSON)
			}
			cfg, err := loadConfig(path)
			if err != nil {
				return err
			}
			now := time.Now().UTC()
			var store agentrunner.Store // none before the first run
			if db := cfg.Abs(cfg.State.Path); fileExists(db) {
				s, err := openStore(cmd.Context(), cfg)
				if err != nil {
					return failureError(err)
				}
				defer s.Close()
				store = s
			}
			st, err := engine.ReadStatus(cmd.Context(), store, cfg, now)
			if err != nil {
				return failureError(err)
			}
			return printStatus(cmd.OutOrStdout(), st, asJSON)
		},
	}
	serverFlag(cmd, &server)
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	configFlag(cmd, &path)
	return cmd
}

// printStatus prints a status as JSON or as aligned lines.
func printStatus(out io.Writer, st *engine.Status, asJSON bool) error {
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
	printSchedules(out, st.Schedules)
	if c := st.LastCycle; c != nil {
		fmt.Fprintf(out, "last cycle:           %s %s", c.ID, c.Status)
		if c.Error != "" {
			fmt.Fprintf(out, " (%s)", c.Error)
		}
		fmt.Fprintln(out)
	}
	if st.Paused {
		fmt.Fprintf(out, "paused:               by %s", orNone(st.PausedBy))
		if st.PausedAt != nil {
			fmt.Fprintf(out, " at %s", st.PausedAt.Format(time.RFC3339))
		}
		fmt.Fprintln(out)
	}
	return nil
}

// printSchedules prints each schedule with its next fire time.
func printSchedules(out io.Writer, schedules []engine.ScheduleStatus) {
	if len(schedules) == 0 {
		return
	}
	fmt.Fprintln(out, "schedules:")
	for _, sc := range schedules {
		fmt.Fprintf(out, "  %s: %s; next %s; overlap %s, catch_up %s\n",
			sc.Pipeline, sc.Schedule, sc.NextFireTime.UTC().Format(time.RFC3339), sc.Overlap, sc.CatchUp)
	}
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
