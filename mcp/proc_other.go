//go:build !unix

package mcp

import "syscall"

// sysProcAttr returns nil: without process groups only the server itself
// is stopped at Close, not what it started.
func sysProcAttr() *syscall.SysProcAttr { return nil }

// killGroup does nothing without process groups; Close has already
// stopped the server itself.
func killGroup(int) {}
