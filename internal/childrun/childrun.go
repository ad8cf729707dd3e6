// Package childrun finds and waits for the runs another run started (a
// lead's sub-agents, an item's tasks): the one lookup by key that makes a
// start after a crash find its child instead of starting another, and the
// one wait for a child's end.
package childrun

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/agentrunner/agentrunner"
)

// Store reads runs.
type Store interface {
	Run(ctx context.Context, id string) (*agentrunner.Run, error)
	Runs(ctx context.Context, f agentrunner.RunFilter) ([]*agentrunner.Run, error)
}

// ErrStopped is wrapped by Wait's error when its context ended first.
var ErrStopped = errors.New("stopped before the run ended")

// Find returns the id of parent's child whose input key holds value, ""
// when it has none.
func Find(ctx context.Context, store Store, parent, key, value string) (string, error) {
	children, err := store.Runs(ctx, agentrunner.RunFilter{Parent: parent})
	if err != nil {
		return "", err
	}
	for _, r := range children {
		if v, _ := r.Inputs[key].(string); v == value {
			return r.ID, nil
		}
	}
	return "", nil
}

// Wait looks at run id every poll until it ended, and returns it. A store
// error is returned as it is; a context that ends first, wrapped in
// ErrStopped. While it waits, the attempt of ctx gives its place among
// the attempts that run at once back (agentrunner.Waiting), so that the
// child can run even when every place is taken by parents that wait; it
// takes one again before it returns the run.
func Wait(ctx context.Context, store Store, id string, poll time.Duration) (r *agentrunner.Run, err error) {
	resume := agentrunner.Waiting(ctx)
	defer func() {
		if rerr := resume(ctx); rerr != nil && err == nil {
			r, err = nil, fmt.Errorf("%w: %w", ErrStopped, rerr)
		}
	}()
	t := time.NewTicker(poll)
	defer t.Stop()
	for {
		r, err := store.Run(ctx, id)
		if err != nil {
			return nil, err
		}
		if r.Status.Finished() {
			return r, nil
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("%w: %w", ErrStopped, ctx.Err())
		case <-t.C:
		}
	}
}
