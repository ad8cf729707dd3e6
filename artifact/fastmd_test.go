package artifact

import (
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"unicode"

	"github.com/google/go-cmp/cmp"
	"github.com/yuin/goldmark/ast"
	east "github.com/yuin/goldmark/extension/ast"
)

// mdDigest is everything contracts read from a parsed document, so two
// parses that agree on it give every contract the same results.
type mdDigest struct {
	Blocks       []blockDigest
	Headings     []headingDigest
	Sections     []Span
	Tables       []tableDigest
	Comments     [][2]int
	Placeholders []Problem
}

type blockDigest struct {
	Kind    string
	Line    int
	Content bool
}

type headingDigest struct {
	Level                int
	Text, Norm           string
	Line, Block, SpanEnd int
	// Span and own blocks: how many, whether they have content and the
	// line of their first table.
	SpanBlocks, OwnBlocks   int
	SpanContent, OwnContent bool
	FirstTable              int
}

type tableDigest struct {
	Line int
	Rows [][]string // the header's cells first
}

func digest(d *mdDocument) mdDigest {
	var g mdDigest
	for _, b := range d.blocks {
		g.Blocks = append(g.Blocks, blockDigest{Kind: b.Kind().String(), Line: d.lines.line(blockPos(b)), Content: hasContent(b, d.src)})
	}
	for i, h := range d.headings {
		hd := headingDigest{Level: h.level, Text: h.text, Norm: h.norm, Line: h.line, Block: h.block, SpanEnd: h.spanEnd,
			SpanBlocks: len(d.spanBlocks(i)), OwnBlocks: len(d.ownBlocks(i)),
			SpanContent: anyContent(d.spanBlocks(i), d.src), OwnContent: anyContent(d.ownBlocks(i), d.src)}
		if tbl := firstTable(d.ownBlocks(i)); tbl != nil {
			hd.FirstTable = d.lines.line(tablePos(tbl))
		}
		g.Headings = append(g.Headings, hd)
	}
	g.Sections = d.sections()
	_ = ast.Walk(d.root, func(n ast.Node, entering bool) (ast.WalkStatus, error) {
		if tbl, ok := n.(*east.Table); ok && entering {
			td := tableDigest{Line: d.lines.line(tablePos(tbl))}
			for row := tbl.FirstChild(); row != nil; row = row.NextSibling() {
				var cells []string
				for cell := row.FirstChild(); cell != nil; cell = cell.NextSibling() {
					cells = append(cells, plainText(cell, d.src))
				}
				td.Rows = append(td.Rows, cells)
			}
			g.Tables = append(g.Tables, td)
		}
		return ast.WalkContinue, nil
	})
	g.Comments = d.commentRanges()
	g.Placeholders = d.unfilledPlaceholders()
	return g
}

// fastPathDiff reports whether scanMarkdown takes src and, if it does,
// how its document differs from goldmark's: in what contracts read from
// it, in what each contract finds in it, and as a template.
func fastPathDiff(src []byte, contracts []*MarkdownContract) (fast bool, diff string) {
	root := scanMarkdown(src)
	if root == nil {
		return false, ""
	}
	fastDoc, slowDoc := newMDDocument(src, root), parseGoldmark(src)
	var b strings.Builder
	if d := cmp.Diff(digest(slowDoc), digest(fastDoc)); d != "" {
		fmt.Fprintf(&b, "document (-goldmark +fast):\n%s", d)
	}
	for i, c := range contracts {
		if d := cmp.Diff(c.check(slowDoc), c.check(fastDoc)); d != "" {
			fmt.Fprintf(&b, "contract %d problems (-goldmark +fast):\n%s", i, d)
		}
	}
	if !isBlank(src) {
		slowC, slowErr := newContract(slowDoc)
		fastC, fastErr := newContract(fastDoc)
		if fmt.Sprint(slowErr) != fmt.Sprint(fastErr) {
			fmt.Fprintf(&b, "as a template: error %v with goldmark, %v fast\n", slowErr, fastErr)
		}
		if slowErr == nil && fastErr == nil {
			if d := cmp.Diff(slowC.Sections(), fastC.Sections()); d != "" {
				fmt.Fprintf(&b, "as a template: sections (-goldmark +fast):\n%s", d)
			}
			if d := cmp.Diff(slowC.check(slowDoc), fastC.check(slowDoc)); d != "" {
				fmt.Fprintf(&b, "as a template: its own problems (-goldmark +fast):\n%s", d)
			}
		}
	}
	return true, b.String()
}

// corpus returns the markdown files of the repository's examples and test
// data, by path relative to the repository.
var corpus = sync.OnceValues(func() (map[string][]byte, error) {
	files := map[string][]byte{}
	err := filepath.WalkDir("..", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == ".git" || d.Name() == "node_modules") {
			return filepath.SkipDir
		}
		sep := string(filepath.Separator)
		inCorpus := strings.Contains(path, sep+"examples"+sep) || strings.Contains(path, sep+"testdata"+sep)
		if d.IsDir() || !inCorpus || filepath.Ext(path) != ".md" {
			return nil
		}
		data, err := os.ReadFile(path)
		files[filepath.ToSlash(strings.TrimPrefix(path, ".."+sep))] = data
		return err
	})
	return files, err
})

// corpusContracts are the contracts of the corpus's templates.
func corpusContracts(t testing.TB) []*MarkdownContract {
	files, err := corpus()
	if err != nil {
		t.Fatal(err)
	}
	var cs []*MarkdownContract
	for path, data := range files {
		if !strings.Contains(path, "_templates/") {
			continue
		}
		if c, err := NewMarkdownContract(data); err == nil {
			cs = append(cs, c)
		}
	}
	for _, tmpl := range []string{fuzzTemplate, benchTemplate} {
		c, err := NewMarkdownContract([]byte(tmpl))
		if err != nil {
			t.Fatal(err)
		}
		cs = append(cs, c)
	}
	return cs
}

var fuzzTemplate = lines(
	"# Evaluation {{cycle_id}}",
	"## 1. Summary",
	"{{summary}}",
	"## 2. Performance Metrics",
	"| Metric | Target | Actual |",
	"|---|---|---|",
	"| Win rate | 55% | {{win}} |",
	"| Max drawdown | 5% | {{dd}} |",
	"### 2.1 Notes",
	"<!-- optional -->",
	"## 3. Next Steps",
	"<!-- what {{next}} -->",
	"## a",
)

// benchTemplate is the template of the engine's benchmark.
const benchTemplate = "# Report {{cycle_id}}\n\n## Summary\n\n<!-- two sentences -->\n\n## Findings\n\n| Item | Value |\n|---|---|\n| Signal | {{signal}} |\n\n## Handoff\n\n<!-- for the next agent -->\n"

// TestFastMarkdownCorpus: every markdown file of the repository's
// examples and test data gives the same results on the fast path as with
// goldmark, checked by each output template's contract and as a template.
func TestFastMarkdownCorpus(t *testing.T) {
	files, err := corpus()
	if err != nil {
		t.Fatal(err)
	}
	if len(files) < 20 {
		t.Fatalf("found %d markdown files in examples and test data, want the repository's", len(files))
	}
	contracts := corpusContracts(t)
	taken, templates, templatesTaken := 0, 0, 0
	for path, data := range files {
		fast, diff := fastPathDiff(data, contracts)
		if diff != "" {
			t.Errorf("%s:\n%s", path, diff)
		}
		if fast {
			taken++
			if strings.Contains(path, "output_templates/") {
				templatesTaken++
			}
		}
		if strings.Contains(path, "output_templates/") {
			templates++
		}
	}
	t.Logf("fast path taken for %d of %d files", taken, len(files))
	if 4*templatesTaken < 3*templates {
		t.Errorf("the fast path took %d of %d output templates, want three quarters", templatesTaken, templates)
	}
}

// TestFastMarkdownRandom is FuzzFastMarkdown on documents from a fixed
// seed, for every test run.
func TestFastMarkdownRandom(t *testing.T) {
	contracts := corpusContracts(t)
	r := rand.New(rand.NewPCG(1, 2))
	taken := 0
	for range 2000 {
		plan := make([]byte, 4+r.IntN(28))
		for i := range plan {
			plan[i] = byte(r.Uint32())
		}
		for _, doc := range [][]byte{buildDocument(plan), buildLines(plan)} {
			fast, diff := fastPathDiff(doc, contracts)
			if diff != "" {
				t.Fatalf("%q:\n%s", doc, diff)
			}
			if fast {
				taken++
			}
		}
	}
	if taken < 300 {
		t.Errorf("the fast path took %d of 4000 random documents, too few to test it", taken)
	}
}

// TestFastMarkdownCases covers each rule of the fast path: each document
// must take it (and agree with goldmark) or fall back, as listed.
func TestFastMarkdownCases(t *testing.T) {
	contracts := corpusContracts(t)
	for _, tt := range []struct {
		name string
		fast bool
		doc  string
	}{
		{"empty", true, ""},
		{"blank lines", true, "\n  \n\n"},
		{"headings", true, lines("# T", "## A", "### B", "#### C", "##### D", "###### E", "text")},
		{"heading without text", true, lines("##", "## ", "#", "x")},
		{"heading at the end without a newline", true, "x\n## A"},
		{"empty heading at the end", true, "x\n##"},
		{"closing sequence", true, lines("## A ##", "## B #####  ", "## C#", "## # #", "## ###", "## a # b #", "## ##a")},
		{"seven hashes are text", true, lines("####### x", "#hashtag", "#5 y")},
		{"heading interrupts a paragraph", true, lines("text", "## A", "more")},
		{"heading with placeholder", true, lines("## Cycle {{cycle_id}} review", "x")},
		{"heading with punctuation", true, lines("## 1. a; Q&A? P & L (a/b): c! d> e| f' g\" h{i} -j- +k+ =l= m.n", "x")},
		{"heading with bare links", true, lines("## see www.example.com and http://a.bc/d_e", "## mail a@b.co (x)", "x")},
		{"heading with intraword underscore", true, lines("## win_rate and a_b_c", "x")},
		{"heading with non-ASCII", true, lines("## Plan — cycle é", "x")},
		{"byte order mark before a heading", true, lines("\ufeff# T", "x")},
		{"invalid UTF-8", true, lines("## A \xff", "b\xfe", "| \xc3 |", "|---|")},
		{"paragraph text with markup", true, lines("## A", "**Regime:** {{r}} `code` *e* [l](u) <span>x</span> &amp; \\* ~s~", "-x", "+y", "*z*", "_w_")},
		{"paragraph of a number", true, lines("## A", "1.5", "2)x is not a list without a space")},
		{"comment block", true, lines("## A", "<!-- one -->", "<!--", "two", "", "  three {{x}}", "-->", "after")},
		{"comment block closed on its first line with text after", true, lines("## A", "<!-- a --> b")},
		{"comment block opened and closed oddly", true, lines("<!-->", "## A", "<!--->", "x", "<!-- a", "b --> c <!-- d", "## B", "x")},
		{"unclosed comment block", true, lines("## A", "x", "<!-- open", "## B", "{{y}}")},
		{"comment interrupts a paragraph", true, lines("## A", "text", "<!-- c -->", "more")},
		{"comment with tabs and markup inside", true, "## A\n<!--\n\t- item\n    code\n> q\x00-->\n"},
		{"table", true, lines("## M", "| Metric | Value |", "|---|---|", "| Win rate | 60% |", "| Sharpe | 1.2 |")},
		{"table after text", true, lines("## M", "Numbers:", "more", "| a | b |", "|---|---|", "| 1 | 2 |")},
		{"table alignments", true, lines("| a | b | c | d |", "|:--|--:|:-:|---|", "| 1 | 2 | 3 | 4 |")},
		{"table without outer pipes", true, lines("a | b", ":-- | --", "1 | 2")},
		{"table rows with fewer and more cells", true, lines("| a | b |", "|---|---|", "| 1 |", "| 1 | 2 | 3 |", "|", "||", "| |", "plain")},
		{"header cell count differs from delimiter", true, lines("| a | b |", "|---|", "| 1 | 2 |")},
		{"delimiter-like lines", true, lines("a", ":--", "b", "|-|-", "c | d", "| :-: |", "|", "x")},
		{"table with empty cells", true, lines("## M", "| | |", "|---|---|", "| | |")},
		{"table with ampersands", true, lines("| P&L | a; b & c |", "|---|---|", "| www.a.bc/?d&e | 1 |")},
		{"table with intraword underscore and links", true, lines("| a_b | www.example.com |", "|---|---|", "| x_1 | a@b.co |")},
		{"table ended by a heading", true, lines("| a |", "|---|", "| 1 |", "## B", "x")},
		{"table ended by a comment", true, lines("| a |", "|---|", "| 1 |", "<!-- c -->", "x")},
		{"paragraph of entities only", false, lines("## A", "&nbsp; &#32; &#x20;")},
		{"paragraph of code spans only", false, lines("## A", "` `")},
		{"inline comment", false, lines("## A", "text <!-- c -->")},
		{"inline comment in a table", false, lines("| a <!-- c --> |", "|---|")},
		{"heading with leading spaces", false, lines(" ## A", "x")},
		{"paragraph line with leading spaces", false, lines("a", "  b")},
		{"heading with code", false, lines("## `A`", "x")},
		{"heading with emphasis", false, lines("## *A*", "x")},
		{"heading with a leading underscore", false, lines("## _A_", "x")},
		{"heading with a link", false, lines("## [A](b)", "x")},
		{"heading with a closing bracket", true, lines("## A] (b)", "x")},
		{"heading with HTML", false, lines("## A <b>", "x")},
		{"heading with an entity", false, lines("## P&amp;L", "x")},
		{"heading with a character reference", false, lines("## P&#38;L", "x")},
		{"heading with a semicolon after an ampersand", false, lines("## P&L; x", "x")},
		{"heading with an escape", false, lines("## \\# A", "x")},
		{"heading with strikethrough", false, lines("## ~~A~~", "x")},
		{"heading with a tab", false, "##\tA\nx\n"},
		{"carriage returns", false, "## A\r\nx\r\n"},
		{"control character", false, "## A\nx\x00\n"},
		{"setext heading", false, lines("A", "===")},
		{"setext heading with dashes", false, lines("A", "---")},
		{"thematic break", false, lines("x", "", "***")},
		{"thematic break of underscores", false, lines("x", "", "_ _ _")},
		{"list", true, lines("## A", "- item", "- **more** `x` [l](u)", "", "## B", "* a", "+ b", "1. c", "2. d", "1) e", "10) f")},
		{"loose list", true, lines("- a", "", "- b", "", "", "- c", "", "text")},
		{"list after a paragraph", true, lines("text", "- a", "", "text", "1. b")},
		{"list of an item without a word", true, lines("- a", "- ?", "- &amp;")},
		{"list ended by a heading and a comment", true, lines("- a", "## B", "- b", "<!-- c -->", "3. c", "# C")},
		{"ordered list after a list", true, lines("- a", "2. b", "* c", "- d")},
		{"ordered list starting at 0 or 5", true, lines("0. a", "", "5) b")},
		{"list item with pipes and a table after it", true, lines("- a | b", "", "| a |", "|---|", "| 1 |")},
		{"list item with marks after the marker", true, lines("- -x", "* *e*", "+ +1", "1. 2.5", "- _a_")},
		{"list without a word", false, lines("## A", "- ?", "- &nbsp;")},
		{"list item continued lazily", false, lines("## A", "- item", "more")},
		{"list item continued by a table row", false, lines("- a | b", "|---|---|")},
		{"list item continued by an indented line", false, lines("- a", "  b")},
		{"ordered list interrupting a paragraph", false, lines("text", "2. item")},
		{"empty list item", false, lines("## A", "*")},
		{"empty list item with a space", false, lines("## A", "- ")},
		{"list item with two spaces", false, lines("## A", "-  item")},
		{"list item with a heading", false, lines("- # A")},
		{"list item with a task", false, lines("- [ ] a", "- [x]")},
		{"list item with a link reference definition", false, lines("- [a]: b")},
		{"list item with a nested list", false, lines("- - a")},
		{"list item with a thematic break", false, lines("* * *")},
		{"list item with a block quote", false, lines("- > a")},
		{"list item with fenced code", false, lines("- ```", "a")},
		{"list item with an inline comment", false, lines("- a <!-- c -->")},
		{"ordered list item with ten digits", false, lines("1234567890. a")},
		{"list item with a tab", false, "-\ta\n"},
		{"block quote", false, lines("## A", "> q")},
		{"fenced code", true, lines("## A", "```go", "## B", "<!-- {{x}} -->", "\tx := 1", "```", "## C", "~~~ sh ~~~", "", "~~~~~", "~~~")},
		{"fenced code with an empty line only", true, lines("## A", "```", "", "```", "## B", "````", "```", "````  ")},
		{"fenced code closed by an indented fence", true, lines("```", "a", "   ```", "b", "```")},
		{"fenced code not closed by a fence indented four spaces", true, lines("```", "a", "    ```", "b")},
		{"fenced code not closed by the other fence", true, lines("```", "a", "~~~", "``", "``` x")},
		{"fenced code interrupting a paragraph and a list", true, lines("text", "```", "a", "```", "- item", "~~~", "```")},
		{"unclosed fenced code", true, lines("## A", "```", "## B", "text")},
		{"unclosed fenced code at the end without a newline", true, "## A\n```x"},
		{"fence with a backtick in its info", false, lines("## A", "```a`b", "x")},
		{"tilde fence with a tab after it", false, lines("## A", "~~~\tx", "y")},
		{"HTML block", false, lines("## A", "<div>", "x", "</div>")},
		{"link reference definition", false, lines("## A", "[a]: http://x")},
		{"table cell with code", false, lines("| `a` |", "|---|")},
		{"table cell with emphasis", false, lines("| a |", "|---|", "| *b* |")},
		{"table cell with an escaped pipe", false, lines("| a \\| b | c |", "|---|---|")},
		{"table cell with an entity", false, lines("| a |", "|---|", "| &amp; |")},
		{"table cell with an entity in a link", false, lines("| a |", "|---|", "| www.a.bc/?d&amp;e |")},
		{"table cell with a link", false, lines("| a |", "|---|", "| [b](c) |")},
		{"table ended by a list", true, lines("| a |", "|---|", "- b")},
	} {
		t.Run(tt.name, func(t *testing.T) {
			fast, diff := fastPathDiff([]byte(tt.doc), contracts)
			if diff != "" {
				t.Errorf("%q:\n%s", tt.doc, diff)
			}
			if fast != tt.fast {
				t.Errorf("%q: fast path taken = %v, want %v", tt.doc, fast, tt.fast)
			}
		})
	}
}

// FuzzFastMarkdown checks that the fast path, whenever it takes a
// document, agrees with goldmark. Documents are built from lines of
// headings, paragraphs, table rows, comments and blank lines with special
// characters mixed in, and the input is also taken as a document itself.
func FuzzFastMarkdown(f *testing.F) {
	// Two contracts, each with a table: checking with all of the corpus's
	// would slow the target down several times.
	var contracts []*MarkdownContract
	for _, tmpl := range []string{fuzzTemplate, benchTemplate} {
		c, err := NewMarkdownContract([]byte(tmpl))
		if err != nil {
			f.Fatal(err)
		}
		contracts = append(contracts, c)
	}
	f.Add([]byte(benchTemplate))
	f.Add([]byte(fuzzTemplate))
	f.Add([]byte{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15})
	f.Add([]byte(lines("## A", "| a | b |", "|:-|-:|", "| 1 |", "<!-- x", "y -->", "www.a.bc_d")))
	f.Fuzz(func(t *testing.T, plan []byte) {
		for _, doc := range [][]byte{plan, buildDocument(plan), buildLines(plan)} {
			if _, diff := fastPathDiff(doc, contracts); diff != "" {
				t.Errorf("%q:\n%s", doc, diff)
			}
		}
	})
}

// Documents are built of pieces: mostly of the subset's, some of what
// makes the fast path fall back.
var (
	subsetPieces = []string{
		"\n", "\n", "\n", "\n\n", " ", "  ",
		"# ", "## ", "### ", "####### ", "#", "##",
		"| ", " | ", " |", "|", "|---|", "|:--|--:|", ":-:", "| a | b |\n|---|---|\n", "-|-",
		"<!--", "-->", "<!-- c -->", ">", "<!-- {{x}} -->\n",
		"text", "Win rate", "55%", "x", "Summary", "1. Summary", "Performance Metrics", "Next Steps", "{{x}}", "{{win}}", "{{",
		"www.example.com", "http://a.bc/d", "a@b.co", "(", ")", ":", ".", "!", "?", "'", "\"",
		"_", "a_b", "__", "&", "&amp;", "&#32;", ";", "-", "=", "é", "—", "\u00a0",
		"- ", "* ", "+ ", "1. ", "2) ", "0. ", "\n- ", "\n1. ", "-  ", "- [ ] ", "[x]",
		"```", "~~~", "````", "\n```\n", "```go\n", "\n~~~\n", "   ```",
		// Whole lines, for documents of several blocks.
		"\n## Summary\n", "\n# Evaluation 1\n", "\n- item\n", "\n* item\n", "\n1. first\n", "\n2. second\n",
		"\n| Metric | Target | Actual |\n|---|---|---|\n| Win rate | 1 | 2 |\n", "\n<!-- c -->\n", "\nSome text.\n",
	}
	fallbackPieces = []string{
		"\t", "\r", "\x00", " #", "<", "<b>", "<div>", "*", "**", "`", "``", "\\", "[", "]", "[a]: b", "&nbsp;",
		"~", "~~", "===", "---", "***", "___",
	}
)

// buildDocument makes a document of pieces, one per byte of plan.
func buildDocument(plan []byte) []byte {
	var b []byte
	for _, p := range plan {
		b = append(b, piece(p)...)
	}
	return b
}

// piece is one of fallbackPieces for a byte from 0xe0 on, else one of
// subsetPieces.
func piece(p byte) string {
	if p >= 0xe0 {
		return fallbackPieces[int(p-0xe0)%len(fallbackPieces)]
	}
	return subsetPieces[int(p)%len(subsetPieces)]
}

// lineStarts start the lines of buildLines.
var lineStarts = []string{
	"", "", "", "Text ", "x ", "{{x}} ", "# ", "## ", "### ", "#", "- ", "* ", "+ ", "1. ", "2) ",
	"| ", "| a | b |", "|---|", "|---|---|", "|:-|-:|", "<!-- ", "-->", "```", "~~~", "``` ",
}

// buildLines makes a document of lines, two bytes of plan a line: the
// start of the line and a piece of it.
func buildLines(plan []byte) []byte {
	var b []byte
	for i := 0; i+1 < len(plan); i += 2 {
		b = append(b, lineStarts[int(plan[i])%len(lineStarts)]...)
		b = append(b, piece(plan[i+1])...)
		b = append(b, '\n')
	}
	return b
}

// BenchmarkMarkdownValidate validates, on the fast path and with
// goldmark, the mock runtime's output for the engine benchmark's template
// and an output as a model might write it, with lists, emphasis and code.
//
//	go test -run '^$' -bench MarkdownValidate -count 10 ./artifact/
func BenchmarkMarkdownValidate(b *testing.B) {
	c, err := NewMarkdownContract([]byte(benchTemplate))
	if err != nil {
		b.Fatal(err)
	}
	for _, doc := range []struct{ name, output string }{
		{"mock", "# Report 20261122_140000\n\n## Summary\n\n" +
			"Mock a0 output for \"Summary\" in cycle 20261122_140000, written at 2026-11-22T14:00:00Z.\n\n" +
			"## Findings\n\n| Item | Value |\n|---|---|\n| Signal | signal for cycle 20261122_140000 |\n\n" +
			"## Handoff\n\nMock a0 output for \"Handoff\" in cycle 20261122_140000, written at 2026-11-22T14:00:00Z.\n\n"},
		{"model", lines(
			"# Report 20261122_140000", "",
			"## Summary", "",
			"- **BTC** held above 97,850 on the 1d close; the trend is up.",
			"- ETH/BTC made a lower high: rotation has not started.",
			"- Funding is flat, open interest up 4% in a day.", "",
			"## Findings", "",
			"| Item | Value |", "|---|---|", "| Signal | long BTC above 98,000 |", "| Confidence | 0.6 |", "",
			"1. Wait for the daily close.", "2. Enter on a retest of 97,500.", "",
			"## Handoff", "",
			"Check `funding_rate` before the next cycle:", "",
			"```sh", "curl -s https://example.com/funding", "```")},
	} {
		output := []byte(doc.output)
		if scanMarkdown(output) == nil {
			b.Fatalf("%s: the output falls back to goldmark", doc.name)
		}
		for _, path := range []struct {
			name  string
			parse func([]byte) *mdDocument
		}{
			{"fast", parseMarkdown},
			{"goldmark", parseGoldmark},
		} {
			b.Run(doc.name+"/"+path.name, func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					if problems := c.check(path.parse(output)); len(problems) > 0 {
						b.Fatal(problems)
					}
				}
			})
		}
	}
}

// TestNormalizeASCII: normalize's path for ASCII text gives what its
// general path gives.
func TestNormalizeASCII(t *testing.T) {
	general := func(s string) string {
		s = strings.Join(strings.FieldsFunc(s, unicode.IsSpace), " ")
		s = strings.TrimSpace(strings.TrimSuffix(s, ":"))
		return strings.ToLower(s)
	}
	alphabet := []string{"a", "Z", "1", " ", "  ", "\t", "\n", "\v", "\f", "\r", ":", "::", ".", "{{x}}", "_", "é", "\u00a0", "\u0085"}
	r := rand.New(rand.NewPCG(3, 4))
	for range 20000 {
		var b strings.Builder
		for range r.IntN(8) {
			b.WriteString(alphabet[r.IntN(len(alphabet))])
		}
		s := b.String()
		if got, want := normalize(s), general(s); got != want {
			t.Fatalf("normalize(%q) = %q, want %q", s, got, want)
		}
	}
}

// TestPlainTextSingleText: plainText's shortcut for a single text gives
// what its walk gives, for the headings and cells goldmark finds in the
// corpus and in random documents.
func TestPlainTextSingleText(t *testing.T) {
	files, err := corpus()
	if err != nil {
		t.Fatal(err)
	}
	var docs [][]byte
	for _, data := range files {
		docs = append(docs, data)
	}
	r := rand.New(rand.NewPCG(5, 6))
	for range 1000 {
		plan := make([]byte, 4+r.IntN(28))
		for i := range plan {
			plan[i] = byte(r.Uint32())
		}
		docs = append(docs, buildDocument(plan))
	}
	docs = append(docs, []byte(lines("## P&amp;L \\# x", "| a&#32;b | `c` |", "|---|---|")))
	for _, doc := range docs {
		d := parseGoldmark(doc)
		_ = ast.Walk(d.root, func(n ast.Node, entering bool) (ast.WalkStatus, error) {
			if _, ok := n.(*ast.Heading); !ok && n.Kind() != east.KindTableCell || !entering {
				return ast.WalkContinue, nil
			}
			if got, want := plainText(n, doc), walkPlainText(n, doc); got != want {
				t.Errorf("%q: plain text %q, want %q", doc, got, want)
			}
			return ast.WalkSkipChildren, nil
		})
	}
}
