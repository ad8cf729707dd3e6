//go:build unix

package bird

import (
	"errors"
	"os/exec"
	"syscall"
)

// containGroup starts bird in a process group of its own and has a
// cancelled ctx kill the whole group: bird is a Node program, and the
// helpers it may start must not outlive the call.
func containGroup(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error {
		err := syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		if errors.Is(err, syscall.ESRCH) {
			// Already gone: what Wait expects when nothing was left to kill.
			return nil
		}
		return err
	}
}
