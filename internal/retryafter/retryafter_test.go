package retryafter_test

import (
	"math"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/agentrunner/agentrunner/internal/retryafter"
)

func TestParse(t *testing.T) {
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	longest := time.Duration(math.MaxInt64/int64(time.Second)) * time.Second
	type result struct {
		Wait time.Duration
		OK   bool
	}
	tests := []struct {
		name   string
		header string
		want   result
	}{
		{"seconds", "120", result{2 * time.Minute, true}},
		{"seconds with spaces", "  7 ", result{7 * time.Second, true}},
		{"leading zeros", "007", result{7 * time.Second, true}},
		{"zero", "0", result{0, false}},
		{"empty", "", result{0, false}},
		{"blank", "   ", result{0, false}},
		{"negative", "-5", result{0, false}},
		{"plus sign", "+5", result{0, false}},
		{"fraction", "1.5", result{0, false}},
		{"unit", "5s", result{0, false}},
		{"garbage", "soon", result{0, false}},
		{"huge saturates", "99999999999999999999999999", result{longest, true}},
		{"just beyond a Duration", "9223372037", result{longest, true}},
		{"a year", "31536000", result{365 * 24 * time.Hour, true}},
		{"HTTP date in the future", "Sun, 01 Mar 2026 12:01:30 GMT", result{90 * time.Second, true}},
		{"HTTP date in the past", "Sun, 01 Mar 2026 11:59:00 GMT", result{0, false}},
		{"HTTP date now", "Sun, 01 Mar 2026 12:00:00 GMT", result{0, false}},
		{"RFC 850 date", "Sunday, 01-Mar-26 12:00:10 GMT", result{10 * time.Second, true}},
		{"asctime date", "Sun Mar  1 12:00:05 2026", result{5 * time.Second, true}},
		{"far future date", "Fri, 31 Dec 9999 23:59:59 GMT", result{time.Date(9999, 12, 31, 23, 59, 59, 0, time.UTC).Sub(now), true}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got result
			got.Wait, got.OK = retryafter.Parse(tt.header, now)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Parse(%q) (-want +got):\n%s", tt.header, diff)
			}
		})
	}
}

func FuzzParse(f *testing.F) {
	for _, s := range []string{"120", "-1", "Sun, 01 Mar 2026 12:01:30 GMT", "99999999999999999999"} {
		f.Add(s)
	}
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	f.Fuzz(func(t *testing.T, s string) {
		if d, ok := retryafter.Parse(s, now); ok != (d > 0) || (!ok && d != 0) {
			t.Fatalf("Parse(%q) = %v, %v: ok must say the wait is positive, and no wait is 0", s, d, ok)
		}
	})
}
