package scheduler

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// TestResourceWaitIsCapped: the wait doubles from 1s and stops at 1m.
func TestResourceWaitIsCapped(t *testing.T) {
	var got []time.Duration
	for n := 1; n <= 9; n++ {
		got = append(got, resourceWait(n))
	}
	want := []time.Duration{1, 2, 4, 8, 16, 32, 60, 60, 60}
	for i := range want {
		want[i] *= time.Second
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("waits (-want +got):\n%s", diff)
	}
	if w := resourceWait(1 << 20); w != time.Minute {
		t.Errorf("wait after many failures: %v, want 1m", w)
	}
}
