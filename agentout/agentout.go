// Package agentout reads what an agent of a task pipeline said at the end of
// its turn (spec 5's ArtifactParser): how confident it is, whether it needs a
// person to answer a question, and, for the split agent, the tasks it split a
// backlog item into. Thresholds decide from that whether a human gate opens.
//
// The format, documented for prompt writers in docs/agent-output.md, is
// plain text an agent can write amid its markdown:
//
//	Confidence: 85
//
//	HUMAN INPUT NEEDED
//	Question: Which database should the service use?
//	- PostgreSQL
//	- SQLite
//
// A confidence line is `Confidence: N` with N an integer 0-100, optionally
// followed by %, or a fraction 0.0-1.0 written with a dot (0.85 is 85; 1 is
// 1 and 1.0 is 100). The name may be `Confidence score`, and both it and the
// value may carry markdown emphasis; the line may be a list item or a quote.
// The last confidence line counts, as agents restate their conclusion at the
// end; a last line that is malformed is an error, never passed over for an
// earlier one. No confidence line gives Confidence -1.
//
// A human-input block is a line `HUMAN INPUT NEEDED` (which may be
// emphasised, a heading, or end in a colon), then, on the next line that is
// neither blank nor a code fence, `Question: …`, then optional options, one
// list item each (`- option`, `* option` or `+ option`), optionally under a
// line `Options:`. The options end at a blank line after the first option,
// or at the first line that is no option. The last block counts.
//
// A task_split output carries its tasks in a fenced ```json block (the last
// one counts):
//
//	```json
//	{"tasks": [
//	  {"title": "Schema", "description": "…", "executionOrder": 1, "dependsOn": []},
//	  {"title": "API", "description": "…", "executionOrder": 2, "dependsOn": [1]}
//	]}
//	```
//
// There is at least one task; every title is non-empty; executionOrder is a
// positive integer no two tasks share; dependsOn names the executionOrder of
// other tasks of the block, and no task depends on itself, directly or
// through others. Fields the block has beyond these are ignored.
//
// HTML comments are not read: templates keep guidance in them. Line breaks
// may be CRLF. Errors name the line and what is wrong; they are
// invalid_output failures, so a step retries the agent with the message.
package agentout

import (
	"regexp"
	"strconv"
	"strings"
	"unicode"

	"github.com/agentrunner/agentrunner"
	"github.com/agentrunner/agentrunner/internal/mdtext"
)

// Kind is the type of artifact an agent produces (spec 5's artifact types);
// it says what Parse reads beyond confidence and human input.
type Kind string

// The artifact kinds of spec 5. Only KindTaskSplit has a structure of its
// own (its tasks); the others are read for confidence and human input only.
const (
	KindTaskSplit      Kind = "task_split"
	KindPlan           Kind = "plan"
	KindImplementation Kind = "implementation"
	KindTest           Kind = "test"
	KindGeneral        Kind = "general"
)

// Kinds are all the kinds, in spec order, for configuration messages.
var Kinds = []Kind{KindTaskSplit, KindPlan, KindImplementation, KindTest, KindGeneral}

// Valid reports whether k is one of Kinds.
func (k Kind) Valid() bool {
	for _, v := range Kinds {
		if k == v {
			return true
		}
	}
	return false
}

// NoConfidence is Artifact.Confidence when the output has no confidence
// line: 0 is a confidence an agent can state.
const NoConfidence = -1

// Artifact is what Parse read from one agent output.
type Artifact struct {
	// Kind is the kind the output was parsed as.
	Kind Kind
	// Confidence is the agent's confidence, 0-100, from its last
	// confidence line; NoConfidence (-1) when it gave none.
	Confidence int
	// HumanInput is the agent's request for a person's answer; nil when
	// it made none.
	HumanInput *Request
	// Tasks are the tasks of a task_split output, in the order written;
	// nil for the other kinds.
	Tasks []Task
	// Body is the whole output, line breaks normalised to \n and
	// surrounding space trimmed: the artifact's content for later prompts.
	Body string
}

// Request is an agent's question for a person, from a HUMAN INPUT NEEDED
// block; a gate shows it and waits for the answer.
type Request struct {
	// Question is the question, emphasis and surrounding space dropped.
	Question string
	// Options are the answers the agent proposes, in order; empty when the
	// answer is free text.
	Options []string
}

// Task is one task of a task_split artifact.
type Task struct {
	Title       string `json:"title"`
	Description string `json:"description"`
	// ExecutionOrder is the task's position within its backlog item,
	// unique and positive ({task.executionOrder} in prompts).
	ExecutionOrder int `json:"executionOrder"`
	// DependsOn are the ExecutionOrders of the tasks this one needs done
	// first.
	DependsOn []int `json:"dependsOn"`
}

// Parse reads an agent's output as an artifact of kind k. Errors for a
// malformed output are invalid_output failures naming the line; an unknown
// kind is an EINVALID error, a fault of the configuration. It never panics.
func Parse(k Kind, output []byte) (*Artifact, error) {
	if !k.Valid() {
		return nil, agentrunner.Errorf(agentrunner.EINVALID, "artifact kind %q: expected one of task_split, plan, implementation, test, general", string(k))
	}
	ls := mdtext.Lines(mdtext.BlankComments(output))
	a := &Artifact{Kind: k, Confidence: NoConfidence, Body: body(output)}
	var err error
	if a.Confidence, err = confidence(ls); err != nil {
		return nil, err
	}
	if a.HumanInput, err = humanInput(ls); err != nil {
		return nil, err
	}
	if k == KindTaskSplit {
		if a.Tasks, err = tasks(ls); err != nil {
			return nil, err
		}
	}
	return a, nil
}

func body(output []byte) string {
	s := strings.ReplaceAll(strings.ToValidUTF8(string(output), "\uFFFD"), "\r\n", "\n")
	return strings.TrimSpace(s)
}

// confidenceFormat is what a confidence line looks like, for messages.
const confidenceFormat = "`Confidence: 85`, `Confidence: 85%` or `Confidence: 0.85`"

// emphasis is optional markdown emphasis around a name or its colon.
const emphasis = `(?:\*\*|__|\*|_)?`

var confidenceLine = regexp.MustCompile(`(?i)^[ \t]*(?:>[ \t]*)*(?:[-*+][ \t]+)?` + emphasis +
	`confidence(?:[ \t]+score)?[ \t]*` + emphasis + `[ \t]*:` + emphasis + `[ \t]*(.*)$`)

var (
	percent  = regexp.MustCompile(`^([0-9]{1,3})[ \t]*%?$`)
	fraction = regexp.MustCompile(`^(?:0?\.[0-9]+|[01]\.[0-9]*)$`)
)

// confidence reads the last confidence line, NoConfidence if none.
func confidence(ls []string) (int, error) {
	for i := len(ls) - 1; i >= 0; i-- {
		m := confidenceLine.FindStringSubmatch(ls[i])
		if m == nil {
			continue
		}
		v := clean(m[1])
		switch {
		case v == "":
			return 0, invalid("line %d: the confidence line has no value: expected %s", i+1, confidenceFormat)
		case percent.MatchString(v):
			n, _ := strconv.Atoi(percent.FindStringSubmatch(v)[1])
			if n > 100 {
				return 0, invalid("line %d: confidence %d is above 100: expected %s", i+1, n, confidenceFormat)
			}
			return n, nil
		case fraction.MatchString(v):
			f, err := strconv.ParseFloat(v, 64)
			if err != nil || f > 1 {
				return 0, invalid("line %d: confidence %s is above 1.0: a fraction is 0.0-1.0; expected %s", i+1, v, confidenceFormat)
			}
			return int(f*100 + 0.5), nil
		default:
			return 0, invalid("line %d: confidence %.40q is no number 0-100 or fraction 0.0-1.0: expected %s", i+1, v, confidenceFormat)
		}
	}
	return NoConfidence, nil
}

// humanFormat is what a human-input block looks like, for messages.
const humanFormat = "a line `HUMAN INPUT NEEDED`, then `Question: …`, then optional `- option` lines"

var (
	questionLine = regexp.MustCompile(`(?i)^` + emphasis + `question[ \t]*` + emphasis + `[ \t]*:` + emphasis + `(.*)$`)
	optionsLine  = regexp.MustCompile(`(?i)^` + emphasis + `options[ \t]*` + emphasis + `[ \t]*:` + emphasis + `[ \t]*$`)
	optionItem   = regexp.MustCompile(`^[-*+][ \t]+(.*)$`)
)

// humanInput reads the last HUMAN INPUT NEEDED block, nil if none.
func humanInput(ls []string) (*Request, error) {
	at := -1
	for i := len(ls) - 1; i >= 0; i-- {
		if isMarker(ls[i]) {
			at = i
			break
		}
	}
	if at < 0 {
		return nil, nil
	}
	j := at + 1
	for j < len(ls) && (strings.TrimSpace(ls[j]) == "" || isFence(strings.TrimSpace(ls[j]))) {
		j++
	}
	if j == len(ls) {
		return nil, invalid("line %d: the HUMAN INPUT NEEDED block has no question: expected %s", at+1, humanFormat)
	}
	m := questionLine.FindStringSubmatch(strings.TrimSpace(ls[j]))
	if m == nil {
		return nil, invalid("line %d: %.60q follows HUMAN INPUT NEEDED (line %d) where a `Question: …` line belongs: expected %s", j+1, strings.TrimSpace(ls[j]), at+1, humanFormat)
	}
	r := &Request{Question: text(m[1])}
	if r.Question == "" {
		return nil, invalid("line %d: the question of the HUMAN INPUT NEEDED block (line %d) is empty: expected %s", j+1, at+1, humanFormat)
	}
	seen := map[string]int{}
	for j++; j < len(ls); j++ {
		t := strings.TrimSpace(ls[j])
		switch {
		case t == "":
			if len(r.Options) > 0 {
				return r, nil
			}
		case isFence(t), optionsLine.MatchString(t):
		case optionItem.MatchString(t):
			o := text(optionItem.FindStringSubmatch(t)[1])
			if o == "" {
				return nil, invalid("line %d: an option of the HUMAN INPUT NEEDED block (line %d) is empty", j+1, at+1)
			}
			if first, dup := seen[o]; dup {
				return nil, invalid("line %d: the option %.60q of the HUMAN INPUT NEEDED block (line %d) is given twice (first on line %d)", j+1, o, at+1, first)
			}
			seen[o] = j + 1
			r.Options = append(r.Options, o)
		default:
			return r, nil
		}
	}
	return r, nil
}

func isMarker(l string) bool {
	t := clean(strings.TrimLeft(strings.TrimSpace(l), "#"))
	return strings.EqualFold(clean(strings.TrimSuffix(t, ":")), "HUMAN INPUT NEEDED")
}

// text cleans a question or an option: emphasis and space dropped, bytes
// that are not UTF-8 replaced.
func text(s string) string {
	return clean(strings.ToValidUTF8(s, "\uFFFD"))
}

// clean trims surrounding space and markdown emphasis and code marks.
func clean(s string) string {
	return strings.TrimFunc(s, func(r rune) bool {
		return unicode.IsSpace(r) || r == '*' || r == '_' || r == '`'
	})
}

func isFence(t string) bool { return strings.HasPrefix(t, "```") || strings.HasPrefix(t, "~~~") }

// invalid is a failure of the output to say what its kind must say.
func invalid(format string, args ...any) error {
	return agentrunner.Fail(agentrunner.ClassInvalidOutput, format, args...)
}
