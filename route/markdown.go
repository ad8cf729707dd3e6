package route

import (
	"bytes"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/agentrunner/agentrunner"
	"github.com/agentrunner/agentrunner/artifact"
	"github.com/agentrunner/agentrunner/internal/mdtext"
)

// section reads the first line of a markdown section: its heading is
// found as output contracts find headings (case, spacing and a trailing
// colon ignored), and the last section of that title counts.
type section struct{ title string }

func compileSection(title string) (*Extractor, error) {
	t := strings.TrimSpace(title)
	switch {
	case t == "" || strings.ContainsAny(t, "\r\n") || !utf8.ValidString(t):
		return nil, agentrunner.Errorf(agentrunner.EINVALID, "label section %q: name a heading's text, on one line", title)
	case strings.HasPrefix(t, "#"):
		return nil, agentrunner.Errorf(agentrunner.EINVALID, "label section %q: name the heading's text without its #", title)
	}
	return &Extractor{desc: fmt.Sprintf("the section %q", t), read: (&section{title: t}).read}, nil
}

func (s *section) read(output []byte) (string, error) {
	src := mdtext.BlankComments(output)
	spans := artifact.MarkdownSections(src)
	span, ok := lastSection(spans, s.title)
	if !ok {
		return "", invalid("the output has no section %q: expected a heading such as `## %s` whose first line is the label; %s", s.title, s.title, headings(spans))
	}
	at := line(src, span.Start)
	for _, l := range mdtext.Lines(src[bodyStart(src, span):span.End]) {
		t := strings.TrimSpace(l)
		switch {
		case t == "" || isFence(t):
			continue
		case isHeading(t):
			return "", invalid("section %q (line %d) has no line of its own before its sub-heading %.60q: expected the label on its first line", s.title, at, t)
		}
		return stripMarker(t), nil
	}
	return "", invalid("section %q (line %d) is empty: expected the label on its first line", s.title, at)
}

// lastSection finds the last section titled title.
func lastSection(spans []artifact.Span, title string) (artifact.Span, bool) {
	for i := len(spans) - 1; i >= 0; i-- {
		if s, ok := artifact.Find(spans[i:i+1], title); ok {
			return s, true
		}
	}
	return artifact.Span{}, false
}

func headings(spans []artifact.Span) string {
	if len(spans) == 0 {
		return "the output has no headings"
	}
	titles := make([]string, len(spans))
	for i, s := range spans {
		titles[i] = strconv.Quote(s.Title)
	}
	return "its headings are " + list(titles)
}

// bodyStart is the offset after a section's heading: one line for an ATX
// heading (## Title), up to the underline for a setext one (Title, ===).
func bodyStart(src []byte, span artifact.Span) int {
	off := span.Start
	first := true
	for off < span.End {
		end := lineEnd(src, off)
		t := strings.TrimSpace(string(src[off:end]))
		off = min(end+1, span.End)
		if (first && isHeading(t)) || isUnderline(t) {
			return off
		}
		first = false
	}
	return span.End
}

func lineEnd(src []byte, off int) int {
	if i := bytes.IndexByte(src[off:], '\n'); i >= 0 {
		return off + i
	}
	return len(src)
}

func isUnderline(t string) bool {
	return t != "" && (strings.Trim(t, "=") == "" || strings.Trim(t, "-") == "")
}

var heading = regexp.MustCompile(`^#{1,6}(\s|$)`)

func isHeading(t string) bool { return heading.MatchString(t) }

func isFence(t string) bool { return strings.HasPrefix(t, "```") || strings.HasPrefix(t, "~~~") }

// stripMarker drops a line's blockquote and list-item markers.
func stripMarker(t string) string {
	for {
		switch {
		case strings.HasPrefix(t, ">"):
			t = strings.TrimSpace(t[1:])
		case len(t) > 1 && strings.ContainsRune("-*+", rune(t[0])) && (t[1] == ' ' || t[1] == '\t'):
			t = strings.TrimSpace(t[2:])
		default:
			return t
		}
	}
}

// field reads a labelled line, Name: value, anywhere in a markdown output;
// the name may be emphasised (**Name**: value, **Name:** value) and the
// line a list item or a quote. The last such line counts: agents restate
// their conclusion at the end.
type field struct {
	name string
	re   *regexp.Regexp
}

// emphasis is optional markdown emphasis around a field's name or colon.
const emphasis = `(?:\*\*|__|\*|_)?`

func compileField(name string) (*Extractor, error) {
	n := strings.TrimSpace(name)
	switch {
	case n == "" || strings.ContainsAny(n, ":\r\n") || !utf8.ValidString(n):
		return nil, agentrunner.Errorf(agentrunner.EINVALID, "label field %q: name the field as it is written before its colon, on one line (e.g. Verdict)", name)
	case clean(n) != n:
		return nil, agentrunner.Errorf(agentrunner.EINVALID, "label field %q: name the field without markdown emphasis", name)
	}
	re := regexp.MustCompile(`(?mi)^[ \t]*(?:>[ \t]*)*(?:[-*+][ \t]+)?` + emphasis + regexp.QuoteMeta(n) +
		`[ \t]*` + emphasis + `[ \t]*:` + emphasis + `[ \t]*(.*)$`)
	return &Extractor{desc: fmt.Sprintf("the field %q", n), read: (&field{name: n, re: re}).read}, nil
}

func (f *field) read(output []byte) (string, error) {
	src := mdtext.BlankComments(output)
	all := f.re.FindAllSubmatchIndex(src, -1)
	if len(all) == 0 {
		return "", invalid("the output has no field %q: expected a line `%s: LABEL` (or `**%[2]s**: LABEL`, `- %[2]s: LABEL`)", f.name, f.name)
	}
	m := all[len(all)-1]
	value := clean(string(src[m[2]:m[3]]))
	if value == "" {
		return "", invalid("field %q (line %d) has no value: expected `%s: LABEL` on one line", f.name, line(src, m[0]), f.name)
	}
	return value, nil
}
