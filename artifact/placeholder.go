package artifact

import (
	"bytes"
	"regexp"
	"sort"
	"unicode/utf8"
)

// placeholderPattern matches {{name}}. Names are restricted so that
// template syntax of other tools ({{ .Field }}, {{#each}}) is left alone.
var placeholderPattern = regexp.MustCompile(`\{\{([\p{L}\p{N}_.+\-]+)\}\}`)

// Placeholder is one {{name}} in a template or artifact: a value the
// template leaves to be filled, such as {{cycle_id}}, {{now+6h}} or
// {{win_rate}}.
type Placeholder struct {
	Name string
	Line int // 1-based
}

// FindPlaceholders returns every placeholder in data in order of
// appearance, repeats included.
func FindPlaceholders(data []byte) []Placeholder {
	locs := placeholderPattern.FindAllSubmatchIndex(data, -1)
	if len(locs) == 0 {
		return nil
	}
	lines := newLineIndex(data)
	found := make([]Placeholder, 0, len(locs))
	for _, loc := range locs {
		found = append(found, Placeholder{Name: string(data[loc[2]:loc[3]]), Line: lines.line(loc[0])})
	}
	return found
}

// ExpandPlaceholders returns a copy of data with every placeholder replaced
// by value(name). It makes one pass, so placeholders inside returned values
// are not expanded again; value can return "{{"+name+"}}" to keep one.
func ExpandPlaceholders(data []byte, value func(name string) string) []byte {
	return placeholderPattern.ReplaceAllFunc(data, func(m []byte) []byte {
		return []byte(value(string(m[2 : len(m)-2])))
	})
}

// lineIndex maps byte offsets to lines: it holds the offset of every '\n'.
type lineIndex []int

func newLineIndex(src []byte) lineIndex {
	idx := make(lineIndex, 0, bytes.Count(src, []byte{'\n'}))
	for i, c := range src {
		if c == '\n' {
			idx = append(idx, i)
		}
	}
	return idx
}

// line returns the 1-based line holding offset off; a '\n' belongs to the
// line it ends.
func (l lineIndex) line(off int) int { return sort.SearchInts(l, off) + 1 }

// column returns the 1-based column, counted in characters, of offset off
// in src.
func (l lineIndex) column(src []byte, off int) int {
	start := 0
	if i := sort.SearchInts(l, off); i > 0 {
		start = l[i-1] + 1
	}
	off = min(max(off, start), len(src))
	return utf8.RuneCount(src[start:off]) + 1
}
