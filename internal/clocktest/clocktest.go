// Package clocktest is a fake agentrunner.Clock for tests: time stands
// still until a test or a wait moves it, so nothing ever sleeps.
package clocktest

import (
	"sync"
	"time"
)

// Clock is a fake clock. After does not block: it moves the clock forward
// by the wait and fires at once, and records the wait, so tests can assert
// the exact schedule of waits (backoffs, polls) without sleeping.
type Clock struct {
	mu    sync.Mutex
	now   time.Time
	waits []time.Duration
	// OnAfter, if set, is called with each wait before it is applied. If it
	// returns false the wait never ends (and the clock does not move): a test
	// cancels a context there to stop the engine in the middle of a wait.
	OnAfter func(d time.Duration) bool
}

// New returns a clock set to t.
func New(t time.Time) *Clock { return &Clock{now: t} }

// Now returns the fake time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Advance moves the clock forward.
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// After records d, moves the clock forward by d and fires at once.
func (c *Clock) After(d time.Duration) <-chan time.Time {
	ch := make(chan time.Time, 1)
	if c.OnAfter != nil && !c.OnAfter(d) {
		return ch
	}
	c.mu.Lock()
	c.waits = append(c.waits, d)
	c.now = c.now.Add(d)
	ch <- c.now
	c.mu.Unlock()
	return ch
}

// Waits returns every wait asked for so far, in order.
func (c *Clock) Waits() []time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]time.Duration(nil), c.waits...)
}

// Stepped marks the clock as one whose time moves when it is waited on
// (agentrunner.SteppedClock).
func (c *Clock) Stepped() {}
