// Package sdnotify tells systemd how the runner is doing (sd_notify(3)):
// READY=1 once serve listens and its engine runs, WATCHDOG=1 while the
// engine loop keeps its deadlines, STOPPING=1 when it shuts down. A unit
// of Type=notify waits for READY=1 before it counts the runner started,
// and with WatchdogSec restarts a runner that stops pinging. The protocol
// is one datagram on the unix socket $NOTIFY_SOCKET names; outside
// systemd, or on other systems than Linux, every call does nothing.
package sdnotify

import (
	"context"
	"strconv"
	"strings"
	"time"

	"github.com/agentrunner/agentrunner"
)

// The states sent.
const (
	Ready    = "READY=1"
	Stopping = "STOPPING=1"
	Watchdog = "WATCHDOG=1"
)

// Environment variables systemd sets for a service.
const (
	envSocket      = "NOTIFY_SOCKET"
	envWatchdogSec = "WATCHDOG_USEC"
	envWatchdogPID = "WATCHDOG_PID"
)

// Notifier sends states to systemd. A nil *Notifier, which FromEnv returns
// outside systemd, sends nothing.
type Notifier struct {
	socket string
	// every is half the unit's WatchdogSec, 0 without a watchdog.
	every time.Duration
}

// FromEnv reads the socket and the watchdog's period from the environment
// (lookup is os.LookupEnv outside tests) for the process pid. It returns
// nil when NOTIFY_SOCKET is unset, and an error naming the variable when
// one is set to something systemd would not set.
func FromEnv(lookup func(string) (string, bool), pid int) (*Notifier, error) {
	socket, ok := lookup(envSocket)
	if !ok || socket == "" {
		return nil, nil
	}
	if !strings.HasPrefix(socket, "/") && !strings.HasPrefix(socket, "@") {
		return nil, agentrunner.Errorf(agentrunner.EINVALID, "environment variable %s=%q: want an absolute path or an abstract socket name starting with @", envSocket, socket)
	}
	every, err := watchdogPeriod(lookup, pid)
	if err != nil {
		return nil, err
	}
	return &Notifier{socket: socket, every: every}, nil
}

// watchdogPeriod is how often to ping: half of WATCHDOG_USEC, as
// sd_watchdog_enabled(3) advises, so one late ping is no restart. It is 0
// when there is no watchdog, or when WATCHDOG_PID names another process
// (the watchdog is a parent's, and the variable was inherited).
func watchdogPeriod(lookup func(string) (string, bool), pid int) (time.Duration, error) {
	raw, ok := lookup(envWatchdogSec)
	if !ok || raw == "" {
		return 0, nil
	}
	usec, err := strconv.ParseInt(raw, 10, 64)
	if err != nil || usec <= 0 {
		return 0, agentrunner.Errorf(agentrunner.EINVALID, "environment variable %s=%q: want a positive number of microseconds", envWatchdogSec, raw)
	}
	if p, ok := lookup(envWatchdogPID); ok && p != "" && p != strconv.Itoa(pid) {
		return 0, nil
	}
	return time.Duration(usec) * time.Microsecond / 2, nil
}

// WatchdogEvery is how often Watch pings: half the unit's WatchdogSec, or
// 0 when the unit has no watchdog.
func (n *Notifier) WatchdogEvery() time.Duration {
	if n == nil {
		return 0
	}
	return n.every
}

// Notify sends one state, such as Ready, or several joined by newlines.
func (n *Notifier) Notify(state string) error {
	if n == nil {
		return nil
	}
	return send(n.socket, state)
}

// Watch pings the watchdog every WatchdogEvery on clock while healthy
// says the engine is well, until ctx ends. A stalled engine gets no ping,
// so systemd restarts the runner WatchdogSec later, and the restart
// resumes where the engine stopped. A failed send is passed to onError
// and the loop goes on: the next ping may get through.
func (n *Notifier) Watch(ctx context.Context, clock agentrunner.Clock, healthy func() bool, onError func(error)) {
	every := n.WatchdogEvery()
	if every <= 0 {
		return
	}
	for {
		select {
		case <-ctx.Done():
			return
		case <-clock.After(every):
		}
		if ctx.Err() != nil || !healthy() {
			continue
		}
		if err := n.Notify(Watchdog); err != nil {
			onError(err)
		}
	}
}
