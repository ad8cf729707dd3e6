//go:build !unix

package worktree

import "os/exec"

// killGroupOnCancel keeps exec's default without process groups: the
// context's end kills git itself, and a child it started may finish its
// work; the next Ensure recognises what it leaves.
func killGroupOnCancel(*exec.Cmd) {}
