package main

import (
	"fmt"
	"log/slog"
	"os"

	"github.com/agentrunner/agentrunner/dashboard"
	arhttp "github.com/agentrunner/agentrunner/http"
)

// sessionKeyEnv names the variable that may hold the key signing the
// dashboard's session cookies, so that sessions outlive a restart and
// several servers behind one name accept each other's. Without it each
// process draws a random key.
const sessionKeyEnv = "AGENTRUNNER_DASHBOARD_SESSION_KEY"

// mountDashboard serves the web dashboard at / beside the API, over the
// same store, credentials and commands.
func mountDashboard(srv *arhttp.Server, r *runner, opts arhttp.Options, log *slog.Logger) error {
	var key []byte
	if v := os.Getenv(sessionKeyEnv); v != "" {
		if len(v) < dashboard.MinSessionKeyBytes {
			return fmt.Errorf("environment variable %s holds fewer than %d bytes; use a longer random value", sessionKeyEnv, dashboard.MinSessionKeyBytes)
		}
		key = []byte(v)
	}
	dash, err := dashboard.New(dashboard.Options{
		Store: r.store, Config: opts.Config, Current: r.engine.Config, Workspace: r.engine.Workspace, Pipelines: opts.Pipelines, Graphs: r.engine.Scheduler(),
		API: srv, Logger: log, SessionKey: key, OnAuthenticated: srv.MarkAuthenticated,
	})
	if err != nil {
		return err
	}
	srv.Mount(dash)
	return nil
}
