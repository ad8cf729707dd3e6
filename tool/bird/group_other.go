//go:build !unix

package bird

import "os/exec"

// containGroup leaves exec's default, killing bird itself when ctx ends;
// without process groups its helpers are left to exit on their own, and
// WaitDelay bounds the wait for them.
func containGroup(*exec.Cmd) {}
