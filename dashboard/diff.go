package dashboard

import (
	"strings"
)

// maxDiffLines bounds the lines each side of a diff may have between
// their common start and end: the table it takes grows with the product.
const maxDiffLines = 1500

// diffOp says what a diff line is.
type diffOp string

// The diff operations.
const (
	diffSame diffOp = "same"
	diffDel  diffOp = "del"
	diffAdd  diffOp = "add"
)

// diffLine is one line of a diff, with its numbers on each side (0: not
// on that side).
type diffLine struct {
	Op       diffOp
	Old, New int
	Text     string
}

// lineDiff returns the line diff from a to b (a longest common
// subsequence of lines), or ok false when the parts that differ are
// longer than maxDiffLines lines.
func lineDiff(a, b string) (lines []diffLine, ok bool) {
	x, y := splitLines(a), splitLines(b)
	pre := 0
	for pre < len(x) && pre < len(y) && x[pre] == y[pre] {
		pre++
	}
	suf := 0
	for suf < len(x)-pre && suf < len(y)-pre && x[len(x)-1-suf] == y[len(y)-1-suf] {
		suf++
	}
	mx, my := x[pre:len(x)-suf], y[pre:len(y)-suf]
	if len(mx) > maxDiffLines || len(my) > maxDiffLines {
		return nil, false
	}
	for i := 0; i < pre; i++ {
		lines = append(lines, diffLine{Op: diffSame, Old: i + 1, New: i + 1, Text: x[i]})
	}
	lines = append(lines, lcsDiff(mx, my, pre, pre)...)
	for i := 0; i < suf; i++ {
		o, n := len(x)-suf+i, len(y)-suf+i
		lines = append(lines, diffLine{Op: diffSame, Old: o + 1, New: n + 1, Text: x[o]})
	}
	return lines, true
}

// lcsDiff diffs x and y by a table of the longest common subsequences of
// their suffixes; offX and offY number their lines.
func lcsDiff(x, y []string, offX, offY int) []diffLine {
	n, m := len(x), len(y)
	t := make([][]uint16, n+1)
	for i := range t {
		t[i] = make([]uint16, m+1)
	}
	for i := n - 1; i >= 0; i-- {
		for j := m - 1; j >= 0; j-- {
			if x[i] == y[j] {
				t[i][j] = t[i+1][j+1] + 1
			} else {
				t[i][j] = max(t[i+1][j], t[i][j+1])
			}
		}
	}
	var out []diffLine
	i, j := 0, 0
	for i < n || j < m {
		switch {
		case i < n && j < m && x[i] == y[j]:
			out = append(out, diffLine{Op: diffSame, Old: offX + i + 1, New: offY + j + 1, Text: x[i]})
			i, j = i+1, j+1
		case i < n && (j == m || t[i+1][j] >= t[i][j+1]):
			out = append(out, diffLine{Op: diffDel, Old: offX + i + 1, Text: x[i]})
			i++
		default:
			out = append(out, diffLine{Op: diffAdd, New: offY + j + 1, Text: y[j]})
			j++
		}
	}
	return out
}

// splitLines splits text into lines without their line ends; an empty
// text has none.
func splitLines(s string) []string {
	if s == "" {
		return nil
	}
	return strings.Split(strings.TrimSuffix(strings.ReplaceAll(s, "\r\n", "\n"), "\n"), "\n")
}

// diffStats counts the added and deleted lines.
func diffStats(lines []diffLine) (added, deleted int) {
	for _, l := range lines {
		switch l.Op {
		case diffAdd:
			added++
		case diffDel:
			deleted++
		}
	}
	return added, deleted
}
