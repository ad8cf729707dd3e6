package artifact

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/agentrunner/agentrunner"
	"github.com/santhosh-tekuri/jsonschema/v6"
)

// JSONContract is the contract of a JSON output template: the artifact
// must be well-formed JSON, hold no unfilled {{placeholder}} in its
// strings and, when the contract has a schema, satisfy it. The zero
// JSONContract has no schema. It is immutable and safe for concurrent use.
type JSONContract struct {
	schema *jsonschema.Schema
}

// NewJSONContract compiles a JSON Schema (draft 2020-12 unless the schema
// says otherwise, with "format" asserted) into a contract. schemaName
// names the schema in errors and is its base URI; it may be a file path.
// The schema must be self-contained: references to other documents are
// refused rather than fetched, so validation never touches the network or
// depends on files other than the one the operator configured.
func NewJSONContract(schema []byte, schemaName string) (*JSONContract, error) {
	if schemaName == "" {
		schemaName = "schema.json"
	}
	if isBlank(schema) {
		return nil, agentrunner.Errorf(agentrunner.EINVALID, "JSON Schema %s is empty", schemaName)
	}
	doc, syntax := decodeJSON(schema)
	if syntax != nil {
		return nil, agentrunner.Errorf(agentrunner.EINVALID, "JSON Schema %s is not valid JSON: %s", schemaName, syntax)
	}
	compiler := jsonschema.NewCompiler()
	compiler.DefaultDraft(jsonschema.Draft2020)
	compiler.AssertFormat()
	compiler.UseLoader(selfContained{})
	if err := compiler.AddResource(schemaName, doc); err != nil {
		return nil, &agentrunner.Error{Code: agentrunner.EINVALID,
			Message: fmt.Sprintf("JSON Schema %s cannot be used", schemaName), Err: err}
	}
	compiled, err := compiler.Compile(schemaName)
	if err != nil {
		return nil, &agentrunner.Error{Code: agentrunner.EINVALID,
			Message: fmt.Sprintf("JSON Schema %s does not compile", schemaName), Err: err}
	}
	return &JSONContract{schema: compiled}, nil
}

// selfContained is the schema loader: it loads nothing. The standard
// meta-schemas are built into the library and never reach a loader.
type selfContained struct{}

func (selfContained) Load(url string) (any, error) {
	return nil, fmt.Errorf("refusing to load %s: the schema must be self-contained (put shared definitions under $defs)", url)
}

// Validate checks a JSON artifact. A syntax error is the only problem
// reported, with its line and column; otherwise every schema violation and
// every unfilled placeholder is reported with its JSON pointer and line.
func (c *JSONContract) Validate(data []byte) []Problem {
	if isBlank(data) {
		return []Problem{problemEmpty}
	}
	value, syntax := decodeJSON(data)
	if syntax != nil {
		return []Problem{*syntax}
	}
	idx := indexJSON(data)
	problems := idx.placeholders
	if c != nil && c.schema != nil {
		problems = append(problems, schemaProblems(c.schema.Validate(value))...)
	}
	for i := range problems {
		if problems[i].Line == 0 {
			problems[i].Line = idx.line(problems[i].Pointer)
		}
	}
	sort.SliceStable(problems, func(i, j int) bool {
		a, b := problems[i], problems[j]
		if a.Line != b.Line {
			return a.Line < b.Line
		}
		if a.Pointer != b.Pointer {
			return a.Pointer < b.Pointer
		}
		return a.Message < b.Message
	})
	// Alternatives of an anyOf can fail the same way; one report is enough.
	return slices.Compact(problems)
}

// schemaProblems turns a validation error into one problem per leaf cause;
// the causes above the leaves only say that their children failed.
func schemaProblems(err error) []Problem {
	if err == nil {
		return nil
	}
	var verr *jsonschema.ValidationError
	if !errors.As(err, &verr) {
		return []Problem{{Message: err.Error()}}
	}
	var problems []Problem
	var walk func(u *jsonschema.OutputUnit)
	walk = func(u *jsonschema.OutputUnit) {
		if len(u.Errors) == 0 {
			if u.Error != nil {
				problems = append(problems, Problem{Pointer: u.InstanceLocation, Message: u.Error.String()})
			}
			return
		}
		for i := range u.Errors {
			walk(&u.Errors[i])
		}
	}
	walk(verr.DetailedOutput())
	return problems
}

// decodeJSON decodes one JSON document the way the schema library expects
// (numbers as json.Number). A syntax error, trailing data included, comes
// back as a problem with line and column.
func decodeJSON(data []byte) (any, *Problem) {
	var raw json.RawMessage
	if err := json.Unmarshal(data, &raw); err != nil {
		off := len(data)
		var syn *json.SyntaxError
		if errors.As(err, &syn) {
			// Offset counts the bytes read, the offending one included;
			// for truncated input this points at the last byte.
			off = min(max(int(syn.Offset)-1, 0), len(data))
		}
		lines := newLineIndex(data)
		return nil, &Problem{
			Line:    lines.line(off),
			Column:  lines.column(data, off),
			Message: "invalid JSON: " + strings.TrimPrefix(err.Error(), "json: "),
		}
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, &Problem{Line: 1, Message: "invalid JSON: " + err.Error()}
	}
	return v, nil
}

// jsonIndex knows where each value of a well-formed JSON document starts
// and which strings in it still hold placeholders.
type jsonIndex struct {
	data         []byte
	lines        lineIndex
	dec          *json.Decoder
	offsets      map[string]int // JSON pointer → offset of the member's key or the element
	placeholders []Problem
}

// indexJSON indexes a document that decodeJSON accepted.
func indexJSON(data []byte) *jsonIndex {
	x := &jsonIndex{data: data, lines: newLineIndex(data), dec: json.NewDecoder(bytes.NewReader(data)), offsets: map[string]int{}}
	x.dec.UseNumber()
	// The document is known to be well-formed; should the walk still fail,
	// the index is partial and problems fall back to coarser lines.
	_ = x.value("")
	return x
}

func (x *jsonIndex) value(ptr string) error {
	start := x.next()
	tok, err := x.dec.Token()
	if err != nil {
		return err
	}
	if _, seen := x.offsets[ptr]; !seen {
		x.offsets[ptr] = start
	}
	switch tok := tok.(type) {
	case string:
		x.checkPlaceholders(tok, ptr, start)
	case json.Delim:
		switch tok {
		case '{':
			for x.dec.More() {
				keyStart := x.next()
				keyTok, err := x.dec.Token()
				if err != nil {
					return err
				}
				key, _ := keyTok.(string)
				child := ptr + "/" + escapePointer(key)
				x.checkPlaceholders(key, child, keyStart)
				if _, seen := x.offsets[child]; !seen {
					x.offsets[child] = keyStart
				}
				if err := x.value(child); err != nil {
					return err
				}
			}
		case '[':
			for i := 0; x.dec.More(); i++ {
				if err := x.value(ptr + "/" + strconv.Itoa(i)); err != nil {
					return err
				}
			}
		}
		if _, err := x.dec.Token(); err != nil { // the closing delimiter
			return err
		}
	}
	return nil
}

// next returns the offset where the decoder's next token starts.
func (x *jsonIndex) next() int {
	off := int(x.dec.InputOffset())
	for off < len(x.data) {
		switch x.data[off] {
		case ' ', '\t', '\r', '\n', ',', ':':
			off++
			continue
		}
		break
	}
	return off
}

func (x *jsonIndex) checkPlaceholders(s, ptr string, off int) {
	for _, m := range placeholderPattern.FindAllString(s, -1) {
		x.placeholders = append(x.placeholders, Problem{
			Line: x.lines.line(off), Pointer: ptr, Message: "unfilled placeholder " + m,
		})
	}
}

// line returns the line of the value at ptr, or of its nearest indexed
// ancestor.
func (x *jsonIndex) line(ptr string) int {
	for {
		if off, ok := x.offsets[ptr]; ok {
			return x.lines.line(off)
		}
		i := strings.LastIndexByte(ptr, '/')
		if i < 0 {
			return 0
		}
		ptr = ptr[:i]
	}
}

// escapePointer escapes a key as a JSON pointer token (RFC 6901).
func escapePointer(key string) string {
	return strings.ReplaceAll(strings.ReplaceAll(key, "~", "~0"), "/", "~1")
}
