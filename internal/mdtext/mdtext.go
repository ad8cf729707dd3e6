// Package mdtext holds the text helpers that the parsers of agents'
// markdown output share: comments blanked out with line numbers kept, and
// lines without their breaks.
package mdtext

import (
	"bytes"
	"regexp"
	"strings"
)

// htmlComment matches an HTML comment: templates keep guidance in them,
// and guidance is no part of what the agent said.
var htmlComment = regexp.MustCompile(`(?s)<!--.*?-->`)

// BlankComments returns src with its HTML comments blanked out, line
// breaks kept so that offsets and line numbers stay those of src.
func BlankComments(src []byte) []byte {
	locs := htmlComment.FindAllIndex(src, -1)
	if len(locs) == 0 {
		return src
	}
	out := bytes.Clone(src)
	for _, loc := range locs {
		for i := loc[0]; i < loc[1]; i++ {
			if out[i] != '\n' {
				out[i] = ' '
			}
		}
	}
	return out
}

// Lines splits a text into lines without their line breaks (LF or CRLF).
func Lines(src []byte) []string {
	ls := strings.Split(string(src), "\n")
	for i, l := range ls {
		ls[i] = strings.TrimSuffix(l, "\r")
	}
	return ls
}
