// Package clip shortens text quoted in messages without splitting a UTF-8
// sequence, so a cut never leaves half a character (which JSON encoders and
// terminals turn into U+FFFD) at the end.
package clip

import "unicode/utf8"

// Ellipsis marks a string that String or Runes shortened.
const Ellipsis = "…"

// String returns s if it has at most n bytes, else its longest prefix of at
// most n bytes that ends on a character boundary, followed by Ellipsis.
func String(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:Index(s, n)] + Ellipsis
}

// Runes returns s if it has at most n characters, else its first n
// characters followed by Ellipsis. Invalid bytes count as one character
// each and are kept as they are.
func Runes(s string, n int) string {
	n = max(n, 0)
	i := 0
	for range n {
		if i == len(s) {
			return s
		}
		_, w := utf8.DecodeRuneInString(s[i:])
		i += w
	}
	if i == len(s) {
		return s
	}
	return s[:i] + Ellipsis
}

// Index returns where to cut s to keep at most n bytes without splitting a
// character: n itself, unless a valid multi-byte character starts before n
// and ends after it, in which case its start. Invalid bytes are not
// characters: a cut may fall next to them, so a run of stray continuation
// bytes does not make the prefix empty. n is clamped to [0, len(s)].
func Index(s string, n int) int {
	if n <= 0 {
		return 0
	}
	if n >= len(s) {
		return len(s)
	}
	// The character that n may split starts at most UTFMax-1 bytes back.
	for j := n - 1; j >= 0 && j > n-utf8.UTFMax; j-- {
		if !utf8.RuneStart(s[j]) {
			continue
		}
		if r, w := utf8.DecodeRuneInString(s[j:]); (r != utf8.RuneError || w > 1) && j+w > n {
			return j
		}
		return n
	}
	return n
}
