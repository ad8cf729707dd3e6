package agentout

import (
	"strings"
	"testing"

	"github.com/agentrunner/agentrunner"
	"github.com/google/go-cmp/cmp"
)

const split = "# Split\n\nThe item splits in three.\n\n```json\n" +
	`{"tasks": [
  {"title": "Schema", "description": "Tables", "executionOrder": 1, "dependsOn": []},
  {"title": "API", "description": "Handlers", "executionOrder": 2, "dependsOn": [1]},
  {"title": "UI", "description": "Pages", "executionOrder": 3, "dependsOn": [1, 2], "acceptanceCriteria": ["renders"]}
]}` + "\n```\n\nConfidence: 90\n"

var splitTasks = []Task{
	{Title: "Schema", Description: "Tables", ExecutionOrder: 1, DependsOn: []int{}},
	{Title: "API", Description: "Handlers", ExecutionOrder: 2, DependsOn: []int{1}},
	{Title: "UI", Description: "Pages", ExecutionOrder: 3, DependsOn: []int{1, 2}},
}

func TestParse(t *testing.T) {
	for _, tc := range []struct {
		name   string
		kind   Kind
		output string
		want   *Artifact // Body is the trimmed output unless set
	}{
		{"nothing", KindGeneral, "Done.\n", &Artifact{Confidence: -1}},
		{"empty", KindPlan, "", &Artifact{Confidence: -1}},
		{"integer", KindPlan, "Confidence: 85\n", &Artifact{Confidence: 85}},
		{"percent", KindPlan, "Confidence: 85%", &Artifact{Confidence: 85}},
		{"percent spaced", KindPlan, "Confidence: 85 %", &Artifact{Confidence: 85}},
		{"fraction", KindPlan, "Confidence: 0.85", &Artifact{Confidence: 85}},
		{"fraction rounds", KindPlan, "Confidence: 0.855", &Artifact{Confidence: 86}},
		{"fraction no zero", KindPlan, "Confidence: .7", &Artifact{Confidence: 70}},
		{"one is one", KindPlan, "Confidence: 1", &Artifact{Confidence: 1}},
		{"one point zero is all", KindPlan, "Confidence: 1.0", &Artifact{Confidence: 100}},
		{"zero", KindPlan, "Confidence: 0", &Artifact{Confidence: 0}},
		{"hundred", KindPlan, "Confidence: 100%", &Artifact{Confidence: 100}},
		{"score", KindTest, "Confidence score: 42", &Artifact{Confidence: 42}},
		{"lower case", KindTest, "confidence: 42", &Artifact{Confidence: 42}},
		{"emphasis", KindTest, "**Confidence:** *85%*", &Artifact{Confidence: 85}},
		{"emphasis name", KindTest, "__Confidence__: `0.6`", &Artifact{Confidence: 60}},
		{"list item quote", KindTest, "> - Confidence: 77", &Artifact{Confidence: 77}},
		{"amid text", KindImplementation, "# Impl\n\nChanged a.go.\n\nConfidence: 70\n\n## Notes\nNone.\n", &Artifact{Confidence: 70}},
		{"last counts", KindImplementation, "Confidence: 40\nmore work\nConfidence: 0.9\n", &Artifact{Confidence: 90}},
		{"earlier malformed", KindImplementation, "Confidence: lots\nConfidence: 50\n", &Artifact{Confidence: 50}},
		{"in comment", KindGeneral, "Confidence: 60\n<!-- Confidence: 10 -->\n", &Artifact{Confidence: 60}},
		{"word in prose", KindGeneral, "My confidence is high.\n", &Artifact{Confidence: -1}},
		{"crlf", KindGeneral, "Text\r\n**Confidence**: 65\r\n", &Artifact{Confidence: 65, Body: "Text\n**Confidence**: 65"}},
		{"question", KindPlan, "Plan.\n\nHUMAN INPUT NEEDED\nQuestion: Which database?\n",
			&Artifact{Confidence: -1, HumanInput: &Request{Question: "Which database?"}}},
		{"question options", KindPlan, "HUMAN INPUT NEEDED\nQuestion: Which database?\n- PostgreSQL\n- SQLite\n\n- not an option\nConfidence: 30\n",
			&Artifact{Confidence: 30, HumanInput: &Request{Question: "Which database?", Options: []string{"PostgreSQL", "SQLite"}}}},
		{"options label", KindPlan, "HUMAN INPUT NEEDED:\n\nQuestion: Which?\n\nOptions:\n* **A**\n+ B\nAfterwards prose.\n",
			&Artifact{Confidence: -1, HumanInput: &Request{Question: "Which?", Options: []string{"A", "B"}}}},
		{"heading emphasis crlf", KindGeneral, "## **Human input needed**\r\n```\r\n**Question:** Ship it?\r\n- yes\r\n- no\r\n```\r\n",
			&Artifact{Confidence: -1, HumanInput: &Request{Question: "Ship it?", Options: []string{"yes", "no"}},
				Body: "## **Human input needed**\n```\n**Question:** Ship it?\n- yes\n- no\n```"}},
		{"last block counts", KindGeneral, "HUMAN INPUT NEEDED\nQuestion: old?\n\nHUMAN INPUT NEEDED\nQuestion: new?\n",
			&Artifact{Confidence: -1, HumanInput: &Request{Question: "new?"}}},
		{"marker in prose", KindGeneral, "No HUMAN INPUT NEEDED here.\n", &Artifact{Confidence: -1}},
		{"marker in comment", KindGeneral, "<!-- HUMAN INPUT NEEDED\nQuestion: x -->\n", &Artifact{Confidence: -1}},
		{"split", KindTaskSplit, split, &Artifact{Confidence: 90, Tasks: splitTasks}},
		{"split crlf", KindTaskSplit, strings.ReplaceAll(split, "\n", "\r\n"),
			&Artifact{Confidence: 90, Tasks: splitTasks, Body: strings.TrimSpace(split)}},
		{"split last block", KindTaskSplit, "```json\n{\"tasks\": [{\"title\": \"old\", \"executionOrder\": 1}]}\n```\n~~~JSON\n{\"tasks\": [{\"title\": \"new\", \"executionOrder\": 7}]}\n~~~\n",
			&Artifact{Confidence: -1, Tasks: []Task{{Title: "new", ExecutionOrder: 7}}}},
		{"split other fences", KindTaskSplit, "```go\n```json\n```\n```json\n{\"tasks\": [{\"title\": \"t\", \"executionOrder\": 2, \"dependsOn\": [3]}, {\"title\": \"u\", \"executionOrder\": 3}]}\n```\n```text\nx\n```\n",
			&Artifact{Confidence: -1, Tasks: []Task{{Title: "t", ExecutionOrder: 2, DependsOn: []int{3}}, {Title: "u", ExecutionOrder: 3}}}},
		{"plan ignores json", KindPlan, "```json\nnot json\n```\n", &Artifact{Confidence: -1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Parse(tc.kind, []byte(tc.output))
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			want := *tc.want
			want.Kind = tc.kind
			if want.Body == "" {
				want.Body = strings.TrimSpace(tc.output)
			}
			if diff := cmp.Diff(&want, got); diff != "" {
				t.Errorf("Parse (-want +got):\n%s", diff)
			}
		})
	}
}

func TestParseInvalid(t *testing.T) {
	task := func(s string) string { return "Split:\n```json\n{\"tasks\": [\n" + s + "\n]}\n```\n" }
	for _, tc := range []struct {
		name, output string
		kind         Kind
		want         []string // in the message
	}{
		{"confidence empty", "a\nConfidence:\n", KindPlan, []string{"line 2", "no value"}},
		{"confidence word", "Confidence: high", KindPlan, []string{"line 1", `"high"`}},
		{"confidence above 100", "\n\nConfidence: 120%", KindPlan, []string{"line 3", "above 100"}},
		{"confidence fraction above 1", "Confidence: 1.5", KindPlan, []string{"line 1", "above 1.0"}},
		{"confidence negative", "Confidence: -5", KindPlan, []string{"line 1", `"-5"`}},
		{"confidence last malformed", "Confidence: 80\nConfidence: 85/100", KindPlan, []string{"line 2"}},
		{"no question", "HUMAN INPUT NEEDED\n\n", KindGeneral, []string{"line 1", "no question"}},
		{"not a question", "HUMAN INPUT NEEDED\nPick one\n", KindGeneral, []string{"line 2", `"Pick one"`, "line 1"}},
		{"empty question", "x\nHUMAN INPUT NEEDED\nQuestion: **\n", KindGeneral, []string{"line 3", "empty"}},
		{"empty option", "HUMAN INPUT NEEDED\nQuestion: q\n- a\n- ``\n", KindGeneral, []string{"line 4", "empty"}},
		{"duplicate option", "HUMAN INPUT NEEDED\nQuestion: q\n- a\n- a\n", KindGeneral, []string{"line 4", "twice", "line 3"}},
		{"no json block", "Tasks: one, two\n```\n{}\n```\n", KindTaskSplit, []string{"no ```json block"}},
		{"unclosed", "a\n```json\n{\"tasks\": []}\n", KindTaskSplit, []string{"line 2", "never closed"}},
		{"bad json", "```json\n{\"tasks\": [\n{\"title\": \"a\",, }\n]}\n```\n", KindTaskSplit, []string{"line 3", "no valid JSON"}},
		{"truncated json", "```json\n{\"tasks\": [\n```\n", KindTaskSplit, []string{"ends before"}},
		{"not an object", "```json\n[1]\n```\n", KindTaskSplit, []string{"line 2", "no JSON object"}},
		{"tasks not array", "```json\n{\"tasks\": {}}\n```\n", KindTaskSplit, []string{"line 2", "no array"}},
		{"trailing", "```json\n{\"tasks\": [{\"title\": \"a\", \"executionOrder\": 1}]}\n{}\n```\n", KindTaskSplit, []string{"more after"}},
		{"two tasks fields", "```json\n{\"tasks\": [], \"Tasks\": []}\n```\n", KindTaskSplit, []string{"two \"tasks\""}},
		{"no tasks", "```json\n{\"tasks\": []}\n```\n", KindTaskSplit, []string{"line 1", "no tasks"}},
		{"no tasks field", "```json\n{\"items\": [1]}\n```\n", KindTaskSplit, []string{"no tasks"}},
		{"order as string", task(`{"title": "a", "executionOrder": "1"}`), KindTaskSplit, []string{"line 4", "executionOrder", "string"}},
		{"order fractional", task(`{"title": "a",` + "\n" + `"executionOrder": 1.5}`), KindTaskSplit, []string{"line 5", "executionOrder"}},
		{"depends not array", task(`{"title": "a", "executionOrder": 1, "dependsOn": 2}`), KindTaskSplit, []string{"line 4", "dependsOn"}},
		{"no title", task(`{"title": "a", "executionOrder": 1},` + "\n" + `{"title": " ", "executionOrder": 2}`), KindTaskSplit, []string{"line 5", "task 2 has no title"}},
		{"no order", task(`{"title": "a"}`), KindTaskSplit, []string{"line 4", "executionOrder 0", "positive"}},
		{"negative order", task(`{"title": "a", "executionOrder": -2}`), KindTaskSplit, []string{"executionOrder -2"}},
		{"duplicate order", task(`{"title": "a", "executionOrder": 1},` + "\n\n" + `{"title": "b", "executionOrder": 1}`), KindTaskSplit, []string{"line 6", "task 2", "task 1 (line 4)"}},
		{"unknown dependency", task(`{"title": "a", "executionOrder": 1, "dependsOn": [4]}`), KindTaskSplit, []string{"line 4", "executionOrder 4, which no task has"}},
		{"self dependency", task(`{"title": "a", "executionOrder": 1, "dependsOn": [1]}`), KindTaskSplit, []string{"line 4", "1 → 1"}},
		{"cycle", task(`{"title": "a", "executionOrder": 1, "dependsOn": [3]},` + "\n" + `{"title": "b", "executionOrder": 2, "dependsOn": [1]},` + "\n" + `{"title": "c", "executionOrder": 3, "dependsOn": [2]}`),
			KindTaskSplit, []string{"line 4", "1 → 3 → 2 → 1", "cycle"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, err := Parse(tc.kind, []byte(tc.output))
			if err == nil {
				t.Fatalf("Parse = %+v, want an error", a)
			}
			if c := agentrunner.ClassOf(err); c != agentrunner.ClassInvalidOutput {
				t.Errorf("error class %s, want invalid_output: %v", c, err)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
		})
	}
}

func TestParseUnknownKind(t *testing.T) {
	_, err := Parse("review", []byte("Confidence: 1"))
	if err == nil || !strings.Contains(err.Error(), `"review"`) || agentrunner.ClassOf(err) == agentrunner.ClassInvalidOutput {
		t.Fatalf("Parse(review) = %v, want a configuration error naming the kind", err)
	}
	for _, k := range Kinds {
		if !k.Valid() {
			t.Errorf("%s is not valid", k)
		}
	}
}

func TestGate(t *testing.T) {
	th := Thresholds{PerState: map[string]int{"planning": 80, "split": 0}, Default: 60}
	ask := &Request{Question: "Which?"}
	for _, tc := range []struct {
		name  string
		th    Thresholds
		state string
		a     *Artifact
		open  bool
		why   string
	}{
		{"above", th, "planning", &Artifact{Confidence: 90}, false, "at or above the state's threshold of 80"},
		{"at", th, "planning", &Artifact{Confidence: 80}, false, "at or above"},
		{"below", th, "planning", &Artifact{Confidence: 79}, true, "79% confident, below the state's threshold of 80"},
		{"default", th, "testing", &Artifact{Confidence: 59}, true, "threshold of 60"},
		{"default met", th, "testing", &Artifact{Confidence: 60}, false, "threshold of 60"},
		{"absent", th, "testing", &Artifact{Confidence: -1}, true, "gave no confidence"},
		{"opted out", th, "split", &Artifact{Confidence: -1}, false, "no confidence threshold"},
		{"no thresholds", Thresholds{}, "x", &Artifact{Confidence: 3}, false, "no confidence threshold"},
		{"human input", th, "planning", &Artifact{Confidence: 100, HumanInput: ask}, true, "asks: Which?"},
		{"human input no threshold", Thresholds{}, "x", &Artifact{Confidence: -1, HumanInput: ask}, true, "asks"},
		{"nil", th, "planning", nil, true, "no artifact"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			open, why := tc.th.Gate(tc.state, tc.a)
			if open != tc.open || !strings.Contains(why, tc.why) {
				t.Errorf("Gate = %v, %q; want %v, …%q…", open, why, tc.open, tc.why)
			}
		})
	}
}

func TestThresholdsValidate(t *testing.T) {
	for _, tc := range []struct {
		th   Thresholds
		want string
	}{
		{Thresholds{}, ""},
		{Thresholds{PerState: map[string]int{"a": 100, "b": 0}, Default: 50}, ""},
		{Thresholds{Default: 101}, "default"},
		{Thresholds{PerState: map[string]int{"plan": -1}}, `"plan"`},
	} {
		err := tc.th.Validate()
		if (err == nil) != (tc.want == "") || err != nil && !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v.Validate() = %v, want an error with %q", tc.th, err, tc.want)
		}
	}
}
