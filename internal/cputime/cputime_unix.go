//go:build unix

package cputime

import (
	"syscall"
	"time"
)

// Self returns the CPU time the process has used so far in user space and
// in the kernel; ok is false where the system does not report it.
func Self() (user, sys time.Duration, ok bool) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0, 0, false
	}
	return time.Duration(ru.Utime.Nano()), time.Duration(ru.Stime.Nano()), true
}
