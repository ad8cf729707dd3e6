package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"time"

	"github.com/agentrunner/agentrunner"
	"github.com/agentrunner/agentrunner/config"
	"github.com/agentrunner/agentrunner/engine"
	"github.com/agentrunner/agentrunner/sqlite"
	"github.com/agentrunner/agentrunner/workspace"
	"github.com/spf13/cobra"
)

// openStore opens the workspace's state database. A database that fails
// its check is refused with the way to recover: every command that opens
// the store goes through here.
func openStore(ctx context.Context, cfg *config.Config) (*sqlite.Store, error) {
	return openStoreWith(ctx, cfg, sqlite.Open)
}

// openStoreWith is openStore with another way to open the database
// (sqlite.OpenChecked for the MCP server of an agent's attempt).
func openStoreWith(ctx context.Context, cfg *config.Config, open func(context.Context, string) (*sqlite.Store, error)) (*sqlite.Store, error) {
	s, err := open(ctx, cfg.Abs(cfg.State.Path))
	var d sqlite.Damage
	if errors.As(err, &d) {
		err = fmt.Errorf("%w\nnothing was run and nothing was written to it. To recover, restore a backup (they are in %s): agentrunner db restore FILE -c %s; for the full report: agentrunner db check -c %s",
			err, cfg.Abs(cfg.State.Backup.Dir), cfg.Path, cfg.Path)
	}
	return s, failureError(err)
}

func newDBCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "db",
		Short: "Check, back up and restore the state database",
		Long: `db checks the workspace's state database, takes an online backup of it (also while serve
runs) and restores a backup in its place.`,
		Args: usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error { return cmd.Help() },
	}
	cmd.AddCommand(newDBCheckCommand(), newDBBackupCommand(), newDBRestoreCommand())
	return cmd
}

func newDBCheckCommand() *cobra.Command {
	var path string
	cmd := &cobra.Command{
		Use:   "check",
		Short: "Check the state database in full; exit 0 only when it is sound",
		Long: `check runs SQLite's full integrity_check and foreign_key_check on the state database and
compares its schema version with this agentrunner's, without writing to it. It may run while
serve runs. It reads every page, so it takes longer than the quick check every command
runs before opening the database. Exit status 0: sound; 1: damaged or unusable.`,
		Args: usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := loadConfig(path)
			if err != nil {
				return err
			}
			r, err := sqlite.Check(cmd.Context(), cfg.Abs(cfg.State.Path))
			if err != nil {
				return failureError(err)
			}
			printReport(cmd.OutOrStdout(), r)
			if !r.Sound() {
				return failureError(fmt.Errorf("the state database %s failed its check: restore a backup with: agentrunner db restore FILE -c %s", r.Path, cfg.Path))
			}
			return nil
		},
	}
	configFlag(cmd, &path)
	return cmd
}

// printReport prints what db check found, one finding a line.
func printReport(w io.Writer, r *sqlite.Report) {
	fmt.Fprintf(w, "state database:  %s\n", r.Path)
	fmt.Fprintf(w, "schema version:  %d (this agentrunner knows up to %d)\n", r.Version, r.Known)
	if why := r.Foreign(); why != "" {
		fmt.Fprintf(w, "application:     %s\n", why)
	}
	fmt.Fprintf(w, "integrity:       %s\n", strings.Join(r.Integrity, "\n                 "))
	fk := "ok"
	if len(r.ForeignKeys) > 0 {
		fk = strings.Join(r.ForeignKeys, "\n                 ")
	}
	fmt.Fprintf(w, "foreign keys:    %s\n", fk)
	if r.Sound() {
		fmt.Fprintln(w, "sound")
	}
}

func newDBBackupCommand() *cobra.Command {
	var path string
	cmd := &cobra.Command{
		Use:   "backup [FILE]",
		Short: "Write a consistent copy of the state database, also while serve runs",
		Long: `backup writes a consistent copy of the state database to FILE (default:
state.backup.dir/state-YYYYMMDD_HHMMSS.db, in UTC) while runners may go on writing to it:
SQLite's VACUUM INTO into a temporary file, fsynced, checked with quick_check, then renamed.
FILE must not exist.`,
		Args: usageArgs(cobra.MaximumNArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			cfg, err := loadConfig(path)
			if err != nil {
				return err
			}
			dst := filepath.Join(cfg.Abs(cfg.State.Backup.Dir), sqlite.BackupName(time.Now()))
			if len(args) == 1 {
				dst = args[0]
			}
			size, err := sqlite.Backup(cmd.Context(), cfg.Abs(cfg.State.Path), dst)
			if err != nil {
				return failureError(err)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "backup written: %s (%d bytes)\n", dst, size)
			return nil
		},
	}
	configFlag(cmd, &path)
	return cmd
}

func newDBRestoreCommand() *cobra.Command {
	var path string
	cmd := &cobra.Command{
		Use:   "restore FILE",
		Short: "Put a backup in place of the state database; no runner may be running",
		Long: `restore checks the backup FILE in full, keeps the current state database as
state.db.damaged-YYYYMMDD_HHMMSS (with its -wal), removes its stale -shm and installs a copy
of the backup atomically in its place. It refuses while a runner holds the workspace: stop
serve first. What was recorded after the backup was taken is lost.`,
		Args: usageArgs(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			cfg, err := loadConfig(path)
			if err != nil {
				return err
			}
			lock, err := workspace.Layout{Root: cfg.Abs(cfg.ArtifactsDir)}.Acquire()
			if err != nil {
				return failureError(err)
			}
			defer lock.Release()
			db := cfg.Abs(cfg.State.Path)
			aside, err := sqlite.Restore(cmd.Context(), args[0], db, time.Now())
			if err != nil {
				return failureError(err)
			}
			out := cmd.OutOrStdout()
			if aside != "" {
				fmt.Fprintf(out, "the database it replaced is kept as %s\n", aside)
			}
			fmt.Fprintf(out, "restored %s from %s\n", db, args[0])
			return nil
		},
	}
	configFlag(cmd, &path)
	return cmd
}

// backups is serve's schedule of backups (state.backup). Each outcome is
// an event (backup.completed, backup.failed), recorded, logged and counted
// in the metrics.
func (r *runner) backups() *sqlite.Backups {
	cfg := r.ws.Config
	record := engine.EventRecorder(r.store, r.log)
	return &sqlite.Backups{
		Source: cfg.Abs(cfg.State.Path), Dir: cfg.Abs(cfg.State.Backup.Dir),
		Every: cfg.State.Backup.Every.D(), Keep: cfg.State.Backup.Keep,
		Clock: agentrunner.SystemClock{}, Log: r.log,
		OnEvent: func(ev *agentrunner.Event) {
			record(ev)
			r.metrics.Observe(ev)
		},
	}
}
