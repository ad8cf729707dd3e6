package route

import (
	"regexp"
	"strings"

	"github.com/agentrunner/agentrunner/internal/mdtext"
)

// Signal is a SIGNAL BLOCK of spec 2: the status line an agent appends to
// the cycle's document to say who it was and which agent runs next.
//
//	SIGNAL BLOCK
//	Agent=comparator | Cycle=2025-11-08-001 | Step=COMPARE | Confidence=4 | Risk=low | Next=diagnoser
type Signal struct {
	// Agent is the agent that wrote the block; Next the agent to run
	// next, or STOP to end the cycle.
	Agent, Next string
	// Fields are all the fields of the status line in order, Agent and
	// Next included, as written (keys and values trimmed).
	Fields []SignalField
	// Line is the 1-based line of the block's SIGNAL BLOCK line.
	Line int
}

// SignalField is one Key=Value of a SIGNAL BLOCK's status line.
type SignalField struct {
	Key, Value string
}

// Get returns the value of a field; keys are compared without case, as
// agents do not all spell them alike.
func (s *Signal) Get(key string) (string, bool) {
	for _, f := range s.Fields {
		if strings.EqualFold(f.Key, key) {
			return f.Value, true
		}
	}
	return "", false
}

// signalFormat is what a SIGNAL BLOCK looks like, for messages.
const signalFormat = "a line `SIGNAL BLOCK` followed by `Agent=… | … | Next=…`"

// ParseSignal returns the last SIGNAL BLOCK of a document: the agents of a
// cycle append their sections to one document, so the last block is the
// current one. A last block that is malformed is an error, never passed
// over for an earlier one, which would route by a stale signal.
//
// The block is a line SIGNAL BLOCK (which may be emphasised, a heading, or
// end in a colon) and, on the next line that is neither blank nor a code
// fence, its status line: Key=Value fields separated by |, every one with
// a value, no key twice, Agent and Next among them. Space, emphasis and
// backticks around the line, its keys and its values are dropped; HTML
// comments are not read. What the values mean (Step, Confidence, Risk)
// is the flow's to check. Errors are invalid_output failures.
func ParseSignal(doc []byte) (*Signal, error) {
	ls := mdtext.Lines(mdtext.BlankComments(doc))
	at := lastMarker(ls)
	if at < 0 {
		return nil, invalid("the output has no SIGNAL BLOCK: expected %s", signalFormat)
	}
	for i := at + 1; i < len(ls); i++ {
		if t := strings.TrimSpace(ls[i]); t != "" && !isFence(t) {
			return parseStatus(t, at+1, i+1)
		}
	}
	return nil, invalid("the last SIGNAL BLOCK (line %d) has no status line: expected %s", at+1, signalFormat)
}

// lastMarker is the index of the last SIGNAL BLOCK line, -1 if none.
func lastMarker(ls []string) int {
	for i := len(ls) - 1; i >= 0; i-- {
		if isMarker(ls[i]) {
			return i
		}
	}
	return -1
}

func isMarker(l string) bool {
	t := clean(strings.TrimLeft(strings.TrimSpace(l), "#"))
	return strings.EqualFold(clean(strings.TrimSuffix(t, ":")), "SIGNAL BLOCK")
}

var signalKey = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9_-]*$`)

// parseStatus parses the status line on line at of the block on line
// marker.
func parseStatus(l string, marker, at int) (*Signal, error) {
	s := &Signal{Line: marker}
	seen := map[string]bool{} // lower-case keys; keys are ASCII
	for _, part := range strings.Split(strings.Trim(clean(l), "|"), "|") {
		k, v, ok := strings.Cut(part, "=")
		k, v = clean(k), clean(v)
		switch dup := seen[strings.ToLower(k)]; {
		case !ok || !signalKey.MatchString(k):
			return nil, invalid("the last SIGNAL BLOCK (line %d): %.60q on line %d is no field Key=Value; expected %s", marker, strings.TrimSpace(part), at, signalFormat)
		case v == "":
			return nil, invalid("the last SIGNAL BLOCK (line %d): its field %s on line %d has no value", marker, k, at)
		case dup:
			return nil, invalid("the last SIGNAL BLOCK (line %d): its field %s is given twice on line %d", marker, k, at)
		}
		seen[strings.ToLower(k)] = true
		s.Fields = append(s.Fields, SignalField{Key: k, Value: v})
	}
	if err := s.required(at); err != nil {
		return nil, err
	}
	return s, nil
}

// required fills Agent and Next, which every block must have.
func (s *Signal) required(at int) error {
	var ok bool
	if s.Agent, ok = s.Get("Agent"); !ok {
		return s.missing("Agent", at)
	}
	if s.Next, ok = s.Get("Next"); !ok {
		return s.missing("Next", at)
	}
	return nil
}

func (s *Signal) missing(key string, at int) error {
	return invalid("the last SIGNAL BLOCK (line %d) has no %s field on its status line (line %d): expected %s", s.Line, key, at, signalFormat)
}

// signalLabel is the parser "signal": the label is the Next field of the
// last SIGNAL BLOCK.
func signalLabel(output []byte) (string, error) {
	s, err := ParseSignal(output)
	if err != nil {
		return "", err
	}
	return s.Next, nil
}
