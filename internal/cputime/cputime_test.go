//go:build unix

package cputime

import (
	"testing"
	"time"
)

var sink int

func TestSelfGrowsWithWork(t *testing.T) {
	u0, s0, ok := Self()
	if !ok {
		t.Fatal("Self() is not ok on unix")
	}
	// Work until the kernel's count moves: its tick may be coarse.
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); {
		for i := range 1_000_000 {
			sink += i
		}
		if u1, s1, _ := Self(); u1+s1 > u0+s0 {
			return
		}
	}
	t.Fatal("the CPU time did not grow in 10s of work")
}
