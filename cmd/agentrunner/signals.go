package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/agentrunner/agentrunner"
)

// exitSignaled is the exit status after a third SIGINT or SIGTERM, which
// exits at once (128 + SIGINT, as shells report it).
const exitSignaled = 130

// hurryKey keys the channel a second signal closes, in a command's context.
type hurryKey struct{}

// shutdownOnSignal returns a context that ends at the first SIGINT or
// SIGTERM with a cause wrapping agentrunner.ErrShutdown, which makes
// serve and run shut down gracefully: running steps may finish within
// shutdown.grace. A second signal closes the channel hurried(ctx)
// returns, which cuts the grace short; a third exits at once through
// exit. stop releases the signals.
func shutdownOnSignal(parent context.Context, exit func(int)) (ctx context.Context, stop func()) {
	ctx, cancel := context.WithCancelCause(parent)
	hurry := make(chan struct{})
	ctx = context.WithValue(ctx, hurryKey{}, (<-chan struct{})(hurry))
	sigs := make(chan os.Signal, 3)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	done := make(chan struct{})
	go func() {
		for n := 1; ; n++ {
			select {
			case sig := <-sigs:
				switch n {
				case 1:
					cancel(fmt.Errorf("%v: %w", sig, agentrunner.ErrShutdown))
				case 2:
					close(hurry)
				default:
					exit(exitSignaled)
				}
			case <-done:
				return
			}
		}
	}()
	return ctx, func() {
		signal.Stop(sigs)
		close(done)
		cancel(nil)
	}
}

// hurried is the channel a second signal closes; nil (never) when the
// context has none.
func hurried(ctx context.Context) <-chan struct{} {
	ch, _ := ctx.Value(hurryKey{}).(<-chan struct{})
	return ch
}
