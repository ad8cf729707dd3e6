package agentrunner

import "context"

// waitingKey is the context key of an attempt's waiter (WithWaiting).
type waitingKey struct{}

// WithWaiting returns ctx carrying wait, which Waiting calls: the
// scheduler gives each attempt's context one.
func WithWaiting(ctx context.Context, wait func() (resume func(context.Context) error)) context.Context {
	return context.WithValue(ctx, waitingKey{}, wait)
}

// Waiting tells the scheduler running the attempt of ctx that the attempt
// now waits on other runs it started (a tasks step on its tasks, a lead
// on its sub-agents): its place among the attempts that run at once
// (scheduler.max_concurrent_attempts) is given back, so that those runs
// can have it, even when every place is taken by attempts that wait like
// this one. resume takes a place again before the attempt goes on,
// waiting while none is free; it fails only when ctx ends first. Calls
// may overlap (parallel sub-agents): the place is given back at the
// first and taken again at the last resume. Without a scheduler behind
// ctx, Waiting does nothing and resume returns at once.
func Waiting(ctx context.Context) (resume func(context.Context) error) {
	if wait, ok := ctx.Value(waitingKey{}).(func() func(context.Context) error); ok {
		return wait()
	}
	return func(context.Context) error { return nil }
}
