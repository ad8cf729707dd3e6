//go:build unix && !linux

package mcp

import "syscall"

// setParentDeathSignal does nothing: only Linux has a parent-death signal.
// A server still ends when the runner dies, since its stdin closes.
func setParentDeathSignal(*syscall.SysProcAttr) {}
