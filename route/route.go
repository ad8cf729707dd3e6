// Package route reads the routing label of a step run from the step's
// output artifact, so that the step's routes can pick its successor.
//
// A step names where its label is ([agentrunner.LabelSource]): a JSON
// pointer, a markdown section, a labelled markdown field, a regular
// expression, or a named parser ("signal": spec 2's SIGNAL BLOCK). The
// source is compiled once, when the configuration is loaded, and read for
// every step run. An output that lacks its label fails the attempt as
// invalid output: the agent broke its contract, and trying the same inputs
// again would most likely fail the same way.
//
// Where an output may say a thing more than once, the last one counts:
// agents restate their conclusion, and several agents append to one
// document, so the latest word is the current one. The regular expression
// is the exception: it takes its first match, as regular expressions do.
package route

import (
	"fmt"
	"sort"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/agentrunner/agentrunner"
)

// maxLabelBytes bounds a label: a label names a route, and a longer text
// is a sign that the source read the wrong thing (a whole paragraph).
const maxLabelBytes = 256

// Extractor reads a routing label from a step's output. It is made by
// Compile and safe for concurrent use.
type Extractor struct {
	desc string
	read func(output []byte) (string, error)
}

// parsers are the named parsers of LabelSource.Parser.
var parsers = map[string]struct {
	desc string
	read func(output []byte) (string, error)
}{
	"signal": {"the SIGNAL BLOCK's Next field", signalLabel},
}

// Compile checks a label source and prepares it for reading: exactly one
// of its fields must be set, and that one must be usable. Its errors are
// EINVALID and say what is wrong with the source.
func Compile(src *agentrunner.LabelSource) (*Extractor, error) {
	if src == nil {
		return nil, agentrunner.Errorf(agentrunner.EINVALID, "no label source: set one of %s", strings.Join(sourceKeys, ", "))
	}
	if set := setKeys(src); len(set) != 1 {
		return nil, oneSourceError(set)
	}
	switch {
	case src.Pointer != "":
		return compilePointer(src.Pointer)
	case src.Section != "":
		return compileSection(src.Section)
	case src.Field != "":
		return compileField(src.Field)
	case src.Regex != "":
		return compileRegex(src.Regex)
	}
	return compileParser(src.Parser)
}

// sourceKeys are the fields of a label source as the configuration names
// them.
var sourceKeys = []string{"pointer", "section", "field", "regex", "parser"}

func setKeys(src *agentrunner.LabelSource) []string {
	var set []string
	for i, v := range []string{src.Pointer, src.Section, src.Field, src.Regex, src.Parser} {
		if v != "" {
			set = append(set, sourceKeys[i])
		}
	}
	return set
}

func oneSourceError(set []string) error {
	if len(set) == 0 {
		return agentrunner.Errorf(agentrunner.EINVALID, "the label source is empty: set one of %s", strings.Join(sourceKeys, ", "))
	}
	return agentrunner.Errorf(agentrunner.EINVALID, "the label source sets %s: set only one", strings.Join(set, " and "))
}

func compileParser(name string) (*Extractor, error) {
	p, ok := parsers[name]
	if !ok {
		return nil, agentrunner.Errorf(agentrunner.EINVALID, "unknown label parser %q; the known parsers are: %s", name, strings.Join(parserNames(), ", "))
	}
	return &Extractor{desc: p.desc, read: p.read}, nil
}

func parserNames() []string {
	names := make([]string, 0, len(parsers))
	for n := range parsers {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// Label reads the routing label from a step's output. The label is
// trimmed of surrounding space and markdown emphasis (**APPROVE** is
// APPROVE). An output without a label is an invalid_output failure whose
// message says what was expected and where.
func (x *Extractor) Label(output []byte) (string, error) {
	raw, err := x.read(output)
	if err != nil {
		return "", err
	}
	label := clean(raw)
	if err := x.check(label); err != nil {
		return "", err
	}
	return label, nil
}

// check refuses what cannot be a label: an empty text, several lines, a
// long text, or bytes that are not UTF-8.
func (x *Extractor) check(label string) error {
	switch {
	case label == "":
		return invalid("the label read from %s is empty", x.desc)
	case !utf8.ValidString(label):
		return invalid("the label read from %s is not valid UTF-8 text: %.60q", x.desc, label)
	case strings.ContainsAny(label, "\r\n"):
		return invalid("the label read from %s spans several lines (%.60q); a label is one line", x.desc, label)
	case len(label) > maxLabelBytes:
		return invalid("the label read from %s is %d bytes long (%.60q…); a label is at most %d bytes", x.desc, len(label), label, maxLabelBytes)
	}
	return nil
}

// String describes the source for messages: "the JSON pointer /verdict".
func (x *Extractor) String() string { return x.desc }

// clean trims a label of surrounding space and of the markdown emphasis
// and code marks around it.
func clean(s string) string {
	return strings.TrimFunc(s, func(r rune) bool {
		return unicode.IsSpace(r) || r == '*' || r == '_' || r == '`'
	})
}

// invalid is a failure of the output to carry its label.
func invalid(format string, args ...any) error {
	return agentrunner.Fail(agentrunner.ClassInvalidOutput, format, args...)
}

// list names up to ten items for a message.
func list(items []string) string {
	const max = 10
	if len(items) <= max {
		return strings.Join(items, ", ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(items[:max], ", "), len(items)-max)
}
