//go:build unix

package mailbox

import (
	"os"
	"syscall"
)

// inode returns fi's inode number.
func inode(fi os.FileInfo) (int64, bool) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return 0, false
	}
	return int64(st.Ino), true
}
