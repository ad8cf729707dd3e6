package artifact

import (
	"bytes"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Span locates one section of a markdown document: its heading line and
// everything after it up to the next heading of the same or a higher level.
type Span struct {
	Level int
	// Title is the heading's plain text.
	Title string
	// Start is the offset of the heading's line; End the offset where the
	// section ends.
	Start, End int
}

// MarkdownSections returns the sections of a markdown document in order,
// found the same way contracts find them (top-level headings only; none
// inside code fences).
func MarkdownSections(src []byte) []Span {
	return parseMarkdown(src).sections()
}

func (d *mdDocument) sections() []Span {
	src := d.src
	spans := make([]Span, len(d.headings))
	for i, h := range d.headings {
		pos := blockPos(d.blocks[h.block])
		start := bytes.LastIndexByte(src[:pos], '\n') + 1
		spans[i] = Span{Level: h.level, Title: h.text, Start: start}
	}
	for i, h := range d.headings {
		spans[i].End = len(src)
		if h.spanEnd < len(spans) {
			spans[i].End = spans[h.spanEnd].Start
		}
	}
	return spans
}

// FindSection returns the first section whose title matches title the way
// contracts match headings (case, spacing and a trailing colon ignored).
func FindSection(src []byte, title string) (Span, bool) {
	return Find(MarkdownSections(src), title)
}

// Find is FindSection on sections already found, for a caller that looks
// up several titles in one document.
func Find(spans []Span, title string) (Span, bool) {
	want := normalize(title)
	for _, s := range spans {
		if normalize(s.Title) == want {
			return s, true
		}
	}
	return Span{}, false
}

// Lookup resolves a JSON pointer (RFC 6901) in a document decoded by
// encoding/json.
func Lookup(doc any, pointer string) (any, bool) {
	if pointer == "" {
		return doc, true
	}
	if !strings.HasPrefix(pointer, "/") {
		return nil, false
	}
	cur := doc
	for _, tok := range strings.Split(pointer[1:], "/") {
		tok = strings.ReplaceAll(strings.ReplaceAll(tok, "~1", "/"), "~0", "~")
		switch v := cur.(type) {
		case map[string]any:
			next, ok := v[tok]
			if !ok {
				return nil, false
			}
			cur = next
		case []any:
			i, err := strconv.Atoi(tok)
			if err != nil || i < 0 || i >= len(v) || (len(tok) > 1 && tok[0] == '0') {
				return nil, false
			}
			cur = v[i]
		default:
			return nil, false
		}
	}
	return cur, true
}

// SampleValues returns the values of the well-known template placeholders
// as an agent would fill them: {{cycle_id}}, {{agent}}, {{now}} and
// {{now+DURATION}} (UTC, RFC 3339). Any other placeholder gets a short
// phrase naming it. The mock runtime writes its outputs with these values,
// and validation fills JSON templates with them to check that a template
// and its schema agree.
func SampleValues(cycleID, agent string, now time.Time) func(name string) string {
	return func(name string) string {
		switch {
		case name == "cycle_id":
			return cycleID
		case name == "agent":
			return agent
		case name == "now":
			return now.Format(time.RFC3339)
		case strings.HasPrefix(name, "now+"):
			if d, err := time.ParseDuration(strings.TrimPrefix(name, "now+")); err == nil {
				return now.Add(d).Format(time.RFC3339)
			}
		}
		return fmt.Sprintf("%s for cycle %s", strings.ReplaceAll(name, "_", " "), cycleID)
	}
}
