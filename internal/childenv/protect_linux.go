package childenv

import "syscall"

// ProtectRunner keeps the processes the runner starts, which run as the
// same user, from reading the runner's own environment and memory: without
// it an agent could read every secret the allowlist keeps from it in
// /proc/<runner pid>/environ. It marks the runner not dumpable, which makes
// its /proc files root's and refuses ptrace by its user; a child is
// dumpable again once it execs, so agents are not affected. The cost: the
// runner leaves no core dump, and a debugger must run as root to attach.
func ProtectRunner() error {
	_, _, errno := syscall.RawSyscall(syscall.SYS_PRCTL, syscall.PR_SET_DUMPABLE, 0, 0)
	if errno != 0 {
		return errno
	}
	return nil
}
