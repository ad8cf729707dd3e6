package artifact_test

import (
	"strings"
	"testing"
	"time"

	"github.com/agentrunner/agentrunner/artifact"
	"github.com/agentrunner/agentrunner/runtime/mock"
)

// benchTemplate is the engine benchmark's template: headings, a table and
// comments.
const benchTemplate = "# Report {{cycle_id}}\n\n## Summary\n\n<!-- two sentences -->\n\n## Findings\n\n" +
	"| Item | Value |\n|---|---|\n| Signal | {{signal}} |\n\n## Handoff\n\n<!-- for the next agent -->\n"

// TestFastMarkdownTakesMockOutputs: the outputs the mock runtime writes
// take the fast path, and agree with goldmark, so the fast path cannot
// silently stop applying to typical documents: for the engine
// benchmark's template always, for the example output templates at
// least three in four.
func TestFastMarkdownTakesMockOutputs(t *testing.T) {
	contracts := artifact.CorpusContracts(t)
	now := time.Date(2026, 11, 22, 14, 0, 0, 0, time.UTC)
	generate := func(tmpl string) []byte { return mock.Generate([]byte(tmpl), ".md", "20261122_140000", "a0", now) }
	out := generate(benchTemplate)
	if !strings.Contains(string(out), "| Signal |") {
		t.Fatalf("the mock output %q has no table", out)
	}
	if fast, diff := artifact.FastPathDiff(out, contracts); !fast || diff != "" {
		t.Errorf("the mock output %q: fast path taken = %v, want true; differences:\n%s", out, fast, diff)
	}
	files, err := artifact.Corpus()
	if err != nil {
		t.Fatal(err)
	}
	var templates int
	var slow []string
	for path, tmpl := range files {
		if !strings.Contains(path, "output_templates/") {
			continue
		}
		templates++
		out := generate(string(tmpl))
		fast, diff := artifact.FastPathDiff(out, contracts)
		if diff != "" {
			t.Errorf("%s: mock output %q:\n%s", path, out, diff)
		}
		if !fast {
			slow = append(slow, path)
		}
	}
	if templates == 0 || 4*len(slow) > templates {
		t.Errorf("the mock outputs of %d of %d example output templates fall back to goldmark: %v", len(slow), templates, slow)
	}
}
