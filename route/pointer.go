package route

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"

	"github.com/agentrunner/agentrunner"
)

// pointer is a JSON pointer (RFC 6901) split into its reference tokens.
type pointer struct {
	text string
	// tokens are unescaped; raw are as written, for messages.
	tokens, raw []string
}

// unescape turns a token's ~1 into / and its ~0 into ~, in one pass so
// that ~01 is ~1 (RFC 6901, section 4).
var unescape = strings.NewReplacer("~1", "/", "~0", "~")

func compilePointer(text string) (*Extractor, error) {
	p, err := parsePointer(text)
	if err != nil {
		return nil, err
	}
	return &Extractor{desc: "the JSON pointer " + text, read: p.read}, nil
}

func parsePointer(text string) (*pointer, error) {
	if !strings.HasPrefix(text, "/") {
		return nil, agentrunner.Errorf(agentrunner.EINVALID, "JSON pointer %q must start with / (e.g. /verdict)", text)
	}
	p := &pointer{text: text, raw: strings.Split(text[1:], "/")}
	for _, tok := range p.raw {
		if badEscape(tok) {
			return nil, agentrunner.Errorf(agentrunner.EINVALID, "JSON pointer %q: a ~ must be followed by 0 (for ~) or 1 (for /)", text)
		}
		p.tokens = append(p.tokens, unescape.Replace(tok))
	}
	return p, nil
}

func badEscape(tok string) bool {
	for i := 0; i < len(tok); i++ {
		if tok[i] == '~' && (i+1 == len(tok) || (tok[i+1] != '0' && tok[i+1] != '1')) {
			return true
		}
	}
	return false
}

// read resolves the pointer in a JSON output; the value must be a
// string, a number (as written) or a boolean.
func (p *pointer) read(output []byte) (string, error) {
	doc, err := decodeJSON(output)
	if err != nil {
		return "", invalid("JSON pointer %s: the output is not JSON: %v", p.text, err)
	}
	for i, tok := range p.tokens {
		if doc, err = p.step(doc, i, tok); err != nil {
			return "", err
		}
	}
	switch v := doc.(type) {
	case string:
		return v, nil
	case json.Number:
		return v.String(), nil
	case bool:
		return strconv.FormatBool(v), nil
	}
	return "", invalid("JSON pointer %s: the value is %s; a label is a string, a number or a boolean", p.text, kindOf(doc))
}

// step resolves token i in v, the value the tokens before it lead to.
func (p *pointer) step(v any, i int, tok string) (any, error) {
	where := p.where(i)
	switch v := v.(type) {
	case map[string]any:
		if next, ok := v[tok]; ok {
			return next, nil
		}
		if len(v) == 0 {
			return nil, invalid("JSON pointer %s: no such member; %s is an empty object", p.text, where)
		}
		return nil, invalid("JSON pointer %s: no such member; %s has members %s", p.text, where, list(members(v)))
	case []any:
		n, err := strconv.Atoi(tok)
		if err != nil || n < 0 || strconv.Itoa(n) != tok {
			return nil, invalid("JSON pointer %s: %s is an array, and %q is not an index", p.text, where, p.raw[i])
		}
		if n >= len(v) {
			return nil, invalid("JSON pointer %s: no such item; %s is an array of %d items", p.text, where, len(v))
		}
		return v[n], nil
	}
	return nil, invalid("JSON pointer %s: %s is %s, not an object or an array", p.text, where, kindOf(v))
}

// where names the value the first i tokens lead to.
func (p *pointer) where(i int) string {
	if i == 0 {
		return "the document"
	}
	return "/" + strings.Join(p.raw[:i], "/")
}

func members(m map[string]any) []string {
	names := make([]string, 0, len(m))
	for k := range m {
		names = append(names, strconv.Quote(k))
	}
	sort.Strings(names)
	return names
}

func kindOf(v any) string {
	switch v.(type) {
	case map[string]any:
		return "an object"
	case []any:
		return "an array"
	case string:
		return "a string"
	case json.Number:
		return "a number"
	case bool:
		return "a boolean"
	}
	return "null"
}

// decodeJSON decodes one JSON value, keeping numbers as written; a
// syntax error names its line.
func decodeJSON(data []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, syntaxError(data, err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, fmt.Errorf("line %d: data after the JSON value", line(data, int(dec.InputOffset())))
	}
	return v, nil
}

func syntaxError(data []byte, err error) error {
	var se *json.SyntaxError
	switch {
	case errors.As(err, &se):
		return fmt.Errorf("line %d: %v", line(data, int(se.Offset)), err)
	case errors.Is(err, io.EOF):
		return errors.New("it is empty")
	case errors.Is(err, io.ErrUnexpectedEOF):
		return errors.New("the JSON value is cut short")
	}
	return err
}

// line is the 1-based line of a byte offset.
func line(data []byte, off int) int {
	return bytes.Count(data[:min(max(off, 0), len(data))], []byte("\n")) + 1
}
