//go:build unix

package http

import "syscall"

// availableMiB returns the MiB free for unprivileged users on dir's file
// system.
func availableMiB(dir string) (int64, error) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return 0, err
	}
	return int64(st.Bavail) * int64(st.Bsize) >> 20, nil
}
