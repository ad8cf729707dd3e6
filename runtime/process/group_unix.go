//go:build unix

package process

import (
	"errors"
	"fmt"
	"os"
	"syscall"
)

// unsupported is nil where the runtime can contain an agent's process tree.
var unsupported error

// sysProcAttr puts the agent in a process group of its own, so one signal
// reaches the agent and every child it started (unless one left the group).
func sysProcAttr() *syscall.SysProcAttr {
	attr := &syscall.SysProcAttr{Setpgid: true}
	setParentDeathSignal(attr)
	return attr
}

// signalGroup sends sig to every process in the group led by pid. A group
// that no longer exists is not an error: it is what we want.
func signalGroup(pid int, sig syscall.Signal) error {
	if err := syscall.Kill(-pid, sig); err != nil && !errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("send %v to process group %d: %w", sig, pid, err)
	}
	return nil
}

var (
	sigterm = syscall.SIGTERM
	sigkill = syscall.SIGKILL
)

// killedBy returns the signal that ended the process, if one did.
func killedBy(state *os.ProcessState) (syscall.Signal, bool) {
	ws, ok := state.Sys().(syscall.WaitStatus)
	if !ok || !ws.Signaled() {
		return 0, false
	}
	return ws.Signal(), true
}
