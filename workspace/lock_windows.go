//go:build windows

package workspace

import (
	"errors"
	"os"

	"golang.org/x/sys/windows"
)

// lockOffset is where the locked byte lies, far past the end of the file:
// Windows locks are mandatory, and locking the pid the file holds would
// stop the next runner from reading who holds the workspace.
const lockOffset = 1 << 62

// tryLock takes an exclusive LockFileEx lock on f without waiting; Windows
// drops it when the process dies.
func tryLock(f *os.File) error {
	ol := &windows.Overlapped{Offset: lockOffset & 0xffffffff, OffsetHigh: lockOffset >> 32}
	err := windows.LockFileEx(windows.Handle(f.Fd()),
		windows.LOCKFILE_EXCLUSIVE_LOCK|windows.LOCKFILE_FAIL_IMMEDIATELY, 0, 1, 0, ol)
	if errors.Is(err, windows.ERROR_LOCK_VIOLATION) {
		return errLocked
	}
	return err
}
