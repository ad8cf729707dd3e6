package main

import (
	"fmt"
	"log/slog"
	"path/filepath"
	"time"

	"github.com/agentrunner/agentrunner"
	"github.com/agentrunner/agentrunner/config"
	"github.com/agentrunner/agentrunner/execsvc"
	"github.com/agentrunner/agentrunner/workspace"
	"github.com/spf13/cobra"
)

func newDemoCommand() *cobra.Command {
	var dir string
	cmd := &cobra.Command{
		Use:   "demo",
		Short: "Run one full cycle of the example loop offline, on mock agents",
		Long: `demo writes the example workspace into --dir, runs every agent on the mock runtime
against a mock Execution Service on loopback, runs exactly one full cycle and prints
each step as it happens. Nothing leaves this machine.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			out := cmd.OutOrStdout()
			if _, err := writeExample(dir, true, "mock"); err != nil {
				return err
			}
			es := execsvc.NewMock(execsvc.MockOptions{ExecutingAfter: 1, CompletedAfter: 2})
			url, err := es.Start("127.0.0.1:0")
			if err != nil {
				return failureError(fmt.Errorf("start the mock Execution Service: %w", err))
			}
			defer es.Close()

			cfg, err := loadConfig(filepath.Join(dir, config.FileName))
			if err != nil {
				return err
			}
			cfg.ExecutionService.URL = url
			cfg.ExecutionService.PollInterval = config.Duration(50 * time.Millisecond)
			for _, a := range cfg.Agents {
				a.Provider = config.ProviderMock
			}
			ws, err := workspace.Load(cfg)
			if err != nil {
				return err
			}
			fmt.Fprintf(out, "demo workspace: %s (mock agents, mock Execution Service at %s)\n", dir, url)
			p := &progress{w: out}
			log := slog.New(slog.NewTextHandler(cmd.ErrOrStderr(), &slog.HandlerOptions{Level: slog.LevelWarn}))
			r, err := openRunner(cmd.Context(), ws, agentrunner.SystemClock{}, log, p.onEvent)
			if err != nil {
				return err
			}
			defer r.Close()
			c, err := r.engine.RunOnce(cmd.Context())
			if err != nil {
				return failureError(err)
			}
			if err := report(out, r, c); err != nil {
				return err
			}
			fmt.Fprintf(out, "mailboxes:  %s\n", r.ws.Layout.Mailboxes())
			// Mock agents work in memory: their prompts are in the store,
			// not in attempt folders.
			db := r.ws.Config.State.Path
			if !filepath.IsAbs(db) {
				db = filepath.Join(r.ws.Config.Dir, db)
			}
			fmt.Fprintf(out, "prompts:    in %s (with serve running: agentrunner attempt %s research 1)\n", db, c.ID)
			fmt.Fprintf(out, "the mock Execution Service received %d strategy(ies) in %d request(s)\n", len(es.Strategies()), len(es.Requests()))
			fmt.Fprintf(out, "next: agentrunner status -c %s\n", filepath.Join(dir, config.FileName))
			return nil
		},
	}
	cmd.Flags().StringVar(&dir, "dir", "agentrunner-demo", "directory to write the demo workspace into")
	return cmd
}
