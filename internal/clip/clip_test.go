package clip_test

import (
	"testing"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"

	"github.com/agentrunner/agentrunner/internal/clip"
)

func TestIndex(t *testing.T) {
	tests := []struct {
		name string
		s    string
		n    int
		want int
	}{
		{"shorter than n", "abc", 10, 3},
		{"exactly n", "abc", 3, 3},
		{"ascii cut", "abcdef", 4, 4},
		{"zero", "abc", 0, 0},
		{"negative", "abc", -1, 0},
		{"empty", "", 5, 0},
		{"cut after a 2-byte rune", "aé b", 3, 3},
		{"cut inside a 2-byte rune", "aéb", 2, 1},
		{"cut inside a 3-byte rune, 1 byte in", "a€b", 2, 1},
		{"cut inside a 3-byte rune, 2 bytes in", "a€b", 3, 1},
		{"cut after a 3-byte rune", "a€b", 4, 4},
		{"cut inside a 4-byte rune, 3 bytes in", "a😀b", 4, 1},
		{"n smaller than the first rune", "😀x", 3, 0},
		{"n smaller than the first rune, 1 byte", "€", 1, 0},
		{"a valid U+FFFD is a rune too", "a\uFFFDb", 2, 1},
		{"stray continuation bytes are kept", "a\x80\x80\x80\x80\x80", 4, 4},
		{"complete rune before a stray byte is kept", "é\x80x", 2, 2},
		{"invalid lead byte is cut next to", "ab\xff\xffcd", 3, 3},
		{"truncated sequence inside the text", "ab\xe2\x82cd", 3, 3},
		{"truncated sequence at n", "ab\xe2\x82", 3, 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, clip.Index(tt.s, tt.n)); diff != "" {
				t.Errorf("Index(%q, %d) (-want +got):\n%s", tt.s, tt.n, diff)
			}
		})
	}
}

func TestString(t *testing.T) {
	tests := []struct {
		name string
		s    string
		n    int
		want string
	}{
		{"fits", "hello", 5, "hello"},
		{"empty", "", 3, ""},
		{"ascii", "hello world", 5, "hello…"},
		{"multi-byte rune at the cut", "naïve", 3, "na…"},
		{"after a multi-byte rune", "naïve", 4, "naï…"},
		{"n smaller than a rune", "日本", 2, "…"},
		{"zero", "abc", 0, "…"},
		{"invalid UTF-8 kept as it is", "\xff\xfe\xfd\xfc", 2, "\xff\xfe…"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, clip.String(tt.s, tt.n)); diff != "" {
				t.Errorf("String(%q, %d) (-want +got):\n%s", tt.s, tt.n, diff)
			}
		})
	}
}

func TestRunes(t *testing.T) {
	tests := []struct {
		name string
		s    string
		n    int
		want string
	}{
		{"fits", "日本語", 3, "日本語"},
		{"cut", "日本語です", 3, "日本語…"},
		{"ascii", "abcdef", 2, "ab…"},
		{"zero", "abc", 0, "…"},
		{"negative", "abc", -2, "…"},
		{"empty", "", 0, ""},
		{"invalid bytes count one each", "a\xffb\xfec", 3, "a\xffb…"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, clip.Runes(tt.s, tt.n)); diff != "" {
				t.Errorf("Runes(%q, %d) (-want +got):\n%s", tt.s, tt.n, diff)
			}
		})
	}
}

// FuzzIndex checks the promise on any input: the prefix is no longer than
// n, and a valid input gives a valid prefix that a longer cut would not
// have to split.
func FuzzIndex(f *testing.F) {
	for _, s := range []string{"", "abc", "naïve", "a😀b", "é\x80x", "\xff\xe2\x82"} {
		f.Add(s, 3)
	}
	f.Fuzz(func(t *testing.T, s string, n int) {
		i := clip.Index(s, n)
		if i < 0 || i > len(s) || (n >= 0 && i > n) {
			t.Fatalf("Index(%q, %d) = %d, out of range", s, n, i)
		}
		if utf8.ValidString(s) && !utf8.ValidString(s[:i]) {
			t.Fatalf("Index(%q, %d) = %d splits a rune", s, n, i)
		}
		if utf8.ValidString(s) && n > i && n < len(s) && utf8.RuneStart(s[n]) {
			t.Fatalf("Index(%q, %d) = %d, but %d is a boundary", s, n, i, n)
		}
	})
}
