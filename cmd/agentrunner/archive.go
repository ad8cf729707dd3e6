package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"

	"github.com/agentrunner/agentrunner"
	"github.com/agentrunner/agentrunner/archive"
	"github.com/agentrunner/agentrunner/config"
	"github.com/agentrunner/agentrunner/engine"
	"github.com/spf13/cobra"
)

// archivePolicy is what the archive section of cfg asks of a pass.
func archivePolicy(cfg *config.Config) archive.Policy {
	a := cfg.Archive
	return archive.Policy{Keep: a.Keep, Count: a.Retention.Count, Age: a.Retention.Age.D()}
}

// archiver is the workspace's archiver on the runner's store; its events
// are recorded, logged and counted like the engine's.
func (r *runner) archiver(clock agentrunner.Clock) *archive.Archiver {
	record := engine.EventRecorder(r.store, r.log)
	return &archive.Archiver{Store: r.store, History: r.ws.Layout.History(), Clock: clock, Log: r.log,
		OnEvent: func(ev *agentrunner.Event) {
			record(ev)
			r.metrics.Observe(ev)
		},
	}
}

// archiveInBackground archives now and every archive.every until ctx
// ends, with the archive settings of the configuration the engine runs
// with at each pass, so a reload changes them.
func (r *runner) archiveInBackground(ctx context.Context) {
	every := r.ws.Config.Archive.Every.D()
	r.archiver(agentrunner.SystemClock{}).Run(ctx, every, func() archive.Policy { return archivePolicy(r.engine.Config()) })
}

func newArchiveCommand() *cobra.Command {
	var path string
	var dry bool
	cmd := &cobra.Command{
		Use:   "archive",
		Short: "Archive old finished runs now, and delete archives past their retention",
		Long: `archive does once what serve and run do every archive.every: the finished runs of each
pipeline beyond its newest archive.keep are compressed into cycles/history/<pipeline>/<run>.tar.gz
(written to a temporary file, fsynced, renamed, read back and checked file by file against the
store), and only then is each run's directory removed. Archives past archive.retention (count,
age) are deleted. The API, the CLI and agents read an archived run's artifacts from the store
as before. It needs the workspace to itself: while serve runs, serve archives on its own.
With --dry-run it prints what it would do and changes nothing.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ws, err := loadWorkspace(path)
			if err != nil {
				return err
			}
			lock, err := ws.Layout.Acquire()
			if err != nil {
				return failureError(fmt.Errorf("%w (serve archives every archive.every on its own)", err))
			}
			defer lock.Release()
			store, err := openStore(cmd.Context(), ws.Config)
			if err != nil {
				return err
			}
			defer store.Close()
			log := slog.New(slog.NewTextHandler(cmd.ErrOrStderr(), &slog.HandlerOptions{Level: slog.LevelWarn}))
			a := &archive.Archiver{Store: store, History: ws.Layout.History(), Clock: agentrunner.SystemClock{}, Log: log,
				OnEvent: engine.EventRecorder(store, log)}
			rep, err := a.Pass(cmd.Context(), archivePolicy(ws.Config), dry)
			if err != nil {
				return failureError(err)
			}
			printArchiveReport(cmd.OutOrStdout(), rep, dry)
			if len(rep.Failed) > 0 {
				return failureError(fmt.Errorf("%d run(s) or archive(s) failed; their directories and archives are left as they were", len(rep.Failed)))
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&dry, "dry-run", false, "print what would be archived and deleted, and change nothing")
	configFlag(cmd, &path)
	return cmd
}

// printArchiveReport prints one line per run archived, archive deleted
// and failure, then a summary.
func printArchiveReport(w io.Writer, rep *archive.Report, dry bool) {
	archived, deleted := "archived", "deleted"
	if dry {
		archived, deleted = "would archive", "would delete"
	}
	for _, id := range rep.Archived {
		fmt.Fprintf(w, "%s %s\n", archived, id)
	}
	for _, p := range rep.Deleted {
		fmt.Fprintf(w, "%s %s\n", deleted, p)
	}
	for _, f := range rep.Failed {
		fmt.Fprintf(w, "failed %s\n", f)
	}
	fmt.Fprintf(w, "%d run(s) %s, %d archive(s) %s\n", len(rep.Archived), archived, len(rep.Deleted), deleted)
}
