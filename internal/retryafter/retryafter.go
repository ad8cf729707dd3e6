// Package retryafter reads the Retry-After header of an HTTP answer (RFC
// 9110, section 10.2.3), which asks for a wait either in seconds or until
// an HTTP date.
package retryafter

import (
	"math"
	"net/http"
	"strings"
	"time"
)

// Parse returns the wait that the Retry-After value header asks for,
// measured from now for an HTTP date, and whether it asks for one: an
// empty, malformed, zero or negative value, or a date not after now, asks
// for none, so the caller falls back on its own backoff. A wait too long
// for a time.Duration is the longest one; callers bound it as they need.
func Parse(header string, now time.Time) (time.Duration, bool) {
	v := strings.TrimSpace(header)
	if v == "" {
		return 0, false
	}
	var d time.Duration
	if secs, ok := seconds(v); ok {
		d = secs
	} else if at, err := http.ParseTime(v); err == nil {
		d = at.Sub(now)
	} else {
		return 0, false
	}
	if d <= 0 {
		return 0, false
	}
	return d, true
}

// seconds reads delay-seconds, which are only digits (1*DIGIT): no sign,
// no fraction. Beyond what a Duration holds it saturates.
func seconds(v string) (time.Duration, bool) {
	const most = math.MaxInt64 / int64(time.Second)
	var n int64
	for i := 0; i < len(v); i++ {
		c := v[i]
		if c < '0' || c > '9' {
			return 0, false
		}
		n = min(n*10+int64(c-'0'), most)
	}
	return time.Duration(n) * time.Second, true
}
