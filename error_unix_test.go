//go:build unix

package agentrunner_test

import (
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"syscall"
	"testing"

	"github.com/agentrunner/agentrunner"
	"github.com/google/go-cmp/cmp"
)

// TestExhaustedResource: the errnos of an exhausted resource are found
// through every kind of wrapping the runner's own operations produce, and
// nothing else is taken for one, not even the same words in a message.
func TestExhaustedResource(t *testing.T) {
	pathErr := func(op string, errno syscall.Errno) error {
		return &os.PathError{Op: op, Path: "/srv/crypton/artifacts/cycles/x/prompt.md", Err: errno}
	}
	tests := []struct {
		name string
		err  error
		want agentrunner.Resource
	}{
		{"nil", nil, ""},
		{"bare EMFILE", syscall.EMFILE, agentrunner.ResourceFileDescriptors},
		{"os.PathError ENFILE", pathErr("open", syscall.ENFILE), agentrunner.ResourceFileDescriptors},
		{"fs.PathError ENOSPC, wrapped twice", fmt.Errorf("write prompt: %w", fmt.Errorf("sync: %w",
			&fs.PathError{Op: "write", Path: "/x", Err: syscall.ENOSPC})), agentrunner.ResourceDiskSpace},
		{"EDQUOT", pathErr("write", syscall.EDQUOT), agentrunner.ResourceDiskSpace},
		{"os.SyscallError ENOMEM", os.NewSyscallError("mmap", syscall.ENOMEM), agentrunner.ResourceMemory},
		{"os.SyscallError EMFILE in a StepError", agentrunner.Fail(agentrunner.ClassUnavailable, "pipe: %w",
			os.NewSyscallError("pipe2", syscall.EMFILE)), agentrunner.ResourceFileDescriptors},
		{"net.OpError from a dial", &net.OpError{Op: "dial", Net: "tcp",
			Err: os.NewSyscallError("socket", syscall.EMFILE)}, agentrunner.ResourceFileDescriptors},
		{"errors.Join", errors.Join(errors.New("rollback failed"), pathErr("open", syscall.ENOSPC)), agentrunner.ResourceDiskSpace},
		{"an *Error's cause", &agentrunner.Error{Code: agentrunner.EUNAVAILABLE, Message: "commit", Err: syscall.ENOSPC}, agentrunner.ResourceDiskSpace},
		{"fork/exec EAGAIN", fmt.Errorf("start: %w", pathErr("fork/exec", syscall.EAGAIN)), agentrunner.ResourceProcesses},
		{"fork/exec ENOMEM", pathErr("fork/exec", syscall.ENOMEM), agentrunner.ResourceMemory},
		{"EAGAIN elsewhere is no exhaustion", pathErr("read", syscall.EAGAIN), ""},
		{"another errno", pathErr("open", syscall.EACCES), ""},
		{"fs.ErrNotExist", fs.ErrNotExist, ""},
		{"the words without the errno", errors.New("open x: too many open files"), ""},
		{"an agent's crash quoting its stderr", agentrunner.Fail(agentrunner.ClassCrash,
			"agent exited with status 1: stderr: open x: too many open files"), ""},
		{"the errno formatted with %v loses it", fmt.Errorf("write: %v", syscall.ENOSPC), ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, agentrunner.ExhaustedResource(tt.err)); diff != "" {
				t.Errorf("ExhaustedResource(%v) (-want +got):\n%s", tt.err, diff)
			}
		})
	}
}

// TestClassOfResource: an exhausted resource makes the failure a
// retryable resource failure whatever class the operation gave it; the
// other classes are as before.
func TestClassOfResource(t *testing.T) {
	emfile := &os.PathError{Op: "open", Path: "/x/prompt.md", Err: syscall.EMFILE}
	tests := []struct {
		name string
		err  error
		want agentrunner.ErrorClass
	}{
		{"internal file work", agentrunner.Fail(agentrunner.ClassInternal, "write prompt: %w", emfile), agentrunner.ClassResource},
		{"agent start", agentrunner.Fail(agentrunner.ClassUnavailable, "start agent command %q: %w", "claude",
			&os.PathError{Op: "fork/exec", Path: "/usr/bin/claude", Err: syscall.EAGAIN}), agentrunner.ClassResource},
		{"reading the artifact", agentrunner.Fail(agentrunner.ClassInvalidOutput, "read: %w", emfile), agentrunner.ClassResource},
		{"not a StepError", fmt.Errorf("commit state change: %w", syscall.ENOSPC), agentrunner.ClassResource},
		{"crash", agentrunner.Fail(agentrunner.ClassCrash, "agent exited with status 24: too many open files"), agentrunner.ClassCrash},
		{"internal", agentrunner.Fail(agentrunner.ClassInternal, "write prompt: %w", fs.ErrPermission), agentrunner.ClassInternal},
		{"plain", errors.New("boom"), agentrunner.ClassInternal},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, agentrunner.ClassOf(tt.err)); diff != "" {
				t.Errorf("ClassOf(%v) (-want +got):\n%s", tt.err, diff)
			}
		})
	}
	if !agentrunner.ClassResource.Retryable() {
		t.Error("ClassResource is not retryable")
	}
}
