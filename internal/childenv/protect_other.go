//go:build !linux

package childenv

// ProtectRunner does nothing here: other systems do not show a process's
// environment to other processes of its user through a file (macOS lets
// only the process itself and root read it).
func ProtectRunner() error { return nil }
