package tool

import (
	"sync"
	"time"
)

// Breaker states, as Stats reports them.
const (
	BreakerClosed   = "closed"
	BreakerOpen     = "open"
	BreakerHalfOpen = "half-open"
)

// breaker is a tool's circuit breaker (FR-135): after `failures`
// consecutive failed calls it opens and refuses calls for `openFor`; then
// it is half-open and lets one trial call through: success closes it,
// failure opens it again. Calls made while the trial runs are refused as
// if it were open.
//
// It is written here rather than taken from sony/gobreaker because
// gobreaker reads time.Now directly: its schedule cannot be driven by the
// injectable clock, and the open → half-open → closed schedule must be
// testable without sleeping.
//
// A breaker with failures == 0 is disabled: it always allows and stays
// closed. It is safe for concurrent use.
type breaker struct {
	failures int
	openFor  time.Duration

	mu          sync.Mutex
	consecutive int       // failed calls in a row
	openUntil   time.Time // zero while closed
	trial       bool      // a half-open trial call is running
}

func newBreaker(failures int, openFor time.Duration) *breaker {
	return &breaker{failures: failures, openFor: openFor}
}

// refusal says why a call was refused.
type refusal struct {
	consecutive int
	until       time.Time
	trialActive bool // refused because another call is the half-open trial
}

// allow decides whether a call may run now. When it may, trial reports
// whether the call is the half-open trial; the caller must then report its
// outcome with success, failure or abandon.
func (b *breaker) allow(now time.Time) (trial bool, refused *refusal) {
	if b.failures == 0 {
		return false, nil
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.openUntil.IsZero() {
		return false, nil
	}
	if now.Before(b.openUntil) {
		return false, &refusal{consecutive: b.consecutive, until: b.openUntil}
	}
	if b.trial {
		return false, &refusal{consecutive: b.consecutive, until: b.openUntil, trialActive: true}
	}
	b.trial = true
	return true, nil
}

// success records a call the tool completed: the breaker closes.
func (b *breaker) success(trial bool) {
	if b.failures == 0 {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if trial {
		b.trial = false
	}
	b.consecutive = 0
	b.openUntil = time.Time{}
}

// failure records a call that failed by the tool's fault. It opens the
// breaker when the trial failed or the failures reached the threshold.
func (b *breaker) failure(now time.Time, trial bool) {
	if b.failures == 0 {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.consecutive++
	if trial {
		b.trial = false
		b.openUntil = now.Add(b.openFor)
		return
	}
	// A call that started before the breaker opened and fails afterwards
	// must not extend the open time, or a burst of slow calls would keep
	// the breaker open forever.
	if b.openUntil.IsZero() && b.consecutive >= b.failures {
		b.openUntil = now.Add(b.openFor)
	}
}

// abandon records a call that ended without a verdict on the tool (the
// caller cancelled it): a trial slot is given back for the next call.
func (b *breaker) abandon(trial bool) {
	if b.failures == 0 || !trial {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.trial = false
}

// state reports the breaker's state at now.
func (b *breaker) state(now time.Time) string {
	if b.failures == 0 {
		return BreakerClosed
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	switch {
	case b.openUntil.IsZero():
		return BreakerClosed
	case now.Before(b.openUntil):
		return BreakerOpen
	default:
		return BreakerHalfOpen
	}
}
