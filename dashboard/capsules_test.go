package dashboard

import (
	"fmt"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/agentrunner/agentrunner"
)

// capsuleText is a capsule's text with the six sections, body in the
// first.
func capsuleText(body string) string {
	var b strings.Builder
	for i, s := range agentrunner.CapsuleSections {
		fmt.Fprintf(&b, "## %s\n\n", s)
		if i == 0 {
			b.WriteString(body + "\n\n")
		} else {
			b.WriteString("- none\n\n")
		}
	}
	return b.String()
}

// putCapsule stores a capsule as the capsule service would, a minute
// after the one before, and returns its id.
func putCapsule(t testing.TB, w *world, c agentrunner.Capsule) int64 {
	t.Helper()
	at := time.Date(2026, 11, 1, 9, 0, 0, 0, time.UTC).Add(time.Duration(c.ID) * time.Minute)
	c.ID, c.CreatedAt, c.UpdatedAt = 0, at, at
	out, err := w.store.PutCapsule(t.Context(), &c, false)
	if err != nil {
		t.Fatal(err)
	}
	return out.ID
}

// capsuleLinks are the capsules a page links to, in the page's order.
var capsuleLinks = regexp.MustCompile(`<a href="/capsules/\d+">([^<]+)</a>`)

func linkedCapsules(body string) []string {
	var out []string
	for _, m := range capsuleLinks.FindAllStringSubmatch(body, -1) {
		out = append(out, m[1])
	}
	return out
}

// seedCapsules stores three capsules of two workspaces, oldest first.
func seedCapsules(t testing.TB, w *world) {
	t.Helper()
	putCapsule(t, w, agentrunner.Capsule{ID: 1, Workspace: "shop", Name: "plan", Phase: "design", Role: "planner", Tags: []string{"api"},
		Text: capsuleText("Design the checkout API on kubernetes.")})
	putCapsule(t, w, agentrunner.Capsule{ID: 2, Workspace: "shop", Name: "build", Phase: "build", Role: "coder", Tags: []string{"api", "db"},
		Text: capsuleText("Write the payment handlers.")})
	putCapsule(t, w, agentrunner.Capsule{ID: 3, Workspace: "blog", Name: "draft", Phase: "design", Role: "writer",
		Text: capsuleText("Outline the launch post.")})
}

// TestCapsulesList: the capsules are listed newest first, and filtered by
// workspace, phase and tag.
func TestCapsulesList(t *testing.T) {
	w := newWorld(t, true)
	seedCapsules(t, w)
	b := w.browser()
	b.login(viewerKey)
	tests := []struct {
		query string
		want  []string
	}{
		{"", []string{"draft", "build", "plan"}},
		{"?workspace=shop", []string{"build", "plan"}},
		{"?phase=design", []string{"draft", "plan"}},
		{"?workspace=shop&tag=db", []string{"build"}},
		{"?tag=api", []string{"build", "plan"}},
		{"?workspace=none", nil},
	}
	for _, tc := range tests {
		p := b.get("/capsules" + tc.query)
		if p.status != http.StatusOK {
			t.Errorf("GET /capsules%s: %d\n%s", tc.query, p.status, p.body)
			continue
		}
		if diff := cmp.Diff(tc.want, linkedCapsules(p.body)); diff != "" {
			t.Errorf("GET /capsules%s (-want +got):\n%s", tc.query, diff)
		}
	}
	for _, bad := range []string{"?before=x", "?before=0", "?workspace=" + strings.Repeat("w", maxCapsuleField+1), "?tag=a%01b",
		"?q=" + strings.Repeat("q", maxQueryLn+1)} {
		if p := b.get("/capsules" + bad); p.status != http.StatusBadRequest {
			t.Errorf("GET /capsules%s: %d, want 400", bad, p.status)
		}
	}
}

// TestCapsulesPaging: a long list is shown a page at a time, the next
// page from the last capsule of this one.
func TestCapsulesPaging(t *testing.T) {
	w := newWorld(t, true)
	for i := 1; i <= capsulesPage+1; i++ {
		putCapsule(t, w, agentrunner.Capsule{ID: int64(i), Workspace: "shop", Name: "note-" + strconv.Itoa(i), Text: capsuleText("note")})
	}
	b := w.browser()
	b.login(viewerKey)
	first := b.get("/capsules?workspace=shop")
	names := linkedCapsules(first.body)
	if len(names) != capsulesPage || names[0] != "note-"+strconv.Itoa(capsulesPage+1) {
		t.Fatalf("the first page shows %d capsules from %v", len(names), names[:min(len(names), 1)])
	}
	next := regexp.MustCompile(`href="(/capsules\?[^"]*before=\d+)"`).FindStringSubmatch(first.body)
	if next == nil {
		t.Fatal("the first page has no link to the older capsules")
	}
	second := b.get(strings.ReplaceAll(next[1], "&amp;", "&"))
	if diff := cmp.Diff([]string{"note-1"}, linkedCapsules(second.body)); diff != "" {
		t.Errorf("the second page (-want +got):\n%s", diff)
	}
	if strings.Contains(second.body, "before=") {
		t.Error("the last page links to older capsules")
	}
}

// TestCapsulesSearch: a search finds capsules by the words of their
// text, within the filters; a query the index cannot parse is explained
// on the page.
func TestCapsulesSearch(t *testing.T) {
	w := newWorld(t, true)
	seedCapsules(t, w)
	b := w.browser()
	b.login(viewerKey)
	tests := []struct {
		query string
		want  []string
	}{
		{"?q=kubernetes", []string{"plan"}},
		{"?q=payment+OR+launch", []string{"build", "draft"}},
		{"?q=launch&workspace=shop", nil},
		{"?q=handler*&phase=build", []string{"build"}},
	}
	for _, tc := range tests {
		p := b.get("/capsules" + tc.query)
		if p.status != http.StatusOK {
			t.Errorf("GET /capsules%s: %d\n%s", tc.query, p.status, p.body)
			continue
		}
		got := linkedCapsules(p.body)
		if len(got) == 2 && got[0] > got[1] { // equal ranks: order is not the point
			got[0], got[1] = got[1], got[0]
		}
		if diff := cmp.Diff(tc.want, got); diff != "" {
			t.Errorf("GET /capsules%s (-want +got):\n%s", tc.query, diff)
		}
	}
	p := b.get("/capsules?q=kubernetes")
	if !strings.Contains(p.body, "«kubernetes»") {
		t.Errorf("the hit has no snippet with the word marked:\n%s", p.body)
	}
	p = b.get("/capsules?q=%22unclosed")
	if p.status != http.StatusOK || !strings.Contains(p.body, "not valid full-text syntax") {
		t.Errorf("a query the index cannot parse: %d\n%s", p.status, p.body)
	}
}

// TestCapsulePage: a capsule's page shows its fields and its text
// rendered; a deleted one says so; a missing or malformed id is an error.
func TestCapsulePage(t *testing.T) {
	w := newWorld(t, true)
	id := putCapsule(t, w, agentrunner.Capsule{ID: 1, Workspace: "shop", Name: "plan", RunID: "20261101_090000", Phase: "design",
		Role: "planner", Tags: []string{"api", "db"}, Text: capsuleText("Use **one** queue.")})
	b := w.browser()
	b.login(viewerKey)
	path := "/capsules/" + strconv.FormatInt(id, 10)
	p := b.get(path)
	if p.status != http.StatusOK {
		t.Fatalf("GET %s: %d\n%s", path, p.status, p.body)
	}
	for _, want := range []string{"<title>Capsule plan · agentrunner</title>", `<a href="/runs/20261101_090000">20261101_090000</a>`,
		`href="/capsules?tag=api"`, `href="/capsules?tag=db"`, "<dt>Role</dt><dd>planner</dd>", "<dt>Version</dt><dd>1</dd>",
		"<h2>Objective</h2>", "<strong>one</strong>", "2026-11-01 09:01:00Z"} {
		if !strings.Contains(p.body, want) {
			t.Errorf("the capsule page lacks %q", want)
		}
	}
	if raw := b.get(path + "?raw=1"); !strings.Contains(raw.body, "Use **one** queue.") {
		t.Errorf("the source is not shown with raw=1:\n%s", raw.body)
	}
	if err := w.store.DeleteCapsule(t.Context(), id, time.Now().UTC()); err != nil {
		t.Fatal(err)
	}
	if p := b.get(path); !strings.Contains(p.body, "This capsule was deleted") {
		t.Errorf("a deleted capsule's page does not say so:\n%s", p.body)
	}
	for path, want := range map[string]int{"/capsules/999": http.StatusNotFound, "/capsules/abc": http.StatusBadRequest,
		"/capsules/0": http.StatusBadRequest, "/capsules/-3": http.StatusBadRequest} {
		if p := b.get(path); p.status != want {
			t.Errorf("GET %s: %d, want %d", path, p.status, want)
		}
	}
}

// TestCapsuleIsInert: a capsule whose text tries every way to run a
// script is shown with none of them, its safe markdown rendered.
func TestCapsuleIsInert(t *testing.T) {
	w := newWorld(t, true)
	id := putCapsule(t, w, agentrunner.Capsule{ID: 1, Workspace: "shop", Name: `<script>alert("name")</script>`, Tags: []string{`"><img src=x onerror=alert(1)>`},
		Text: capsuleText(xssMarkdown)})
	b := w.browser()
	b.login(viewerKey)
	for _, path := range []string{"/capsules/" + strconv.FormatInt(id, 10), "/capsules", "/capsules?q=findings"} {
		p := b.get(path)
		if p.status != http.StatusOK {
			t.Fatalf("GET %s: %d", path, p.status)
		}
		for _, problem := range activeContent(t, p.body) {
			t.Errorf("GET %s has %s", path, problem)
		}
	}
	p := b.get("/capsules/" + strconv.FormatInt(id, 10))
	if !strings.Contains(p.body, "<h1>Findings</h1>") || !strings.Contains(p.body, `href="https://example.com/ok"`) {
		t.Errorf("the capsule's safe markdown is not rendered:\n%s", p.body)
	}
}
