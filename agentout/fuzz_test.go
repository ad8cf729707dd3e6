package agentout

import (
	"strings"
	"testing"

	"github.com/agentrunner/agentrunner"
)

// FuzzParse checks that any output, read as any kind, gives an artifact
// whose fields keep their promises, or an invalid_output failure; never a
// panic. A parsed task_split always satisfies the split's invariants.
func FuzzParse(f *testing.F) {
	for _, seed := range []string{
		split,
		strings.ReplaceAll(split, "\n", "\r\n"),
		"Confidence: 85%\nHUMAN INPUT NEEDED\nQuestion: Which?\n- a\n- b\n",
		"**Confidence:** 0.85\n## Human input needed:\n```\nQuestion: q\n```\n",
		"Confidence: 120\n",
		"```json\n{\"tasks\": [{\"title\": \"a\", \"executionOrder\": 1, \"dependsOn\": [2]}, {\"title\": \"b\", \"executionOrder\": 2, \"dependsOn\": [1]}]}\n```\n",
		"```json\n{\"tasks\": [{\"title\": \"a\", \"executionOrder\": 1}], \"tasks\": 1}\n```\n",
		"~~~json\n{\"tasks\": [{\"title\": \"\xff\", \"executionOrder\": 9}]}\n~~~",
		"<!-- Confidence: 1 -->\n```json\n",
		"",
	} {
		for k := range Kinds {
			f.Add(uint8(k), []byte(seed))
		}
	}
	f.Fuzz(func(t *testing.T, k uint8, output []byte) {
		kind := Kinds[int(k)%len(Kinds)]
		a, err := Parse(kind, output)
		if err != nil {
			if c := agentrunner.ClassOf(err); c != agentrunner.ClassInvalidOutput {
				t.Fatalf("Parse: error of class %s, want invalid_output: %v", c, err)
			}
			if !strings.Contains(err.Error(), "line ") && !strings.Contains(err.Error(), "no ```json block") {
				t.Fatalf("Parse: error names no line: %v", err)
			}
			return
		}
		if a.Kind != kind {
			t.Fatalf("Kind = %s, want %s", a.Kind, kind)
		}
		if a.Confidence < NoConfidence || a.Confidence > 100 {
			t.Fatalf("Confidence = %d, want -1 or 0-100", a.Confidence)
		}
		if r := a.HumanInput; r != nil {
			if r.Question == "" || clean(r.Question) != r.Question {
				t.Fatalf("Question = %q, want non-empty and trimmed", r.Question)
			}
			seen := map[string]bool{}
			for _, o := range r.Options {
				if o == "" || clean(o) != o || seen[o] {
					t.Fatalf("Options = %q, want non-empty, trimmed and distinct", r.Options)
				}
				seen[o] = true
			}
		}
		if kind != KindTaskSplit {
			if a.Tasks != nil {
				t.Fatalf("a %s artifact has tasks: %+v", kind, a.Tasks)
			}
			return
		}
		checkSplit(t, a.Tasks)
		_, _ = Thresholds{Default: 50}.Gate("s", a)
	})
}

// checkSplit checks the invariants of a task_split's tasks independently
// of the parser: titles non-empty, orders positive and unique,
// dependencies existing and acyclic.
func checkSplit(t *testing.T, ts []Task) {
	t.Helper()
	if len(ts) == 0 {
		t.Fatal("a task_split with no tasks")
	}
	deps := map[int][]int{}
	for _, task := range ts {
		if strings.TrimSpace(task.Title) == "" {
			t.Fatalf("task %+v has no title", task)
		}
		if task.ExecutionOrder <= 0 {
			t.Fatalf("task %+v has a non-positive order", task)
		}
		if _, dup := deps[task.ExecutionOrder]; dup {
			t.Fatalf("order %d given twice", task.ExecutionOrder)
		}
		deps[task.ExecutionOrder] = task.DependsOn
	}
	// Kahn's algorithm: every task is removed iff there is no cycle.
	indeg := map[int]int{}
	for o, ds := range deps {
		for _, d := range ds {
			if _, ok := deps[d]; !ok {
				t.Fatalf("task %d depends on %d, which no task has", o, d)
			}
		}
		indeg[o] = len(ds)
	}
	var ready []int
	for o, n := range indeg {
		if n == 0 {
			ready = append(ready, o)
		}
	}
	removed := 0
	for len(ready) > 0 {
		d := ready[0]
		ready = ready[1:]
		removed++
		for o, ds := range deps {
			for _, x := range ds {
				if x == d {
					if indeg[o]--; indeg[o] == 0 {
						ready = append(ready, o)
					}
				}
			}
		}
	}
	if removed != len(deps) {
		t.Fatalf("tasks %+v have a dependency cycle", ts)
	}
}
