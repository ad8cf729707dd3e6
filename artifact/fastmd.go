package artifact

import (
	"bytes"

	"github.com/yuin/goldmark/ast"
	east "github.com/yuin/goldmark/extension/ast"
	"github.com/yuin/goldmark/text"
)

// scanMarkdown builds, for a common subset of markdown, the tree goldmark
// builds, without goldmark's general machinery: validating a step's
// output is on every step's path, and goldmark's parse costs far more
// there than the scan. The subset: ATX headings, paragraphs, GFM pipe
// tables, HTML comment blocks and lists of one-line items, every line at
// column 0, with headings and table cells in plain text. It returns nil
// for anything else, which the caller parses with goldmark. What it
// accepts must give contracts the results goldmark's tree gives (see the
// differential tests): the same blocks at the same positions, the same
// texts, the lines of comment blocks and paragraphs (a paragraph's
// position is its first line's); it leaves out the lines of headings and
// table cells, which contracts do not read.
func scanMarkdown(src []byte) *ast.Document {
	if bytes.IndexByte(src, '\r') >= 0 {
		return nil
	}
	s := &mdScanner{src: src, doc: ast.NewDocument()}
	for start := 0; start < len(src); {
		end := len(src)
		if i := bytes.IndexByte(src[start:], '\n'); i >= 0 {
			end = start + i
		}
		next := min(end+1, len(src))
		if !s.line(start, end, next) {
			return nil
		}
		start = next
	}
	if !s.closeParagraph() || s.list != nil && !s.closeList(nil) {
		return nil
	}
	return s.doc
}

// mdScanner is the state of one scanMarkdown. Line segments, as goldmark
// keeps them, run from a line's start to after its newline.
type mdScanner struct {
	src     []byte
	doc     *ast.Document
	comment *ast.HTMLBlock // the open comment block, nil if none
	code    *openFence     // the open fenced code block, nil if none
	para    []text.Segment // the open paragraph's lines
	list    *openList      // the open list, nil if none
	// Nodes come from slabs, a few per allocation.
	texts slab[ast.Text]
	cells slab[east.TableCell]
}

// slab hands out zero values of T from arrays of several, one allocation
// per array.
type slab[T any] struct{ free []T }

func (s *slab[T]) next() *T {
	if len(s.free) == 0 {
		s.free = make([]T, 8)
	}
	v := &s.free[0]
	s.free = s.free[1:]
	return v
}

// text returns a text node of the segment.
func (s *mdScanner) text(seg text.Segment) *ast.Text {
	t := s.texts.next()
	t.Segment = seg
	return t
}

// line scans the line src[start:end], whose segment ends at next. It
// returns false for a line outside the subset.
func (s *mdScanner) line(start, end, next int) bool {
	switch {
	case s.comment != nil:
		s.commentLine(start, next)
		return true
	case s.code != nil:
		s.codeLine(start, end, next)
		return true
	}
	line := s.src[start:end]
	switch {
	case isBlankLine(line):
		if s.list != nil {
			s.list.blank = true
		}
		return s.closeParagraph()
	case !plainLine(line):
		return false
	}
	if it, isItem := parseListItem(line); isItem {
		return it.content > 0 && s.listItem(start, end, it)
	}
	if s.list != nil && !s.closeList(line) {
		return false
	}
	return s.blockLine(start, end, next)
}

// blockLine scans a line that is not a list item: a heading, a comment
// block's first line or a paragraph's line.
func (s *mdScanner) blockLine(start, end, next int) bool {
	line := s.src[start:end]
	if line[0] == '#' {
		if isHeading, ok := s.heading(start, end); isHeading || !ok {
			return ok
		}
	}
	switch {
	case bytes.HasPrefix(line, commentOpen):
		if !s.closeParagraph() {
			return false
		}
		s.openComment(start, next)
		return true
	case line[0] == '`' || line[0] == '~':
		if f := parseFence(s.src[start:next]); f != nil {
			if !s.closeParagraph() {
				return false
			}
			s.openCode(start, f)
			return true
		}
	}
	switch {
	case startsBlock(line):
		return false
	case len(s.para) == 0 && line[0] == '[':
		// A link reference definition, which goldmark removes.
		return false
	}
	s.para = append(s.para, text.NewSegment(start, next))
	return true
}

// plainLine reports whether a line outside a comment block has no control
// characters (tabs included) and no inline comment.
func plainLine(line []byte) bool {
	for _, c := range line {
		if c < ' ' {
			return false
		}
	}
	return bytes.HasPrefix(line, commentOpen) || !bytes.Contains(line, commentOpen)
}

var (
	commentOpen  = []byte("<!--")
	commentClose = []byte("-->")
)

// isBlankLine reports whether goldmark takes a line for blank; a tab
// would be, but lines with tabs are outside the subset.
func isBlankLine(line []byte) bool {
	for _, c := range line {
		if c != ' ' {
			return false
		}
	}
	return true
}

// startsBlock reports whether a line may start (or, under a paragraph,
// turn it into) a block the subset leaves out: indented code, lists, block
// quotes, thematic breaks, setext underlines, fenced code, HTML other than
// a comment. It errs towards yes.
func startsBlock(line []byte) bool {
	c := line[0]
	switch c {
	case ' ', '>', '<':
		return true
	case '-', '+', '*':
		if len(line) == 1 || line[1] == ' ' {
			return true // a list item
		}
	case '`', '~':
		return bytes.HasPrefix(line, []byte{c, c, c})
	}
	if c == '-' || c == '*' || c == '_' || c == '=' {
		return onlyBytes(line, c, ' ')
	}
	if n := leadingDigits(line); n > 0 && n < len(line) && (line[n] == '.' || line[n] == ')') {
		return n+1 == len(line) || line[n+1] == ' ' // an ordered list item
	}
	return false
}

func onlyBytes(line []byte, a, b byte) bool {
	for _, c := range line {
		if c != a && c != b {
			return false
		}
	}
	return true
}

func leadingDigits(line []byte) int {
	n := 0
	for n < len(line) && line[n] >= '0' && line[n] <= '9' {
		n++
	}
	return n
}

// heading adds the ATX heading on the line src[start:end], closing the
// paragraph before it, and reports whether the line is one and whether
// it is in the subset. Like goldmark it takes a closing sequence of '#'
// off the text.
func (s *mdScanner) heading(start, end int) (isHeading, ok bool) {
	line := s.src[start:end]
	level := 0
	for level < len(line) && line[level] == '#' {
		level++
	}
	if level > 6 || (level < len(line) && line[level] != ' ') {
		return false, true // a paragraph's text
	}
	h := ast.NewHeading(level)
	h.SetPos(start)
	stop := end
	for stop > start+level && s.src[stop-1] == ' ' {
		stop--
	}
	from := start + level
	for from < stop && s.src[from] == ' ' {
		from++
	}
	if from < stop {
		from, stop = headingText(s.src, from, stop)
	}
	if from < stop {
		if !plainInline(s.src[from:stop]) {
			return true, false
		}
		h.AppendChild(h, s.text(text.NewSegment(from, stop)))
	}
	if !s.closeParagraph() {
		return true, false
	}
	s.doc.AppendChild(s.doc, h)
	return true, true
}

// headingText returns the text of a heading's content src[from:stop]
// (trimmed, not empty) without its closing sequence, as goldmark's ATX
// heading parser cuts it; from == stop when nothing is left.
func headingText(src []byte, from, stop int) (int, int) {
	line := src[from:stop]
	i := len(line) - 1
	for ; line[i] == '#' && i > 0; i-- {
	}
	if i == 0 && line[0] == '#' {
		return from, from
	}
	n := len(line)
	if i != n-1 && line[i] == ' ' {
		n = i
		for n > 0 && line[n-1] == ' ' {
			n--
		}
	}
	return from, from + n
}

// openComment opens an HTML comment block (goldmark's HTML block type 2)
// on the line. A block whose first line holds its end is complete.
func (s *mdScanner) openComment(start, next int) {
	b := ast.NewHTMLBlock(ast.HTMLBlockType2)
	b.SetPos(start)
	b.Lines().Append(text.NewSegment(start, next))
	s.doc.AppendChild(s.doc, b)
	if !bytes.Contains(s.src[start:next], commentClose) {
		s.comment = b
	}
}

// commentLine adds a line to the open comment block: its closure line if
// it holds the comment's end, else one of its lines.
func (s *mdScanner) commentLine(start, next int) {
	seg := text.NewSegment(start, next)
	if bytes.Contains(seg.Value(s.src), commentClose) {
		s.comment.ClosureLine = seg
		s.comment = nil
		return
	}
	s.comment.Lines().Append(seg)
}

// openFence is a fenced code block being scanned.
type openFence struct {
	node   *ast.FencedCodeBlock
	char   byte // '`' or '~'
	length int  // of the opening fence
	info   [2]int
}

// parseFence reads the opening fence of a code block on a line (with its
// newline), nil if the line has none; it mirrors goldmark's parser.
func parseFence(line []byte) *openFence {
	c := line[0]
	if c != '`' && c != '~' {
		return nil
	}
	n := 0
	for n < len(line) && line[n] == c {
		n++
	}
	if n < 3 {
		return nil
	}
	f := &openFence{char: c, length: n}
	if n < len(line)-1 {
		rest := line[n:]
		left, right := len(rest)-len(bytes.TrimLeft(rest, " \t\n")), len(rest)-len(bytes.TrimRight(rest, " \t\n"))
		if left < len(rest)-right {
			if c == '`' && bytes.IndexByte(rest[left:len(rest)-right], '`') >= 0 {
				return nil // a code span, in a paragraph
			}
			f.info = [2]int{n + left, len(line) - right}
		}
	}
	return f
}

// openCode opens the fenced code block f on the line that starts at start.
func (s *mdScanner) openCode(start int, f *openFence) {
	var info *ast.Text
	if f.info[0] < f.info[1] {
		info = s.text(text.NewSegment(start+f.info[0], start+f.info[1]))
	}
	f.node = ast.NewFencedCodeBlock(info)
	f.node.SetPos(start)
	s.doc.AppendChild(s.doc, f.node)
	s.code = f
}

// codeLine adds a line to the open code block, or closes the block on a
// closing fence: of its character, as long as the opening one or longer,
// indented less than four columns and followed by nothing but spaces.
func (s *mdScanner) codeLine(start, end, next int) {
	line := s.src[start:end]
	i := 0
	for i < len(line) && i < 4 && line[i] == ' ' {
		i++
	}
	if i < 4 {
		n := i
		for n < len(line) && line[n] == s.code.char {
			n++
		}
		if n-i >= s.code.length && len(bytes.Trim(line[n:], " \t")) == 0 {
			s.code = nil
			return
		}
	}
	seg := text.NewSegment(start, next)
	seg.ForceNewline = true
	s.code.node.Lines().Append(seg)
}

// openList is a list being scanned: bullet or ordered list items at
// column 0, each one line of plain content.
type openList struct {
	node  *ast.List
	blank bool // a blank line follows the last item
	words bool // an item has a word (see hasWord)
}

// listItem is a list item's line: its marker ('-', '+', '*', or '.' or
// ')' after the number), start number (-1 for a bullet) and the offset
// of its content, 0 if the item is outside the subset.
type listItem struct {
	marker  byte
	start   int
	content int
}

// parseListItem reads a line that goldmark takes for a list item. The
// subset's items have one space after the marker and content that
// starts no block of its own, nor a task check box or a link reference
// definition.
func parseListItem(line []byte) (it listItem, isItem bool) {
	n := leadingDigits(line)
	switch {
	case n == 0 && (line[0] == '-' || line[0] == '+' || line[0] == '*'):
		it = listItem{marker: line[0], start: -1}
	case n > 0 && n < len(line) && (line[n] == '.' || line[n] == ')'):
		if n > 9 {
			return it, false
		}
		it = listItem{marker: line[n], start: atoi(line[:n])}
	default:
		return it, false
	}
	m := n // the marker's offset
	if m+1 < len(line) && line[m+1] != ' ' {
		return it, false
	}
	if m+2 < len(line) {
		if c := line[m+2]; c != ' ' && c != '#' && c != '[' && !startsBlock(line[m+2:]) {
			it.content = m + 2
		}
	}
	return it, true
}

func atoi(digits []byte) int {
	n := 0
	for _, c := range digits {
		n = 10*n + int(c-'0')
	}
	return n
}

// listItem adds an item to the open list, or to a new one when it is not
// of the open list's kind. It reports false for an ordered item that
// does not start at 1 right after a paragraph, which continues the
// paragraph instead.
func (s *mdScanner) listItem(start, end int, it listItem) bool {
	l := s.list
	if l == nil || !l.node.CanContinue(it.marker, it.start >= 0) {
		if len(s.para) > 0 && it.start >= 0 && it.start != 1 {
			return false
		}
		if !s.closeParagraph() || l != nil && !s.closeList(nil) {
			return false
		}
		l = &openList{node: ast.NewList(it.marker)}
		if it.start >= 0 {
			l.node.Start = it.start
		}
		l.node.SetPos(start)
		s.doc.AppendChild(s.doc, l.node)
		s.list = l
	}
	if l.blank && l.node.HasChildren() {
		l.node.IsTight = false
	}
	l.blank = false
	item := ast.NewListItem(it.content)
	item.SetPos(start)
	p := ast.NewParagraph()
	seg := text.NewSegment(start+it.content, end)
	seg = seg.TrimRightSpace(s.src)
	p.Lines().Append(seg)
	p.AppendChild(p, s.text(seg))
	item.AppendChild(item, p)
	l.node.AppendChild(l.node, item)
	l.words = l.words || hasWord(seg.Value(s.src))
	return true
}

// closeList closes the open list before line, nil at the end of the
// document or before another list. Right after an item only a heading, a
// comment or a code fence does: other lines continue the item's paragraph
// (and are outside the subset). Like goldmark it makes the paragraphs of
// a tight list text blocks.
func (s *mdScanner) closeList(line []byte) bool {
	l := s.list
	s.list = nil
	if line != nil && !l.blank && !bytes.HasPrefix(line, commentOpen) && !isATXHeading(line) && parseFence(line) == nil {
		return false
	}
	if l.node.IsTight {
		for item := l.node.FirstChild(); item != nil; item = item.NextSibling() {
			p := item.FirstChild()
			tb := ast.NewTextBlock()
			tb.SetLines(p.Lines())
			tb.AppendChild(tb, p.FirstChild())
			item.ReplaceChild(item, p, tb)
		}
	}
	return l.words
}

// isATXHeading reports whether a line is an ATX heading.
func isATXHeading(line []byte) bool {
	level := 0
	for level < len(line) && line[level] == '#' {
		level++
	}
	return level <= 6 && (level == len(line) || line[level] == ' ')
}

// closeParagraph adds the open paragraph, if any, the way goldmark's
// table extension transforms it: its lines from a header row followed by
// a delimiter row on are a table. It reports false when the paragraph
// or the table is outside the subset.
func (s *mdScanner) closeParagraph() bool {
	lines := s.para
	if len(lines) == 0 {
		return true
	}
	s.para = s.para[:0]
	pos := lines[0].Start
	for i := 1; i < len(lines); i++ {
		aligns := parseDelimiterRow(lines[i].Value(s.src))
		if aligns == nil {
			continue
		}
		if bytes.IndexByte(lines[i-1].Value(s.src), '\\') >= 0 {
			// An escaped pipe would change the header's cell count.
			return false
		}
		header, plain := s.tableRow(lines[i-1], aligns, true)
		if header.ChildCount() != len(aligns) {
			break
		}
		tbl := east.NewTable()
		tbl.Alignments = aligns
		tbl.SetPos(pos)
		tbl.AppendChild(tbl, east.NewTableHeader(header))
		for _, l := range lines[i+1:] {
			row, ok := s.tableRow(l, aligns, false)
			tbl.AppendChild(tbl, row)
			plain = plain && ok
		}
		if !plain || !s.addParagraph(lines[:i-1]) {
			return false
		}
		s.doc.AppendChild(s.doc, tbl)
		return true
	}
	return s.addParagraph(lines)
}

// addParagraph adds a paragraph of the lines, one text per line. Its
// inline markup is left unparsed: the contract only asks whether it has
// content, which a letter or digit outside markup settles.
func (s *mdScanner) addParagraph(lines []text.Segment) bool {
	if len(lines) == 0 {
		return true
	}
	p := ast.NewParagraph() // its position is its first line's
	content := false
	for _, l := range lines {
		l = l.TrimLeftSpace(s.src)
		l = l.TrimRightSpace(s.src)
		content = content || hasWord(l.Value(s.src))
		p.Lines().Append(l)
		p.AppendChild(p, s.text(l))
	}
	s.doc.AppendChild(s.doc, p)
	return content
}

// hasWord reports whether the text holds a letter or digit that no
// inline markup of goldmark's can hide: outside an entity or a character
// reference (HTML comments, which could, are outside the subset).
func hasWord(b []byte) bool {
	for i := 0; i < len(b); i++ {
		if !isAlnum(b[i]) {
			continue
		}
		if i == 0 || (b[i-1] != '&' && b[i-1] != '#') {
			return true
		}
		for i < len(b) && isAlnum(b[i]) {
			i++
		}
	}
	return false
}

func isAlnum(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
}

// plainInline reports whether goldmark's inline parser reads b as plain
// text, whose plain text is b itself: nothing that could be code,
// emphasis, strikethrough, a link, HTML, an escape, or an entity (which
// needs a ';' after its '&'). Bare URLs it may turn into links print as
// they are written.
func plainInline(b []byte) bool {
	amp := false
	for i, c := range b {
		switch c {
		case '`', '\\', '*', '[', '<', '~':
			return false
		case '&':
			amp = true
		case ';':
			if amp {
				return false
			}
		case '_':
			// Only inside a word can '_' not delimit emphasis.
			if i == 0 || i == len(b)-1 || !isAlnum(b[i-1]) || !isAlnum(b[i+1]) {
				return false
			}
		}
	}
	return true
}

// parseDelimiterRow returns the alignments of a table's delimiter row, nil
// if the line is not one; it mirrors goldmark's table extension.
func parseDelimiterRow(line []byte) []east.Alignment {
	if !isTableDelimiter(line) {
		return nil
	}
	cols := bytes.Split(line, []byte{'|'})
	if isBlankLine(bytes.TrimRight(cols[0], "\n")) {
		cols = cols[1:]
	}
	if len(cols) > 0 && isBlankLine(bytes.TrimRight(cols[len(cols)-1], "\n")) {
		cols = cols[:len(cols)-1]
	}
	var aligns []east.Alignment
	for _, col := range cols {
		a, ok := columnAlignment(col)
		if !ok {
			return nil
		}
		aligns = append(aligns, a)
	}
	return aligns
}

// isTableDelimiter mirrors goldmark's test of a delimiter row's bytes, for
// lines without leading spaces.
func isTableDelimiter(line []byte) bool {
	allDashes := true
	for _, c := range line {
		if c != '-' {
			allDashes = false
		}
		if c != ' ' && c != '\n' && c != '-' && c != '|' && c != ':' {
			return false
		}
	}
	return !allDashes
}

// columnAlignment reads one column of a delimiter row: dashes with an
// optional colon on either side, spaces around.
func columnAlignment(col []byte) (east.Alignment, bool) {
	col = bytes.Trim(col, " \n")
	left := len(col) > 0 && col[0] == ':'
	if left {
		col = col[1:]
	}
	right := len(col) > 0 && col[len(col)-1] == ':'
	if right {
		col = col[:len(col)-1]
	}
	if len(col) == 0 || !onlyBytes(col, '-', '-') {
		return east.AlignNone, false
	}
	switch {
	case left && right:
		return east.AlignCenter, true
	case left:
		return east.AlignLeft, true
	case right:
		return east.AlignRight, true
	}
	return east.AlignNone, true
}

// tableRow splits a row into cells as goldmark's table extension does: a
// body row's cells past the header's are dropped, missing ones are empty.
// Cells hold one text each; it reports whether they are all plain (a
// row with escaped pipes is not, by its backslash).
func (s *mdScanner) tableRow(seg text.Segment, aligns []east.Alignment, isHeader bool) (*east.TableRow, bool) {
	rowPos := seg.Start
	seg = seg.TrimLeftSpace(s.src)
	seg = seg.TrimRightSpace(s.src)
	line := seg.Value(s.src)
	pos, limit := 0, len(line)
	if len(line) > 0 && line[0] == '|' {
		pos++
	}
	if len(line) > 0 && line[limit-1] == '|' {
		limit--
	}
	row := east.NewTableRow(aligns)
	row.SetPos(rowPos)
	plain := true
	i := 0
	for ; pos < limit; i++ {
		align := east.AlignNone
		if i < len(aligns) {
			align = aligns[i]
		} else if !isHeader {
			return row, plain
		}
		closure := pos
		for closure < limit && line[closure] != '|' {
			closure++
		}
		cell := s.cell(align)
		cell.SetPos(seg.Start + pos)
		c := text.NewSegment(seg.Start+pos, seg.Start+closure)
		c = c.TrimLeftSpace(s.src)
		c = c.TrimRightSpace(s.src)
		if c.Len() > 0 {
			plain = plain && plainInline(c.Value(s.src))
			cell.AppendChild(cell, s.text(c))
		}
		row.AppendChild(row, cell)
		pos = closure + 1
	}
	for ; i < len(aligns); i++ {
		row.AppendChild(row, s.cell(east.AlignNone))
	}
	return row, plain
}

func (s *mdScanner) cell(align east.Alignment) *east.TableCell {
	c := s.cells.next()
	c.Alignment = align
	return c
}
