package engine

import (
	"context"
	"time"
)

// CheckStrategy runs the strategy watcher (execution.Watcher.CheckStrategy)
// with the engine's current configuration.
func (e *Engine) CheckStrategy(ctx context.Context) (time.Time, error) {
	return e.watcher.CheckStrategy(ctx, e.Config())
}
