package artifact

import (
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// lines joins lines with newlines, so a test's line numbers can be read off
// its source.
func lines(ls ...string) string { return strings.Join(ls, "\n") + "\n" }

func TestMarkdownContractValidate(t *testing.T) {
	threeSections := lines(
		"# Plan {{cycle_id}}",      // 1
		"",                         // 2
		"## 1. Summary",            // 3
		"{{summary}}",              // 4
		"",                         // 5
		"## 2. Context",            // 6
		"{{context}}",              // 7
		"",                         // 8
		"## 3. Hypotheses to Test", // 9
		"{{hypotheses}}",           // 10
	)
	nested := lines(
		"## A",         // 1
		"### Evidence", // 2
		"text",         // 3
		"## B",         // 4
		"### Evidence", // 5
		"text",         // 6
	)
	metrics := lines(
		"## Performance Metrics",              // 1
		"| Metric | Target | Actual |",        // 2
		"|---|---|---|",                       // 3
		"| Win rate | 55% | {{win_rate}} |",   // 4
		"| Sharpe ratio | 1.0 | {{sharpe}} |", // 5
		"| {{extra}} | | |",                   // 6
	)
	tests := []struct {
		name     string
		template string
		output   string
		want     []Problem
	}{
		{
			name:     "all sections present",
			template: threeSections,
			output: lines(
				"# Plan 20250101_000000",
				"## 1. Summary",
				"We go long.",
				"## 2. Context",
				"Calm markets.",
				"## 3. Hypotheses to Test",
				"- H1",
			),
		},
		{
			name:     "several missing sections are all reported",
			template: threeSections,
			output: lines(
				"# Plan",
				"## 2. Context",
				"Calm markets.",
			),
			want: []Problem{
				{Line: 3, InTemplate: true, Message: `missing section "## 1. Summary"`},
				{Line: 9, InTemplate: true, Message: `missing section "## 3. Hypotheses to Test"`},
			},
		},
		{
			name:     "missing title",
			template: threeSections,
			output: lines(
				"## 1. Summary", "x",
				"## 2. Context", "x",
				"## 3. Hypotheses to Test", "x",
			),
			want: []Problem{{Line: 1, InTemplate: true, Message: `missing level-1 heading like "# Plan {{cycle_id}}"`}},
		},
		{
			name:     "level mismatch is a missing section",
			template: lines("## Summary", "x", "## Risks", "x"),
			output:   lines("## Summary", "x", "### Risks", "x"),
			want:     []Problem{{Line: 3, InTemplate: true, Message: `missing section "## Risks"`}},
		},
		{
			name:     "heading normalization: case, spaces, colon, emphasis, code",
			template: lines("## 1. Market   Context", "x", "## Risk `limits`", "x", "## *Next* steps:", "x"),
			output:   lines("##   1.  market context:  ", "x", "## RISK LIMITS", "x", "## next **steps**", "x"),
		},
		{
			name:     "setext and escaped headings match",
			template: lines("## Profit & Loss", "x"),
			output:   lines("Profit &amp; Loss", "---", "x"),
		},
		{
			name:     "placeholder heading matches any text",
			template: lines("## Cycle {{cycle_id}} review", "x"),
			output:   lines("## Cycle 20250101_000000 review", "x"),
		},
		{
			name:     "placeholder heading needs its literal parts",
			template: lines("## Cycle {{cycle_id}} review", "x"),
			output:   lines("## Cycle 20250101_000000 summary", "x"),
			want:     []Problem{{Line: 1, InTemplate: true, Message: `missing section "## Cycle {{cycle_id}} review"`}},
		},
		{
			name:     "placeholder must stand for some text",
			template: lines("## {{n}}. Summary", "x"),
			output:   lines("## . Summary", "x"),
			want:     []Problem{{Line: 1, InTemplate: true, Message: `missing section "## {{n}}. Summary"`}},
		},
		{
			name:     "empty sections, comment-only counts as empty",
			template: lines("## A", "x", "## B", "x", "## C", "x", "## D", "x"),
			output: lines(
				"## A",                             // 1
				"",                                 // 2
				"## B",                             // 3
				"<!-- fill me -->",                 // 4
				"## C",                             // 5
				"<!--",                             // 6
				"multi-line comment",               // 7
				"-->",                              // 8
				"---",                              // 9
				"## D",                             // 10
				"Real text <!-- and a comment -->", // 11
			),
			want: []Problem{
				{Line: 1, Message: `section "## A" is empty`},
				{Line: 3, Message: `section "## B" is empty`},
				{Line: 5, Message: `section "## C" is empty`},
			},
		},
		{
			name:     "inline comment alone in a paragraph is empty",
			template: lines("## A", "x"),
			output:   lines("## A", "   <!-- TODO --> "),
			want:     []Problem{{Line: 1, Message: `section "## A" is empty`}},
		},
		{
			name:     "content of sub-sections counts for the parent",
			template: lines("## Parent", "### Child", "x"),
			output:   lines("## Parent", "### Child", "text", "### Extra", "more"),
		},
		{
			name:     "parent with only empty sub-sections is empty",
			template: lines("## Parent", "### Child", "x"),
			output:   lines("## Parent", "### Child", "<!-- nothing -->"),
			want: []Problem{
				{Line: 1, Message: `section "## Parent" is empty`},
				{Line: 2, Message: `section "### Child" is empty`},
			},
		},
		{
			name:     "headings inside code fences are not headings",
			template: lines("## A", "```", "## Not a section", "```", "## B", "x"),
			output:   lines("## A", "```md", "## B", "```", "more"),
			want:     []Problem{{Line: 5, InTemplate: true, Message: `missing section "## B"`}},
		},
		{
			name:     "code fence is content",
			template: lines("## A", "x"),
			output:   lines("## A", "```", "## B", "```"),
		},
		{
			name:     "sub-sections match within their parent",
			template: nested,
			output:   lines("## A", "intro", "## B", "### Evidence", "text"),
			want:     []Problem{{Line: 2, InTemplate: true, Message: `missing section "### Evidence"`}},
		},
		{
			name:     "sub-sections of a missing parent are still looked for",
			template: nested,
			output:   lines("### Evidence", "text", "## B", "### Evidence", "text"),
			want:     []Problem{{Line: 1, InTemplate: true, Message: `missing section "## A"`}},
		},
		{
			name:     "out of order",
			template: lines("## A", "x", "## B", "x", "## C", "x"),
			output:   lines("## C", "x", "## A", "x", "## B", "x"),
			want:     []Problem{{Line: 1, Message: `section "## C" is out of order: the template puts it after "## B"`}},
		},
		{
			name:     "metrics table present",
			template: metrics,
			output: lines(
				"## Performance Metrics",
				"Numbers of the last cycle:",
				"| metric | Actual | Target | Notes |",
				"|---|---|---|---|",
				"| *Win rate* | 60% | 55% | good |",
				"| Sharpe Ratio | 1.2 | 1.0 | |",
				"| Max drawdown | 4% | 5% | |",
			),
		},
		{
			name:     "metrics table in a sub-section counts",
			template: metrics,
			output: lines(
				"## Performance Metrics",
				"### Detail",
				"| Metric | Target | Actual |",
				"|---|---|---|",
				"| Win rate | 55% | 60% |",
				"| Sharpe ratio | 1.0 | 1.2 |",
			),
		},
		{
			name:     "metrics table missing",
			template: metrics,
			output:   lines("## Performance Metrics", "Win rate was 60%."),
			want: []Problem{{Line: 1,
				Message: `section "## Performance Metrics" has no table; the template's table has columns "Metric", "Target", "Actual"`}},
		},
		{
			name:     "metrics table missing columns and rows",
			template: metrics,
			output: lines(
				"## Performance Metrics", // 1
				"Summary first.",         // 2
				"| Metric | Value |",     // 3
				"|---|---|",              // 4
				"| Win rate | 60% |",     // 5
				"| Drawdown | 4% |",      // 6
			),
			want: []Problem{
				{Line: 3, Message: `table in section "## Performance Metrics" is missing columns "Target", "Actual"`},
				{Line: 3, Message: `table in section "## Performance Metrics" is missing row "Sharpe ratio"`},
			},
		},
		{
			name:     "metrics table without data rows",
			template: lines("## Metrics", "| Metric | Value |", "|---|---|", "| {{m}} | {{v}} |"),
			output:   lines("## Metrics", "text", "| Metric | Value |", "|---|---|", "| | |"),
			want:     []Problem{{Line: 3, Message: `table in section "## Metrics" has no data rows`}},
		},
		{
			name:     "closest of several tables is reported",
			template: lines("## Metrics", "| Metric | Value |", "|---|---|", "| Win rate | x |"),
			output: lines(
				"## Metrics",
				"| A | B |", "|---|---|", "| 1 | 2 |", // 2
				"",
				"| Metric | Value |", "|---|---|", "| Loss rate | 1 |", // 6
			),
			want: []Problem{{Line: 6, Message: `table in section "## Metrics" is missing row "Win rate"`}},
		},
		{
			name:     "unfilled placeholders",
			template: lines("## Summary", "{{summary}}"),
			output: lines(
				"## Summary",                        // 1
				"Win rate {{win_rate}} and {{x}}",   // 2
				"<!-- {{ignored}} in a comment -->", // 3
				"`{{in_code}}`",                     // 4
			),
			want: []Problem{
				{Line: 2, Message: "unfilled placeholder {{win_rate}}"},
				{Line: 2, Message: "unfilled placeholder {{x}}"},
				{Line: 4, Message: "unfilled placeholder {{in_code}}"},
			},
		},
		{
			name:     "empty artifact",
			template: threeSections,
			output:   " \n\t\n",
			want:     []Problem{{Message: "artifact is empty"}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := NewMarkdownContract([]byte(tt.template))
			if err != nil {
				t.Fatalf("NewMarkdownContract: %v", err)
			}
			got := c.Validate([]byte(tt.output))
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Validate() problems (-want +got):\n%s", diff)
			}
		})
	}
}

func TestMarkdownContractSections(t *testing.T) {
	template := lines(
		"# Evaluation {{cycle_id}}",      // 1
		"## 1. Summary",                  // 2
		"{{summary}}",                    // 3
		"## 2. Performance Metrics",      // 4
		"| Metric | *Target* | Actual |", // 5
		"|---|---|---|",                  // 6
		"| Win rate | 55% | {{win}} |",   // 7
		"| {{custom}} | | |",             // 8
		"| Sharpe | 1 | {{sharpe}} |",    // 9
		"### 2.1 Notes",                  // 10
		"| Not | Required |",             // 11
		"|---|---|",                      // 12
		"```",                            // 13
		"## Not a section",               // 14
		"```",                            // 15
		"Setext section",                 // 16
		"--------------",                 // 17
		"- ## in a list is content",      // 18
	)
	c, err := NewMarkdownContract([]byte(template))
	if err != nil {
		t.Fatal(err)
	}
	want := []Section{
		{Level: 2, Title: "1. Summary", Line: 2},
		{Level: 2, Title: "2. Performance Metrics", Line: 4,
			Columns: []string{"Metric", "Target", "Actual"}, Rows: []string{"Win rate", "Sharpe"}},
		{Level: 3, Title: "2.1 Notes", Line: 10, Columns: []string{"Not", "Required"}},
		{Level: 2, Title: "Setext section", Line: 16},
	}
	if diff := cmp.Diff(want, c.Sections()); diff != "" {
		t.Errorf("Sections() (-want +got):\n%s", diff)
	}
	// The result is a copy: changing it must not change the contract.
	c.Sections()[1].Columns[0] = "changed"
	if got := c.Sections()[1].Columns[0]; got != "Metric" {
		t.Errorf("Sections() shares its slices: column 0 is %q after a caller changed its copy", got)
	}
}

func TestNewMarkdownContractErrors(t *testing.T) {
	tests := []struct {
		name, template, want string
	}{
		{"empty", " \n", "template is empty"},
		{"heading without text", lines("## A", "x", "##", "y"), `line 3: heading "##" has no text`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := NewMarkdownContract([]byte(tt.template))
			if err == nil || err.Error() != tt.want {
				t.Errorf("NewMarkdownContract() error = %v, want %q", err, tt.want)
			}
		})
	}
}

func TestMarkdownContractWithoutHeadings(t *testing.T) {
	c, err := NewMarkdownContract([]byte("Write free text about {{topic}}.\n"))
	if err != nil {
		t.Fatal(err)
	}
	if got := c.Validate([]byte("Some notes.\n")); got != nil {
		t.Errorf("Validate(free text) = %v, want no problems", got)
	}
	want := []Problem{{Line: 1, Message: "unfilled placeholder {{topic}}"}}
	if diff := cmp.Diff(want, c.Validate([]byte("About {{topic}}.\n"))); diff != "" {
		t.Errorf("Validate() (-want +got):\n%s", diff)
	}
}

func TestMarkdownContractConcurrentUse(t *testing.T) {
	c, err := NewMarkdownContract([]byte(lines("## A", "x", "## B", "x")))
	if err != nil {
		t.Fatal(err)
	}
	want := []Problem{{Line: 3, InTemplate: true, Message: `missing section "## B"`}}
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			if diff := cmp.Diff(want, c.Validate([]byte(lines("## A", "text")))); diff != "" {
				t.Errorf("Validate() (-want +got):\n%s", diff)
			}
		})
	}
	wg.Wait()
}

// FuzzMarkdownContract checks that no output, however malformed, makes
// validation panic, and that every problem it reports is well-formed.
func FuzzMarkdownContract(f *testing.F) {
	template := lines(
		"# Evaluation {{cycle_id}}",
		"## 1. Summary",
		"{{summary}}",
		"## 2. Performance Metrics",
		"| Metric | Target | Actual |",
		"|---|---|---|",
		"| Win rate | 55% | {{win}} |",
		"### 2.1 Notes",
		"<!-- optional -->",
		"## 3. Next Steps",
	)
	c, err := NewMarkdownContract([]byte(template))
	if err != nil {
		f.Fatal(err)
	}
	f.Add([]byte(""))
	f.Add([]byte(template))
	f.Add([]byte(lines("# E", "## 1. Summary", "ok", "## 2. Performance Metrics", "| Metric | Target | Actual |", "|-|-|-|", "| Win rate | 1 | 2 |", "## 3. Next Steps", "go")))
	f.Add([]byte("## 2. performance metrics\n| a |\n|\n<!-- x\n```\n## 3. Next Steps\n"))
	f.Add([]byte("> ## 1. Summary\n- ## 3. Next Steps\n\n<div>\n\n{{x}}\n</div>\n\\## esc"))
	templateLines := strings.Count(template, "\n") + 1
	f.Fuzz(func(t *testing.T, output []byte) {
		outputLines := strings.Count(string(output), "\n") + 1
		for _, p := range c.Validate(output) {
			limit := outputLines
			if p.InTemplate {
				limit = templateLines
			}
			if p.Message == "" || p.Line < 0 || p.Line > limit || p.Pointer != "" {
				t.Errorf("malformed problem %+v for output %q", p, output)
			}
			_ = p.String()
		}
	})
}

// TestCheckSectionsIsCheckAndMarkdownSectionsInOneParse: the engine
// validates an artifact and quotes its sections from one parse; the
// answers must be those of the two separate calls.
func TestCheckSectionsIsCheckAndMarkdownSectionsInOneParse(t *testing.T) {
	c, err := NewMarkdownContract([]byte("# Plan\n\n## Summary\n\n<!-- two lines -->\n\n## Handoff\n\n<!-- for research -->\n"))
	if err != nil {
		t.Fatal(err)
	}
	for _, doc := range []string{
		"# Plan\n\n## Summary\n\nBuy the dip.\n\n## Handoff\n\nLook at ETH.\n",
		"# Plan\n\n## Summary\n\nOnly a summary.\n",
		"   \n",
	} {
		spans, err := c.CheckSections("plan.md", []byte(doc))
		want := Check(c, "plan.md", []byte(doc))
		if (err == nil) != (want == nil) || (err != nil && err.Error() != want.Error()) {
			t.Errorf("%q: error %v, want %v", doc, err, want)
		}
		wantSpans := MarkdownSections([]byte(doc))
		if len(wantSpans) == 0 {
			wantSpans = nil
		}
		if len(spans) == 0 {
			spans = nil
		}
		if diff := cmp.Diff(wantSpans, spans); diff != "" {
			t.Errorf("%q: sections (-want +got):\n%s", doc, diff)
		}
	}
}
