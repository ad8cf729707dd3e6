package taskprompt

import (
	"strings"
	"unicode/utf8"
)

// piece is a part of a template: text to copy, or a variable to fill in.
type piece struct {
	text string // the text, when name is ""
	name string // the variable, without its braces
	at   int    // byte offset of the variable's "{"
}

// parse splits a template into text and variables, left to right in one
// pass. A doubled {{name}} stays text, and \{name} is text without its
// backslash (see the package documentation).
func parse(t string) []piece {
	var out []piece
	lit := 0 // start of the text not yet added
	for i := 0; i < len(t); {
		j := strings.IndexByte(t[i:], '{')
		if j < 0 {
			break
		}
		j += i
		if n := doubledLen(t, j); n > 0 {
			i = j + n
			continue
		}
		n := refLen(t, j)
		switch {
		case n == 0:
			i = j + 1
		case j > 0 && t[j-1] == '\\':
			out = addText(out, t[lit:j-1])
			lit, i = j, j+n
		default:
			out = addText(out, t[lit:j])
			out = append(out, piece{name: t[j+1 : j+n-1], at: j})
			lit, i = j+n, j+n
		}
	}
	return addText(out, t[lit:])
}

func addText(out []piece, s string) []piece {
	if s == "" {
		return out
	}
	return append(out, piece{text: s})
}

// doubledLen is the length of the {{name}} at t[i:], or 0.
func doubledLen(t string, i int) int {
	if i+1 >= len(t) || t[i+1] != '{' {
		return 0
	}
	n := refLen(t, i+1)
	if n == 0 || i+1+n >= len(t) || t[i+1+n] != '}' {
		return 0
	}
	return n + 2
}

// refLen is the length of the {name} or {namespace.name} at t[i:], or 0.
func refLen(t string, i int) int {
	if t[i] != '{' {
		return 0
	}
	k := identEnd(t, i+1)
	if k == i+1 {
		return 0
	}
	if k < len(t) && t[k] == '.' {
		k2 := identEnd(t, k+1)
		if k2 == k+1 {
			return 0
		}
		k = k2
	}
	if k < len(t) && t[k] == '}' {
		return k + 1 - i
	}
	return 0
}

// identEnd is the end of the identifier at t[i:], or i if there is none.
func identEnd(t string, i int) int {
	if i >= len(t) || !isLetter(t[i]) {
		return i
	}
	i++
	for i < len(t) && (isLetter(t[i]) || isDigit(t[i]) || t[i] == '_') {
		i++
	}
	return i
}

func isLetter(c byte) bool { return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' }

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

// position is the line and column of the byte offset off, both from 1,
// the column in characters as an editor shows it.
func position(t string, off int) (line, col int) {
	before := t[:off]
	line = strings.Count(before, "\n") + 1
	col = utf8.RuneCountInString(before[strings.LastIndexByte(before, '\n')+1:]) + 1
	return line, col
}
