package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"time"

	"github.com/agentrunner/agentrunner"
	arhttp "github.com/agentrunner/agentrunner/http"
	"github.com/agentrunner/agentrunner/mailbox"
	"github.com/agentrunner/agentrunner/metrics"
	"github.com/agentrunner/agentrunner/workspace"
	"github.com/spf13/cobra"
)

func newRunCommand() *cobra.Command {
	var path string
	var once bool
	cmd := &cobra.Command{
		Use:   "run",
		Short: "Run the pipeline in the foreground (--once: one cycle)",
		Long: `run resumes the unfinished cycle, if any, and runs the pipeline. With --once it runs
exactly one cycle, starting it now whatever the schedule says, and exits 0 only if
the cycle completed. Without --once it runs cycles on schedule until interrupted.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			log := slog.New(slog.NewTextHandler(cmd.ErrOrStderr(), &slog.HandlerOptions{Level: slog.LevelWarn}))
			p := &progress{w: cmd.OutOrStdout()}
			ws, err := loadWorkspace(path)
			if err != nil {
				return err
			}
			r, err := prepare(cmd.Context(), ws, log, p.onEvent)
			if err != nil {
				return err
			}
			defer r.Close()
			if !once {
				r.background(cmd.Context())
				return failureError(r.run(cmd.Context()))
			}
			if !ws.Config.HasLoop() {
				return usageError(errors.New("--once runs one cycle of the learning loop (pipeline:), which this workspace does not have; start runs of its pipelines with agentrunner start PIPELINE while agentrunner serve runs"))
			}
			c, err := r.engine.RunOnce(cmd.Context())
			r.flush(cmd.Context())
			if err != nil {
				return failureError(err)
			}
			return report(cmd.OutOrStdout(), r, c)
		},
	}
	cmd.Flags().BoolVar(&once, "once", false, "run one cycle and exit")
	configFlag(cmd, &path)
	return cmd
}

// prepare opens a loaded workspace for running.
func prepare(ctx context.Context, ws *workspace.Workspace, log *slog.Logger, onEvent func(*agentrunner.Event)) (*runner, error) {
	return openRunner(ctx, ws, agentrunner.SystemClock{}, log, onEvent)
}

// report prints where a cycle's artifacts are, and fails unless it completed.
func report(w io.Writer, r *runner, c *agentrunner.Cycle) error {
	if c.EndedAt.IsZero() {
		fmt.Fprintf(w, "\ncycle %s %s at step %s\n", c.ID, c.Status, c.Step)
	} else {
		fmt.Fprintf(w, "\ncycle %s %s in %s\n", c.ID, c.Status, c.EndedAt.Sub(c.StartedAt).Round(1e6))
	}
	fmt.Fprintf(w, "cycle dir: %s\n", c.Dir)
	entries, _ := os.ReadDir(c.Dir)
	for _, e := range entries {
		if info, err := e.Info(); err == nil {
			fmt.Fprintf(w, "  %-16s %7d bytes\n", e.Name(), info.Size())
		}
	}
	switch c.Status {
	case agentrunner.CycleCompleted:
		return nil
	case agentrunner.CycleHalted:
		return failureError(fmt.Errorf("%s; after fixing the cause, run: agentrunner resume", c.Error))
	}
	return failureError(errors.New(c.Error))
}

func newServeCommand() *cobra.Command {
	var path string
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Run the pipeline continuously, with the HTTP API",
		Long: `serve runs cycles on schedule, resuming any unfinished cycle first, and serves the
operator API (status, cycles, events, overrides, metrics, health) on server.listen.
Logs are JSON lines on stderr.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			log := slog.New(slog.NewJSONHandler(cmd.ErrOrStderr(), nil))
			ws, err := loadWorkspace(path)
			if err != nil {
				return err
			}
			cfg := ws.Config
			auth, err := arhttp.NewAuthenticator(cfg.Server.Auth, cfg.Dir, os.LookupEnv, time.Now)
			if err != nil {
				return usageError(err)
			}
			listen := cfg.Server.Listen
			if !auth.Enabled() {
				if err := requireLoopback(listen); err != nil {
					return usageError(err)
				}
			}
			var callbackSecret []byte
			if name := cfg.ExecutionService.CallbackSecretEnv; name != "" {
				if callbackSecret = []byte(os.Getenv(name)); len(callbackSecret) == 0 {
					return usageError(fmt.Errorf("environment variable %s (execution_service.callback_secret_env) is not set", name))
				}
			}
			r, err := prepare(cmd.Context(), ws, log, nil)
			if err != nil {
				return err
			}
			defer r.Close()
			boxes, err := mailbox.New(ws.Layout.Mailboxes(), cfg.Mailbox.MaxMessages)
			if err != nil {
				return failureError(err)
			}
			opts := arhttp.Options{
				Store: r.store, Config: cfg, Logger: log, Auth: auth, Mailboxes: boxes,
				Tools: r.box.Registry.Specs(), ToolStats: r.tools.Stats, Metrics: r.metrics.Handler(),
				Wake: r.wake,
			}
			// Runs are started, and gates decided, through the API.
			opts.Engine, opts.Pipelines, opts.Runs = r.engine, cfg.Graphs(), r.engine.Scheduler()
			srv, err := arhttp.New(opts)
			if err != nil {
				return failureError(err)
			}
			if callbackSecret != nil {
				srv.WithCallback(callbackSecret, r.wake)
			}
			r.metrics.WatchConnections(func() metrics.Connections { return metrics.Connections(srv.ConnStats()) })
			ln, err := net.Listen("tcp", listen)
			if err != nil {
				return failureError(fmt.Errorf("listen on %s: %w", listen, err))
			}
			if auth.Enabled() {
				log.Info("serving the API", "listen", ln.Addr().String(), "auth", "api keys or JWT")
			} else {
				log.Warn("serving the API without credentials: listening on loopback only, and every caller is admin; set server.auth to expose it", "listen", ln.Addr().String())
			}
			ctx, cancel := context.WithCancel(cmd.Context())
			defer cancel()
			r.background(ctx)
			if cfg.State.Backup.Every > 0 {
				go r.backups().Run(ctx)
			}
			errc := make(chan error, 1)
			go func() { errc <- srv.Serve(ctx, ln) }()
			runErr := r.run(ctx)
			cancel()
			return failureError(errors.Join(runErr, <-errc))
		},
	}
	configFlag(cmd, &path)
	return cmd
}

// requireLoopback refuses to expose an API without credentials beyond this
// machine: an open operator endpoint is not acceptable.
func requireLoopback(listen string) error {
	host, _, err := net.SplitHostPort(listen)
	if err != nil {
		return err
	}
	if ip := net.ParseIP(host); host == "localhost" || (ip != nil && ip.IsLoopback()) {
		return nil
	}
	return fmt.Errorf("server.listen %s is not a loopback address: without server.auth (API keys or JWT) the API only listens on 127.0.0.1, ::1 or localhost", listen)
}
