package scheduler

import (
	"context"
	"slices"
	"sync"
)

// slotRequest is a worker telling the loop that its attempt gives its
// slot back while it waits on other runs (give), or wants one again
// (granted is closed once it has it).
type slotRequest struct {
	ss      *stepState
	give    bool
	granted chan struct{}
}

// waiter is the attempt's side of agentrunner.Waiting: it counts the
// overlapping waits of one attempt, gives the slot back at the first and
// takes one again at the last resume.
type waiter struct {
	s   *Scheduler
	ss  *stepState
	ctx context.Context // the attempt's: once it ends, the loop may be gone
	mu  sync.Mutex      // held while a slot is taken again, so a new wait follows it
	n   int
}

func (w *waiter) wait() func(context.Context) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.n++
	if w.n == 1 {
		select {
		case w.s.slotRequests <- slotRequest{ss: w.ss, give: true}:
		case <-w.ctx.Done(): // the slot stays the attempt's, which is ending
		}
	}
	var once sync.Once
	return func(ctx context.Context) (err error) {
		once.Do(func() { err = w.resume(ctx) })
		return err
	}
}

func (w *waiter) resume(ctx context.Context) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.n--; w.n > 0 {
		return nil
	}
	granted := make(chan struct{})
	select {
	case w.s.slotRequests <- slotRequest{ss: w.ss, granted: granted}:
	case <-ctx.Done():
		return ctx.Err()
	}
	select {
	case <-granted:
		return nil
	case <-ctx.Done():
		return ctx.Err() // the loop forgets the request when the result comes
	}
}

// slotRequest applies a worker's request, in the loop. A slot given back
// is free for any attempt; one asked for again is granted by assign,
// before any attempt that has yet to start. How many attempts wait with
// their slot given back is not bounded here: a bound would be a deadlock
// again, its parents holding every slot their children need.
func (s *Scheduler) slotRequest(q slotRequest) {
	switch {
	case q.give && !s.yielded[q.ss]:
		s.yielded[q.ss] = true
		s.slots++
	case q.give:
	case s.yielded[q.ss]:
		s.resuming = append(s.resuming, q)
	default:
		close(q.granted) // it kept its slot
	}
}

// drainSlotRequests applies the requests already there.
func (s *Scheduler) drainSlotRequests() {
	for {
		select {
		case q := <-s.slotRequests:
			s.slotRequest(q)
		default:
			return
		}
	}
}

// resume grants the attempts that wait for their slot again, oldest
// first, while slots are free.
func (s *Scheduler) resume() {
	for len(s.resuming) > 0 && s.slots > 0 {
		q := s.resuming[0]
		s.resuming = s.resuming[1:]
		delete(s.yielded, q.ss)
		s.slots--
		close(q.granted)
	}
}

// ended settles the slot of an attempt whose result came: its slot is
// free again, unless it had given it back and not taken one since. The
// requests already sent are applied first: the attempt sent them before
// its result, but the loop may have taken the result first (an attempt
// that gave its slot back and was stopped at once), and a slot given
// back after it was freed would be one slot too many.
func (s *Scheduler) ended(ss *stepState) {
	s.drainSlotRequests()
	if !s.yielded[ss] {
		s.slots++
		return
	}
	delete(s.yielded, ss)
	s.resuming = slices.DeleteFunc(s.resuming, func(q slotRequest) bool { return q.ss == ss })
}
