package process

import "syscall"

// setParentDeathSignal has the kernel SIGKILL the agent when the runner dies,
// even by SIGKILL, so an agent cannot outlive the runner that would stop it.
// It reaches the agent only, not the children it started. The kernel sends it
// when the OS thread that started the agent ends; Go ends threads only when a
// goroutine exits while locked to one with runtime.LockOSThread, so code in
// the runner must not do that, or its agents may be killed at random.
func setParentDeathSignal(attr *syscall.SysProcAttr) {
	attr.Pdeathsig = syscall.SIGKILL
}
