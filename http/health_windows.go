//go:build windows

package http

import "golang.org/x/sys/windows"

// availableMiB returns the MiB free for this account (quotas included) on
// dir's volume.
func availableMiB(dir string) (int64, error) {
	p, err := windows.UTF16PtrFromString(dir)
	if err != nil {
		return 0, err
	}
	var avail, total, free uint64
	if err := windows.GetDiskFreeSpaceEx(p, &avail, &total, &free); err != nil {
		return 0, err
	}
	return int64(avail >> 20), nil
}
