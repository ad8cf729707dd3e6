package main

import (
	"context"
	"strings"

	"github.com/agentrunner/agentrunner/internal/filewatch"
)

// operations starts what a runner does beside its engine while run or
// serve runs: SIGHUP reloads the configuration, and so does a change of
// its files with reload.watch; a second SIGINT or SIGTERM cuts a
// shutdown's grace short. stop ends them.
func (r *runner) operations(ctx context.Context) (stop func(), err error) {
	done := make(chan struct{})
	stopHangup := onHangup(func() { r.reload(ctx, "sighup", "the runner received SIGHUP") })
	go func() {
		select {
		case <-hurried(ctx):
			r.log.Info("a second signal: interrupting the running steps now")
			r.engine.Hurry()
		case <-done:
		}
	}()
	watchCtx, stopWatch := context.WithCancel(context.WithoutCancel(ctx))
	stop = func() {
		stopHangup()
		stopWatch()
		close(done)
	}
	if !r.ws.Config.Reload.Watch {
		return stop, nil
	}
	w, err := filewatch.New(filewatch.Options{Files: r.engine.WatchedFiles, OnChange: r.filesChanged(ctx), Logger: r.log})
	if err != nil {
		stop()
		return nil, failureError(err)
	}
	go w.Run(watchCtx)
	r.log.Info("watching the configuration's files: a change reloads it (reload.watch)", "dirs", strings.Join(w.Dirs(), ", "))
	return stop, nil
}

// filesChanged reloads after a change of the configuration's files, while
// reload.watch is on (a reload may turn it off).
func (r *runner) filesChanged(ctx context.Context) func([]string) {
	return func(changed []string) {
		if r.engine.Config().Reload.Watch {
			r.reload(ctx, "file-watcher", "changed: "+strings.Join(changed, ", "))
		}
	}
}

// reload asks the engine to read the configuration again, as an
// operator's reload does: the scheduler applies it between two passes,
// or refuses it with the reason, in its events and logs. A runner that
// is shutting down does not: its next start reads the configuration.
func (r *runner) reload(ctx context.Context, by, why string) {
	if ctx.Err() != nil {
		return
	}
	r.log.Info("reloading the configuration", "by", by, "why", why)
	if err := r.engine.RequestReload(ctx, by, why); err != nil && ctx.Err() == nil {
		r.log.Error("asking the engine to reload its configuration", "by", by, "error", err)
	}
}
