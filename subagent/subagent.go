// Package subagent is spec 4's subagent_run: a lead agent's tool that runs
// a sub-agent, for one task, as a run of a configured pipeline that is a
// child of the lead's run. The child is durable like every run: a lead
// attempt that runs again after a crash finds the child it started by the
// task's key (Key) and waits for it, or takes the result of one that
// ended, instead of starting the sub-agent over.
//
// The package holds the task's contract (Task, CheckTask), the result's
// (Result), the tool's settings and the Launcher that starts and awaits
// children on the scheduler of the process.
package subagent

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math"
	"path"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/agentrunner/agentrunner/config"
	"github.com/agentrunner/agentrunner/tool"
)

// Kind is the tool kind, and its default name.
const Kind = "subagent_run"

// The bounds of a task. A task is a focused brief, not a document: its
// name is a label, its description a line or two.
const (
	MaxTaskNameChars       = 200
	MaxDescriptionChars    = 2000
	MaxPromptChars         = 20000
	MaxExpectedOutputChars = 2000
	MaxToolBudget          = 200
)

// The bounds of max_parallel.
const (
	DefaultMaxParallel = 3
	MaxMaxParallel     = 64
)

// Task is what a lead gives a sub-agent (spec 4): a name, the prompt the
// sub-agent works from, a description of the task, the tool calls it may
// make, and, when the lead knows it, the output it expects.
type Task struct {
	TaskName       string `json:"task_name"`
	Prompt         string `json:"prompt"`
	Description    string `json:"description"`
	ToolBudget     int    `json:"tool_budget"`
	ExpectedOutput string `json:"expected_output,omitempty"`
}

// Result is what a sub-agent answers (spec 4's SubagentResult): a summary,
// and optionally the detail and the path of a report it wrote.
type Result struct {
	Summary      string `json:"summary"`
	Detail       string `json:"detail,omitempty"`
	ArtifactPath string `json:"artifact_path,omitempty"`
}

// TaskSchema is the JSON Schema of a task.
const TaskSchema = `{"type":"object","properties":{` +
	`"task_name":{"type":"string","minLength":1,"maxLength":200,"description":"a short name of the task, unique among the tasks you give"},` +
	`"prompt":{"type":"string","minLength":1,"maxLength":20000,"description":"what the sub-agent is to do, with everything it needs to know"},` +
	`"description":{"type":"string","minLength":1,"maxLength":2000,"description":"the task in a line or two"},` +
	`"tool_budget":{"type":"integer","minimum":1,"maximum":200,"description":"how many tool calls the sub-agent may make"},` +
	`"expected_output":{"type":"string","minLength":1,"maxLength":2000,"description":"optional: the output you expect, when you know it"}},` +
	`"required":["task_name","prompt","description","tool_budget"],"additionalProperties":false}`

// Parameters is the JSON Schema of the tool's arguments: {"task": Task}.
const Parameters = `{"type":"object","properties":{"task":` + TaskSchema + `},"required":["task"],"additionalProperties":false}`

// ParseTask reads the tool's arguments, {"task": {...}}, and checks the
// task (CheckTask). The error names the field at fault, as a model can
// fix it.
func ParseTask(raw json.RawMessage) (Task, error) {
	var args struct {
		Task *json.RawMessage `json:"task"`
	}
	if err := strict(raw, &args); err != nil {
		return Task{}, err
	}
	if args.Task == nil || bytes.Equal(bytes.TrimSpace(*args.Task), []byte("null")) {
		return Task{}, fmt.Errorf("task is required: {task_name, prompt, description, tool_budget, expected_output?}")
	}
	var t struct {
		TaskName       *string          `json:"task_name"`
		Prompt         *string          `json:"prompt"`
		Description    *string          `json:"description"`
		ToolBudget     *json.RawMessage `json:"tool_budget"`
		ExpectedOutput *string          `json:"expected_output"`
	}
	if err := strict(*args.Task, &t); err != nil {
		return Task{}, fmt.Errorf("task: %v", err)
	}
	var missing []string
	for _, f := range []struct {
		name  string
		unset bool
	}{{"task_name", t.TaskName == nil}, {"prompt", t.Prompt == nil}, {"description", t.Description == nil}, {"tool_budget", t.ToolBudget == nil}} {
		if f.unset {
			missing = append(missing, "task."+f.name)
		}
	}
	if len(missing) > 0 {
		return Task{}, fmt.Errorf("%s: required", strings.Join(missing, ", "))
	}
	task := Task{TaskName: *t.TaskName, Prompt: *t.Prompt, Description: *t.Description}
	if t.ExpectedOutput != nil {
		task.ExpectedOutput = *t.ExpectedOutput
	}
	budget := strings.TrimSpace(string(*t.ToolBudget))
	n, err := strconv.ParseFloat(budget, 64) // a JSON number; a string fails
	if err != nil || n < 1 || n > MaxToolBudget || n != math.Trunc(n) {
		return Task{}, fmt.Errorf("task.tool_budget: %s is not an integer from 1 to %d", clip(budget), MaxToolBudget)
	}
	task.ToolBudget = int(n)
	return CheckTask(task)
}

// CheckTask checks a task and returns it as it is keyed and stored: its
// strings trimmed of surrounding space. Every field is required but
// expected_output; each string is bounded, and the tool budget is from 1
// to MaxToolBudget. The error names the first field at fault.
func CheckTask(t Task) (Task, error) {
	t.TaskName = strings.TrimSpace(t.TaskName)
	t.Prompt = strings.TrimSpace(t.Prompt)
	t.Description = strings.TrimSpace(t.Description)
	t.ExpectedOutput = strings.TrimSpace(t.ExpectedOutput)
	for _, f := range []struct {
		name, value string
		max         int
		optional    bool
	}{
		{"task_name", t.TaskName, MaxTaskNameChars, false},
		{"prompt", t.Prompt, MaxPromptChars, false},
		{"description", t.Description, MaxDescriptionChars, false},
		{"expected_output", t.ExpectedOutput, MaxExpectedOutputChars, true},
	} {
		switch n := utf8.RuneCountInString(f.value); {
		case n == 0 && !f.optional:
			return Task{}, fmt.Errorf("task.%s is empty", f.name)
		case n > f.max:
			return Task{}, fmt.Errorf("task.%s is %d characters, more than %d", f.name, n, f.max)
		case !utf8.ValidString(f.value):
			return Task{}, fmt.Errorf("task.%s is not valid UTF-8", f.name)
		}
	}
	if t.ToolBudget < 1 || t.ToolBudget > MaxToolBudget {
		return Task{}, fmt.Errorf("task.tool_budget: %d is not an integer from 1 to %d", t.ToolBudget, MaxToolBudget)
	}
	return t, nil
}

// Canonical is the task's JSON as it is keyed and stored: its fields in
// their fixed order, expected_output left out when empty. Give it a
// checked task.
func (t Task) Canonical() []byte {
	data, _ := json.Marshal(t) // strings and an int: it cannot fail
	return data
}

// Key is the key of the child run a lead's call of subagent_run starts:
// the hex SHA-256 of the lead's run, its step and the task's canonical
// JSON. The same task given again by the same step of the same run, in
// any attempt, has the same key, so an attempt run again after a crash
// finds the child the one before started.
func Key(leadRun, leadStep string, t Task) string {
	h := sha256.New()
	for _, part := range [][]byte{[]byte(leadRun), []byte(leadStep), t.Canonical()} {
		fmt.Fprintf(h, "%d:", len(part)) // lengths keep the parts apart
		h.Write(part)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// ParseResult reads a sub-agent's output as a Result: a JSON object with
// a non-empty summary, and optional detail and artifact_path. The
// artifact_path is made relative to the lead's run directory, where the
// sub-agent's filesystem_write wrote it: a path relative to memory/
// (report.md) becomes memory/report.md, as the lead's filesystem_read
// takes it.
func ParseResult(data []byte) (Result, error) {
	var r Result
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&r); err != nil {
		return Result{}, fmt.Errorf("is not a SubagentResult {summary, detail?, artifact_path?}: %v", err)
	}
	if strings.TrimSpace(r.Summary) == "" {
		return Result{}, fmt.Errorf("is not a SubagentResult: its summary is empty")
	}
	r.ArtifactPath = memoryPath(r.ArtifactPath)
	return r, nil
}

// memoryPath is an artifact_path relative to the lead's run directory:
// memory/ and the path, cleaned, when the path is relative to memory/.
// A path that is absolute or leaves memory/ is left as the sub-agent gave
// it: the lead's filesystem_read refuses it, and says why.
func memoryPath(p string) string {
	p = strings.TrimSpace(p)
	if p == "" || strings.HasPrefix(p, "/") || strings.Contains(p, "\\") {
		return p
	}
	clean := path.Clean(p)
	if clean == ".." || strings.HasPrefix(clean, "../") || clean == "." {
		return p
	}
	if clean == memoryDir || strings.HasPrefix(clean, memoryDir+"/") {
		return clean
	}
	return memoryDir + "/" + clean
}

// memoryDir is the folder of the lead's run its sub-agents write in
// (fstool.MemoryDir).
const memoryDir = "memory"

func strict(raw json.RawMessage, v any) error {
	if len(bytes.TrimSpace(raw)) == 0 {
		raw = json.RawMessage(`{}`)
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	dec.UseNumber()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("the arguments do not fit the tool: %v", err)
	}
	return nil
}

// Settings are the keys of a subagent_run tool's section besides those
// every tool has.
type Settings struct {
	// Pipeline names the pipeline under pipelines: whose runs are the
	// sub-agents' runs (one agent step is the usual shape).
	Pipeline string `yaml:"pipeline"`
	// MaxParallel bounds the children of one lead run that run at once;
	// 0: DefaultMaxParallel.
	MaxParallel int `yaml:"max_parallel"`
}

var _ config.ToolSettingsInConfig = (*Settings)(nil)

// Check reports a missing pipeline and a bound out of range.
func (s *Settings) Check(report config.Reporter) {
	if strings.TrimSpace(s.Pipeline) == "" {
		report("pipeline", "is required: the pipeline under pipelines: whose runs are the sub-agents' runs")
	}
	if s.MaxParallel < 0 || s.MaxParallel > MaxMaxParallel {
		report("max_parallel", "must be from 1 to %d (0: %d), got %d", MaxMaxParallel, DefaultMaxParallel, s.MaxParallel)
	}
}

// CheckIn reports a pipeline that the configuration does not declare.
func (s *Settings) CheckIn(c *config.Config, report config.Reporter) {
	if strings.TrimSpace(s.Pipeline) == "" {
		return
	}
	if c.Pipelines[s.Pipeline] == nil {
		var names []string
		for name := range c.Pipelines {
			names = append(names, name)
		}
		report("pipeline", "no pipeline %q under pipelines:%s", s.Pipeline, listOf(names))
	}
}

// Parallel is the bound on a lead run's children at once.
func (s *Settings) Parallel() int {
	if s == nil || s.MaxParallel <= 0 {
		return DefaultMaxParallel
	}
	return s.MaxParallel
}

func listOf(names []string) string {
	if len(names) == 0 {
		return " (there are none)"
	}
	slices.Sort(names)
	return " (there are " + strings.Join(names, ", ") + ")"
}

// Spec is what a lead's model is offered: the defaults a tool's section
// may override.
var Spec = tool.Spec{
	Name: Kind,
	Description: "Runs a sub-agent on one task and returns its result: " +
		`{"summary", "detail"?, "artifact_path"?}. Give the task as {task_name, prompt, description, tool_budget, expected_output?}: ` +
		"the prompt is all the sub-agent knows, tool_budget the tool calls it may make. " +
		"To run several sub-agents at once, give several subagent_run calls in one parallel_tool_call. " +
		"The same task given again returns the result of the sub-agent that ran it, without running it again.",
	Parameters: json.RawMessage(Parameters),
	Timeout:    DefaultTimeout,
}

// ToolKind is what configuration knows of the kind: its settings.
func ToolKind() config.ToolKind {
	return config.ToolKind{Timeout: DefaultTimeout, Settings: func() config.ToolSettings { return &Settings{} }}
}

// clip bounds a value the model gave, echoed in an error.
func clip(s string) string {
	if len(s) > 40 {
		return s[:40] + "…"
	}
	return s
}
