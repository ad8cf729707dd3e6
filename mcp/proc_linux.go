package mcp

import "syscall"

// setParentDeathSignal has the kernel SIGKILL a stdio server when the
// runner dies, even by SIGKILL, so servers do not pile up across restarts.
// The kernel sends it when the OS thread that started the server ends; Go
// ends threads only when a goroutine exits while locked to one with
// runtime.LockOSThread, which the runner does not do.
func setParentDeathSignal(attr *syscall.SysProcAttr) {
	attr.Pdeathsig = syscall.SIGKILL
}
