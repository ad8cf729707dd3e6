package http

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/agentrunner/agentrunner"
)

// readyTimeout bounds each readiness check.
const readyTimeout = 2 * time.Second

// check is one readiness check's result.
type check struct {
	OK         bool   `json:"ok"`
	Message    string `json:"message,omitempty"`
	DurationMS int64  `json:"duration_ms"`
}

func (s *Server) handleLive(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
}

// handleReady reports whether the runner can do its work (FR-071): the
// state database answers, the artifacts dir is writable and has free
// space, no run is halted waiting for an operator (nor is the workspace
// paused, unless health.ready_when_paused), and the engine loop is not
// stalled. Each check is in the body;
// any failure answers 503.
func (s *Server) handleReady(w http.ResponseWriter, r *http.Request) {
	checks := map[string]check{}
	run := func(name string, fn func(ctx context.Context) error) {
		ctx, cancel := context.WithTimeout(r.Context(), readyTimeout)
		defer cancel()
		start := time.Now()
		err := fn(ctx)
		c := check{OK: err == nil, DurationMS: time.Since(start).Milliseconds()}
		if err != nil {
			c.Message = err.Error()
		}
		checks[name] = c
	}
	dir := s.cfg.Abs(s.cfg.ArtifactsDir)
	run("database", func(ctx context.Context) error {
		if _, err := s.store.Control(ctx); err != nil {
			s.log.Error("readiness: the state database does not answer", "error", err)
			return fmt.Errorf("the state database does not answer")
		}
		return nil
	})
	run("artifacts_writable", func(context.Context) error { return writable(dir) })
	run("disk_space", func(context.Context) error { return freeSpace(dir, s.cfg.Health.MinFreeDiskMiB) })
	run("loop", s.loopReady)
	if s.opts.Engine != nil {
		run("engine", func(context.Context) error {
			if late := s.opts.Engine.Stalled(); late > s.cfg.Health.MaxEngineLag.D() {
				return fmt.Errorf("the engine loop is %s past its deadline (health.max_engine_lag %s)", late.Round(time.Second), s.cfg.Health.MaxEngineLag)
			}
			return nil
		})
	}
	status, code := "ready", http.StatusOK
	for _, c := range checks {
		if !c.OK {
			status, code = "not_ready", http.StatusServiceUnavailable
		}
	}
	writeJSON(w, code, map[string]any{"status": status, "checks": checks})
}

// writable creates and removes a file in dir.
func writable(dir string) error {
	f, err := os.CreateTemp(dir, ".ready-*")
	if err != nil {
		return fmt.Errorf("the artifacts dir is not writable")
	}
	name := f.Name()
	f.Close()
	if err := os.Remove(name); err != nil {
		return fmt.Errorf("cannot remove %s from the artifacts dir", filepath.Base(name))
	}
	return nil
}

// freeSpace checks that dir's file system has at least minMiB free for
// unprivileged users.
func freeSpace(dir string, minMiB int64) error {
	free, err := availableMiB(dir)
	if err != nil {
		return fmt.Errorf("cannot read the free space of the artifacts dir")
	}
	if free < minMiB {
		return fmt.Errorf("%d MiB free, below health.min_free_disk_mib %d", free, minMiB)
	}
	return nil
}

// loopReady fails while a run is halted, waiting for an operator, and
// while the workspace is paused unless health.ready_when_paused: a
// stopped loop answers every request, so only readiness (and the
// pipeline state metric) can tell monitoring that no work is done.
func (s *Server) loopReady(ctx context.Context) error {
	ctl, err := s.store.Control(ctx)
	if err != nil {
		return fmt.Errorf("cannot read the control state")
	}
	counts, err := s.store.RunCounts(ctx)
	if err != nil {
		return fmt.Errorf("cannot count the halted runs")
	}
	var halted []string
	for _, c := range counts.Unfinished {
		if c.Status == agentrunner.RunHalted {
			halted = append(halted, fmt.Sprintf("%s (%d)", c.Pipeline, c.N))
		}
	}
	if len(halted) > 0 {
		return fmt.Errorf("halted, waiting for an operator: %s; resume with `agentrunner resume` (the loop) or POST /api/runs/{run}/resume", strings.Join(halted, ", "))
	}
	if ctl.Paused && !s.config().Health.ReadyWhenPaused {
		return fmt.Errorf("paused by %s since %s (health.ready_when_paused is false); lift it with `agentrunner resume`", ctl.PausedBy, ctl.PausedAt.UTC().Format(time.RFC3339))
	}
	return nil
}
