//go:build unix

package mcp

import "syscall"

// sysProcAttr puts a stdio server in a process group of its own, so Close
// can stop it together with everything it started (an npx or uvx launcher
// runs the real server as its child).
func sysProcAttr() *syscall.SysProcAttr {
	attr := &syscall.SysProcAttr{Setpgid: true}
	setParentDeathSignal(attr)
	return attr
}

// killGroup kills what is left of the group led by pid. A group that is
// already gone is what we want, so its error is ignored.
func killGroup(pid int) {
	if pid > 0 {
		_ = syscall.Kill(-pid, syscall.SIGKILL)
	}
}
