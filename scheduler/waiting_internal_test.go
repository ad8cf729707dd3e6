package scheduler

import "testing"

// TestASlotGivenBackBeforeTheResultIsNotCountedTwice: an attempt that
// gave its slot back and was stopped at once sends its request and then
// its result; the loop may take the result first. The request is applied
// before the result frees the slot, so the slots end where they began.
func TestASlotGivenBackBeforeTheResultIsNotCountedTwice(t *testing.T) {
	s := &Scheduler{opts: Options{MaxAttempts: 2}, slots: 1, yielded: map[*stepState]bool{},
		slotRequests: make(chan slotRequest, 8)}
	ss := &stepState{}
	s.slotRequests <- slotRequest{ss: ss, give: true} // sent before the result
	s.ended(ss)
	s.drainSlotRequests() // what the loop would take next
	if s.slots != 2 || len(s.yielded) != 0 {
		t.Errorf("slots %d, attempts with their slot given back %d; want 2 and 0", s.slots, len(s.yielded))
	}
}
