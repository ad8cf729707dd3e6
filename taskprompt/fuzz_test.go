package taskprompt

import (
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/agentrunner/agentrunner/agentout"
)

// variableRE finds what the package documentation calls a variable,
// written apart from the parser so that the one checks the other.
var variableRE = regexp.MustCompile(`\{[A-Za-z][A-Za-z0-9_]*(\.[A-Za-z][A-Za-z0-9_]*)?\}`)

// FuzzBuild checks that Build never panics, that a template without a
// variable comes back unchanged, that Build fails exactly when Check does
// for its scope, and that a value is never read for variables.
func FuzzBuild(f *testing.F) {
	seeds := []string{"", "{task.title}", "{{task.title}}", `\{task.title}`, "{task.titel}", `{"a": {b}}`, "{{{x}}}", "{a.b.c}", "é\n{x}"}
	templates, _ := filepath.Glob("testdata/build/*.tmpl")
	for _, name := range templates {
		if data, err := os.ReadFile(name); err == nil {
			seeds = append(seeds, string(data))
		}
	}
	for _, s := range seeds {
		f.Add(s, "{task.title}", true)
	}
	f.Fuzz(func(t *testing.T, template, value string, withTask bool) {
		v, scope := fuzzVars(value, withTask)
		got, err := Build(template, v)
		checkErr := Check(template, scope)
		if (err == nil) != (checkErr == nil) {
			t.Fatalf("Build error %v, Check error %v", err, checkErr)
		}
		var ps Problems
		if err != nil && !errors.As(err, &ps) {
			t.Fatalf("Build error %v (%T), want Problems", err, err)
		}
		if !variableRE.MatchString(template) && (err != nil || got != template) {
			t.Fatalf("Build(%q) = %q, %v; want the template unchanged", template, got, err)
		}
		if err == nil && withTask && strings.HasPrefix(template, "{task.title}") && !strings.HasPrefix(got, text(value)) {
			t.Fatalf("Build(%q) = %q, want it to start with the value %q as it is", template, got, text(value))
		}
	})
}

// fuzzVars gives every variable the same value, which may itself look like
// a template.
func fuzzVars(value string, withTask bool) (Vars, Scope) {
	v := Vars{
		Item:    Item{Title: value, Description: value, AcceptanceCriteria: value, RefiningIterations: len(value)},
		Context: Context{Language: value, Framework: value, RepoPath: value},
		Artifacts: []Artifact{
			{Kind: agentout.KindTaskSplit, Step: value, Owner: OwnerItem, Content: value},
			{Kind: agentout.KindPlan, Step: value, Owner: OwnerItem, Content: value},
		},
	}
	if !withTask {
		return v, ScopeBacklog
	}
	v.Task = &Task{Title: value, Description: value, State: value, Priority: value, AcceptanceCriteria: value, ExecutionOrder: len(value)}
	return v, ScopeTask
}
