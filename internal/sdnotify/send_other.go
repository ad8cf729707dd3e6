//go:build !linux

package sdnotify

// send does nothing: systemd runs only on Linux.
func send(socket, state string) error { return nil }
