package http

import (
	"context"
	"errors"
	"time"

	"github.com/agentrunner/agentrunner"
)

// Waits between the reconnections of Follow: the first is short, for a
// server that restarts at once; they double up to the longest while it
// stays away, and start again short once events flow.
const (
	FollowFirstWait = 250 * time.Millisecond
	FollowLongest   = 5 * time.Second
)

// Follow calls fn with each event the server streams, as Stream does,
// and outlives the stream: when the server or the network ends it (a
// restart of serve), Follow connects again from the last event fn got,
// sent as Last-Event-ID, so an event committed meanwhile is not missed
// and none is given twice. onBreak, when not nil, is told of each break
// and the wait before the next try. Follow returns nil when ctx ends,
// fn's error as is, and any answer a retry would not change (a refused
// key, a bad filter) as Stream returns it.
func (c *Client) Follow(ctx context.Context, since string, f EventFilter, fn func(Event) error, onBreak func(err error, wait time.Duration)) error {
	last, wait := int64(-1), FollowFirstWait
	for {
		var fnErr error
		got := false
		err := c.stream(ctx, since, last, f, func(ev Event) error {
			last, got = ev.ID, true
			fnErr = fn(ev)
			return fnErr
		})
		switch {
		case ctx.Err() != nil:
			return nil
		case fnErr != nil:
			return fnErr
		case !transient(err):
			return err
		}
		if got {
			wait = FollowFirstWait
		}
		if onBreak != nil {
			onBreak(err, wait)
		}
		if !sleep(ctx, wait) {
			return nil
		}
		wait = min(2*wait, FollowLongest)
	}
}

// transient reports whether a stream's error may pass by itself: the
// server is not reachable, ended the stream, or is too busy now.
func transient(err error) bool {
	var e *agentrunner.Error
	return errors.As(err, &e) && e.Code == agentrunner.EUNAVAILABLE
}

// sleep waits d, or less when ctx ends first (false).
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
