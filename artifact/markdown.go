package artifact

import (
	"bytes"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/agentrunner/agentrunner"
	"github.com/yuin/goldmark"
	"github.com/yuin/goldmark/ast"
	"github.com/yuin/goldmark/extension"
	east "github.com/yuin/goldmark/extension/ast"
	"github.com/yuin/goldmark/text"
	"github.com/yuin/goldmark/util"
)

// markdown parses templates and artifacts the way GitHub renders them, so
// what an operator sees in a preview is what the contract checks. Its
// parser is safe for concurrent use.
var markdown = goldmark.New(goldmark.WithExtensions(extension.GFM))

// Section is a section the template requires of an artifact: one heading
// of level 2 or deeper in the template.
type Section struct {
	Level int
	// Title is the heading's plain text as written in the template.
	Title string
	// Line is the heading's line in the template.
	Line int
	// Columns and Rows describe the table the section must contain: the
	// header cells of the first table in the template section's own content
	// and the literal labels (first cells without a placeholder) of its
	// rows. Both are nil when the section requires no table; Rows is nil
	// when the table's rows have no literal labels.
	Columns []string
	Rows    []string
}

// MarkdownContract is the contract of a markdown output template. It
// requires the template's structure (title, sections in order, their
// tables) and that every section is filled. It is immutable and safe for
// concurrent use.
type MarkdownContract struct {
	// title is the template's first level-1 heading, nil if it has none.
	title *templateHeading
	// roots are the top sections of the template's section tree.
	roots []*templateSection
	// sections are all required sections in template order.
	sections []*templateSection
}

type templateHeading struct {
	display string // "# Plan {{cycle_id}}"
	line    int
}

type templateSection struct {
	Section
	display  string // "## 3. Hypotheses to Test"
	pattern  textPattern
	children []*templateSection
	table    *tableSpec
}

// tableSpec is the table a section requires.
type tableSpec struct {
	columns []textPattern
	// rows are the normalized literal row labels.
	rows []string
}

// NewMarkdownContract builds the contract of a markdown template. Headings
// count as sections only at the top level of the document: a heading
// nested in a list or a block quote is content.
func NewMarkdownContract(template []byte) (*MarkdownContract, error) {
	if isBlank(template) {
		return nil, agentrunner.Errorf(agentrunner.EINVALID, "template is empty")
	}
	return newContract(parseMarkdown(template))
}

func newContract(doc *mdDocument) (*MarkdownContract, error) {
	template := doc.src
	c := &MarkdownContract{}
	var stack []*templateSection
	for i, h := range doc.headings {
		if h.level == 1 {
			if c.title == nil {
				c.title = &templateHeading{display: h.display(), line: h.line}
			}
			// A level-1 heading ends every section before it.
			stack = stack[:0]
			continue
		}
		if h.norm == "" {
			return nil, agentrunner.Errorf(agentrunner.EINVALID, "line %d: heading %q has no text", h.line, h.display())
		}
		s := &templateSection{
			Section: Section{Level: h.level, Title: h.text, Line: h.line},
			display: h.display(),
			pattern: newTextPattern(h.norm),
		}
		if tbl := firstTable(doc.ownBlocks(i)); tbl != nil {
			spec, cols, rows := newTableSpec(tbl, template)
			if len(spec.columns) > 0 {
				s.table, s.Columns, s.Rows = spec, cols, rows
			}
		}
		for len(stack) > 0 && stack[len(stack)-1].Level >= s.Level {
			stack = stack[:len(stack)-1]
		}
		if len(stack) == 0 {
			c.roots = append(c.roots, s)
		} else {
			parent := stack[len(stack)-1]
			parent.children = append(parent.children, s)
		}
		stack = append(stack, s)
		c.sections = append(c.sections, s)
	}
	return c, nil
}

// Sections returns the required sections in template order.
func (c *MarkdownContract) Sections() []Section {
	out := make([]Section, len(c.sections))
	for i, s := range c.sections {
		out[i] = s.Section
		out[i].Columns = slices.Clone(s.Columns)
		out[i].Rows = slices.Clone(s.Rows)
	}
	return out
}

// Validate checks a markdown artifact: the title, every section present in
// template order at its level and not empty, required tables with their
// columns and rows, and no unfilled placeholders.
func (c *MarkdownContract) Validate(data []byte) []Problem {
	problems, _ := c.validate(data)
	return problems
}

// CheckSections is Check for a markdown contract that also returns the
// artifact's sections, found in the same parse, for a caller that quotes
// them next (nil when the artifact is empty).
func (c *MarkdownContract) CheckSections(artifact string, data []byte) ([]Span, error) {
	problems, doc := c.validate(data)
	var spans []Span
	if doc != nil {
		spans = doc.sections()
	}
	if len(problems) > 0 {
		return spans, &ValidationError{Artifact: artifact, Problems: problems}
	}
	return spans, nil
}

func (c *MarkdownContract) validate(data []byte) ([]Problem, *mdDocument) {
	if isBlank(data) {
		return []Problem{problemEmpty}, nil
	}
	doc := parseMarkdown(data)
	return c.check(doc), doc
}

// check validates a parsed artifact.
func (c *MarkdownContract) check(doc *mdDocument) []Problem {
	v := &mdValidation{doc: doc, used: make([]bool, len(doc.headings))}
	if c.title != nil && !doc.hasTitle() {
		v.noTitle(c.title)
	}
	v.matchScope(c.roots, 0, len(doc.headings))
	v.problems = append(v.problems, doc.unfilledPlaceholders()...)
	return v.problems
}

// mdValidation is the state of one Validate call.
type mdValidation struct {
	doc      *mdDocument
	used     []bool // output headings already matched to a template section
	problems []Problem
}

// matchScope finds the template sections in the output headings [from, to)
// in order. A section found only before the previous match is out of
// order; one not found at all is missing, and its sub-sections are looked
// for where it should have been.
func (v *mdValidation) matchScope(sections []*templateSection, from, to int) {
	cursor := from
	var previous *templateSection
	for _, s := range sections {
		if i := v.find(s, cursor, to); i >= 0 {
			v.accept(s, i, to)
			cursor, previous = i+1, s
			continue
		}
		if i := v.find(s, from, cursor); i >= 0 && previous != nil {
			v.outOfOrder(&v.doc.headings[i], previous)
			v.accept(s, i, to)
			continue
		}
		v.missing(s)
		v.matchScope(s.children, cursor, to)
	}
}

// The problems are built by functions of their own, which keeps the
// frames of the matching small (see tablesIn).

func (v *mdValidation) noTitle(t *templateHeading) {
	v.problems = append(v.problems, Problem{Line: t.line, InTemplate: true, Message: fmt.Sprintf("missing level-1 heading like %q", t.display)})
}

func (v *mdValidation) outOfOrder(h *mdHeading, previous *templateSection) {
	v.problems = append(v.problems, Problem{Line: h.line,
		Message: fmt.Sprintf("section %q is out of order: the template puts it after %q", h.display(), previous.display)})
}

func (v *mdValidation) missing(s *templateSection) {
	v.problems = append(v.problems, Problem{Line: s.Line, InTemplate: true, Message: fmt.Sprintf("missing section %q", s.display)})
}

func (v *mdValidation) empty(h *mdHeading) {
	v.problems = append(v.problems, Problem{Line: h.line, Message: fmt.Sprintf("section %q is empty", h.display())})
}

func (v *mdValidation) noTable(s *templateSection, h *mdHeading) {
	v.problems = append(v.problems, Problem{Line: h.line,
		Message: fmt.Sprintf("section %q has no table; the template's table has columns %s", h.display(), quoteList(s.Columns))})
}

// tableLacks is the problem of a table that lacks items (columns or rows).
func tableLacks(line int, h *mdHeading, one, many string, items []string) Problem {
	return Problem{Line: line, Message: fmt.Sprintf("table in section %q is missing %s %s", h.display(), plural(len(items), one, many), quoteList(items))}
}

func noDataRows(line int, h *mdHeading) Problem {
	return Problem{Line: line, Message: fmt.Sprintf("table in section %q has no data rows", h.display())}
}

// find returns the first unused output heading in [from, to) that matches
// the section, or -1.
func (v *mdValidation) find(s *templateSection, from, to int) int {
	for i := from; i < to; i++ {
		h := v.doc.headings[i]
		if !v.used[i] && h.level == s.Level && s.pattern.match(h.norm) {
			return i
		}
	}
	return -1
}

// accept records that output heading i is section s, checks its content
// and matches s's sub-sections inside its span.
func (v *mdValidation) accept(s *templateSection, i, to int) {
	v.used[i] = true
	h := v.doc.headings[i]
	blocks := v.doc.spanBlocks(i)
	if !anyContent(blocks, v.doc.src) {
		v.empty(&h)
	} else if s.table != nil {
		v.checkTable(s, &h, blocks)
	}
	v.matchScope(s.children, i+1, min(h.spanEnd, to))
}

// checkTable reports what the section's tables lack against the template's
// table. Problems are about the output table closest to the template's, so
// an agent that wrote several tables learns what the intended one misses.
func (v *mdValidation) checkTable(s *templateSection, h *mdHeading, blocks []ast.Node) {
	var best []Problem
	found := false
	var buf [4]*east.Table
	for _, tbl := range tablesIn(blocks, buf[:0]) {
		t := readTable(tbl, v.doc)
		problems := v.tableProblems(s, h, &t)
		if !found || len(problems) < len(best) {
			best = problems
		}
		found = true
		if len(best) == 0 {
			return
		}
	}
	if !found {
		v.noTable(s, h)
		return
	}
	v.problems = append(v.problems, best...)
}

// tablesIn appends the tables in the blocks to tables, outermost first.
// The caller reads them after the walk, at a shallower depth: the step's
// goroutine starts with a small stack, and a deep call grows it.
func tablesIn(blocks []ast.Node, tables []*east.Table) []*east.Table {
	for _, b := range blocks {
		if tbl, ok := b.(*east.Table); ok {
			tables = append(tables, tbl)
			continue
		}
		_ = ast.Walk(b, func(n ast.Node, entering bool) (ast.WalkStatus, error) {
			if tbl, ok := n.(*east.Table); ok && entering {
				tables = append(tables, tbl)
				return ast.WalkSkipChildren, nil
			}
			return ast.WalkContinue, nil
		})
	}
	return tables
}

// tableProblems compares one output table with the section's required
// table.
func (v *mdValidation) tableProblems(s *templateSection, h *mdHeading, t *outputTable) []Problem {
	var problems []Problem
	var missingCols []string
	for i, col := range s.table.columns {
		if !col.matchAny(t.header) {
			missingCols = append(missingCols, s.Columns[i])
		}
	}
	if len(missingCols) > 0 {
		problems = append(problems, tableLacks(t.line, h, "column", "columns", missingCols))
	}
	var missingRows []string
	for i, label := range s.table.rows {
		if !slices.Contains(t.labels, label) {
			missingRows = append(missingRows, s.Rows[i])
		}
	}
	if len(missingRows) > 0 {
		problems = append(problems, tableLacks(t.line, h, "row", "rows", missingRows))
	}
	if t.dataRows == 0 {
		problems = append(problems, noDataRows(t.line, h))
	}
	return problems
}

// outputTable is what a contract reads of a table in an output.
type outputTable struct {
	line   int
	header []string // normalized header cells
	labels []string // normalized first cells of the rows
	// dataRows counts the rows with a cell filled.
	dataRows int
}

func readTable(tbl *east.Table, d *mdDocument) outputTable {
	t := outputTable{line: d.lines.line(tablePos(tbl))}
	for row := tbl.FirstChild(); row != nil; row = row.NextSibling() {
		if _, ok := row.(*east.TableHeader); ok {
			for cell := row.FirstChild(); cell != nil; cell = cell.NextSibling() {
				t.header = append(t.header, normalize(plainText(cell, d.src)))
			}
			continue
		}
		filled := false
		for cell := row.FirstChild(); cell != nil; cell = cell.NextSibling() {
			norm := normalize(plainText(cell, d.src))
			if cell == row.FirstChild() {
				t.labels = append(t.labels, norm)
			}
			filled = filled || norm != ""
		}
		if filled {
			t.dataRows++
		}
	}
	return t
}

// mdDocument is a parsed markdown file reduced to what contracts need: its
// top-level blocks and the headings among them.
type mdDocument struct {
	src      []byte
	lines    lineIndex
	root     ast.Node
	blocks   []ast.Node
	headings []mdHeading
}

type mdHeading struct {
	level int
	text  string // plain text, trimmed
	norm  string // normalized plain text
	line  int
	block int // index in blocks
	// spanEnd is the index in headings of the next heading of the same or
	// a higher level, len(headings) if none: the section ends there.
	spanEnd int
}

func (h mdHeading) display() string {
	if h.text == "" {
		return strings.Repeat("#", h.level)
	}
	return strings.Repeat("#", h.level) + " " + h.text
}

// parseMarkdown parses with scanMarkdown when the document is in its
// subset, else with goldmark.
func parseMarkdown(src []byte) *mdDocument {
	if root := scanMarkdown(src); root != nil {
		return newMDDocument(src, root)
	}
	return parseGoldmark(src)
}

func parseGoldmark(src []byte) *mdDocument {
	return newMDDocument(src, markdown.Parser().Parse(text.NewReader(src)))
}

func newMDDocument(src []byte, root ast.Node) *mdDocument {
	d := &mdDocument{src: src, lines: newLineIndex(src), root: root}
	d.blocks = make([]ast.Node, 0, root.ChildCount())
	headings := 0
	for n := root.FirstChild(); n != nil; n = n.NextSibling() {
		if n.Kind() == ast.KindHeading {
			headings++
		}
	}
	d.headings = make([]mdHeading, 0, headings)
	for n := root.FirstChild(); n != nil; n = n.NextSibling() {
		if h, ok := n.(*ast.Heading); ok {
			plain := strings.TrimSpace(plainText(h, src))
			d.headings = append(d.headings, mdHeading{
				level: h.Level, text: plain, norm: normalize(plain),
				line: d.lines.line(blockPos(h)), block: len(d.blocks),
			})
		}
		d.blocks = append(d.blocks, n)
	}
	for i := range d.headings {
		d.headings[i].spanEnd = len(d.headings)
		for j := i + 1; j < len(d.headings); j++ {
			if d.headings[j].level <= d.headings[i].level {
				d.headings[i].spanEnd = j
				break
			}
		}
	}
	return d
}

func (d *mdDocument) hasTitle() bool {
	for _, h := range d.headings {
		if h.level == 1 {
			return true
		}
	}
	return false
}

// spanBlocks returns the blocks of heading i's section: everything after
// it up to the next heading of the same or a higher level.
func (d *mdDocument) spanBlocks(i int) []ast.Node {
	end := len(d.blocks)
	if se := d.headings[i].spanEnd; se < len(d.headings) {
		end = d.headings[se].block
	}
	return d.blocks[d.headings[i].block+1 : end]
}

// ownBlocks returns the blocks between heading i and the next heading of
// any level: the section's own content, before its first sub-heading.
func (d *mdDocument) ownBlocks(i int) []ast.Node {
	end := len(d.blocks)
	if i+1 < len(d.headings) {
		end = d.headings[i+1].block
	}
	return d.blocks[d.headings[i].block+1 : end]
}

// unfilledPlaceholders reports every {{placeholder}} outside HTML
// comments. Comments are not rendered, so instructions a template keeps in
// them may mention placeholders without being unfilled content.
func (d *mdDocument) unfilledPlaceholders() []Problem {
	if !bytes.Contains(d.src, []byte("{{")) {
		return nil
	}
	locs := placeholderPattern.FindAllSubmatchIndex(d.src, -1)
	if len(locs) == 0 {
		return nil
	}
	comments := d.commentRanges()
	var problems []Problem
	for _, loc := range locs {
		if inRanges(comments, loc[0]) {
			continue
		}
		problems = append(problems, Problem{
			Line:    d.lines.line(loc[0]),
			Message: "unfilled placeholder " + string(d.src[loc[0]:loc[1]]),
		})
	}
	return problems
}

// commentRanges returns the byte ranges of the HTML comments in the
// document, as [start, end) pairs in document order.
func (d *mdDocument) commentRanges() [][2]int {
	var ranges [][2]int
	_ = ast.Walk(d.root, func(n ast.Node, entering bool) (ast.WalkStatus, error) {
		if !entering {
			return ast.WalkContinue, nil
		}
		switch n := n.(type) {
		case *ast.HTMLBlock:
			if n.Lines().Len() == 0 {
				return ast.WalkSkipChildren, nil
			}
			start, end := n.Lines().At(0).Start, n.Lines().At(n.Lines().Len()-1).Stop
			if n.HasClosure() {
				end = max(end, n.ClosureLine.Stop)
			}
			ranges = append(ranges, commentsIn(d.src, start, end)...)
			return ast.WalkSkipChildren, nil
		case *ast.RawHTML:
			if n.Segments.Len() == 0 {
				return ast.WalkSkipChildren, nil
			}
			start, end := n.Segments.At(0).Start, n.Segments.At(n.Segments.Len()-1).Stop
			ranges = append(ranges, commentsIn(d.src, start, end)...)
			return ast.WalkSkipChildren, nil
		}
		return ast.WalkContinue, nil
	})
	return ranges
}

// commentsIn returns the HTML comments within src[start:end]; an unclosed
// comment runs to end.
func commentsIn(src []byte, start, end int) [][2]int {
	var ranges [][2]int
	for start < end {
		open := bytes.Index(src[start:end], []byte("<!--"))
		if open < 0 {
			break
		}
		open += start
		closeAt := bytes.Index(src[open+4:end], []byte("-->"))
		stop := end
		if closeAt >= 0 {
			stop = open + 4 + closeAt + 3
		}
		ranges = append(ranges, [2]int{open, stop})
		start = stop
	}
	return ranges
}

func inRanges(ranges [][2]int, off int) bool {
	for _, r := range ranges {
		if off >= r[0] && off < r[1] {
			return true
		}
	}
	return false
}

// anyContent reports whether the blocks hold something other than
// whitespace, HTML comments and headings.
func anyContent(blocks []ast.Node, src []byte) bool {
	for _, b := range blocks {
		if hasContent(b, src) {
			return true
		}
	}
	return false
}

func hasContent(n ast.Node, src []byte) bool {
	switch n := n.(type) {
	case *ast.Heading, *ast.ThematicBreak:
		return false
	case *ast.HTMLBlock:
		var raw []byte
		for i := 0; i < n.Lines().Len(); i++ {
			line := n.Lines().At(i)
			raw = append(raw, line.Value(src)...)
		}
		if n.HasClosure() {
			raw = append(raw, n.ClosureLine.Value(src)...)
		}
		return !isBlank(stripComments(raw))
	case *ast.RawHTML:
		var raw []byte
		for i := 0; i < n.Segments.Len(); i++ {
			seg := n.Segments.At(i)
			raw = append(raw, seg.Value(src)...)
		}
		return !isBlank(stripComments(raw))
	case *ast.FencedCodeBlock, *ast.CodeBlock:
		for i := 0; i < n.Lines().Len(); i++ {
			if line := n.Lines().At(i); !isBlank(line.Value(src)) {
				return true
			}
		}
		return false
	case *ast.Text:
		return !isBlank(n.Segment.Value(src))
	case *ast.String:
		return !isBlank(n.Value)
	case *ast.AutoLink, *ast.Link, *ast.Image:
		return true
	}
	for c := n.FirstChild(); c != nil; c = c.NextSibling() {
		if hasContent(c, src) {
			return true
		}
	}
	return false
}

// stripComments removes HTML comments from raw HTML.
func stripComments(raw []byte) []byte {
	var out []byte
	last := 0
	for _, r := range commentsIn(raw, 0, len(raw)) {
		out = append(out, raw[last:r[0]]...)
		last = r[1]
	}
	return append(out, raw[last:]...)
}

// plainText returns the text of an inline container as a reader sees it:
// emphasis, code and link markup dropped, escapes and entities resolved,
// inline HTML left out.
func plainText(n ast.Node, src []byte) string {
	if t, ok := n.FirstChild().(*ast.Text); ok && n.ChildCount() == 1 && !t.SoftLineBreak() && !t.HardLineBreak() {
		// The common single text with nothing to resolve, without a walk.
		if v := t.Segment.Value(src); t.IsRaw() || bytes.IndexByte(v, '\\') < 0 && bytes.IndexByte(v, '&') < 0 {
			return string(v)
		}
	}
	return walkPlainText(n, src)
}

func walkPlainText(n ast.Node, src []byte) string {
	var b strings.Builder
	_ = ast.Walk(n, func(c ast.Node, entering bool) (ast.WalkStatus, error) {
		if !entering {
			return ast.WalkContinue, nil
		}
		switch c := c.(type) {
		case *ast.Text:
			v := c.Segment.Value(src)
			if !c.IsRaw() {
				v = util.ResolveEntityNames(util.ResolveNumericReferences(util.UnescapePunctuations(v)))
			}
			b.Write(v)
			if c.SoftLineBreak() || c.HardLineBreak() {
				b.WriteByte(' ')
			}
		case *ast.String:
			b.Write(c.Value)
		case *ast.AutoLink:
			b.Write(c.Label(src))
			return ast.WalkSkipChildren, nil
		case *ast.RawHTML:
			return ast.WalkSkipChildren, nil
		}
		return ast.WalkContinue, nil
	})
	return b.String()
}

// normalize makes heading and cell texts comparable: lower case, inner
// whitespace collapsed, surrounding whitespace and a trailing colon dropped.
func normalize(s string) string {
	if norm, ok := normalizeASCII(s); ok {
		return norm
	}
	s = strings.Join(strings.FieldsFunc(s, unicode.IsSpace), " ")
	s = strings.TrimSpace(strings.TrimSuffix(s, ":"))
	return strings.ToLower(s)
}

// normalizeASCII is normalize of ASCII text, without allocating when the
// text is normalized already; ok is false for other text.
func normalizeASCII(s string) (norm string, ok bool) {
	normal := true
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c >= utf8.RuneSelf:
			return "", false
		case c >= 'A' && c <= 'Z', isASCIISpace(c) && (c != ' ' || i == 0 || i == len(s)-1 || s[i+1] == ' '):
			normal = false
		}
	}
	if normal && !strings.HasSuffix(s, ":") {
		return s, true
	}
	var b strings.Builder
	b.Grow(len(s))
	space := false
	for i := 0; i < len(s); i++ {
		c := s[i]
		if isASCIISpace(c) {
			space = b.Len() > 0
			continue
		}
		if space {
			b.WriteByte(' ')
			space = false
		}
		if c >= 'A' && c <= 'Z' {
			c += 'a' - 'A'
		}
		b.WriteByte(c)
	}
	norm = b.String()
	norm = strings.TrimSuffix(norm, ":")
	return strings.TrimSuffix(norm, " "), true
}

// isASCIISpace is unicode.IsSpace for ASCII.
func isASCIISpace(c byte) bool { return c == ' ' || c >= '\t' && c <= '\r' }

// textPattern matches normalized text against a normalized template text
// in which each {{placeholder}} stands for any non-empty text.
type textPattern struct {
	literal string
	re      *regexp.Regexp // nil when the template text has no placeholder
}

func newTextPattern(norm string) textPattern {
	locs := placeholderPattern.FindAllStringIndex(norm, -1)
	if len(locs) == 0 {
		return textPattern{literal: norm}
	}
	var expr strings.Builder
	expr.WriteString(`^(?s:`)
	last := 0
	for _, loc := range locs {
		expr.WriteString(regexp.QuoteMeta(norm[last:loc[0]]))
		expr.WriteString(`.+?`)
		last = loc[1]
	}
	expr.WriteString(regexp.QuoteMeta(norm[last:]))
	expr.WriteString(`)$`)
	// The expression is built from quoted literals and a fixed wildcard,
	// so it always compiles.
	return textPattern{literal: norm, re: regexp.MustCompile(expr.String())}
}

func (p textPattern) match(norm string) bool {
	if p.re == nil {
		return norm == p.literal
	}
	return p.re.MatchString(norm)
}

func (p textPattern) matchAny(norms []string) bool {
	for _, n := range norms {
		if p.match(n) {
			return true
		}
	}
	return false
}

// firstTable returns the first table in the blocks, or nil.
func firstTable(blocks []ast.Node) *east.Table {
	var found *east.Table
	for _, b := range blocks {
		_ = ast.Walk(b, func(n ast.Node, entering bool) (ast.WalkStatus, error) {
			if tbl, ok := n.(*east.Table); ok && entering {
				found = tbl
				return ast.WalkStop, nil
			}
			return ast.WalkContinue, nil
		})
		if found != nil {
			return found
		}
	}
	return nil
}

// newTableSpec derives a required table from a template table: its
// non-empty header cells and the literal labels of its rows.
func newTableSpec(tbl *east.Table, src []byte) (spec *tableSpec, columns, rows []string) {
	spec = &tableSpec{}
	for row := tbl.FirstChild(); row != nil; row = row.NextSibling() {
		if _, ok := row.(*east.TableHeader); ok {
			for cell := row.FirstChild(); cell != nil; cell = cell.NextSibling() {
				title := strings.TrimSpace(plainText(cell, src))
				if norm := normalize(title); norm != "" {
					spec.columns = append(spec.columns, newTextPattern(norm))
					columns = append(columns, title)
				}
			}
			continue
		}
		if row.FirstChild() == nil {
			continue
		}
		label := strings.TrimSpace(plainText(row.FirstChild(), src))
		norm := normalize(label)
		if norm == "" || placeholderPattern.MatchString(label) {
			continue
		}
		spec.rows = append(spec.rows, norm)
		rows = append(rows, label)
	}
	return spec, columns, rows
}

// blockPos returns the byte offset where a block starts.
func blockPos(n ast.Node) int {
	if p := n.Pos(); p >= 0 {
		return p
	}
	if n.Lines().Len() > 0 {
		return n.Lines().At(0).Start
	}
	return 0
}

// tablePos returns the offset of a table's header row: the table node's
// own position is that of the paragraph it was cut from, which may start
// lines earlier.
func tablePos(tbl *east.Table) int {
	if h := tbl.FirstChild(); h != nil && h.Pos() >= 0 {
		return h.Pos()
	}
	return blockPos(tbl)
}

func quoteList(items []string) string {
	quoted := make([]string, len(items))
	for i, s := range items {
		quoted[i] = fmt.Sprintf("%q", s)
	}
	return strings.Join(quoted, ", ")
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}
