package http_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/agentrunner/agentrunner"
	"github.com/agentrunner/agentrunner/capsule"
	"github.com/agentrunner/agentrunner/config"
	arhttp "github.com/agentrunner/agentrunner/http"
	"github.com/agentrunner/agentrunner/internal/clocktest"
	"github.com/agentrunner/agentrunner/sqlite"
)

// capsuleText is a capsule's text with its six sections, in order.
func capsuleText(objective string) string {
	return "## Objective\n\n" + objective + "\n\n## Status\n\nFunding is positive on three venues.\n\n" +
		"## Decisions\n\n- Watch BTC only.\n\n## Next actions\n\n- Check the rate limit of the feed.\n\n" +
		"## Key locations\n\n- research.md\n\n## Open questions\n\n- None.\n"
}

// capsuleJSON is a request body of the fields.
func capsuleJSON(fields map[string]any) string {
	data, err := json.Marshal(fields)
	if err != nil {
		panic(err)
	}
	return string(data)
}

// capsuleRecord is one line of an export: a live capsule of the name at
// version.
func capsuleRecord(workspace, name string, version int) string {
	at := now.Add(-time.Hour)
	data, err := json.Marshal(capsule.Record{Workspace: workspace, Name: name, Phase: "imported", Text: capsuleText("Imported " + name + "."),
		Version: version, CreatedAt: at, UpdatedAt: at})
	if err != nil {
		panic(err)
	}
	return string(data)
}

// capsuleFixture is a server with credentials and capsules over a real
// store.
type capsuleFixture struct {
	t     *testing.T
	store *sqlite.Store
	srv   *arhttp.Server
	log   bytes.Buffer
}

// newCapsuleFixture serves capsules capped at maxChars (0: the default);
// edit changes the configuration.
func newCapsuleFixture(t *testing.T, maxChars int, edit func(*config.Config)) *capsuleFixture {
	t.Helper()
	f := &capsuleFixture{t: t, store: openStore(t)}
	cfg := testConfig()
	cfg.Server.MaxBodyBytes = 1 << 20
	cfg.Server.Auth.APIKeys = []config.APIKey{
		{Name: "grafana", KeyEnv: "VIEWER_KEY", Role: config.RoleViewer},
		{Name: "alice", KeyEnv: "OPERATOR_KEY", Role: config.RoleOperator},
	}
	if edit != nil {
		edit(cfg)
	}
	env := map[string]string{"VIEWER_KEY": viewerKey, "OPERATOR_KEY": operatorKey}
	auth, err := arhttp.NewAuthenticator(cfg.Server.Auth, t.TempDir(), func(k string) (string, bool) { v, ok := env[k]; return v, ok }, func() time.Time { return now })
	if err != nil {
		t.Fatal(err)
	}
	f.srv = newServer(t, arhttp.Options{Store: f.store, Config: cfg, Clock: clocktest.New(now), Auth: auth,
		Logger:   slog.New(slog.NewTextHandler(&f.log, nil)),
		Capsules: capsule.NewService(f.store, capsule.Options{MaxChars: maxChars, Clock: clocktest.New(now)})})
	return f
}

// capsuleAnswer is an answer of the server.
type capsuleAnswer struct {
	code   int
	header http.Header
	body   string
}

// json decodes the answer's body into v, zeroed first, which it must
// have with code.
func (a capsuleAnswer) json(t *testing.T, code int, v any) {
	t.Helper()
	if a.code != code {
		t.Fatalf("status %d, want %d:\n%s", a.code, code, a.body)
	}
	reflect.ValueOf(v).Elem().SetZero()
	if err := json.Unmarshal([]byte(a.body), v); err != nil {
		t.Fatalf("the body is not the JSON expected: %v\n%s", err, a.body)
	}
}

// message is the error message of the answer, which must be code.
func (a capsuleAnswer) message(t *testing.T, code int) string {
	t.Helper()
	var e struct {
		Error struct{ Code, Message string }
	}
	a.json(t, code, &e)
	if e.Error.Message == "" {
		t.Fatalf("no error message:\n%s", a.body)
	}
	return e.Error.Message
}

// do sends a request as the operator with a JSON body (when not empty).
func (f *capsuleFixture) do(method, target, body string) capsuleAnswer {
	f.t.Helper()
	return f.as(operatorKey, method, target, "application/json", body)
}

// as sends a request with the key, declaring the body of contentType.
func (f *capsuleFixture) as(key, method, target, contentType, body string) capsuleAnswer {
	f.t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req := localRequest(method, target, rd)
	if rd != nil {
		req.Header.Set("Content-Type", contentType)
	}
	req.Header.Set("Authorization", "Bearer "+key)
	rec := httptest.NewRecorder()
	f.srv.Handler().ServeHTTP(rec, req)
	return capsuleAnswer{code: rec.Code, header: rec.Header(), body: rec.Body.String()}
}

// put stores a capsule through the API and returns it.
func (f *capsuleFixture) put(fields map[string]any) capsule.View {
	f.t.Helper()
	var v capsule.View
	f.do("POST", "/api/capsules", capsuleJSON(fields)).json(f.t, http.StatusCreated, &v)
	return v
}

// TestCapsuleRoutes: every capsule route's success, through the API, on a
// real store.
func TestCapsuleRoutes(t *testing.T) {
	f := newCapsuleFixture(t, 0, nil)

	// Store: 201, Location, the view without the text.
	a := f.do("POST", "/api/capsules", capsuleJSON(map[string]any{"workspace": "crypton", "name": "handoff", "run_id": "20260314_060000",
		"phase": "research", "role": "planner", "tags": []string{"btc", "funding"}, "capsule_text": capsuleText("Find where funding flips.")}))
	var first capsule.View
	a.json(t, http.StatusCreated, &first)
	if first.ID < 1 || first.Version != 1 || first.Text != "" || strings.Contains(a.body, "capsule_text") {
		t.Errorf("stored: %+v\n%s", first, a.body)
	}
	if loc := a.header.Get("Location"); loc != fmt.Sprintf("/api/capsules/%d", first.ID) {
		t.Errorf("Location %q", loc)
	}
	if !strings.Contains(f.log.String(), "capsule stored") || !strings.Contains(f.log.String(), "operator=alice") {
		t.Errorf("the write is not logged with its operator:\n%s", f.log.String())
	}
	second := f.put(map[string]any{"workspace": "crypton", "name": "notes/rate limits", "phase": "analysis", "capsule_text": capsuleText("Note the rate limits.")})
	f.put(map[string]any{"workspace": "other", "name": "handoff", "phase": "research", "capsule_text": capsuleText("Another workspace.")})

	// Upsert: the same id, the next version.
	var up capsule.View
	f.do("POST", "/api/capsules", capsuleJSON(map[string]any{"workspace": "crypton", "name": "handoff", "run_id": "20260314_060000", "phase": "research",
		"role": "planner", "tags": []string{"btc", "funding"}, "upsert": true, "capsule_text": capsuleText("Find where funding flips, again.")})).json(t, http.StatusCreated, &up)
	if up.ID != first.ID || up.Version != 2 {
		t.Errorf("upsert: %+v, want id %d version 2", up, first.ID)
	}

	// By id and by name, with the text; a name with a slash escaped.
	var got capsule.View
	f.do("GET", fmt.Sprintf("/api/capsules/%d", first.ID), "").json(t, http.StatusOK, &got)
	if got.Text != capsuleText("Find where funding flips, again.") || got.Version != 2 || !slices.Equal(got.Tags, []string{"btc", "funding"}) {
		t.Errorf("by id: %+v", got)
	}
	f.do("GET", "/api/workspaces/crypton/capsules/notes%2Frate%20limits", "").json(t, http.StatusOK, &got)
	if got.ID != second.ID || got.Text == "" {
		t.Errorf("by name: %+v", got)
	}

	// List: newest first, without texts, paged.
	var list arhttp.CapsuleList
	f.do("GET", "/api/capsules?workspace=crypton", "").json(t, http.StatusOK, &list)
	if len(list.Capsules) != 2 || list.Capsules[0].ID != second.ID || list.Capsules[1].ID != first.ID || list.NextBefore != 0 {
		t.Errorf("list: %+v", list)
	}
	for _, c := range list.Capsules {
		if c.Text != "" {
			t.Errorf("a listed capsule has its text: %+v", c)
		}
	}
	f.do("GET", "/api/capsules?limit=1", "").json(t, http.StatusOK, &list)
	if len(list.Capsules) != 1 || list.NextBefore != list.Capsules[0].ID {
		t.Errorf("a full page: %+v", list)
	}
	f.do("GET", fmt.Sprintf("/api/capsules?limit=1&before=%d", list.NextBefore), "").json(t, http.StatusOK, &list)
	if len(list.Capsules) != 1 || list.Capsules[0].ID != second.ID {
		t.Errorf("the next page: %+v", list)
	}
	f.do("GET", "/api/capsules?tag=funding&phase=research&role=planner&run_id=20260314_060000", "").json(t, http.StatusOK, &list)
	if len(list.Capsules) != 1 || list.Capsules[0].ID != first.ID {
		t.Errorf("by tag, phase, role and run: %+v", list)
	}

	// Search: hits with rank and snippet, without texts.
	var hits arhttp.CapsuleHits
	f.do("GET", "/api/capsules/search?q=rate+limits&workspace=crypton&limit=5", "").json(t, http.StatusOK, &hits)
	if len(hits.Hits) == 0 || hits.Hits[0].Snippet == "" || hits.Hits[0].Text != "" {
		t.Errorf("search: %+v", hits)
	}
	f.do("GET", "/api/capsules/search?q=nothinglikethis", "").json(t, http.StatusOK, &hits)
	if hits.Hits == nil || len(hits.Hits) != 0 {
		t.Errorf("a search that finds nothing: %+v", hits)
	}

	// Inventory and latest.
	var inv arhttp.CapsuleInventory
	f.do("GET", "/api/capsules/inventory", "").json(t, http.StatusOK, &inv)
	want := []arhttp.CapsuleCount{{"crypton", "analysis", "", 1}, {"crypton", "research", "planner", 1}, {"other", "research", "", 1}}
	if !slices.Equal(inv.Counts, want) {
		t.Errorf("inventory: %+v, want %+v", inv.Counts, want)
	}
	f.do("GET", "/api/capsules/latest?workspace=crypton&phase=research", "").json(t, http.StatusOK, &got)
	if got.ID != first.ID || got.Text == "" {
		t.Errorf("latest: %+v", got)
	}

	// Update: only the fields given change; the version read is checked.
	var upd capsule.View
	f.do("PATCH", fmt.Sprintf("/api/capsules/%d", first.ID), `{"version": 2, "role": "analyst"}`).json(t, http.StatusOK, &upd)
	if upd.Version != 3 || upd.Role != "analyst" || upd.Phase != "research" || !slices.Equal(upd.Tags, []string{"btc", "funding"}) {
		t.Errorf("update: %+v", upd)
	}
	msg := f.do("PATCH", fmt.Sprintf("/api/capsules/%d", first.ID), `{"version": 2, "role": "writer"}`).message(t, http.StatusConflict)
	if !strings.Contains(msg, "is at version 3, not 2") {
		t.Errorf("a stale version: %q does not give the store's reason", msg)
	}

	// Compose: markdown, in the order given.
	a = f.do("POST", "/api/capsules/compose", fmt.Sprintf(`{"capsules": [{"workspace": "crypton", "name": "notes/rate limits"}, {"id": %d}]}`, first.ID))
	if a.code != http.StatusOK || !strings.HasPrefix(a.header.Get("Content-Type"), "text/markdown") {
		t.Fatalf("compose: %d %s\n%s", a.code, a.header.Get("Content-Type"), a.body)
	}
	i, j := strings.Index(a.body, "## crypton/notes/rate limits"), strings.Index(a.body, "## crypton/handoff (version 3")
	if !strings.HasPrefix(a.body, "# 2 capsule(s)") || i < 0 || j < i || !strings.Contains(a.body, "### Objective") {
		t.Errorf("compose:\n%s", a.body)
	}

	// Delete: 204; then 404, and the capsule is still fetched by id and
	// listed with include_deleted.
	if a := f.do("DELETE", fmt.Sprintf("/api/capsules/%d", second.ID), ""); a.code != http.StatusNoContent || a.body != "" {
		t.Errorf("delete: %d %q", a.code, a.body)
	}
	f.do("DELETE", fmt.Sprintf("/api/capsules/%d", second.ID), "").message(t, http.StatusNotFound)
	f.do("GET", fmt.Sprintf("/api/capsules/%d", second.ID), "").json(t, http.StatusOK, &got)
	if got.DeletedAt == nil {
		t.Errorf("a deleted capsule by id: %+v", got)
	}
	f.do("GET", "/api/capsules?workspace=crypton", "").json(t, http.StatusOK, &list)
	if len(list.Capsules) != 1 {
		t.Errorf("live capsules after the delete: %+v", list)
	}
	f.do("GET", "/api/capsules?workspace=crypton&include_deleted=true", "").json(t, http.StatusOK, &list)
	if len(list.Capsules) != 2 {
		t.Errorf("with include_deleted: %+v", list)
	}

	// Export: JSON lines, oldest first, the deleted one with include_deleted.
	a = f.do("GET", "/api/capsules/export?workspace=crypton&include_deleted=true", "")
	if a.code != http.StatusOK || a.header.Get("Content-Type") != "application/x-ndjson" {
		t.Fatalf("export: %d %s\n%s", a.code, a.header.Get("Content-Type"), a.body)
	}
	var records []capsule.Record
	sc := bufio.NewScanner(strings.NewReader(a.body))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var r capsule.Record
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatalf("an exported line is not a record: %v\n%s", err, sc.Text())
		}
		records = append(records, r)
	}
	if len(records) != 2 || records[0].Name != "handoff" || records[0].Version != 3 || records[1].DeletedAt == nil {
		t.Errorf("exported: %+v", records)
	}

	// Import into another store: everything comes back, versions and
	// deletion included; a second import skips, or replaces.
	g := newCapsuleFixture(t, 0, nil)
	var n arhttp.CapsuleImported
	g.as(operatorKey, "POST", "/api/capsules/import", "application/x-ndjson", a.body).json(t, http.StatusOK, &n)
	if n != (arhttp.CapsuleImported{Stored: 2}) {
		t.Errorf("import: %+v", n)
	}
	g.do("POST", "/api/capsules/import", a.body).json(t, http.StatusOK, &n)
	if n != (arhttp.CapsuleImported{Stored: 1, Skipped: 1}) {
		t.Errorf("a second import: %+v, want the live one skipped and the deleted one stored again", n)
	}
	g.do("POST", "/api/capsules/import?on_conflict=replace", a.body).json(t, http.StatusOK, &n)
	if n != (arhttp.CapsuleImported{Stored: 1, Replaced: 1}) {
		t.Errorf("an import that replaces: %+v", n)
	}
	g.do("GET", "/api/workspaces/crypton/capsules/handoff", "").json(t, http.StatusOK, &got)
	if got.Role != "analyst" || got.Phase != "research" || got.DeletedAt != nil || got.Text != capsuleText("Find where funding flips, again.") {
		t.Errorf("imported: %+v", got)
	}
	g.do("POST", "/api/capsules/import", "").json(t, http.StatusOK, &n)
	if n != (arhttp.CapsuleImported{}) {
		t.Errorf("an empty import: %+v", n)
	}

	// Bulk update and delete: the counts.
	var updated struct{ Updated int }
	f.do("POST", "/api/capsules/bulk-update", `{"filter": {"phase": "research"}, "set": {"tags": ["reviewed"]}}`).json(t, http.StatusOK, &updated)
	if updated.Updated != 2 {
		t.Errorf("bulk update: %+v, want 2", updated)
	}
	f.do("GET", "/api/capsules?tag=reviewed", "").json(t, http.StatusOK, &list)
	if len(list.Capsules) != 2 {
		t.Errorf("capsules tagged by the bulk update: %+v", list)
	}
	var deleted struct{ Deleted int }
	f.do("POST", "/api/capsules/bulk-delete", `{"filter": {"workspace": "other"}}`).json(t, http.StatusOK, &deleted)
	if deleted.Deleted != 1 {
		t.Errorf("bulk delete: %+v, want 1", deleted)
	}
	f.do("GET", "/api/capsules/latest?workspace=other", "").message(t, http.StatusNotFound)
}

// TestCapsuleBadInputs: each bad request is refused with a status and a
// message that says what is wrong.
func TestCapsuleBadInputs(t *testing.T) {
	f := newCapsuleFixture(t, 400, nil)
	stored := f.put(map[string]any{"workspace": "crypton", "name": "handoff", "capsule_text": capsuleText("Short.")})
	tests := []struct {
		name, method, target, body string
		code                       int
		// says are in the message; never is not.
		says  []string
		never []string
	}{
		{name: "an unknown filter key", method: "GET", target: "/api/capsules?colour=red", code: 400,
			says: []string{`"colour"`, "workspace, run_id, phase, role, tag, include_deleted, before, limit"}},
		{name: "an unknown key of a search", method: "GET", target: "/api/capsules/search?q=x&before=3", code: 400, says: []string{`"before"`, "q, workspace"}},
		{name: "a key of the inventory", method: "GET", target: "/api/capsules/inventory?workspace=x", code: 400, says: []string{`"workspace"`, "takes none"}},
		{name: "a key given twice", method: "GET", target: "/api/capsules?tag=a&tag=b", code: 400, says: []string{"tag is given 2 times"}},
		{name: "limit 0", method: "GET", target: "/api/capsules?limit=0", code: 400, says: []string{"limit", "1 to 1000"}},
		{name: "limit over the search's", method: "GET", target: "/api/capsules/search?q=x&limit=101", code: 400, says: []string{"limit", "1 to 100,"}},
		{name: "before not a number", method: "GET", target: "/api/capsules?before=x", code: 400, says: []string{"before"}},
		{name: "include_deleted not a boolean", method: "GET", target: "/api/capsules/export?include_deleted=yes", code: 400, says: []string{"include_deleted", "true or false"}},
		{name: "a search without q", method: "GET", target: "/api/capsules/search", code: 400, says: []string{"q is required"}},
		{name: "a blank search", method: "GET", target: "/api/capsules/search?q=+", code: 400, says: []string{"q is required"}},
		{name: "a search the index cannot parse", method: "GET", target: "/api/capsules/search?q=%22rate+limit", code: 400,
			says: []string{"not valid full-text syntax"}, never: []string{"SQL", "fts5"}},
		{name: "another search the index cannot parse", method: "GET", target: "/api/capsules/search?q=rate+AND", code: 400, never: []string{"SQL", "fts5"}},
		{name: "a bad capsule id", method: "GET", target: "/api/capsules/0", code: 400, says: []string{"capsule id"}},
		{name: "an unknown capsule", method: "GET", target: "/api/capsules/99", code: 404, says: []string{"capsule 99"}},
		{name: "latest without a workspace", method: "GET", target: "/api/capsules/latest?phase=x", code: 400, says: []string{"workspace is required"}},
		{name: "a missing section", method: "POST", target: "/api/capsules", code: 400,
			body: capsuleJSON(map[string]any{"workspace": "crypton", "name": "x", "capsule_text": strings.Replace(capsuleText("x"), "## Decisions", "## Choices", 1)}),
			says: []string{"lacks the section(s) ## Decisions"}},
		{name: "sections out of order", method: "POST", target: "/api/capsules", code: 400,
			body: capsuleJSON(map[string]any{"workspace": "crypton", "name": "x", "capsule_text": "## Status\n\n## Objective\n\n## Decisions\n\n## Next actions\n\n## Key locations\n\n## Open questions\n"}),
			says: []string{"## Objective", "comes before ## Objective"}},
		{name: "over the size cap", method: "POST", target: "/api/capsules", code: 400,
			body: capsuleJSON(map[string]any{"workspace": "crypton", "name": "x", "capsule_text": capsuleText(strings.Repeat("long ", 100))}),
			says: []string{"over the cap of 400"}},
		{name: "no workspace", method: "POST", target: "/api/capsules", code: 400,
			body: capsuleJSON(map[string]any{"name": "x", "capsule_text": capsuleText("x")}), says: []string{"workspace is required"}},
		{name: "an unknown field", method: "POST", target: "/api/capsules", code: 400,
			body: capsuleJSON(map[string]any{"workspace": "crypton", "name": "x", "text": capsuleText("x")}), says: []string{`unknown field "text"`}},
		{name: "a name taken", method: "POST", target: "/api/capsules", code: 409,
			body: capsuleJSON(map[string]any{"workspace": "crypton", "name": "handoff", "capsule_text": capsuleText("x")}), says: []string{"handoff"}},
		{name: "a query on a write", method: "POST", target: "/api/capsules?upsert=true", code: 400,
			body: capsuleJSON(map[string]any{"workspace": "crypton", "name": "handoff", "capsule_text": capsuleText("x")}), says: []string{`"upsert"`}},
		{name: "an update without a version", method: "PATCH", target: fmt.Sprintf("/api/capsules/%d", stored.ID), code: 400,
			body: `{"role": "x"}`, says: []string{"version is required"}},
		{name: "a stale version", method: "PATCH", target: fmt.Sprintf("/api/capsules/%d", stored.ID), code: 409,
			body: `{"version": 7, "role": "x"}`, says: []string{"is at version 1, not 7", "fetch it again"}},
		{name: "an update that breaks the text", method: "PATCH", target: fmt.Sprintf("/api/capsules/%d", stored.ID), code: 400,
			body: `{"version": 1, "capsule_text": "## Objective\n"}`, says: []string{"lacks the section(s)"}},
		{name: "an update over the cap", method: "PATCH", target: fmt.Sprintf("/api/capsules/%d", stored.ID), code: 400,
			body: capsuleJSON(map[string]any{"version": 1, "capsule_text": capsuleText(strings.Repeat("long ", 100))}), says: []string{"over the cap of 400"}},
		{name: "delete an unknown capsule", method: "DELETE", target: "/api/capsules/99", code: 404, says: []string{"capsule 99"}},
		{name: "a bulk update without a filter", method: "POST", target: "/api/capsules/bulk-update", code: 400,
			body: `{"filter": {}, "set": {"phase": "x"}}`, says: []string{"needs a filter"}},
		{name: "a bulk update with an unknown filter key", method: "POST", target: "/api/capsules/bulk-update", code: 400,
			body: `{"filter": {"colour": "red"}, "set": {"phase": "x"}}`, says: []string{`unknown field "colour"`}},
		{name: "a bulk update that sets nothing", method: "POST", target: "/api/capsules/bulk-update", code: 400,
			body: `{"filter": {"workspace": "crypton"}, "set": {}}`, says: []string{"nothing to set"}},
		{name: "a bulk delete without a filter", method: "POST", target: "/api/capsules/bulk-delete", code: 400,
			body: `{"filter": {"include_deleted": true}}`, says: []string{"needs a filter"}},
		{name: "compose nothing", method: "POST", target: "/api/capsules/compose", code: 400, body: `{"capsules": []}`, says: []string{"1 to 50"}},
		{name: "compose an unknown capsule", method: "POST", target: "/api/capsules/compose", code: 404,
			body: fmt.Sprintf(`{"capsules": [{"id": %d}, {"workspace": "crypton", "name": "nosuch"}]}`, stored.ID), says: []string{"capsule 2 (crypton/nosuch)", "nosuch"}},
		{name: "import a bad line", method: "POST", target: "/api/capsules/import", code: 400,
			body: capsuleRecord("crypton", "one", 1) + "\n{\"workspace\": \"crypton\"}\n", says: []string{"line 2:", "imported before it: 1 stored"}},
		{name: "import a record without its section", method: "POST", target: "/api/capsules/import", code: 400,
			body: strings.Replace(capsuleRecord("crypton", "two", 1), "## Status", "## State", 1), says: []string{"line 1:", "## Status"}},
		{name: "import with an unknown policy", method: "POST", target: "/api/capsules/import?on_conflict=merge", code: 400, body: capsuleRecord("crypton", "x", 1),
			says: []string{"on_conflict", "skip or replace"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			msg := f.do(tc.method, tc.target, tc.body).message(t, tc.code)
			for _, s := range tc.says {
				if !strings.Contains(msg, s) {
					t.Errorf("the message does not say %q:\n%s", s, msg)
				}
			}
			for _, s := range tc.never {
				if strings.Contains(msg, s) {
					t.Errorf("the message says %q:\n%s", s, msg)
				}
			}
		})
	}
}

// TestCapsuleImportIsBoundedByMaxBodyBytes: an import longer than
// server.max_body_bytes is refused whole: nothing of it is stored.
func TestCapsuleImportIsBoundedByMaxBodyBytes(t *testing.T) {
	f := newCapsuleFixture(t, 0, func(cfg *config.Config) { cfg.Server.MaxBodyBytes = 4096 })
	var lines []string
	for i := range 12 {
		lines = append(lines, capsuleRecord("crypton", fmt.Sprintf("c%d", i), 1))
	}
	body := strings.Join(lines, "\n")
	if len(body) <= 4096 {
		t.Fatalf("the body is %d bytes, not over the cap", len(body))
	}
	msg := f.as(operatorKey, "POST", "/api/capsules/import", "application/x-ndjson", body).message(t, http.StatusBadRequest)
	if !strings.Contains(msg, "server.max_body_bytes") {
		t.Errorf("the message does not name the cap: %s", msg)
	}
	cs, err := f.store.Capsules(t.Context(), agentrunner.CapsuleFilter{IncludeDeleted: true})
	if err != nil || len(cs) != 0 {
		t.Errorf("an import over the cap stored %d capsule(s) (%v)", len(cs), err)
	}
}

// TestCapsuleWritesNeedAnOperator: a viewer reads capsules and composes
// them; every write is refused with 403 and changes nothing.
func TestCapsuleWritesNeedAnOperator(t *testing.T) {
	f := newCapsuleFixture(t, 0, nil)
	c := f.put(map[string]any{"workspace": "crypton", "name": "handoff", "capsule_text": capsuleText("x")})
	id := fmt.Sprint(c.ID)
	writes := []struct{ method, target, contentType, body string }{
		{"POST", "/api/capsules", "application/json", capsuleJSON(map[string]any{"workspace": "crypton", "name": "y", "capsule_text": capsuleText("y")})},
		{"PATCH", "/api/capsules/" + id, "application/json", `{"version": 1, "role": "x"}`},
		{"DELETE", "/api/capsules/" + id, "", ""},
		{"POST", "/api/capsules/bulk-update", "application/json", `{"filter": {"workspace": "crypton"}, "set": {"role": "x"}}`},
		{"POST", "/api/capsules/bulk-delete", "application/json", `{"filter": {"workspace": "crypton"}}`},
		{"POST", "/api/capsules/import?on_conflict=replace", "application/x-ndjson", capsuleRecord("crypton", "handoff", 9)},
	}
	for _, w := range writes {
		a := f.as(viewerKey, w.method, w.target, w.contentType, w.body)
		if a.code != http.StatusForbidden {
			t.Errorf("%s %s as a viewer: %d, want 403\n%s", w.method, w.target, a.code, a.body)
		}
	}
	var got capsule.View
	f.as(viewerKey, "GET", "/api/capsules/"+id, "", "").json(t, http.StatusOK, &got)
	if got.Version != 1 || got.Role != "" || got.DeletedAt != nil {
		t.Errorf("a viewer's writes changed the capsule: %+v", got)
	}
	for _, target := range []string{"/api/capsules", "/api/capsules/search?q=funding", "/api/capsules/inventory", "/api/capsules/latest?workspace=crypton",
		"/api/capsules/export", "/api/workspaces/crypton/capsules/handoff"} {
		if a := f.as(viewerKey, "GET", target, "", ""); a.code != http.StatusOK {
			t.Errorf("GET %s as a viewer: %d\n%s", target, a.code, a.body)
		}
	}
	if a := f.as(viewerKey, "POST", "/api/capsules/compose", "application/json", `{"capsules": [{"id": `+id+`}]}`); a.code != http.StatusOK {
		t.Errorf("compose as a viewer: %d\n%s", a.code, a.body)
	}
	if a := f.as("", "GET", "/api/capsules", "", ""); a.code != http.StatusUnauthorized {
		t.Errorf("without a key: %d", a.code)
	}
}

// TestCapsuleImportContentTypes: an import's JSON lines are declared
// application/x-ndjson or application/json; anything else is 415, and only
// the import takes x-ndjson.
func TestCapsuleImportContentTypes(t *testing.T) {
	f := newCapsuleFixture(t, 0, nil)
	body := capsuleRecord("crypton", "a", 1) + "\n" + capsuleRecord("crypton", "b", 1) + "\n"
	for ct, want := range map[string]int{"application/x-ndjson": 200, "application/x-ndjson; charset=utf-8": 200, "application/json": 200, "text/plain": 415} {
		a := f.as(operatorKey, "POST", "/api/capsules/import?on_conflict=replace", ct, body)
		if a.code != want {
			t.Errorf("import as %s: %d, want %d\n%s", ct, a.code, want, a.body)
		}
	}
	a := f.as(operatorKey, "POST", "/api/capsules", "application/x-ndjson", capsuleJSON(map[string]any{"workspace": "crypton", "name": "c", "capsule_text": capsuleText("c")}))
	if a.code != http.StatusUnsupportedMediaType {
		t.Errorf("a capsule as application/x-ndjson: %d, want 415\n%s", a.code, a.body)
	}
}

// TestCapsulesNotServed: without a capsule service every capsule route
// answers 503, saying so.
func TestCapsulesNotServed(t *testing.T) {
	srv := newServer(t, arhttp.Options{Store: openStore(t), Config: testConfig(), Clock: clocktest.New(now), Logger: slog.New(slog.DiscardHandler)})
	for _, rt := range [][2]string{{"GET", "/api/capsules"}, {"GET", "/api/capsules/1"}, {"POST", "/api/capsules"}, {"DELETE", "/api/capsules/1"},
		{"GET", "/api/workspaces/w/capsules/n"}, {"POST", "/api/capsules/import"}} {
		rec := httptest.NewRecorder()
		srv.Handler().ServeHTTP(rec, localRequest(rt[0], rt[1], nil))
		if rec.Code != http.StatusServiceUnavailable || !strings.Contains(rec.Body.String(), "capsules are not served by this server") {
			t.Errorf("%s %s: %d\n%s", rt[0], rt[1], rec.Code, rec.Body)
		}
	}
}
