//go:build !windows

package main

import (
	"context"
	"errors"
	"syscall"
	"testing"
	"time"

	"github.com/agentrunner/agentrunner"
)

// TestSignalsShutDownThenHurryThenExit: the first SIGTERM ends the
// context as a shutdown, the second hurries it, the third exits.
func TestSignalsShutDownThenHurryThenExit(t *testing.T) {
	exited := make(chan int, 1)
	ctx, stop := shutdownOnSignal(context.Background(), func(code int) { exited <- code })
	defer stop()
	within := func(what string, ch <-chan struct{}) {
		t.Helper()
		select {
		case <-ch:
		case <-time.After(10 * time.Second):
			t.Fatalf("%s: not within 10s", what)
		}
	}
	syscall.Kill(syscall.Getpid(), syscall.SIGTERM)
	within("the shutdown", ctx.Done())
	if !agentrunner.Shutdown(ctx) || !errors.Is(context.Cause(ctx), agentrunner.ErrShutdown) {
		t.Fatalf("cause %v, want a shutdown", context.Cause(ctx))
	}
	select {
	case <-hurried(ctx):
		t.Fatal("hurried by the first signal")
	default:
	}
	syscall.Kill(syscall.Getpid(), syscall.SIGINT)
	within("the hurry", hurried(ctx))
	syscall.Kill(syscall.Getpid(), syscall.SIGTERM)
	select {
	case code := <-exited:
		if code != exitSignaled {
			t.Errorf("exit %d, want %d", code, exitSignaled)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the third signal did not exit")
	}
}
