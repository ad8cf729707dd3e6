package main

import (
	"context"
	"os"
	"sync"

	"github.com/agentrunner/agentrunner"
	"github.com/agentrunner/agentrunner/internal/sdnotify"
)

// notifySystemd tells systemd, when it runs serve as a unit of
// Type=notify, that serve is ready (it listens on addr and the engine
// starts), pings the unit's watchdog while the engine loop keeps its
// deadlines until live ends, and says STOPPING=1 once the context
// shutdown ends: at the signal, while the running steps may still finish
// (the API and the watchdog go on until live ends). It returns the
// func that says STOPPING=1 when serve returns for another reason. Outside
// systemd it does nothing. The variables are removed from the environment,
// so that no agent the runner starts takes systemd's socket for its own.
func (r *runner) notifySystemd(shutdown, live context.Context, addr string) (stopping func(), err error) {
	n, err := sdnotify.FromEnv(os.LookupEnv, os.Getpid())
	if err != nil || n == nil {
		return func() {}, err
	}
	for _, k := range []string{"NOTIFY_SOCKET", "WATCHDOG_USEC", "WATCHDOG_PID"} {
		os.Unsetenv(k)
	}
	if err := n.Notify(sdnotify.Ready + "\nSTATUS=serving the API on " + addr); err != nil {
		return func() {}, err
	}
	var once sync.Once
	stopping = func() {
		once.Do(func() {
			if err := n.Notify(sdnotify.Stopping); err != nil {
				r.log.Warn("telling systemd that the runner stops", "error", err)
			}
		})
	}
	healthy := func() bool { return r.engine.Stalled() == 0 }
	go n.Watch(live, agentrunner.SystemClock{}, healthy, func(err error) {
		r.log.Warn("pinging systemd's watchdog", "error", err)
	})
	go func() {
		<-shutdown.Done()
		stopping()
	}()
	return stopping, nil
}
