//go:build !windows

package main

import (
	"os"
	"os/signal"
	"syscall"
)

// onHangup calls reload at each SIGHUP until stop is called: serve and
// run read their configuration again instead of dying, as a daemon does.
func onHangup(reload func()) (stop func()) {
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGHUP)
	done := make(chan struct{})
	go func() {
		for {
			select {
			case <-sigs:
				reload()
			case <-done:
				return
			}
		}
	}()
	return func() {
		signal.Stop(sigs)
		close(done)
	}
}
