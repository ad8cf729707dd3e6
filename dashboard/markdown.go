package dashboard

import (
	"bytes"
	"encoding/json"
	"html"
	"html/template"
	"net/url"
	"strings"
	"unicode"

	"github.com/yuin/goldmark"
	"github.com/yuin/goldmark/ast"
	"github.com/yuin/goldmark/extension"
	"github.com/yuin/goldmark/parser"
	"github.com/yuin/goldmark/text"
	"github.com/yuin/goldmark/util"
)

// markdown renders an agent's markdown as HTML that cannot run anything.
// An agent's output is untrusted (it may quote a web page, or be steered
// by one), so: raw HTML is dropped (goldmark without WithUnsafe writes
// "raw HTML omitted" in its place), and every link and image destination
// whose scheme is not http, https or mailto (javascript:, data:,
// vbscript:, file: …, however cased or padded) is replaced by "#". The
// page's Content-Security-Policy is a second wall behind this one.
var markdown = goldmark.New(
	goldmark.WithExtensions(extension.GFM),
	goldmark.WithParserOptions(parser.WithASTTransformers(util.Prioritized(safeLinks{}, 100))),
)

// safeLinks neutralises the destinations of links, images and autolinks
// with a scheme that is not allowed.
type safeLinks struct{}

// Transform walks the document once.
func (safeLinks) Transform(doc *ast.Document, reader text.Reader, _ parser.Context) {
	var unsafe []*ast.AutoLink
	ast.Walk(doc, func(n ast.Node, entering bool) (ast.WalkStatus, error) {
		if !entering {
			return ast.WalkContinue, nil
		}
		switch v := n.(type) {
		case *ast.Link:
			if !safeURL(string(v.Destination)) {
				v.Destination = []byte("#")
			}
		case *ast.Image:
			if !safeURL(string(v.Destination)) {
				v.Destination = []byte("#")
			}
		case *ast.AutoLink:
			if !safeURL(string(v.URL(reader.Source()))) {
				unsafe = append(unsafe, v)
			}
		}
		return ast.WalkContinue, nil
	})
	// Replaced after the walk, which a change of the tree would cut short.
	for _, v := range unsafe {
		if parent := v.Parent(); parent != nil {
			// An autolink's text is its URL: it stays, as text only.
			parent.ReplaceChild(parent, v, ast.NewString(v.Label(reader.Source())))
		}
	}
}

// safeURL reports whether a destination may be a link: a relative
// reference or an http, https or mailto URL. Control characters and
// spaces are removed first, as browsers do, so "java\tscript:" is seen as
// what a browser would run.
func safeURL(dest string) bool {
	// Entities are decoded first, as the renderer will decode them:
	// "javascript&#58;" is "javascript:".
	cleaned := strings.Map(func(r rune) rune {
		if unicode.IsControl(r) || unicode.IsSpace(r) {
			return -1
		}
		return r
	}, html.UnescapeString(dest))
	u, err := url.Parse(cleaned)
	if err != nil {
		return false
	}
	switch strings.ToLower(u.Scheme) {
	case "":
		// A relative reference: a colon before the first slash would be
		// a scheme to a browser.
		return !strings.Contains(strings.SplitN(cleaned, "/", 2)[0], ":")
	case "http", "https", "mailto":
		return true
	}
	return false
}

// renderMarkdown renders src safely; a document goldmark cannot render
// is shown as text.
func renderMarkdown(src []byte) template.HTML {
	var buf bytes.Buffer
	if err := markdown.Convert(src, &buf); err != nil {
		return template.HTML("<pre>" + template.HTMLEscapeString(string(src)) + "</pre>")
	}
	return template.HTML(buf.String())
}

// prettyJSONBytes indents a JSON document; ok is false when it is not
// valid JSON (it is then shown as it is).
func prettyJSONBytes(src []byte) (string, bool) {
	var buf bytes.Buffer
	if err := json.Indent(&buf, src, "", "  "); err != nil {
		return string(src), false
	}
	return buf.String(), true
}
