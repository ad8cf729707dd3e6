package webfetch

import (
	"bytes"
	"errors"
	"mime"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"unicode/utf8"

	readability "codeberg.org/readeck/go-readability/v2"
	"codeberg.org/readeck/go-readability/v2/render"
	htmltomarkdown "github.com/JohannesKaufmann/html-to-markdown/v2/converter"
	"github.com/JohannesKaufmann/html-to-markdown/v2/plugin/base"
	"github.com/JohannesKaufmann/html-to-markdown/v2/plugin/commonmark"
	"github.com/JohannesKaufmann/html-to-markdown/v2/plugin/strikethrough"
	"github.com/JohannesKaufmann/html-to-markdown/v2/plugin/table"
	"golang.org/x/net/html"
	"golang.org/x/net/html/charset"
	"golang.org/x/text/encoding"
)

// Output formats of HTML pages (FR-121).
const (
	FormatMarkdown = "markdown"
	FormatText     = "text"
)

// kind is what a body is, for what to do with it.
type kind int

const (
	kindUnknown kind = iota // decided by sniffing the bytes
	kindHTML                // readable content is extracted
	kindText                // passed through as it is
	kindBinary              // refused
)

// classify tells HTML, text and binary apart by the declared media type.
func classify(mediaType string) kind {
	switch mt := mediaType; {
	case mt == "text/html" || mt == "application/xhtml+xml":
		return kindHTML
	case strings.HasPrefix(mt, "text/"):
		return kindText
	case mt == "application/json" || strings.HasSuffix(mt, "+json") ||
		mt == "application/xml" || strings.HasSuffix(mt, "+xml") ||
		mt == "application/javascript" || mt == "application/x-javascript" || mt == "application/ecmascript" ||
		mt == "application/x-ndjson" || mt == "application/jsonl" ||
		mt == "application/yaml" || mt == "application/x-yaml" || mt == "application/toml" ||
		mt == "application/csv" || mt == "application/sql" || mt == "application/graphql":
		return kindText
	case strings.HasPrefix(mt, "image/"), strings.HasPrefix(mt, "audio/"), strings.HasPrefix(mt, "video/"),
		strings.HasPrefix(mt, "font/"), strings.HasPrefix(mt, "model/"),
		mt == "application/octet-stream", mt == "application/pdf", mt == "application/zip",
		mt == "application/gzip", mt == "application/x-gzip", mt == "application/x-tar",
		mt == "application/x-7z-compressed", mt == "application/x-rar-compressed", mt == "application/vnd.rar",
		mt == "application/x-bzip2", mt == "application/zstd", mt == "application/wasm",
		mt == "application/msword", mt == "application/java-archive", mt == "application/x-msdownload",
		mt == "application/x-shockwave-flash", mt == "application/postscript",
		strings.HasPrefix(mt, "application/vnd.") && !strings.HasSuffix(mt, "+json") && !strings.HasSuffix(mt, "+xml"):
		return kindBinary
	}
	return kindUnknown
}

// mediaType is the lower-case media type of a Content-Type header, "" if
// there is none or it cannot be parsed.
func mediaType(contentType string) string {
	mt, _, err := mime.ParseMediaType(contentType)
	if err != nil {
		// A bad parameter still leaves a usable type ("text/html; charset").
		mt, _, _ = strings.Cut(contentType, ";")
	}
	return strings.ToLower(strings.TrimSpace(mt))
}

// looksBinary reports whether the start of a body is not text: a known
// binary signature or control bytes that text does not have.
func looksBinary(body []byte) bool {
	sniffed := http.DetectContentType(body)
	return !strings.HasPrefix(sniffed, "text/")
}

// document is a fetched body made readable.
type document struct {
	Title   string
	Content string
}

// binaryError is a body that web_fetch does not read.
type binaryError struct{ mediaType string }

func (e *binaryError) Error() string {
	if e.mediaType == "" {
		return "the content is binary, not text or HTML, so web_fetch cannot read it"
	}
	return "the content is " + e.mediaType + ", not text or HTML, so web_fetch cannot read it"
}

// convert turns a body into text for a model: HTML is decoded from its
// charset, reduced to its readable content and rendered as markdown or
// text; text types are decoded and passed through; binary is refused. It
// never panics and always returns valid UTF-8.
func convert(body []byte, contentType string, page *url.URL, format string) (document, error) {
	mt := mediaType(contentType)
	k := classify(mt)
	if k == kindBinary {
		return document{}, &binaryError{mediaType: mt}
	}
	if looksBinary(body) && !declaredUTF16(contentType) {
		return document{}, &binaryError{mediaType: sniffedType(body, mt)}
	}
	if k == kindUnknown {
		k = kindText
		if mediaType(http.DetectContentType(body)) == "text/html" {
			k = kindHTML
		}
	}
	if k == kindText {
		return document{Content: decodeText(body, contentType)}, nil
	}
	return extractHTML(decodeHTML(body, contentType), page, format), nil
}

// declaredUTF16 reports a UTF-16 charset in the Content-Type: such text is
// full of zero bytes that would otherwise look binary.
func declaredUTF16(contentType string) bool {
	_, params, err := mime.ParseMediaType(contentType)
	return err == nil && strings.HasPrefix(strings.ToLower(params["charset"]), "utf-16")
}

// sniffedType names binary content for the error: the sniffed type when it
// is more telling than the declared one.
func sniffedType(body []byte, declared string) string {
	s := mediaType(http.DetectContentType(body))
	if s == "application/octet-stream" && declared != "" {
		return declared + " (with binary bytes)"
	}
	return s
}

// decodeHTML converts an HTML body to UTF-8 using, in order, a byte-order
// mark, the Content-Type charset, a <meta charset> in the first kilobyte,
// and UTF-8 validity (else windows-1252), as browsers do.
func decodeHTML(body []byte, contentType string) string {
	enc, _, _ := charset.DetermineEncoding(body, contentType)
	return decode(body, enc)
}

// decodeText converts a text body to UTF-8: a byte-order mark, else the
// Content-Type charset, else UTF-8 when it is valid, else windows-1252. No
// <meta> is looked for: it is not HTML.
func decodeText(body []byte, contentType string) string {
	var enc encoding.Encoding
	switch {
	case bytes.HasPrefix(body, []byte{0xEF, 0xBB, 0xBF}):
		enc, _ = charset.Lookup("utf-8")
	case bytes.HasPrefix(body, []byte{0xFE, 0xFF}):
		enc, _ = charset.Lookup("utf-16be")
	case bytes.HasPrefix(body, []byte{0xFF, 0xFE}):
		enc, _ = charset.Lookup("utf-16le")
	}
	if enc == nil {
		if _, params, err := mime.ParseMediaType(contentType); err == nil && params["charset"] != "" {
			enc, _ = charset.Lookup(params["charset"])
		}
	}
	if enc == nil {
		if utf8.Valid(body) {
			return strings.TrimPrefix(string(body), "\uFEFF")
		}
		enc, _ = charset.Lookup("windows-1252")
	}
	return decode(body, enc)
}

// dropPartialRune removes an incomplete UTF-8 sequence at the end of a
// body cut at the size cap, so that UTF-8 text stays valid UTF-8 (in
// other encodings it costs at most three bytes of a truncated body).
func dropPartialRune(body []byte) []byte {
	for i := 1; i < utf8.UTFMax && i <= len(body); i++ {
		b := body[len(body)-i]
		if b < utf8.RuneSelf {
			return body
		}
		if utf8.RuneStart(b) {
			if r, size := utf8.DecodeRune(body[len(body)-i:]); r == utf8.RuneError && size <= 1 && !utf8.FullRune(body[len(body)-i:]) {
				return body[:len(body)-i]
			}
			return body
		}
	}
	return body
}

// decode converts body from enc to valid UTF-8, without a byte-order mark.
func decode(body []byte, enc encoding.Encoding) string {
	out := body
	if enc != nil && enc != encoding.Nop {
		if b, err := enc.NewDecoder().Bytes(body); err == nil {
			out = b
		}
	}
	return strings.TrimPrefix(strings.ToValidUTF8(string(out), "\uFFFD"), "\uFEFF")
}

// minReadable is the text length below which a page is shown whole:
// readability needs that much text to tell an article from the page
// around it (its own threshold), and a page that small has little
// boilerplate worth removing.
const minReadable = 500

// maxElements bounds the pages readability analyses: its passes grow with
// the element count, and a page beyond this (a huge listing, a generated
// dump) is rendered whole instead, which is linear.
const maxElements = 60000

// extractHTML reduces a page to its readable content (FR-120) and renders
// it. Readability picks the article; when it finds nothing, the page is
// tiny, or readability fails, the whole body is rendered instead, so even
// malformed HTML yields its text (FR-122).
func extractHTML(page string, pageURL *url.URL, format string) document {
	root, err := html.Parse(strings.NewReader(page))
	if err != nil {
		// html.Parse fails only when reading fails, which a string
		// cannot; strip the tags rather than return nothing.
		return document{Content: tidy(tokenText(page))}
	}
	title := documentTitle(root)
	var node *html.Node
	if countElements(root, maxElements+1) <= maxElements && textLength(bodyOf(root), minReadable) >= minReadable {
		if article, ok := readable(root, pageURL); ok {
			node = article.Node
			if t := collapse(article.Title()); t != "" {
				title = t
			}
		}
	}
	if node == nil {
		// readable changed root; start again from the page.
		root, _ = html.Parse(strings.NewReader(page))
		stripNonContent(root)
		node = bodyOf(root)
	}
	if format == FormatText {
		return document{Title: title, Content: tidy(render.InnerText(node))}
	}
	md, err := markdown(node, pageURL)
	if err != nil {
		return document{Title: title, Content: tidy(render.InnerText(node))}
	}
	return document{Title: title, Content: tidy(md)}
}

// readable runs readability on root (which it changes). It reports false
// when readability finds no text, or fails in any way: a heuristic over
// hostile input must not take the call down with it.
func readable(root *html.Node, pageURL *url.URL) (article readability.Article, ok bool) {
	defer func() {
		if recover() != nil {
			ok = false
		}
	}()
	p := readability.NewParser()
	p.MaxElemsToParse = maxElements
	a, err := p.ParseAndMutate(root, pageURL)
	if err != nil || a.Node == nil || strings.TrimSpace(render.InnerText(a.Node)) == "" {
		return readability.Article{}, false
	}
	return a, true
}

// markdown renders a node as CommonMark with tables and strikethrough,
// links made absolute against the page.
func markdown(node *html.Node, pageURL *url.URL) (out string, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = errConversion
		}
	}()
	conv := htmltomarkdown.NewConverter(htmltomarkdown.WithPlugins(
		base.NewBasePlugin(),
		commonmark.NewCommonmarkPlugin(),
		table.NewTablePlugin(),
		strikethrough.NewStrikethroughPlugin(),
	))
	var opts []htmltomarkdown.ConvertOptionFunc
	if pageURL != nil {
		opts = append(opts, htmltomarkdown.WithDomain(pageURL.String()))
	}
	b, err := conv.ConvertNode(node, opts...)
	if err != nil {
		return "", err
	}
	return string(b), nil
}

// errConversion is a markdown conversion that failed; text is used instead.
var errConversion = errors.New("the page could not be converted to markdown")

// countElements counts element nodes, stopping at limit.
func countElements(n *html.Node, limit int) int {
	count := 0
	var walk func(*html.Node)
	walk = func(n *html.Node) {
		for c := n.FirstChild; c != nil && count < limit; c = c.NextSibling {
			if c.Type == html.ElementNode {
				count++
			}
			walk(c)
		}
	}
	walk(n)
	return count
}

// textLength counts the non-space bytes of the text under n that a reader
// sees (not scripts or styles), stopping at limit.
func textLength(n *html.Node, limit int) int {
	count := 0
	var walk func(*html.Node)
	walk = func(n *html.Node) {
		for c := n.FirstChild; c != nil && count < limit; c = c.NextSibling {
			switch {
			case c.Type == html.TextNode:
				for i := 0; i < len(c.Data); i++ {
					if b := c.Data[i]; b != ' ' && b != '\n' && b != '\t' && b != '\r' && b != '\f' {
						count++
					}
				}
			case c.Type == html.ElementNode && !nonContent[c.Data]:
				walk(c)
			}
		}
	}
	walk(n)
	return count
}

// bodyOf returns the <body> element, or the document when there is none.
func bodyOf(root *html.Node) *html.Node {
	if b := find(root, "body"); b != nil {
		return b
	}
	return root
}

// find returns the first element with the tag, depth first.
func find(n *html.Node, tag string) *html.Node {
	if n.Type == html.ElementNode && n.Data == tag {
		return n
	}
	for c := n.FirstChild; c != nil; c = c.NextSibling {
		if f := find(c, tag); f != nil {
			return f
		}
	}
	return nil
}

// documentTitle is the text of <title>.
func documentTitle(root *html.Node) string {
	t := find(root, "title")
	if t == nil {
		return ""
	}
	var b strings.Builder
	for c := t.FirstChild; c != nil; c = c.NextSibling {
		if c.Type == html.TextNode {
			b.WriteString(c.Data)
		}
	}
	return collapse(b.String())
}

// nonContent are elements whose content is never text for a reader.
var nonContent = map[string]bool{
	"head": true, "script": true, "style": true, "noscript": true, "template": true,
	"iframe": true, "object": true, "embed": true, "svg": true, "canvas": true,
}

// stripNonContent removes scripts, styles and the like from the tree.
func stripNonContent(n *html.Node) {
	for c := n.FirstChild; c != nil; {
		next := c.NextSibling
		if c.Type == html.CommentNode || (c.Type == html.ElementNode && nonContent[c.Data]) {
			n.RemoveChild(c)
		} else {
			stripNonContent(c)
		}
		c = next
	}
}

// tokenText is the text of an HTML string with the tags removed.
func tokenText(page string) string {
	var b strings.Builder
	z := html.NewTokenizer(strings.NewReader(page))
	for {
		switch z.Next() {
		case html.ErrorToken:
			return b.String()
		case html.TextToken:
			b.Write(z.Text())
		}
	}
}

// collapse trims and joins whitespace runs into single spaces.
func collapse(s string) string {
	return strings.Join(strings.Fields(strings.ToValidUTF8(s, "\uFFFD")), " ")
}

var blankLines = regexp.MustCompile(`\n[ \t\x{a0}]*(\n[ \t\x{a0}]*)+\n`)

// tidy keeps at most one blank line in a row and trims the ends.
func tidy(s string) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	s = strings.ReplaceAll(s, "\r\n", "\n")
	return strings.TrimSpace(blankLines.ReplaceAllString(s, "\n\n"))
}
