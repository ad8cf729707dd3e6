//go:build unix

package http

import "syscall"

// descriptorLimit returns the process's soft limit on open files. An
// unlimited one reads as the largest number, which caps nothing.
func descriptorLimit() (uint64, bool) {
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil {
		return 0, false
	}
	return uint64(rl.Cur), true
}
