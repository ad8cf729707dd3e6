package sqlite

import (
	"encoding/json"
	"math"
	"testing"
	"time"
)

func TestEncodeDetailsIsJSONMarshal(t *testing.T) {
	for _, m := range []map[string]any{
		{},
		{"attempt": 1, "visit": 2, "from": "", "pipeline": "loop"},
		{"duration_ms": int64(1234567890123), "n": int32(-7), "ok": true, "no": false, "none": nil},
		{"path": "/tmp/a b/c.md", "sha256": "ab12", "bytes": 315, "min": math.MinInt64},
		{"quote": `a "b" \c`, "html": "<a href='x'>&</a>", "ctrl": "a\nb\tc\rd\x00\x1f\b\f", "del": "\x7f"},
		{"utf8": "héllo wörld 日本", "seps": "a\u2028b\u2029c", "invalid": "a\xffb\xc3", "emoji": "😀"},
		{"<key>": 1, "k\"ey": 2, "é": 3, "": 4, "B": 5, "a": 6},
		{"float": 1.5, "s": "x"},
		{"list": []string{"a", "b"}, "s": "x"},
		{"nested": map[string]any{"a": 1}},
		{"time": time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)},
		{"u": uint(3)},
	} {
		want, werr := json.Marshal(m)
		got, gerr := encodeDetails(m)
		if (werr == nil) != (gerr == nil) || string(got) != string(want) {
			t.Errorf("encodeDetails(%#v) = %s, %v; json.Marshal gives %s, %v", m, got, gerr, want, werr)
		}
	}
}

func FuzzEncodeDetails(f *testing.F) {
	f.Add("from", "a<b>&\"c\"\\", int64(42), true)
	f.Fuzz(func(t *testing.T, k, v string, n int64, b bool) {
		m := map[string]any{k: v, k + "n": n, k + "b": b, "x" + v: int(n)}
		want, _ := json.Marshal(m)
		got, err := encodeDetails(m)
		if err != nil || string(got) != string(want) {
			t.Fatalf("encodeDetails(%#v) = %s, %v; json.Marshal gives %s", m, got, err, want)
		}
	})
}
