//go:build windows

package main

// onHangup does nothing on Windows, which has no SIGHUP: reload through
// the API, agentrunner reload or reload.watch.
func onHangup(func()) (stop func()) { return func() {} }
