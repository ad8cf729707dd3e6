package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/agentrunner/agentrunner"
	"github.com/agentrunner/agentrunner/capsule"
	"github.com/agentrunner/agentrunner/config"
	"github.com/agentrunner/agentrunner/document"
	arhttp "github.com/agentrunner/agentrunner/http"
	"github.com/agentrunner/agentrunner/mailbox"
	"github.com/agentrunner/agentrunner/metrics"
	"github.com/agentrunner/agentrunner/workspace"
	"github.com/spf13/cobra"
)

func newRunCommand() *cobra.Command {
	var path, pipeline string
	var once bool
	var inputs []string
	cmd := &cobra.Command{
		Use:   "run",
		Short: "Run the pipeline in the foreground (--once: one cycle)",
		Long: `run resumes the unfinished cycle, if any, and runs the pipeline. With --once it runs
exactly one cycle, starting it now whatever the schedule says, and exits 0 only if
the cycle completed. Without --once it runs cycles on schedule until interrupted.

It prints a line per step outcome. On a terminal a line under them shows each running
attempt's elapsed time, tool calls and tokens so far, redrawn every second; when the
output is not a terminal (a pipe, a file, TERM=dumb) there is no such line.

In a workspace without the learning loop (pipeline:), --once runs one run of the
pipeline --pipeline names (needed only when there are several), with the inputs
--input gives, or its unfinished run if it has one.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			log := cmdLogger(cmd, logText, slog.LevelWarn)
			p := &progress{w: cmd.OutOrStdout()}
			stopLive := func() {}
			if isTerminal(p.w) {
				stopLive = p.live(time.Now)
				defer stopLive()
			}
			ws, err := loadWorkspace(path)
			if err != nil {
				return err
			}
			r, err := prepare(cmd.Context(), ws, log, p.onEvent)
			if err != nil {
				return err
			}
			defer r.Close()
			stop, err := r.operations(cmd.Context())
			if err != nil {
				return err
			}
			defer stop()
			if !once {
				r.background(cmd.Context())
				return failureError(r.run(cmd.Context()))
			}
			in, err := parseInputs(inputs)
			if err != nil {
				return err
			}
			name, err := oncePipeline(ws.Config, pipeline, in)
			if err != nil {
				return err
			}
			var c *agentrunner.Run
			if name == "" {
				c, err = r.engine.RunOnce(cmd.Context())
			} else {
				c, err = r.engine.RunPipelineOnce(cmd.Context(), name, in)
			}
			r.flush(cmd.Context())
			stopLive()
			if err != nil {
				return failureError(stoppedEarly(cmd.Context(), err))
			}
			return report(cmd.OutOrStdout(), r, c)
		},
	}
	cmd.Flags().BoolVar(&once, "once", false, "run one cycle and exit")
	cmd.Flags().StringVar(&pipeline, "pipeline", "", "with --once: the pipeline to run one run of (default: the learning loop, else the only pipeline)")
	cmd.Flags().StringArrayVar(&inputs, "input", nil, "with --once: an input variable KEY=VALUE of the new run, repeatable; VALUE is JSON when it parses as JSON")
	configFlag(cmd, &path)
	return cmd
}

// oncePipeline is the pipeline run --once runs a run of: the one named,
// else "" for the learning loop, else the workspace's only pipeline.
// Inputs go to a pipeline's run; the learning loop's cycles take none.
func oncePipeline(cfg *config.Config, named string, inputs map[string]any) (string, error) {
	switch {
	case named != "":
		if cfg.Graphs()[named] == nil {
			return "", usageError(fmt.Errorf("--pipeline %q: no such pipeline (the workspace has %s)", named, strings.Join(slices.Sorted(maps.Keys(cfg.Graphs())), ", ")))
		}
		if named == cfg.Name && cfg.HasLoop() {
			named = ""
		}
	case cfg.HasLoop():
	case len(cfg.Pipelines) == 1:
		for name := range cfg.Pipelines {
			named = name
		}
	default:
		return "", usageError(fmt.Errorf("--once: the workspace has the pipelines %s; name one with --pipeline", strings.Join(slices.Sorted(maps.Keys(cfg.Pipelines)), ", ")))
	}
	if named == "" && len(inputs) > 0 {
		return "", usageError(errors.New("--input: the learning loop's cycles take no inputs; name a pipeline with --pipeline"))
	}
	return named, nil
}

// stoppedEarly explains the error of a run --once that a shutdown
// stopped before its run ended: where it stands is kept, and the next run
// goes on from there.
func stoppedEarly(ctx context.Context, err error) error {
	if !agentrunner.Shutdown(ctx) {
		return err
	}
	return fmt.Errorf("stopped (%v) before the run ended; its steps that did not finish within shutdown.grace were interrupted and run again, with no retry spent, at the next start", context.Cause(ctx))
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
	if p := r.engine.Config().Pipelines[c.Pipeline]; p != nil && p.Document != nil && c.Status.Finished() {
		fmt.Fprintf(w, "archived:  %s\n", r.engine.Config().Abs(filepath.Join(p.Document.Archive, document.ArchiveName(c))))
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
Logs are JSON lines on stderr at info level (--log-format, --log-level).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			log := cmdLogger(cmd, logJSON, slog.LevelInfo)
			ws, err := loadWorkspace(path)
			if err != nil {
				return err
			}
			cfg := ws.Config
			listen := cfg.Server.Listen
			if !authConfigured(cfg.Server.Auth) {
				if err := requireLoopback(listen); err != nil {
					return usageError(err)
				}
			}
			r, err := prepare(cmd.Context(), ws, log, nil)
			if err != nil {
				return err
			}
			defer r.Close()
			auth, err := serveAuth(r)
			if err != nil {
				return usageError(err)
			}
			callbackSecret, err := serveCallbackSecret(r)
			if err != nil {
				return usageError(err)
			}
			boxes, err := mailbox.New(ws.Layout.Mailboxes(), cfg.Mailbox.MaxMessages)
			if err != nil {
				return failureError(err)
			}
			opts := arhttp.Options{
				Store: r.store, Config: cfg, Logger: log, Auth: auth, Mailboxes: boxes,
				Tools: r.box.Registry.Specs(), ToolStats: r.tools.Stats, Metrics: r.metrics.Handler(),
				Wake: r.wake,
			}
			// Capsules are read and written through the API too.
			opts.Capsules = capsule.NewService(r.store, capsule.Options{MaxChars: cfg.Capsules.MaxChars})
			// So are the agents' memories.
			if opts.Memory, err = memoryLog(ws, r.store, agentrunner.SystemClock{}); err != nil {
				return failureError(err)
			}
			// Runs are started, and gates decided, through the API.
			opts.Engine, opts.Pipelines, opts.Runs = r.engine, cfg.Graphs(), r.engine.Scheduler()
			srv, err := arhttp.New(opts)
			if err != nil {
				return failureError(err)
			}
			if callbackSecret != nil {
				srv.WithCallbackFrom(callbackSecret, r.wake)
			}
			if err := mountDashboard(srv, r, opts, log); err != nil {
				return usageError(err)
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
			ctx := cmd.Context()
			// The API and the background work go on while a shutdown
			// lets the running steps finish: they stop once the engine did.
			live, stopLive := context.WithCancel(context.WithoutCancel(ctx))
			defer stopLive()
			stop, err := r.operations(ctx)
			if err != nil {
				return err
			}
			defer stop()
			r.background(live)
			stopping, err := r.notifySystemd(ctx, live, ln.Addr().String())
			if err != nil {
				return usageError(err)
			}
			defer stopping()
			if cfg.State.Backup.Every > 0 {
				go r.backups().Run(live)
			}
			errc := make(chan error, 1)
			go func() { errc <- srv.Serve(live, ln) }()
			runErr := r.run(ctx)
			stopLive()
			return failureError(errors.Join(runErr, <-errc))
		},
	}
	configFlag(cmd, &path)
	return cmd
}

// authConfigured reports whether the API asks for credentials: API keys
// or JWTs are configured.
func authConfigured(a config.Auth) bool { return len(a.APIKeys) > 0 || a.JWT != nil }

// serveAuth builds the API's authenticator from the runner's secrets, and
// builds it again at each reload, so rotated API keys and JWT keys are
// checked from the next request on.
func serveAuth(r *runner) (*arhttp.Authenticator, error) {
	cfg := r.ws.Config
	auth, err := arhttp.NewAuthenticator(cfg.Server.Auth, cfg.Dir, r.secrets.Lookup, time.Now)
	if err != nil {
		return nil, err
	}
	r.onRefresh = append(r.onRefresh, func() error {
		next, err := arhttp.NewAuthenticator(cfg.Server.Auth, cfg.Dir, r.secrets.Lookup, time.Now)
		if err != nil {
			return err
		}
		auth.Replace(next)
		return nil
	})
	return auth, nil
}

// serveCallbackSecret returns the getter of the Execution Service's
// callback secret, nil when callbacks are off; it is read at each
// callback.
func serveCallbackSecret(r *runner) (func() []byte, error) {
	name := r.ws.Config.ExecutionService.CallbackSecretEnv
	if name == "" {
		return nil, nil
	}
	if v, _ := r.secrets.Lookup(name); v == "" {
		return nil, fmt.Errorf("execution_service.callback_secret_env: %w", missing(r.secrets.Lookup, name))
	}
	current := secretFrom(r.secrets.Lookup, name)
	return func() []byte { return []byte(current()) }, nil
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
