//go:build !unix

package process

import (
	"errors"
	"os"
	"syscall"
)

// unsupported says why New fails here: without process groups the runtime
// cannot stop an agent together with the children it started.
var unsupported = errors.New("the process runtime needs a Unix system (process groups)")

func sysProcAttr() *syscall.SysProcAttr { return nil }

func signalGroup(int, syscall.Signal) error { return unsupported }

var (
	sigterm = syscall.Signal(0xf)
	sigkill = syscall.Signal(0x9)
)

func killedBy(*os.ProcessState) (syscall.Signal, bool) { return 0, false }
