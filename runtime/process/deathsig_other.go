//go:build unix && !linux

package process

import "syscall"

// setParentDeathSignal does nothing: only Linux offers a parent-death signal
// this runtime relies on.
func setParentDeathSignal(*syscall.SysProcAttr) {}
