package agentout

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
)

// splitFormat is what a task_split output carries, for messages.
const splitFormat = "a fenced ```json block {\"tasks\": [{\"title\", \"description\", \"executionOrder\", \"dependsOn\"}]}"

// jsonBlock is a fenced ```json block: the text between its fences and the
// 0-based index of its opening fence's line.
type jsonBlock struct {
	open int
	text string
}

// tasks reads and checks the tasks of the last ```json block.
func tasks(ls []string) ([]Task, error) {
	b, err := lastJSONBlock(ls)
	if err != nil {
		return nil, err
	}
	ts, at, err := decodeTasks(b)
	if err != nil {
		return nil, err
	}
	if err := check(ts, at); err != nil {
		return nil, err
	}
	return ts, nil
}

// lastJSONBlock finds the last fenced block whose info string is json.
func lastJSONBlock(ls []string) (*jsonBlock, error) {
	var last *jsonBlock
	for i := 0; i < len(ls); i++ {
		t := strings.TrimSpace(ls[i])
		if !isFence(t) {
			continue
		}
		mark := t[:3]
		n := len(t) - len(strings.TrimLeft(t, mark[:1]))
		info := strings.TrimSpace(t[n:])
		end := -1
		for j := i + 1; j < len(ls); j++ {
			c := strings.TrimSpace(ls[j])
			if strings.HasPrefix(c, mark) && strings.Trim(c, mark[:1]) == "" && len(c) >= n {
				end = j
				break
			}
		}
		isJSON := strings.EqualFold(strings.Fields(info + " x")[0], "json")
		if end < 0 {
			if isJSON {
				return nil, invalid("line %d: the ```json block is never closed: expected a closing %s", i+1, t[:n])
			}
			break
		}
		if isJSON {
			last = &jsonBlock{open: i, text: strings.Join(ls[i+1:end], "\n")}
		}
		i = end
	}
	if last == nil {
		return nil, invalid("the task_split output has no ```json block: expected %s", splitFormat)
	}
	return last, nil
}

// line is the 1-based line of the output at byte offset off of the block.
func (b *jsonBlock) line(off int64) int {
	if off < 0 {
		off = 0
	}
	if off > int64(len(b.text)) {
		off = int64(len(b.text))
	}
	return b.open + 2 + strings.Count(b.text[:off], "\n")
}

// decodeTasks decodes the block's tasks and the line each starts on.
func decodeTasks(b *jsonBlock) ([]Task, []int, error) {
	dec := json.NewDecoder(strings.NewReader(b.text))
	fail := func(err error) error {
		var syn *json.SyntaxError
		var typ *json.UnmarshalTypeError
		switch {
		case errors.As(err, &syn):
			return invalid("line %d: the ```json block (line %d) is no valid JSON: %v", b.line(syn.Offset), b.open+1, err)
		case errors.As(err, &typ):
			what := typ.Field
			if what == "" {
				what = "a task"
			}
			return invalid("line %d: in the ```json block (line %d), %s is a JSON %s where %s belongs: expected %s", b.line(typ.Offset), b.open+1, what, typ.Value, goType(typ.Type.Kind().String()), splitFormat)
		case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
			return invalid("line %d: the ```json block (line %d) ends before its JSON does: expected %s", b.line(int64(len(b.text))), b.open+1, splitFormat)
		default:
			return invalid("line %d: the ```json block (line %d): %v", b.line(dec.InputOffset()), b.open+1, err)
		}
	}
	if err := expect(dec, '{'); err != nil {
		if errors.Is(err, errShape) {
			return nil, nil, invalid("line %d: the ```json block (line %d) is no JSON object: expected %s", b.line(dec.InputOffset()), b.open+1, splitFormat)
		}
		return nil, nil, fail(err)
	}
	var (
		ts    []Task
		at    []int
		found bool
	)
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, nil, fail(err)
		}
		key, _ := tok.(string)
		if !strings.EqualFold(key, "tasks") {
			var skip json.RawMessage
			if err := dec.Decode(&skip); err != nil {
				return nil, nil, fail(err)
			}
			continue
		}
		if found {
			return nil, nil, invalid("line %d: the ```json block (line %d) has two \"tasks\" fields", b.line(dec.InputOffset()), b.open+1)
		}
		found = true
		if err := expect(dec, '['); err != nil {
			if errors.Is(err, errShape) {
				return nil, nil, invalid("line %d: \"tasks\" of the ```json block (line %d) is no array: expected %s", b.line(dec.InputOffset()), b.open+1, splitFormat)
			}
			return nil, nil, fail(err)
		}
		for dec.More() {
			start := b.line(dec.InputOffset() + int64(leadingSkip(b.text[dec.InputOffset():])))
			var t Task
			if err := dec.Decode(&t); err != nil {
				return nil, nil, fail(err)
			}
			ts, at = append(ts, t), append(at, start)
		}
		if _, err := dec.Token(); err != nil {
			return nil, nil, fail(err)
		}
	}
	if _, err := dec.Token(); err != nil {
		return nil, nil, fail(err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, nil, invalid("line %d: the ```json block (line %d) has more after its JSON object: expected one object", b.line(dec.InputOffset()), b.open+1)
	}
	if len(ts) == 0 {
		return nil, nil, invalid("line %d: the ```json block has no tasks: expected %s", b.open+1, splitFormat)
	}
	return ts, at, nil
}

var errShape = errors.New("unexpected JSON value")

// expect reads the next token, which must be the delimiter d.
func expect(dec *json.Decoder, d json.Delim) error {
	tok, err := dec.Token()
	if err != nil {
		return err
	}
	if tok != d {
		return errShape
	}
	return nil
}

// leadingSkip is the length of the space and commas before a value.
func leadingSkip(s string) int {
	return len(s) - len(strings.TrimLeft(s, " \t\r\n,"))
}

func goType(k string) string {
	switch k {
	case "int", "int64":
		return "an integer"
	case "string":
		return "a string"
	case "slice":
		return "an array of integers"
	case "struct":
		return "an object"
	}
	return "a " + k
}

// check checks the tasks' invariants; at are the lines they start on.
func check(ts []Task, at []int) error {
	byOrder := map[int]int{} // executionOrder → index
	for i, t := range ts {
		switch {
		case strings.TrimSpace(t.Title) == "":
			return invalid("line %d: task %d has no title", at[i], i+1)
		case t.ExecutionOrder <= 0:
			return invalid("line %d: task %d (%.60q) has executionOrder %d: expected a positive integer", at[i], i+1, t.Title, t.ExecutionOrder)
		}
		if j, dup := byOrder[t.ExecutionOrder]; dup {
			return invalid("line %d: task %d (%.60q) has executionOrder %d, as task %d (line %d) has: each task has its own", at[i], i+1, t.Title, t.ExecutionOrder, j+1, at[j])
		}
		byOrder[t.ExecutionOrder] = i
	}
	for i, t := range ts {
		for _, d := range t.DependsOn {
			if _, ok := byOrder[d]; !ok {
				return invalid("line %d: task %d (%.60q) depends on executionOrder %d, which no task has", at[i], i+1, t.Title, d)
			}
		}
	}
	if cycle := findCycle(ts, byOrder); cycle != nil {
		i := byOrder[cycle[0]]
		parts := make([]string, len(cycle))
		for k, o := range cycle {
			parts[k] = fmt.Sprint(o)
		}
		return invalid("line %d: task %d (%.60q) depends on itself, directly or through others: executionOrders %s form a cycle", at[i], i+1, ts[i].Title, strings.Join(parts, " → "))
	}
	return nil
}

// findCycle returns a dependency cycle as executionOrders, first repeated
// at the end, or nil.
func findCycle(ts []Task, byOrder map[int]int) []int {
	const (
		unseen = iota
		open
		done
	)
	state := make([]int, len(ts))
	var path []int
	var visit func(i int) []int
	visit = func(i int) []int {
		state[i] = open
		path = append(path, ts[i].ExecutionOrder)
		for _, d := range ts[i].DependsOn {
			j := byOrder[d]
			switch state[j] {
			case open:
				for k, o := range path {
					if o == d {
						return append(append([]int(nil), path[k:]...), d)
					}
				}
			case unseen:
				if c := visit(j); c != nil {
					return c
				}
			}
		}
		path = path[:len(path)-1]
		state[i] = done
		return nil
	}
	for i := range ts {
		if state[i] == unseen {
			if c := visit(i); c != nil {
				return c
			}
		}
	}
	return nil
}
