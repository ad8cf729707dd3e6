//go:build unix

package worktree

import (
	"os/exec"
	"syscall"
)

// killGroupOnCancel puts git in a process group of its own and makes the
// context's end kill the whole group: git worktree add runs git reset as
// a child, which would otherwise go on writing into a folder that the
// caller has given up on.
func killGroupOnCancel(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error {
		return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	}
}
