package artifact_test

import (
	"strings"
	"testing"
	"time"

	"github.com/agentrunner/agentrunner/artifact"
	"github.com/agentrunner/agentrunner/runtime/mock"
)

// TestFastMarkdownTakesMockOutputs: the outputs the mock runtime writes
// for a template of headings, a table and comments, as the engine's
// benchmark uses, and for the example output templates in the fast
// path's subset take the fast path, so it cannot silently stop applying
// to typical documents.
func TestFastMarkdownTakesMockOutputs(t *testing.T) {
	contracts := artifact.CorpusContracts(t)
	now := time.Date(2026, 11, 22, 14, 0, 0, 0, time.UTC)
	templates := map[string][]byte{
		"bench": []byte("# Report {{cycle_id}}\n\n## Summary\n\n<!-- two sentences -->\n\n## Findings\n\n" +
			"| Item | Value |\n|---|---|\n| Signal | {{signal}} |\n\n## Handoff\n\n<!-- for the next agent -->\n"),
	}
	files, err := artifact.Corpus()
	if err != nil {
		t.Fatal(err)
	}
	for path, data := range files {
		if strings.Contains(path, "output_templates/") {
			templates[path] = data
		}
	}
	fast := 0
	for name, tmpl := range templates {
		out := mock.Generate(tmpl, ".md", "20261122_140000", "a0", now)
		tmplFast, _ := artifact.FastPathDiff(tmpl, nil)
		outFast, diff := artifact.FastPathDiff(out, contracts)
		if diff != "" {
			t.Errorf("%s: mock output %q:\n%s", name, out, diff)
		}
		if tmplFast && !outFast {
			t.Errorf("%s: the template takes the fast path, its mock output %q does not", name, out)
		}
		if outFast {
			fast++
		}
	}
	if !strings.Contains(string(mustGenerate(templates["bench"], now)), "| Signal |") {
		t.Fatal("the bench template's output has no table: the test does not test tables")
	}
	if 2*fast < len(templates) {
		t.Errorf("%d of %d mock outputs take the fast path, want most", fast, len(templates))
	}
	if ok, _ := artifact.FastPathDiff(mustGenerate(templates["bench"], now), nil); !ok {
		t.Error("the bench template's mock output falls back to goldmark")
	}
}

func mustGenerate(tmpl []byte, now time.Time) []byte {
	return mock.Generate(tmpl, ".md", "20261122_140000", "a0", now)
}
