package dashboard

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/net/html"

	"github.com/agentrunner/agentrunner"
	"github.com/agentrunner/agentrunner/internal/runtest"
)

// TestPagesAreAccessible renders every page for an admin and checks the
// basics a screen reader and a keyboard need: a title, the main landmark
// and navigation, a label for every form field, and actions that are
// links or buttons (reachable with Tab, taken with Enter).
func TestPagesAreAccessible(t *testing.T) {
	w := newWorldWith(t, true, worldSetup{workspace: planWorkspace(t)})
	run := w.startRun(false)
	w.waitFor("the gate", func() bool { return w.gateWaits(run) })
	storeArtifact(t, w, run, "draft", 1, "draft.md", "# Draft\n\nHello.\n")
	storeArtifact(t, w, run, "draft", 1, "plan.json", `{"goal": ""}`)
	seedCapsules(t, w)
	b := w.browser()
	b.login(adminKey)
	paths := []string{"/capsules", "/capsules?q=kubernetes", "/capsules?workspace=shop&tag=api", "/capsules/1", "/capsules/1?raw=1",
		"/", "/runs", "/runs?status=running", "/runs/" + run, "/runs/" + run + "/artifacts/draft.md", "/runs/" + run + "/artifacts/plan.json",
		"/runs/" + run + "/steps/draft/attempts/1", "/gates", "/errors", "/errors?type=escalation", "/audit", "/tools",
		"/mailboxes", "/memory", "/charts", "/confirm?action=pause", "/confirm?action=inject", "/confirm?action=reload",
		"/confirm?action=route&run=" + run + "&step=signoff", "/confirm?action=answer&run=" + run + "&step=signoff"}
	for _, path := range paths {
		p := b.get(path)
		if p.status != http.StatusOK {
			t.Errorf("GET %s: %d\n%s", path, p.status, p.body)
			continue
		}
		for _, problem := range a11yProblems(t, p.body) {
			t.Errorf("GET %s: %s", path, problem)
		}
	}
	if p := b.get("/login"); p.status != http.StatusOK {
		t.Errorf("GET /login while signed in: %d", p.status)
	}
	login := w.browser().get("/login")
	for _, problem := range a11yProblems(t, login.body) {
		t.Errorf("GET /login: %s", problem)
	}
}

// a11yProblems lists what a page lacks of the accessibility basics.
func a11yProblems(t *testing.T, page string) []string {
	t.Helper()
	doc, err := html.Parse(strings.NewReader(page))
	if err != nil {
		t.Fatal(err)
	}
	var problems []string
	labels, ids := map[string]bool{}, map[string]bool{}
	var fields []*html.Node
	var title string
	landmarks := map[string]bool{}
	var walk func(*html.Node)
	walk = func(n *html.Node) {
		if n.Type == html.ElementNode {
			switch n.Data {
			case "title":
				if n.FirstChild != nil {
					title = n.FirstChild.Data
				}
			case "main", "nav", "header", "footer":
				landmarks[n.Data] = true
			case "label":
				labels[attr(n, "for")] = true
			case "input", "select", "textarea":
				if attr(n, "type") != "hidden" {
					fields = append(fields, n)
				}
			case "a":
				if strings.Contains(attr(n, "class"), "action") && attr(n, "href") == "" {
					problems = append(problems, "an action link without href is not reachable by keyboard")
				}
			case "div", "span", "td":
				if attr(n, "onclick") != "" {
					problems = append(problems, "a click handler on a "+n.Data)
				}
			}
			if id := attr(n, "id"); id != "" {
				if ids[id] {
					problems = append(problems, "the id "+id+" is used twice")
				}
				ids[id] = true
			}
		}
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			walk(c)
		}
	}
	walk(doc)
	if strings.TrimSpace(title) == "" {
		problems = append(problems, "no <title>")
	}
	for _, l := range []string{"main", "header"} {
		if !landmarks[l] {
			problems = append(problems, "no <"+l+"> landmark")
		}
	}
	for _, f := range fields {
		if id := attr(f, "id"); id == "" || !labels[id] {
			problems = append(problems, "a <"+f.Data+" name="+attr(f, "name")+"> without a <label for>")
		}
	}
	return problems
}

func attr(n *html.Node, key string) string {
	for _, a := range n.Attr {
		if a.Key == key {
			return a.Val
		}
	}
	return ""
}

// storeArtifact commits a stored artifact for a run's step, as a step's
// success does.
func storeArtifact(t testing.TB, w *world, run, step string, attempt int, name, content string) {
	t.Helper()
	f := &agentrunner.StoredFile{RunID: run, Step: step, Visit: 1, Attempt: attempt, Kind: agentrunner.FileArtifact, Name: name,
		Data: []byte(content), Size: int64(len(content)), SHA256: strings.Repeat("ab", 32), CreatedAt: time.Now().UTC()}
	if err := w.store.Apply(t.Context(), &agentrunner.Change{Files: []*agentrunner.StoredFile{f}}); err != nil {
		t.Fatal(err)
	}
}

// TestArtifactIsInert: an agent's markdown with a script, an event
// handler, an iframe and links to javascript: and data: URLs is shown
// without any of them; a page a browser would run nothing from.
func TestArtifactIsInert(t *testing.T) {
	w := newWorld(t, true)
	run := w.startRun(false)
	w.waitFor("the gate", func() bool { return w.gateWaits(run) })
	storeArtifact(t, w, run, "draft", 1, "draft.md", xssMarkdown)
	b := w.browser()
	b.login(viewerKey)
	p := b.get("/runs/" + run + "/artifacts/draft.md")
	if p.status != http.StatusOK {
		t.Fatalf("GET the artifact: %d", p.status)
	}
	for _, problem := range activeContent(t, p.body) {
		t.Errorf("the artifact page has %s", problem)
	}
	if !strings.Contains(p.body, "<h1>Findings</h1>") || !strings.Contains(p.body, `href="https://example.com/ok"`) {
		t.Errorf("the artifact's safe markdown is not rendered:\n%s", p.body)
	}
	if csp := p.header.Get("Content-Security-Policy"); !strings.Contains(csp, "script-src 'self'") {
		t.Errorf("Content-Security-Policy %q does not limit scripts to the dashboard's", csp)
	}
}

// activeContent lists what in a page could run a script: a script
// element other than the dashboard's own, an iframe, object or embed, an
// event handler attribute, or a URL attribute with a scheme that runs or
// embeds content.
func activeContent(t *testing.T, page string) []string {
	t.Helper()
	doc, err := html.Parse(strings.NewReader(page))
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	var walk func(*html.Node)
	walk = func(n *html.Node) {
		if n.Type == html.ElementNode {
			switch n.Data {
			case "script":
				if attr(n, "src") != "/static/dash.js" {
					out = append(out, "a script element")
				}
			case "iframe", "object", "embed":
				out = append(out, "an "+n.Data)
			}
			for _, a := range n.Attr {
				v := strings.ToLower(strings.TrimSpace(a.Val))
				switch {
				case strings.HasPrefix(a.Key, "on"):
					out = append(out, "the attribute "+a.Key+" on a "+n.Data)
				case (a.Key == "href" || a.Key == "src" || a.Key == "action" || a.Key == "formaction") &&
					(strings.HasPrefix(v, "javascript:") || strings.HasPrefix(v, "data:") || strings.HasPrefix(v, "vbscript:")):
					out = append(out, a.Key+"="+a.Val+" on a "+n.Data)
				}
			}
		}
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			walk(c)
		}
	}
	walk(doc)
	return out
}

// xssMarkdown is an agent's output that tries every way to run a script.
const xssMarkdown = "# Findings\n\n<script>alert('xss')</script>\n\n" +
	"<img src=x onerror=\"alert('img')\">\n\n<iframe src=\"https://evil.example\"></iframe>\n\n" +
	"[click me](javascript:alert('link'))\n\n[again](JaVaScRiPt:alert(1))\n\n[tabbed](java\tscript:alert(1))\n\n" +
	"[data](data:text/html;base64,PHNjcmlwdD5hbGVydCgxKTwvc2NyaXB0Pg==)\n\n![pic](javascript:alert('img'))\n\n" +
	"<javascript:alert(2)>\n\n[vb](vbscript:msgbox(1))\n\n[fine](https://example.com/ok)\n"

// TestMarkdownNeutralisesLinks: links keep http, https, mailto and
// relative destinations only.
func TestMarkdownNeutralisesLinks(t *testing.T) {
	tests := []struct {
		name, in, want string
	}{
		{"https", "[a](https://example.com/x)", `<p><a href="https://example.com/x">a</a></p>`},
		{"relative", "[a](/runs/x)", `<p><a href="/runs/x">a</a></p>`},
		{"mailto", "[a](mailto:ops@example.com)", `<p><a href="mailto:ops@example.com">a</a></p>`},
		{"javascript", "[a](javascript:alert(1))", `<p><a href="#">a</a></p>`},
		{"mixed case", "[a](JavaScript:alert(1))", `<p><a href="#">a</a></p>`},
		{"entity", "[a](javascript&#58;alert(1))", `<p><a href="#">a</a></p>`},
		{"data", "[a](data:text/html,hi)", `<p><a href="#">a</a></p>`},
		{"data image", "![a](data:image/png;base64,AAAA)", `<p><img src="#" alt="a"></p>`},
		{"file", "[a](file:///etc/passwd)", `<p><a href="#">a</a></p>`},
		{"autolink", "<javascript:alert(1)>", `<p>javascript:alert(1)</p>`},
		{"raw html", "<b onclick=x>hi</b>", `<p><!-- raw HTML omitted -->hi<!-- raw HTML omitted --></p>`},
		{"script block", "<script>alert(1)</script>", `<!-- raw HTML omitted -->`},
	}
	var got, want []string
	for _, tc := range tests {
		got = append(got, tc.name+": "+strings.TrimSpace(string(renderMarkdown([]byte(tc.in)))))
		want = append(want, tc.name+": "+tc.want)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("renderMarkdown (-want +got):\n%s", diff)
	}
}

// TestLineDiff: a line diff keeps the common lines and marks the others.
func TestLineDiff(t *testing.T) {
	tests := []struct {
		name, a, b string
		want       []diffLine
	}{
		{"same", "a\nb\n", "a\nb\n", []diffLine{{diffSame, 1, 1, "a"}, {diffSame, 2, 2, "b"}}},
		{"changed", "a\nb\nc\n", "a\nB\nc\n", []diffLine{{diffSame, 1, 1, "a"}, {diffDel, 2, 0, "b"}, {diffAdd, 0, 2, "B"}, {diffSame, 3, 3, "c"}}},
		{"added", "a\n", "a\nb\n", []diffLine{{diffSame, 1, 1, "a"}, {diffAdd, 0, 2, "b"}}},
		{"from nothing", "", "x\n", []diffLine{{diffAdd, 0, 1, "x"}}},
		{"moved", "x\ny\nz\n", "y\nz\nx\n", []diffLine{{diffDel, 1, 0, "x"}, {diffSame, 2, 1, "y"}, {diffSame, 3, 2, "z"}, {diffAdd, 0, 3, "x"}}},
	}
	for _, tc := range tests {
		got, ok := lineDiff(tc.a, tc.b)
		if !ok {
			t.Fatalf("%s: too large", tc.name)
		}
		if diff := cmp.Diff(tc.want, got); diff != "" {
			t.Errorf("%s (-want +got):\n%s", tc.name, diff)
		}
	}
	if _, ok := lineDiff(strings.Repeat("a\n", maxDiffLines+1), strings.Repeat("b\n", maxDiffLines+1)); ok {
		t.Error("two long, different texts were diffed")
	}
}

// TestArtifactDiff: two versions of an artifact are compared line by
// line on its page.
func TestArtifactDiff(t *testing.T) {
	w := newWorld(t, true)
	run := w.startRun(false)
	w.waitFor("the gate", func() bool { return w.gateWaits(run) })
	storeArtifact(t, w, run, "draft", 1, "draft.md", "# Draft\n\nfirst line\nkept\n")
	storeArtifact(t, w, run, "draft", 2, "draft.md", "# Draft\n\nsecond line\nkept\n")
	b := w.browser()
	b.login(viewerKey)
	p := b.get("/runs/" + run + "/artifacts/draft.md?step=draft&attempt=2&with_step=draft&with_attempt=1")
	if p.status != http.StatusOK {
		t.Fatalf("the diff: %d\n%s", p.status, p.body)
	}
	for _, want := range []string{"1 lines added, 1 deleted", `class="d-del"`, "− first line", "+ second line"} {
		if !strings.Contains(p.body, want) {
			t.Errorf("the diff lacks %q", want)
		}
	}
}

// TestGraphLayout: the review pipeline is laid out left to right, its
// loop drawn as one, and the run's state marks the steps.
func TestGraphLayout(t *testing.T) {
	p := runtest.ReviewPipeline()
	p.Steps["fix"] = &agentrunner.Step{ID: "fix", Kind: runtest.KindScript, Next: "draft", MaxVisits: 3}
	p.Steps["signoff"].Routes = []agentrunner.Route{{When: "approve", To: "publish"}, {When: "reject", To: "fix"}}
	l := newLayout(p)
	got := map[string]int{}
	for id, n := range l.nodes {
		got[id] = n.layer
	}
	want := map[string]int{"draft": 0, "signoff": 1, "publish": 2, "fix": 2, agentrunner.EndStep: 3}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("layers (-want +got):\n%s", diff)
	}
	loops := 0
	for i := range l.edges {
		if l.back[i] {
			loops++
			if e := l.edges[i]; e.From != "fix" || e.To != "draft" {
				t.Errorf("edge %s → %s is taken for a loop", e.From, e.To)
			}
		}
	}
	if loops != 1 {
		t.Errorf("%d loops, want 1 (fix → draft)", loops)
	}
	svg := string(drawGraph(p, map[string]stepState{"draft": {Visits: 2, Status: agentrunner.StepRunSucceeded},
		"signoff": {Visits: 2, Status: agentrunner.StepRunWaiting}, "fix": {Visits: 1, Status: agentrunner.StepRunSucceeded}}))
	for _, want := range []string{`class="node st-waiting current" data-step="signoff"`, `class="node unvisited" data-step="publish"`,
		"visit 1/3", "×2", "now at signoff", "edge-loop"} {
		if !strings.Contains(svg, want) {
			t.Errorf("the graph lacks %q", want)
		}
	}
}
