package http_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"mime"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/agentrunner/agentrunner"
	"github.com/agentrunner/agentrunner/artifact"
	"github.com/agentrunner/agentrunner/capsule"
	"github.com/agentrunner/agentrunner/config"
	arhttp "github.com/agentrunner/agentrunner/http"
	"github.com/agentrunner/agentrunner/internal/clocktest"
	"github.com/agentrunner/agentrunner/internal/mailboxtest"
	"github.com/agentrunner/agentrunner/mailbox"
	"github.com/agentrunner/agentrunner/memory"
	"github.com/agentrunner/agentrunner/sqlite"
	"github.com/agentrunner/agentrunner/tool"
	"github.com/agentrunner/agentrunner/webhook"
	"github.com/google/go-cmp/cmp"
	"github.com/santhosh-tekuri/jsonschema/v6"
)

// openAPIURL is where the document is loaded as a JSON Schema resource, so
// its "#/components/schemas/…" references resolve inside it.
const openAPIURL = "mem://openapi.json"

// openAPIMethods are the operation keys of a path item.
var openAPIMethods = []string{"get", "put", "post", "delete", "options", "head", "patch", "trace"}

// apiCallbackSecret signs the Execution Service's callbacks in these tests.
var apiCallbackSecret = []byte("openapi test callback secret")

// apiDoc is the OpenAPI document, decoded, with a schema compiler that
// holds it as one resource.
type apiDoc struct {
	raw      []byte
	doc      map[string]any
	compiler *jsonschema.Compiler
	compiled map[string]*jsonschema.Schema
}

// apiOperation is one operation of the document.
type apiOperation struct {
	Method string // upper case
	Path   string
	// Pointer is the JSON pointer of the operation object.
	Pointer string
	Op      map[string]any
}

func (o apiOperation) String() string { return o.Method + " " + o.Path }

func loadAPIDoc(t *testing.T) *apiDoc {
	t.Helper()
	raw, err := os.ReadFile("openapi.json")
	if err != nil {
		t.Fatal(err)
	}
	d := &apiDoc{raw: raw, compiled: map[string]*jsonschema.Schema{}}
	if err := json.Unmarshal(raw, &d.doc); err != nil {
		t.Fatalf("openapi.json is not JSON: %v", err)
	}
	res, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	d.compiler = jsonschema.NewCompiler()
	d.compiler.DefaultDraft(jsonschema.Draft2020)
	d.compiler.AssertFormat()
	if err := d.compiler.AddResource(openAPIURL, res); err != nil {
		t.Fatalf("openapi.json as a schema resource: %v", err)
	}
	return d
}

// jsonPointer joins JSON pointer tokens, escaped.
func jsonPointer(tokens ...string) string {
	var b strings.Builder
	for _, tok := range tokens {
		b.WriteString("/" + strings.NewReplacer("~", "~0", "/", "~1").Replace(tok))
	}
	return b.String()
}

// schema compiles the schema at ptr, a JSON pointer into the document.
func (d *apiDoc) schema(t *testing.T, ptr string) *jsonschema.Schema {
	t.Helper()
	if s, ok := d.compiled[ptr]; ok {
		return s
	}
	// The fragment is percent-decoded by the compiler: escape each token
	// ("{id}" in paths), keeping the separators.
	tokens := strings.Split(ptr, "/")
	for i := range tokens {
		tokens[i] = url.PathEscape(tokens[i])
	}
	s, err := d.compiler.Compile(openAPIURL + "#" + strings.Join(tokens, "/"))
	if err != nil {
		t.Fatalf("compile the schema at %s: %v", ptr, err)
	}
	d.compiled[ptr] = s
	return s
}

// objectAt walks v through the keys of nested objects; nil where one is
// missing or not an object.
func objectAt(v any, keys ...string) map[string]any {
	m, _ := v.(map[string]any)
	for _, k := range keys {
		m, _ = m[k].(map[string]any)
	}
	return m
}

// resolve returns the value at the local reference ref ("#/a/b").
func (d *apiDoc) resolve(ref string) (any, bool) {
	if !strings.HasPrefix(ref, "#/") {
		return nil, false
	}
	var v any = d.doc
	for _, tok := range strings.Split(ref[2:], "/") {
		tok = strings.NewReplacer("~1", "/", "~0", "~").Replace(tok)
		m, ok := v.(map[string]any)
		if !ok {
			return nil, false
		}
		if v, ok = m[tok]; !ok {
			return nil, false
		}
	}
	return v, true
}

// operations lists the document's operations, sorted.
func (d *apiDoc) operations(t *testing.T) []apiOperation {
	t.Helper()
	paths, ok := d.doc["paths"].(map[string]any)
	if !ok {
		t.Fatal("the document has no paths object")
	}
	var out []apiOperation
	for _, p := range slices.Sorted(maps.Keys(paths)) {
		item, ok := paths[p].(map[string]any)
		if !ok {
			t.Fatalf("paths[%q] is not an object", p)
		}
		for _, m := range openAPIMethods {
			if op, ok := item[m].(map[string]any); ok {
				out = append(out, apiOperation{Method: strings.ToUpper(m), Path: p, Pointer: jsonPointer("paths", p, m), Op: op})
			}
		}
	}
	return out
}

// match finds the operation serving method and the concrete path; of
// several templates matching, the one with the most literal segments.
func (d *apiDoc) match(t *testing.T, method, path string) apiOperation {
	t.Helper()
	segs := strings.Split(path, "/")
	best, bestLiterals := apiOperation{}, -1
	for _, op := range d.operations(t) {
		tsegs := strings.Split(op.Path, "/")
		if op.Method != method || len(tsegs) != len(segs) {
			continue
		}
		literals := 0
		for i, ts := range tsegs {
			switch {
			case strings.HasPrefix(ts, "{") && strings.HasSuffix(ts, "}") && segs[i] != "":
			case ts == segs[i]:
				literals++
			default:
				literals = -1
			}
			if literals < 0 {
				break
			}
		}
		if literals > bestLiterals {
			best, bestLiterals = op, literals
		}
	}
	if bestLiterals < 0 {
		t.Fatalf("no documented operation serves %s %s", method, path)
	}
	return best
}

// response returns op's documented response for status, following a
// reference, and its pointer.
func (d *apiDoc) response(op apiOperation, status int) (map[string]any, string, bool) {
	responses, _ := op.Op["responses"].(map[string]any)
	key := strconv.Itoa(status)
	r, ok := responses[key].(map[string]any)
	if !ok {
		return nil, "", false
	}
	ptr := op.Pointer + jsonPointer("responses", key)
	if ref, ok := r["$ref"].(string); ok {
		target, found := d.resolve(ref)
		if r, ok = target.(map[string]any); !found || !ok {
			return nil, "", false
		}
		ptr = ref[1:]
	}
	return r, ptr, true
}

// parameters returns op's parameters, references followed.
func (d *apiDoc) parameters(t *testing.T, op apiOperation) []map[string]any {
	t.Helper()
	list, _ := op.Op["parameters"].([]any)
	var out []map[string]any
	for i, p := range list {
		m, ok := p.(map[string]any)
		if ref, isRef := m["$ref"].(string); isRef {
			target, found := d.resolve(ref)
			if m, ok = target.(map[string]any); !found || !ok {
				t.Fatalf("%s: parameter %d: %s does not resolve", op, i, ref)
			}
		}
		if !ok {
			t.Fatalf("%s: parameter %d is not an object", op, i)
		}
		out = append(out, m)
	}
	return out
}

// examplePath fills op's path parameters with their documented examples.
func (d *apiDoc) examplePath(t *testing.T, op apiOperation) string {
	t.Helper()
	path := op.Path
	for _, p := range d.parameters(t, op) {
		if p["in"] != "path" {
			continue
		}
		ex, ok := p["example"].(string)
		if !ok {
			t.Fatalf("%s: path parameter %v has no example", op, p["name"])
		}
		path = strings.ReplaceAll(path, "{"+p["name"].(string)+"}", ex)
	}
	return path
}

// validateJSON validates a JSON document against the schema at ptr.
func (d *apiDoc) validateJSON(t *testing.T, ptr string, data []byte) error {
	t.Helper()
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(data))
	if err != nil {
		return fmt.Errorf("not JSON: %v", err)
	}
	return d.schema(t, ptr).Validate(v)
}

// checkResponse holds a served response to op's documentation: the status
// is documented, the media type is one of the documented ones (no body when
// none is), JSON bodies validate against the documented schema, and headers
// with a documented constant value carry it.
func (d *apiDoc) checkResponse(t *testing.T, op apiOperation, rec *httptest.ResponseRecorder) {
	t.Helper()
	doc, ptr, ok := d.response(op, rec.Code)
	if !ok {
		t.Errorf("%s answered %d, which the document does not list:\n%s", op, rec.Code, rec.Body)
		return
	}
	content, _ := doc["content"].(map[string]any)
	if len(content) == 0 {
		if rec.Body.Len() > 0 {
			t.Errorf("%s %d: documented without a body, got %q", op, rec.Code, rec.Body)
		}
	} else {
		mt, _, err := mime.ParseMediaType(rec.Header().Get("Content-Type"))
		if err != nil {
			t.Errorf("%s %d: Content-Type %q: %v", op, rec.Code, rec.Header().Get("Content-Type"), err)
			return
		}
		media, ok := content[mt].(map[string]any)
		if !ok {
			t.Errorf("%s %d: Content-Type %s is not documented (documented: %v)", op, rec.Code, mt, slices.Sorted(maps.Keys(content)))
			return
		}
		if _, hasSchema := media["schema"]; hasSchema && mt == "application/json" {
			if err := d.validateJSON(t, ptr+jsonPointer("content", mt, "schema"), rec.Body.Bytes()); err != nil {
				t.Errorf("%s %d: the body does not match the documented schema: %v\n%s", op, rec.Code, err, rec.Body)
			}
		}
	}
	headers, _ := doc["headers"].(map[string]any)
	for name, h := range headers {
		if want, ok := objectAt(h, "schema")["const"].(string); ok {
			if got := rec.Header().Get(name); got != want {
				t.Errorf("%s %d: header %s is %q, documented %q", op, rec.Code, name, got, want)
			}
		}
	}
}

// goPatternPath turns a ServeMux pattern ("GET /api/cycles/{id}") into the
// method and the OpenAPI path.
func goPatternPath(t *testing.T, pattern string) (string, string) {
	t.Helper()
	method, path, ok := strings.Cut(pattern, " ")
	if !ok || method == "" || !strings.HasPrefix(path, "/") {
		t.Fatalf("route %q is not METHOD /path", pattern)
	}
	if strings.Contains(path, "{$}") || strings.HasSuffix(path, "/") {
		t.Fatalf("route %q: exact-match and subtree patterns have no OpenAPI path; document them by hand", pattern)
	}
	// "{rest...}" matches the remaining segments; OpenAPI names it {rest}.
	return method, strings.ReplaceAll(path, "...}", "}")
}

// fakeMetrics stands in for the Prometheus handler.
var fakeMetrics = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
	fmt.Fprintln(w, "# TYPE agentrunner_cycles_total counter")
	fmt.Fprintln(w, `agentrunner_cycles_total{status="completed"} 1`)
})

// engineLag is an engine whose loop is a fixed time late.
type engineLag time.Duration

func (l engineLag) Stalled() time.Duration { return time.Duration(l) }

func (l engineLag) Config() *config.Config { return nil }

// TestOpenAPIDocumentsEveryRoute: the document is OpenAPI 3.1 and
// describes exactly the routes the server registers, with metrics and the
// callback enabled: no route undocumented, no documented route missing.
func TestOpenAPIDocumentsEveryRoute(t *testing.T) {
	d := loadAPIDoc(t)
	if v, _ := d.doc["openapi"].(string); !regexp.MustCompile(`^3\.1\.[0-9]+$`).MatchString(v) {
		t.Fatalf("openapi is %q, want 3.1.x", v)
	}
	info, _ := d.doc["info"].(map[string]any)
	if info["title"] != "agentrunner operator API" || info["version"] != "1" {
		t.Errorf("info: title %q version %q", info["title"], info["version"])
	}
	srv := newServer(t, arhttp.Options{Store: openStore(t), Config: testConfig(), Clock: clocktest.New(now),
		Logger: slog.New(slog.DiscardHandler), Metrics: fakeMetrics}).WithCallback(apiCallbackSecret, nil)
	var served []string
	for _, pattern := range srv.Routes() {
		method, path := goPatternPath(t, pattern)
		served = append(served, method+" "+path)
	}
	var documented []string
	for _, op := range d.operations(t) {
		documented = append(documented, op.String())
	}
	slices.Sort(served)
	slices.Sort(documented)
	for _, r := range served {
		if !slices.Contains(documented, r) {
			t.Errorf("route %s is not in openapi.json", r)
		}
	}
	for _, r := range documented {
		if !slices.Contains(served, r) {
			t.Errorf("openapi.json documents %s, which the server does not serve", r)
		}
	}
	if len(served) != len(slices.Compact(slices.Clone(served))) {
		t.Errorf("the server lists a route twice: %v", served)
	}
}

// TestOpenAPIOperations: every operation has a unique operationId, a
// summary, the role it needs (except the signed callback), an error
// response in the error envelope, 403 documented exactly where a role above
// viewer is needed, and documented path parameters with examples; every
// reference resolves inside the document and every component schema
// compiles.
func TestOpenAPIOperations(t *testing.T) {
	d := loadAPIDoc(t)
	ids := map[string]string{}
	for _, op := range d.operations(t) {
		id, _ := op.Op["operationId"].(string)
		if id == "" {
			t.Errorf("%s has no operationId", op)
		} else if other, dup := ids[id]; dup {
			t.Errorf("operationId %s is used by %s and %s", id, other, op)
		}
		ids[id] = op.String()
		if s, _ := op.Op["summary"].(string); s == "" {
			t.Errorf("%s has no summary", op)
		}
		if desc, _ := op.Op["description"].(string); desc == "" {
			t.Errorf("%s has no description", op)
		}

		role, hasRole := op.Op["x-agentrunner-role"].(string)
		if op.String() == "POST /api/execution/callback" {
			if hasRole {
				t.Errorf("%s is signed, not called with a role, but documents role %s", op, role)
			}
			if sec, ok := op.Op["security"].([]any); !ok || len(sec) != 0 {
				t.Errorf("%s: security is %v, want [] (the request is signed instead)", op, op.Op["security"])
			}
		} else if !slices.Contains(config.Roles, role) {
			t.Errorf("%s: x-agentrunner-role is %q, want one of %v", op, role, config.Roles)
		}
		if public, ok := op.Op["x-agentrunner-public"]; ok && public != config.PublicHealth && public != config.PublicMetrics {
			t.Errorf("%s: x-agentrunner-public is %v, want %s or %s", op, public, config.PublicHealth, config.PublicMetrics)
		}
		// 403: a role too low, or a state-changing request (POST, PATCH,
		// DELETE) from another origin; 415: a body of a state-changing
		// request not declared JSON; 421: a foreign Host without
		// credentials, on every route.
		changes := op.Method != http.MethodGet && op.Method != http.MethodHead
		_, _, has403 := d.response(op, http.StatusForbidden)
		if want := (hasRole && role != config.RoleViewer) || changes; has403 != want {
			t.Errorf("%s (role %q): 403 documented = %v, want %v", op, role, has403, want)
		}
		if _, _, has415 := d.response(op, http.StatusUnsupportedMediaType); has415 != changes {
			t.Errorf("%s: 415 documented = %v, want %v", op, has415, changes)
		}
		if _, _, has421 := d.response(op, http.StatusMisdirectedRequest); !has421 {
			t.Errorf("%s: 421 is not documented", op)
		}

		errorEnvelope := false
		responses, _ := op.Op["responses"].(map[string]any)
		for key := range responses {
			status, err := strconv.Atoi(key)
			if err != nil {
				t.Errorf("%s: response key %q is not a status", op, key)
				continue
			}
			r, _, ok := d.response(op, status)
			if !ok {
				t.Errorf("%s: response %s does not resolve", op, key)
				continue
			}
			if status < 400 {
				continue
			}
			if objectAt(r, "content", "application/json", "schema")["$ref"] == "#/components/schemas/Error" {
				errorEnvelope = true
			}
		}
		if !errorEnvelope {
			t.Errorf("%s documents no 4xx/5xx response with the error schema", op)
		}

		params := d.parameters(t, op)
		for _, name := range regexp.MustCompile(`\{([^}]+)\}`).FindAllStringSubmatch(op.Path, -1) {
			found := slices.ContainsFunc(params, func(p map[string]any) bool {
				return p["in"] == "path" && p["name"] == name[1] && p["required"] == true
			})
			if !found {
				t.Errorf("%s: path parameter %s is not documented as required", op, name[1])
			}
		}
		d.examplePath(t, op)
	}

	// References: local, into components, resolving.
	var walk func(at string, v any)
	walk = func(at string, v any) {
		switch v := v.(type) {
		case map[string]any:
			if ref, ok := v["$ref"].(string); ok {
				if !strings.HasPrefix(ref, "#/components/") {
					t.Errorf("%s: $ref %q is not into #/components/", at, ref)
				} else if _, ok := d.resolve(ref); !ok {
					t.Errorf("%s: $ref %q does not resolve", at, ref)
				}
				if strings.Contains(at, "/schema") && !strings.HasPrefix(ref, "#/components/schemas/") {
					t.Errorf("%s: schema $ref %q is not into #/components/schemas/", at, ref)
				}
			}
			for k, e := range v {
				walk(at+jsonPointer(k), e)
			}
		case []any:
			for i, e := range v {
				walk(at+"/"+strconv.Itoa(i), e)
			}
		}
	}
	walk("", d.doc)

	schemas := objectAt(d.doc, "components", "schemas")
	for _, name := range slices.Sorted(maps.Keys(schemas)) {
		d.schema(t, jsonPointer("components", "schemas", name))
	}

	// The error codes are the server's.
	codes, _ := objectAt(schemas, "ErrorCode")["enum"].([]any)
	var got []string
	for _, c := range codes {
		s, _ := c.(string)
		got = append(got, s)
	}
	want := []string{agentrunner.EINVALID, agentrunner.ENOTFOUND, agentrunner.ECONFLICT, agentrunner.EUNAVAILABLE,
		agentrunner.EUNAUTHORIZED, agentrunner.EFORBIDDEN, agentrunner.EINTERNAL, agentrunner.EUNSUPPORTED, agentrunner.EMISDIRECTED,
		agentrunner.EUNPROCESSABLE, agentrunner.EMETHOD}
	slices.Sort(got)
	slices.Sort(want)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("ErrorCode enum (-want +got):\n%s", diff)
	}
}

// apiRoleKeys are the API keys of the role tests, one per role.
var apiRoleKeys = map[string]string{
	config.RoleViewer:   "viewer-key-0123456789abcdef",
	config.RoleOperator: "operator-key-0123456789abcdef",
	config.RoleAdmin:    "admin-key-0123456789abcdef",
}

// TestOpenAPIRolesMatchTheServer: the role each operation documents is
// the one the server enforces. Without a credential the answer is the
// documented 401 (with its challenge) unless the route's public group is
// configured; with the role just below it is the documented 403; with the
// documented role it is neither, and still a documented answer.
func TestOpenAPIRolesMatchTheServer(t *testing.T) {
	d := loadAPIDoc(t)
	env := map[string]string{}
	var keys []config.APIKey
	for _, role := range config.Roles {
		env["KEY_"+strings.ToUpper(role)] = apiRoleKeys[role]
		keys = append(keys, config.APIKey{Name: role + "-caller", KeyEnv: "KEY_" + strings.ToUpper(role), Role: role})
	}
	auth, err := arhttp.NewAuthenticator(config.Auth{APIKeys: keys}, "", func(k string) (string, bool) { v, ok := env[k]; return v, ok }, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, public := range [][]string{nil, {config.PublicHealth, config.PublicMetrics}} {
		t.Run(fmt.Sprintf("public %v", public), func(t *testing.T) {
			cfg := testConfig()
			cfg.ArtifactsDir = t.TempDir()
			cfg.Server.MaxBodyBytes = 1 << 20
			cfg.Server.Public = public
			srv := newServer(t, arhttp.Options{Store: openStore(t), Config: cfg, Clock: clocktest.New(now),
				Logger: slog.New(slog.DiscardHandler), Auth: auth, Metrics: fakeMetrics}).WithCallback(apiCallbackSecret, nil)
			serve := func(op apiOperation, role string) *httptest.ResponseRecorder {
				req := localRequest(op.Method, d.examplePath(t, op), nil)
				if role != "" {
					req.Header.Set("Authorization", "Bearer "+apiRoleKeys[role])
				}
				if op.String() == "GET /api/events/stream" {
					// Refused after authorization, so the stream does not start.
					req.Header.Set("Last-Event-ID", "not an id")
				}
				rec := httptest.NewRecorder()
				srv.Handler().ServeHTTP(rec, req)
				return rec
			}
			for _, op := range d.operations(t) {
				role, ok := op.Op["x-agentrunner-role"].(string)
				if !ok {
					continue // the signed callback
				}
				group, _ := op.Op["x-agentrunner-public"].(string)
				rec := serve(op, "")
				if isPublic := group != "" && slices.Contains(public, group); isPublic {
					if rec.Code == http.StatusUnauthorized {
						t.Errorf("%s is public (%s) but answered 401 without a credential", op, group)
					}
				} else if rec.Code != http.StatusUnauthorized {
					t.Errorf("%s without a credential: %d, want 401", op, rec.Code)
				}
				d.checkResponse(t, op, rec)
				if public != nil {
					continue
				}
				if i := slices.Index(config.Roles, role); i > 0 {
					below := config.Roles[i-1]
					rec := serve(op, below)
					if rec.Code != http.StatusForbidden {
						t.Errorf("%s documents role %s; a %s got %d, want 403", op, role, below, rec.Code)
					}
					d.checkResponse(t, op, rec)
				}
				rec = serve(op, role)
				if rec.Code == http.StatusUnauthorized || rec.Code == http.StatusForbidden {
					t.Errorf("%s documents role %s; a %s got %d:\n%s", op, role, role, rec.Code, rec.Body)
				}
				d.checkResponse(t, op, rec)
			}
		})
	}
}

// Cycles of the seeded store.
const (
	apiCompletedCycle = "20260313_210000"
	apiFailedCycle    = "20260314_030000" // its directory is gone (archived)
	apiRunningCycle   = "20260314_090000"
)

// apiWorld is a workspace with history: cycles with attempts, events,
// artifacts, commands, a paused loop and a mailbox.
type apiWorld struct {
	store     *sqlite.Store
	artifacts string // the artifacts dir
	mailboxes *mailbox.Mailboxes
	// modified is the modification time of every artifact.
	modified time.Time
	// events counts the stored events.
	events int
}

func seedAPIWorld(t *testing.T) *apiWorld {
	t.Helper()
	w := &apiWorld{store: openStore(t), artifacts: t.TempDir(), modified: now.Add(-10 * time.Hour)}
	ctx := t.Context()
	apply := func(ch *agentrunner.Change) {
		t.Helper()
		if err := w.store.Apply(ctx, ch); err != nil {
			t.Fatal(err)
		}
		w.events += len(ch.Events)
	}
	dir := func(id string) string { return filepath.Join(w.artifacts, "cycles", id) }
	at := func(s string) time.Time {
		tm, err := time.Parse(time.RFC3339, s)
		if err != nil {
			t.Fatal(err)
		}
		return tm
	}
	exit := func(n int) *int { return &n }

	// The completed cycle, with its artifacts, a publication in progress
	// and a subdirectory, which are not listed.
	files := map[string]string{
		"plan.md":                "# Plan\n\n## Hypotheses\n\n- BTC funding flips positive\n",
		"research.md":            "# Research\n\n## Findings\n\nFunding is positive on three venues.\n",
		"strategy.json":          `{"strategy_id": "s-1", "positions": [{"asset": "BTC", "side": "long", "size": 0.1}]}`,
		"notes.txt":              "plain notes\n",
		"chart.bin":              "\x00\x01\x02binary",
		".strategy.json.tmp-123": "{",
	}
	if err := os.MkdirAll(filepath.Join(dir(apiCompletedCycle), "attempts"), 0o755); err != nil {
		t.Fatal(err)
	}
	for name, content := range files {
		path := filepath.Join(dir(apiCompletedCycle), name)
		if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(path, w.modified, w.modified); err != nil {
			t.Fatal(err)
		}
	}
	apply(&agentrunner.Change{
		Cycle: &agentrunner.Cycle{ID: apiCompletedCycle, Pipeline: "crypton", Status: agentrunner.CycleCompleted,
			LastCompletedStep: "evaluate", Dir: dir(apiCompletedCycle), StartedAt: at("2026-03-13T21:00:00Z"), EndedAt: at("2026-03-13T23:10:00Z")},
		Attempts: []*agentrunner.Attempt{
			{CycleID: apiCompletedCycle, Step: "plan", Number: 1, Agent: "planner", Status: agentrunner.AttemptSucceeded,
				StartedAt: at("2026-03-13T21:00:01Z"), EndedAt: at("2026-03-13T21:04:00Z"), ExitCode: exit(0),
				Usage: agentrunner.Usage{InputTokens: 5200, OutputTokens: 900, ToolCalls: 0}},
			{CycleID: apiCompletedCycle, Step: "research", Number: 1, Agent: "researcher", Status: agentrunner.AttemptFailed,
				ErrorClass: agentrunner.ClassTimeout, Error: "the agent ran past its 20m timeout",
				StartedAt: at("2026-03-13T21:04:01Z"), EndedAt: at("2026-03-13T21:24:01Z"), ExitCode: exit(-1)},
			{CycleID: apiCompletedCycle, Step: "research", Number: 2, Agent: "researcher", Status: agentrunner.AttemptSucceeded,
				NotBefore: at("2026-03-13T21:29:01Z"), StartedAt: at("2026-03-13T21:29:01Z"), EndedAt: at("2026-03-13T21:41:00Z"),
				Usage: agentrunner.Usage{InputTokens: 48000, OutputTokens: 3100, ToolCalls: 12}},
			{CycleID: apiCompletedCycle, Step: "execute", Number: 1, Status: agentrunner.AttemptSucceeded,
				StartedAt: at("2026-03-13T22:50:00Z"), EndedAt: at("2026-03-13T22:51:30Z")},
		},
		Events: []*agentrunner.Event{
			{Timestamp: at("2026-03-13T20:59:59Z"), Type: agentrunner.EventRunnerStarted, Level: agentrunner.LevelInfo,
				Details: map[string]any{"version": "1.0.0"}},
			{Timestamp: at("2026-03-13T21:00:00Z"), Type: agentrunner.EventCycleStarted, CycleID: apiCompletedCycle, Level: agentrunner.LevelInfo},
			{Timestamp: at("2026-03-13T21:10:00Z"), Type: "tool.call", Agent: "researcher", Step: "research", CycleID: apiCompletedCycle,
				Level: agentrunner.LevelDebug, Details: map[string]any{"tool": "web_search", "is_error": false, "duration_ms": 120}},
			{Timestamp: at("2026-03-13T21:11:00Z"), Type: "tool.call", Agent: "researcher", Step: "research", CycleID: apiCompletedCycle,
				Level: agentrunner.LevelDebug, Details: map[string]any{"tool": "price_feed", "is_error": true, "duration_ms": 40}},
			{Timestamp: at("2026-03-13T21:12:00Z"), Type: "tool.call", Agent: "researcher", Step: "research", CycleID: apiCompletedCycle,
				Level: agentrunner.LevelDebug, Details: map[string]any{"tool": "legacy_quotes", "is_error": false, "duration_ms": 10}},
			{Timestamp: at("2026-03-13T21:24:01Z"), Type: agentrunner.EventAttemptFailed, Agent: "researcher", Step: "research",
				CycleID: apiCompletedCycle, Level: agentrunner.LevelWarn, Details: map[string]any{"attempt": 1, "error_class": "timeout"}},
			{Timestamp: at("2026-03-13T23:10:00Z"), Type: agentrunner.EventCycleCompleted, CycleID: apiCompletedCycle, Level: agentrunner.LevelInfo},
		},
	})
	// The failed cycle; its directory was archived.
	apply(&agentrunner.Change{
		Cycle: &agentrunner.Cycle{ID: apiFailedCycle, Pipeline: "crypton", Status: agentrunner.CycleFailed, LastCompletedStep: "synthesize",
			Dir: dir(apiFailedCycle), StartedAt: at("2026-03-14T03:00:00Z"), EndedAt: at("2026-03-14T05:00:00Z"),
			Error: "step execute failed after 4 attempt(s)"},
		Attempts: []*agentrunner.Attempt{
			{CycleID: apiFailedCycle, Step: "execute", Number: 1, Status: agentrunner.AttemptFailed, ErrorClass: agentrunner.ClassUnavailable,
				Error: "the Execution Service answered 503", StartedAt: at("2026-03-14T04:00:00Z"), EndedAt: at("2026-03-14T04:00:02Z")},
		},
		Events: []*agentrunner.Event{
			{Timestamp: at("2026-03-14T05:00:00Z"), Type: "escalation", Step: "execute", CycleID: apiFailedCycle, Level: agentrunner.LevelError,
				Details: map[string]any{"attempts": 4, "error": "the Execution Service answered 503", "inputs": []any{"strategy.json"}}},
			{Timestamp: at("2026-03-14T05:00:00Z"), Type: agentrunner.EventCycleFailed, CycleID: apiFailedCycle, Level: agentrunner.LevelError},
		},
	})
	// The running cycle: research failed once and runs again.
	if err := os.MkdirAll(dir(apiRunningCycle), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir(apiRunningCycle), "plan.md"), []byte("# Plan\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	apply(&agentrunner.Change{
		Cycle: &agentrunner.Cycle{ID: apiRunningCycle, Pipeline: "crypton", Status: agentrunner.CycleRunning, Step: "research",
			LastCompletedStep: "plan", Dir: dir(apiRunningCycle), StartedAt: at("2026-03-14T09:00:00Z")},
		Attempts: []*agentrunner.Attempt{
			{CycleID: apiRunningCycle, Step: "plan", Number: 1, Agent: "planner", Status: agentrunner.AttemptSucceeded,
				StartedAt: at("2026-03-14T09:00:01Z"), EndedAt: at("2026-03-14T09:03:00Z"), ExitCode: exit(0)},
			{CycleID: apiRunningCycle, Step: "research", Number: 1, Agent: "researcher", Status: agentrunner.AttemptFailed,
				ErrorClass: agentrunner.ClassCrash, Error: "the agent exited with status 137", ExitCode: exit(137),
				StartedAt: at("2026-03-14T09:03:01Z"), EndedAt: at("2026-03-14T09:10:00Z")},
			{CycleID: apiRunningCycle, Step: "research", Number: 2, Agent: "researcher", Status: agentrunner.AttemptRunning,
				NotBefore: at("2026-03-14T09:15:00Z"), StartedAt: at("2026-03-14T09:15:00Z")},
		},
		// The store's copies: the artifact, and research's first prompt
		// and why its output was rejected.
		Files: []*agentrunner.StoredFile{
			apiStoredFile(apiRunningCycle, "plan", 1, agentrunner.FileArtifact, "plan.md", "# Plan\n", at("2026-03-14T09:03:00Z")),
			apiStoredFile(apiRunningCycle, "research", 1, agentrunner.FilePrompt, "prompt.md", "# Research\n\nRead plan.md.\n", at("2026-03-14T09:03:01Z")),
			apiStoredFile(apiRunningCycle, "research", 1, agentrunner.FileValidation, "validation.txt", "research.md: empty\n", at("2026-03-14T09:10:00Z")),
		},
		Events: []*agentrunner.Event{
			{Timestamp: at("2026-03-14T09:00:00Z"), Type: agentrunner.EventCycleStarted, CycleID: apiRunningCycle, Level: agentrunner.LevelInfo},
			{Timestamp: at("2026-03-14T09:10:00Z"), Type: agentrunner.EventRetryScheduled, Agent: "researcher", Step: "research",
				CycleID: apiRunningCycle, Level: agentrunner.LevelWarn, Details: map[string]any{"not_before": "2026-03-14T09:15:00Z"}},
		},
	})
	// The running cycle's lead keeps a to-do list, in two versions.
	for i, status := range []agentrunner.TodoStatus{agentrunner.TodoInProgress, agentrunner.TodoDone} {
		l := &agentrunner.TodoList{RunID: apiRunningCycle, WrittenAt: at("2026-03-14T09:05:00Z").Add(time.Duration(i) * time.Minute), Agent: "planner", Step: "plan",
			Todos: []agentrunner.Todo{{ID: "t1", Title: "Survey the funding rates", Status: status, Note: "three venues"},
				{ID: "t2", Title: "Write the synthesis", Status: agentrunner.TodoPending}}}
		if _, err := w.store.WriteTodos(ctx, l, i); err != nil {
			t.Fatal(err)
		}
	}
	// An operator paused the loop (a consumed command) and injected a
	// message (not consumed yet).
	pause := &agentrunner.Command{Kind: agentrunner.CommandPause, Operator: "alice", CreatedAt: at("2026-03-14T09:20:00Z"),
		Args: map[string]any{"reason": "exchange maintenance"}}
	if err := w.store.AddCommand(ctx, pause); err != nil {
		t.Fatal(err)
	}
	pause.ConsumedAt, pause.Result = at("2026-03-14T09:20:01Z"), "paused"
	apply(&agentrunner.Change{Consumed: []*agentrunner.Command{pause},
		Control: &agentrunner.Control{Paused: true, PausedBy: "alice", PausedAt: at("2026-03-14T09:20:01Z")}})
	inject := &agentrunner.Command{Kind: agentrunner.CommandInject, Operator: "bob", CreatedAt: at("2026-03-14T09:21:00Z"),
		Args: map[string]any{"agent": "researcher", "message": "ETH unlock on Friday"}}
	if err := w.store.AddCommand(ctx, inject); err != nil {
		t.Fatal(err)
	}

	var err error
	if w.mailboxes, err = mailbox.New(filepath.Join(w.artifacts, "mailboxes"), 5); err != nil {
		t.Fatal(err)
	}
	msgs := []mailbox.Message{
		{ID: apiCompletedCycle + "/plan/forward", Time: at("2026-03-13T21:04:00Z"), From: "planner", Kind: mailbox.Forward,
			CycleID: apiCompletedCycle, Body: "Focus on funding rates."},
		{ID: "inject-1", Time: at("2026-03-14T08:00:00Z"), From: "alice", Kind: mailbox.Inject, Body: "Ignore the SOL rumour."},
	}
	mailboxtest.Deposit(t, w.store, w.mailboxes, "researcher", msgs...)
	return w
}

// apiStoredFile is the store's copy of a file attempt n of step wrote.
func apiStoredFile(run, step string, n int, kind agentrunner.FileKind, name, body string, at time.Time) *agentrunner.StoredFile {
	return &agentrunner.StoredFile{RunID: run, Step: step, Visit: 1, Attempt: n, Kind: kind, Name: name,
		Data: []byte(body), SHA256: artifact.Hash([]byte(body)), CreatedAt: at}
}

// config returns the workspace's configuration: two agents with tools.
func (w *apiWorld) config() *config.Config {
	cfg := testConfig()
	cfg.ArtifactsDir = w.artifacts
	cfg.Server.MaxBodyBytes = 1 << 20
	cfg.Agents = map[string]*config.Agent{
		"planner":    {},
		"researcher": {Tools: []string{"web_search", "price_feed"}},
	}
	return cfg
}

// memory returns the agents' memories of the workspace; their files are
// under the artifacts dir, and writing one fails with fault when set.
func (w *apiWorld) memory(t *testing.T, fault error) *memory.Log {
	t.Helper()
	l, err := memory.NewLog(w.store, memory.LogOptions{
		Path:   func(agent string) string { return filepath.Join(w.artifacts, agent, "memory.md") },
		Clock:  clocktest.New(now),
		Faults: func(string) error { return fault },
	})
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// server returns a server of the workspace, changed by opts.
func (w *apiWorld) server(t *testing.T, change func(*arhttp.Options)) *arhttp.Server {
	t.Helper()
	opts := arhttp.Options{
		Store: w.store, Config: w.config(), Clock: clocktest.New(now), Logger: slog.New(slog.DiscardHandler),
		Mailboxes: w.mailboxes, Metrics: fakeMetrics, Engine: engineLag(0),
		Capsules: capsule.NewService(w.store, capsule.Options{Clock: clocktest.New(now)}),
		Memory:   w.memory(t, nil),
		Tools: []tool.Spec{{Name: "web_search", Description: "Search the web.",
			Parameters: json.RawMessage(`{"type": "object", "properties": {"query": {"type": "string"}}, "required": ["query"]}`)}},
		ToolStats: func() map[string]tool.Stats {
			return map[string]tool.Stats{"web_search": {Calls: 3, BreakerState: "closed"}, "price_feed": {Calls: 1, Errors: 1, BreakerState: "open"}}
		},
	}
	if change != nil {
		change(&opts)
	}
	return newServer(t, opts).WithCallback(apiCallbackSecret, nil)
}

// apiCase is one request and the status it must get.
type apiCase struct {
	name   string
	srv    string // "" is the full server
	method string
	target string
	header map[string]string
	// host replaces the Host 127.0.0.1.
	host string
	// contentType replaces application/json; "-" sends none.
	contentType string
	body        string
	// sign signs the body as the Execution Service does.
	sign bool
	want int
	// breaksSchema: the body is one the documented request schema refuses.
	breaksSchema bool
}

// TestOpenAPIResponsesMatchTheSchemas: against a store with history, every
// operation answers as documented: each request below gets its expected
// status, which the document lists, in a documented media type, with a
// body valid against the documented schema. Every operation is exercised
// with a success; accepted request bodies match the documented request
// schemas and bodies the schema refuses are refused by the server too.
func TestOpenAPIResponsesMatchTheSchemas(t *testing.T) {
	d := loadAPIDoc(t)
	w := seedAPIWorld(t)
	servers := map[string]*arhttp.Server{
		"": w.server(t, nil),
		"bare": w.server(t, func(o *arhttp.Options) {
			o.Mailboxes, o.Tools, o.ToolStats, o.Engine, o.Capsules, o.Memory = nil, nil, nil, nil, nil, nil
		}),
		"behind": w.server(t, func(o *arhttp.Options) {
			o.Memory = w.memory(t, errors.New("disk full"))
		}),
		// Ready: the world's store holds a halted run, which is not.
		"fresh": w.server(t, func(o *arhttp.Options) { o.Store, o.Engine = openStore(t), nil }),
		"stalled": w.server(t, func(o *arhttp.Options) {
			o.Engine = engineLag(time.Hour)
			o.Config.Health.MaxEngineLag = config.Duration(time.Minute)
		}),
	}
	runs := startAPIRuns(t, w)
	servers["runs"] = runs.srv
	bl := startAPIBacklog(t, w)
	if bl != nil {
		servers["backlog"] = bl.srv
	}
	modified := w.modified.UTC().Format(http.TimeFormat)
	artifact := "/api/cycles/" + apiCompletedCycle + "/artifacts/"
	attempt := "/api/runs/" + apiRunningCycle + "/steps/research/attempts/"
	cases := []apiCase{
		{name: "status", method: "GET", target: "/api/status", want: 200},
		{name: "status without history", srv: "bare", method: "GET", target: "/api/status", want: 200},
		{name: "cycles", method: "GET", target: "/api/cycles", want: 200},
		{name: "a full page of cycles", method: "GET", target: "/api/cycles?limit=1", want: 200},
		{name: "cycles by status and before", method: "GET", target: "/api/cycles?status=failed&before=" + apiRunningCycle + "&limit=500", want: 200},
		{name: "limit 0", method: "GET", target: "/api/cycles?limit=0", want: 400},
		{name: "limit 501", method: "GET", target: "/api/cycles?limit=501", want: 400},
		{name: "before not a cycle id", method: "GET", target: "/api/cycles?before=yesterday", want: 400},
		{name: "unknown status", method: "GET", target: "/api/cycles?status=paused", want: 400},
		{name: "completed cycle", method: "GET", target: "/api/cycles/" + apiCompletedCycle, want: 200},
		{name: "failed cycle without directory", method: "GET", target: "/api/cycles/" + apiFailedCycle, want: 200},
		{name: "running cycle", method: "GET", target: "/api/cycles/" + apiRunningCycle, want: 200},
		{name: "bad cycle id", method: "GET", target: "/api/cycles/2026", want: 400},
		{name: "unknown cycle", method: "GET", target: "/api/cycles/20990101_000000", want: 404},
		{name: "markdown artifact", method: "GET", target: artifact + "plan.md", want: 200},
		{name: "JSON artifact", method: "GET", target: artifact + "strategy.json", want: 200},
		{name: "text artifact", method: "GET", target: artifact + "notes.txt", want: 200},
		{name: "binary artifact", method: "GET", target: artifact + "chart.bin", want: 200},
		{name: "a range", method: "GET", target: artifact + "plan.md", header: map[string]string{"Range": "bytes=0-5"}, want: 206},
		{name: "two ranges", method: "GET", target: artifact + "plan.md", header: map[string]string{"Range": "bytes=0-1,4-5"}, want: 206},
		{name: "not modified", method: "GET", target: artifact + "plan.md", header: map[string]string{"If-Modified-Since": modified}, want: 304},
		{name: "modified since", method: "GET", target: artifact + "plan.md",
			header: map[string]string{"If-Unmodified-Since": w.modified.Add(-time.Hour).UTC().Format(http.TimeFormat)}, want: 412},
		{name: "range past the end", method: "GET", target: artifact + "plan.md", header: map[string]string{"Range": "bytes=100000-"}, want: 416},
		{name: "hidden file", method: "GET", target: artifact + ".strategy.json.tmp-123", want: 400},
		{name: "dot dot in the name", method: "GET", target: artifact + "a..b.md", want: 400},
		{name: "artifact of a bad cycle id", method: "GET", target: "/api/cycles/x/artifacts/plan.md", want: 400},
		{name: "missing artifact", method: "GET", target: artifact + "evaluation.md", want: 404},
		{name: "a subdirectory", method: "GET", target: artifact + "attempts", want: 404},
		{name: "artifact of an archived cycle", method: "GET", target: "/api/cycles/" + apiFailedCycle + "/artifacts/plan.md", want: 404},
		{name: "artifact of an unknown cycle", method: "GET", target: "/api/cycles/20990101_000000/artifacts/plan.md", want: 404},
		{name: "a stored artifact", method: "GET", target: "/api/cycles/" + apiRunningCycle + "/artifacts/plan.md", want: 200},
		{name: "an artifact the store lacks", method: "GET", target: "/api/cycles/" + apiRunningCycle + "/artifacts/research.md", want: 404},
		{name: "a run's stored artifact", method: "GET", target: "/api/runs/" + apiRunningCycle + "/artifacts/plan.md", want: 200},
		{name: "an artifact a run lacks", method: "GET", target: "/api/runs/" + apiRunningCycle + "/artifacts/nosuch.md", want: 404},
		{name: "a run artifact's bad name", method: "GET", target: "/api/runs/" + apiRunningCycle + "/artifacts/plan..md", want: 400},
		{name: "a prompt", method: "GET", target: attempt + "1/prompt", want: 200},
		{name: "a prompt not modified", method: "GET", target: attempt + "1/prompt", header: map[string]string{"If-Modified-Since": "Sat, 14 Mar 2026 09:03:01 GMT"}, want: 304},
		{name: "a validation report", method: "GET", target: attempt + "1/validation", want: 200},
		{name: "no validation report", method: "GET", target: attempt + "2/validation", want: 404},
		{name: "a prompt of no attempt", method: "GET", target: attempt + "9/prompt", want: 404},
		{name: "a prompt of attempt 0", method: "GET", target: attempt + "0/prompt", want: 400},
		{name: "a prompt of an unknown run", method: "GET", target: "/api/runs/review-999999/steps/a/attempts/1/prompt", want: 404},
		{name: "a prompt of a bad run id", method: "GET", target: "/api/runs/-x/steps/a/attempts/1/prompt", want: 400},
		{name: "errors", method: "GET", target: "/api/errors", want: 200},
		{name: "a full page of errors", method: "GET", target: "/api/errors?limit=1&before=100", want: 200},
		{name: "errors before -1", method: "GET", target: "/api/errors?before=-1", want: 400},
		{name: "errors limit x", method: "GET", target: "/api/errors?limit=x", want: 400},
		{name: "tools", method: "GET", target: "/api/tools", want: 200},
		{name: "tools without registry", srv: "bare", method: "GET", target: "/api/tools", want: 200},
		{name: "mailbox", method: "GET", target: "/api/mailboxes/researcher", want: 200},
		{name: "empty mailbox", method: "GET", target: "/api/mailboxes/planner", want: 200},
		{name: "mailbox of an unknown agent", method: "GET", target: "/api/mailboxes/nobody", want: 404},
		{name: "mailboxes not served", srv: "bare", method: "GET", target: "/api/mailboxes/researcher", want: 503},
		{name: "events", method: "GET", target: "/api/events", want: 200},
		{name: "events of a cycle from warn", method: "GET", target: "/api/events?cycle_id=" + apiCompletedCycle + "&level=warn", want: 200},
		{name: "events since an id", method: "GET", target: "/api/events?since=2&limit=3", want: 200},
		{name: "events since a time", method: "GET", target: "/api/events?since=2026-03-14T00:00:00Z&type=cycle.started", want: 200},
		{name: "no events after the last", method: "GET", target: "/api/events?since=1000", want: 200},
		{name: "since neither id nor time", method: "GET", target: "/api/events?since=yesterday", want: 400},
		{name: "unknown level", method: "GET", target: "/api/events?level=loud", want: 400},
		{name: "bad cycle_id", method: "GET", target: "/api/events?cycle_id=-x", want: 400},
		{name: "events limit 0", method: "GET", target: "/api/events?limit=0", want: 400},
		{name: "stream with unknown level", method: "GET", target: "/api/events/stream?level=loud", want: 400},
		{name: "stream with bad Last-Event-ID", method: "GET", target: "/api/events/stream", header: map[string]string{"Last-Event-ID": "abc"}, want: 400},
		{name: "audit", method: "GET", target: "/api/audit", want: 200},
		{name: "a full page of audit", method: "GET", target: "/api/audit?limit=1", want: 200},
		{name: "audit before x", method: "GET", target: "/api/audit?before=x", want: 400},
		{name: "config", method: "GET", target: "/api/config", want: 200},
		{name: "document", method: "GET", target: "/api/openapi.json", want: 200},
		{name: "live", method: "GET", target: "/health/live", want: 200},
		{name: "ready without engine", srv: "fresh", method: "GET", target: "/health/ready", want: 200},
		{name: "a run is halted", method: "GET", target: "/health/ready", want: 503},
		{name: "engine stalled", srv: "stalled", method: "GET", target: "/health/ready", want: 503},
		{name: "metrics", method: "GET", target: "/metrics", want: 200},

		{name: "pause", method: "POST", target: "/api/override/pause", want: 202},
		{name: "pause with a reason", method: "POST", target: "/api/override/pause", body: `{"reason": "exchange maintenance"}`, want: 202},
		{name: "inject", method: "POST", target: "/api/override/inject", body: `{"agent": "researcher", "message": "ETH unlock on Friday", "reason": "news"}`, want: 202},
		{name: "force a cycle", method: "POST", target: "/api/override/force-cycle", body: `{}`, want: 202},
		{name: "reload", method: "POST", target: "/api/admin/reload", body: `{"reason": "new prompts"}`, want: 202},
		{name: "reload with an unknown field", method: "POST", target: "/api/admin/reload", body: `{"force": true}`, want: 400, breaksSchema: true},
		{name: "unknown override", method: "POST", target: "/api/override/nap", want: 404},
		{name: "agent for pause", method: "POST", target: "/api/override/pause", body: `{"agent": "researcher"}`, want: 400},
		{name: "inject without body", method: "POST", target: "/api/override/inject", want: 400},
		{name: "inject to an unknown agent", method: "POST", target: "/api/override/inject", body: `{"agent": "nobody", "message": "hi"}`, want: 400},
		{name: "blank inject", method: "POST", target: "/api/override/inject", body: `{"agent": "researcher", "message": "  "}`, want: 400, breaksSchema: true},
		{name: "unknown field", method: "POST", target: "/api/override/resume", body: `{"reason": "ok", "force": true}`, want: 400, breaksSchema: true},
		{name: "reason too long", method: "POST", target: "/api/override/resume", body: `{"reason": "` + strings.Repeat("x", 1025) + `"}`, want: 400, breaksSchema: true},
		{name: "not JSON", method: "POST", target: "/api/override/abort", body: `reason`, want: 400},
		{name: "mailbox message", method: "POST", target: "/api/mailboxes/researcher", body: `{"message": "Check the ETH unlock."}`, want: 202},
		{name: "blank mailbox message", method: "POST", target: "/api/mailboxes/researcher", body: `{"message": " "}`, want: 400, breaksSchema: true},
		{name: "mailbox message without body", method: "POST", target: "/api/mailboxes/researcher", want: 400},
		{name: "mailbox message with an unknown field", method: "POST", target: "/api/mailboxes/researcher", body: `{"message": "hi", "from": "x"}`, want: 400, breaksSchema: true},
		{name: "message to an unknown agent", method: "POST", target: "/api/mailboxes/nobody", body: `{"message": "hi"}`, want: 404},
		{name: "callback", method: "POST", target: "/api/execution/callback", sign: true,
			body: `{"strategy_id": "strat-000042", "status": "error", "error": "exchange rejected the order"}`, want: 202},
		{name: "unsigned callback", method: "POST", target: "/api/execution/callback",
			body: `{"strategy_id": "strat-000042", "status": "completed"}`, want: 401},
		{name: "callback with an unknown status", method: "POST", target: "/api/execution/callback", sign: true,
			body: `{"strategy_id": "strat-000042", "status": "done"}`, want: 400, breaksSchema: true},

		{name: "store a capsule", method: "POST", target: "/api/capsules", want: 201,
			body: capsuleJSON(map[string]any{"workspace": "crypton", "name": "handoff", "phase": "research", "role": "planner", "tags": []string{"btc"}, "capsule_text": capsuleText("Find where funding flips.")})},
		{name: "a capsule's name taken", method: "POST", target: "/api/capsules", want: 409,
			body: capsuleJSON(map[string]any{"workspace": "crypton", "name": "handoff", "capsule_text": capsuleText("Again.")})},
		{name: "upsert a capsule", method: "POST", target: "/api/capsules", want: 201,
			body: capsuleJSON(map[string]any{"workspace": "crypton", "name": "handoff", "phase": "research", "upsert": true, "capsule_text": capsuleText("Find where funding flips, v2.")})},
		{name: "a second capsule", method: "POST", target: "/api/capsules", want: 201,
			body: capsuleJSON(map[string]any{"workspace": "crypton", "name": "notes", "run_id": "20260314_060000", "capsule_text": capsuleText("Notes on the rate limit.")})},
		{name: "a capsule without a section", method: "POST", target: "/api/capsules", want: 400,
			body: capsuleJSON(map[string]any{"workspace": "crypton", "name": "bad", "capsule_text": "## Objective\n\nNothing else.\n"})},
		{name: "a capsule without a name", method: "POST", target: "/api/capsules", want: 400, breaksSchema: true,
			body: capsuleJSON(map[string]any{"workspace": "crypton", "capsule_text": capsuleText("x")})},
		{name: "a capsule with an unknown field", method: "POST", target: "/api/capsules", want: 400, breaksSchema: true,
			body: capsuleJSON(map[string]any{"workspace": "crypton", "name": "x", "colour": "red", "capsule_text": capsuleText("x")})},
		{name: "capsules", method: "GET", target: "/api/capsules", want: 200},
		{name: "a full page of capsules", method: "GET", target: "/api/capsules?workspace=crypton&include_deleted=true&limit=1", want: 200},
		{name: "capsules before an id", method: "GET", target: "/api/capsules?before=2&tag=btc&phase=research&role=planner&run_id=", want: 200},
		{name: "capsules by an unknown key", method: "GET", target: "/api/capsules?colour=red", want: 400},
		{name: "capsules limit x", method: "GET", target: "/api/capsules?limit=x", want: 400},
		{name: "capsules include_deleted maybe", method: "GET", target: "/api/capsules?include_deleted=maybe", want: 400},
		{name: "search capsules", method: "GET", target: "/api/capsules/search?q=funding&workspace=crypton&limit=5", want: 200},
		{name: "search without q", method: "GET", target: "/api/capsules/search", want: 400},
		{name: "a search the index cannot parse", method: "GET", target: "/api/capsules/search?q=%22funding", want: 400},
		{name: "capsule inventory", method: "GET", target: "/api/capsules/inventory", want: 200},
		{name: "the latest capsule", method: "GET", target: "/api/capsules/latest?workspace=crypton&phase=research", want: 200},
		{name: "the latest capsule of no workspace", method: "GET", target: "/api/capsules/latest", want: 400},
		{name: "the latest capsule of an empty workspace", method: "GET", target: "/api/capsules/latest?workspace=nosuch", want: 404},
		{name: "a capsule", method: "GET", target: "/api/capsules/1", want: 200},
		{name: "a capsule of a bad id", method: "GET", target: "/api/capsules/x", want: 400},
		{name: "an unknown capsule", method: "GET", target: "/api/capsules/999", want: 404},
		{name: "a capsule by name", method: "GET", target: "/api/workspaces/crypton/capsules/handoff", want: 200},
		{name: "a capsule of an unknown name", method: "GET", target: "/api/workspaces/crypton/capsules/nosuch", want: 404},
		{name: "update a capsule", method: "PATCH", target: "/api/capsules/1", body: `{"version": 2, "role": "analyst", "tags": ["btc", "funding"]}`, want: 200},
		{name: "update a stale version", method: "PATCH", target: "/api/capsules/1", body: `{"version": 2, "role": "writer"}`, want: 409},
		{name: "update without a version", method: "PATCH", target: "/api/capsules/1", body: `{"role": "writer"}`, want: 400, breaksSchema: true},
		{name: "update an unknown capsule", method: "PATCH", target: "/api/capsules/999", body: `{"version": 1}`, want: 404},
		{name: "export capsules", method: "GET", target: "/api/capsules/export?workspace=crypton", want: 200},
		{name: "compose capsules", method: "POST", target: "/api/capsules/compose", body: `{"capsules": [{"id": 1}, {"workspace": "crypton", "name": "notes"}]}`, want: 200},
		{name: "compose an unknown capsule", method: "POST", target: "/api/capsules/compose", body: `{"capsules": [{"id": 999}]}`, want: 404},
		{name: "compose nothing", method: "POST", target: "/api/capsules/compose", body: `{"capsules": []}`, want: 400, breaksSchema: true},
		{name: "bulk update capsules", method: "POST", target: "/api/capsules/bulk-update", body: `{"filter": {"workspace": "crypton", "tag": "btc"}, "set": {"phase": "analysis"}}`, want: 200},
		{name: "bulk update without a filter", method: "POST", target: "/api/capsules/bulk-update", body: `{"filter": {}, "set": {"phase": "x"}}`, want: 400},
		{name: "bulk update with an unknown filter key", method: "POST", target: "/api/capsules/bulk-update", body: `{"filter": {"colour": "red"}, "set": {"phase": "x"}}`, want: 400, breaksSchema: true},
		{name: "delete a capsule", method: "DELETE", target: "/api/capsules/2", want: 204},
		{name: "delete a deleted capsule", method: "DELETE", target: "/api/capsules/2", want: 404},
		{name: "import capsules", method: "POST", target: "/api/capsules/import?on_conflict=replace", contentType: "application/x-ndjson", want: 200,
			body: capsuleRecord("crypton", "imported", 3) + "\n" + capsuleRecord("crypton", "handoff", 7) + "\n"},
		{name: "import a bad line", method: "POST", target: "/api/capsules/import", want: 400, body: capsuleRecord("crypton", "more", 1) + "\nnot a record\n"},
		{name: "import with an unknown policy", method: "POST", target: "/api/capsules/import?on_conflict=merge", want: 400},
		{name: "bulk delete capsules", method: "POST", target: "/api/capsules/bulk-delete", body: `{"filter": {"workspace": "crypton"}}`, want: 200},
		{name: "capsules not served", srv: "bare", method: "GET", target: "/api/capsules", want: 503},

		{name: "append to a memory", method: "POST", target: "/api/memory/researcher", body: `{"text": "Funding flips negative before the expiry."}`, want: 201},
		{name: "append with the memory file behind", srv: "behind", method: "POST", target: "/api/memory/researcher", body: `{"text": "Check the rate limits."}`, want: 201},
		{name: "a blank memory note", method: "POST", target: "/api/memory/researcher", body: `{"text": " "}`, want: 400, breaksSchema: true},
		{name: "a memory note with an unknown field", method: "POST", target: "/api/memory/researcher", body: `{"text": "x", "step": "plan"}`, want: 400, breaksSchema: true},
		{name: "append to an unknown agent's memory", method: "POST", target: "/api/memory/nobody", body: `{"text": "x"}`, want: 404},
		{name: "a memory", method: "GET", target: "/api/memory/researcher", want: 200},
		{name: "a memory without entries", method: "GET", target: "/api/memory/planner", want: 200},
		{name: "the memory of an unknown agent", method: "GET", target: "/api/memory/nobody", want: 404},
		{name: "a memory with a query", method: "GET", target: "/api/memory/researcher?limit=5", want: 400},
		{name: "search the memories", method: "GET", target: "/api/memory/search?q=funding", want: 200},
		{name: "search two agents' memories", method: "GET", target: "/api/memory/search?q=funding+OR+rate&agent=researcher&agent=planner&limit=5", want: 200},
		{name: "search an unknown agent's memory", method: "GET", target: "/api/memory/search?q=funding&agent=nobody", want: 400},
		{name: "a memory search the index cannot parse", method: "GET", target: "/api/memory/search?q=%22funding", want: 400},
		{name: "a blank memory search", method: "GET", target: "/api/memory/search?q=", want: 400},
		{name: "memory search limit 101", method: "GET", target: "/api/memory/search?q=funding&limit=101", want: 400},
		{name: "memories not served", srv: "bare", method: "GET", target: "/api/memory/researcher", want: 503},

		{name: "a run's to-do list", method: "GET", target: "/api/runs/" + apiRunningCycle + "/todos", want: 200},
		{name: "a version of a to-do list", method: "GET", target: "/api/runs/" + apiRunningCycle + "/todos?version=1", want: 200},
		{name: "a to-do list's history", method: "GET", target: "/api/runs/" + apiRunningCycle + "/todos?history=true", want: 200},
		{name: "the to-do list of a run without one", method: "GET", target: "/api/runs/" + apiCompletedCycle + "/todos", want: 200},
		{name: "the to-do history of a run without a list", method: "GET", target: "/api/runs/" + apiCompletedCycle + "/todos?history=true", want: 200},
		{name: "a to-do list version not written", method: "GET", target: "/api/runs/" + apiRunningCycle + "/todos?version=9", want: 404},
		{name: "a to-do list version 0", method: "GET", target: "/api/runs/" + apiRunningCycle + "/todos?version=0", want: 400},
		{name: "a to-do list version and its history", method: "GET", target: "/api/runs/" + apiRunningCycle + "/todos?version=1&history=true", want: 400},
		{name: "a to-do history that is not a boolean", method: "GET", target: "/api/runs/" + apiRunningCycle + "/todos?history=maybe", want: 400},
		{name: "a to-do list with an unknown parameter", method: "GET", target: "/api/runs/" + apiRunningCycle + "/todos?agent=planner", want: 400},
		{name: "the to-do list of an unknown run", method: "GET", target: "/api/runs/review-999999/todos", want: 404},
		{name: "the to-do list of a bad run id", method: "GET", target: "/api/runs/-x/todos", want: 400},

		{name: "status with runs", srv: "runs", method: "GET", target: "/api/status", want: 200},
		{name: "runs", srv: "runs", method: "GET", target: "/api/runs", want: 200},
		{name: "a full page of runs", srv: "runs", method: "GET", target: "/api/runs?pipeline=load&status=running&limit=1", want: 200},
		{name: "runs before a run", srv: "runs", method: "GET", target: "/api/runs?before=" + runs.held, want: 200},
		{name: "runs of an unknown status", srv: "runs", method: "GET", target: "/api/runs?status=sleeping", want: 400},
		{name: "runs before a bad id", srv: "runs", method: "GET", target: "/api/runs?before=-x", want: 400},
		{name: "a run", srv: "runs", method: "GET", target: "/api/runs/" + runs.done, want: 200},
		{name: "a run at its gate", srv: "runs", method: "GET", target: "/api/runs/" + runs.gate, want: 200},
		{name: "a learning-loop cycle as a run", srv: "runs", method: "GET", target: "/api/runs/" + apiRunningCycle, want: 200},
		{name: "an unknown run", srv: "runs", method: "GET", target: "/api/runs/review-999999", want: 404},
		{name: "a bad run id", srv: "runs", method: "GET", target: "/api/runs/-x", want: 400},
		{name: "step runs", srv: "runs", method: "GET", target: "/api/runs/" + runs.done + "/steps", want: 200},
		{name: "waiting step runs", srv: "runs", method: "GET", target: "/api/runs/" + runs.gate + "/steps?status=waiting", want: 200},
		{name: "step runs of an unknown status", srv: "runs", method: "GET", target: "/api/runs/" + runs.gate + "/steps?status=asleep", want: 400},
		{name: "step runs of an unknown run", srv: "runs", method: "GET", target: "/api/runs/review-999999/steps", want: 404},
		{name: "gates", srv: "runs", method: "GET", target: "/api/gates", want: 200},
		{name: "gates of a pipeline", srv: "runs", method: "GET", target: "/api/gates?pipeline=load", want: 200},
		{name: "gates limit 0", srv: "runs", method: "GET", target: "/api/gates?limit=0", want: 400},
		{name: "start a run", srv: "runs", method: "POST", target: "/api/pipelines/load/runs", body: `{"inputs": {"n": 2}}`, want: 201},
		{name: "start a run without a body", srv: "runs", method: "POST", target: "/api/pipelines/review/runs", want: 201},
		{name: "start a run without a runner", method: "POST", target: "/api/pipelines/load/runs", want: 404},
		{name: "inputs the schema refuses", srv: "runs", method: "POST", target: "/api/pipelines/load/runs", body: `{"inputs": {"n": "two"}}`, want: 422},
		{name: "start with an unknown field", srv: "runs", method: "POST", target: "/api/pipelines/load/runs", body: `{"input": {}}`, want: 400, breaksSchema: true},
		{name: "start an unknown pipeline", srv: "runs", method: "POST", target: "/api/pipelines/nosuch/runs", want: 404},
		{name: "route without to", srv: "runs", method: "POST", target: "/api/runs/" + runs.gate + "/gates/signoff", body: `{"decision": "route"}`, want: 422, breaksSchema: true},
		{name: "an unknown decision", srv: "runs", method: "POST", target: "/api/runs/" + runs.gate + "/gates/signoff", body: `{"decision": "maybe"}`, want: 422, breaksSchema: true},
		{name: "route to no step", srv: "runs", method: "POST", target: "/api/runs/" + runs.gate + "/gates/signoff", body: `{"decision": "route", "to": "nowhere"}`, want: 422},
		{name: "a decision with an unknown field", srv: "runs", method: "POST", target: "/api/runs/" + runs.gate + "/gates/signoff", body: `{"decision": "approve", "why": "x"}`, want: 400, breaksSchema: true},
		{name: "a decision without a body", srv: "runs", method: "POST", target: "/api/runs/" + runs.gate + "/gates/signoff", want: 400},
		{name: "a step the pipeline lacks", srv: "runs", method: "POST", target: "/api/runs/" + runs.held + "/gates/nosuch", body: `{"decision": "approve"}`, want: 404},
		{name: "a decision on no gate", srv: "runs", method: "POST", target: "/api/runs/" + runs.gate + "/gates/draft", body: `{"decision": "approve"}`, want: 409},
		{name: "a decision on an unknown run", srv: "runs", method: "POST", target: "/api/runs/review-999999/gates/signoff", body: `{"decision": "approve"}`, want: 404},
		{name: "approve", srv: "runs", method: "POST", target: "/api/runs/" + runs.gate + "/gates/signoff", body: `{"decision": "approve", "comment": "ship it"}`, want: 202},
		{name: "a second decision", srv: "runs", method: "POST", target: "/api/runs/" + runs.gate + "/gates/signoff", body: `{"decision": "reject"}`, want: 409},
		{name: "abort a run", srv: "runs", method: "POST", target: "/api/runs/" + runs.held + "/abort", body: `{"reason": "wrong ticker"}`, want: 202},
		{name: "abort a finished run", srv: "runs", method: "POST", target: "/api/runs/" + runs.done + "/abort", want: 409},
		{name: "abort an unknown run", srv: "runs", method: "POST", target: "/api/runs/review-999999/abort", want: 404},
		{name: "resume a halted run", srv: "runs", method: "POST", target: "/api/runs/" + runs.halted + "/resume", body: `{"reason": "fixed"}`, want: 202},
		{name: "resume a run that is not halted", srv: "runs", method: "POST", target: "/api/runs/" + runs.done + "/resume", want: 409},
		{name: "resume an unknown run", srv: "runs", method: "POST", target: "/api/runs/review-999999/resume", want: 404},
		{name: "an abort with a long reason", srv: "runs", method: "POST", target: "/api/runs/" + runs.held + "/abort", body: `{"reason": "` + strings.Repeat("x", 1025) + `"}`, want: 400, breaksSchema: true},
		{name: "audit after decisions", srv: "runs", method: "GET", target: "/api/audit?limit=50", want: 200},

		{name: "a foreign Host", method: "GET", target: "/api/status", host: "attacker.example", want: 421},
		{name: "a foreign Host for the callback", method: "POST", target: "/api/execution/callback", host: "attacker.example:8080", sign: true,
			body: `{"strategy_id": "strat-000042", "status": "completed"}`, want: 421},
		{name: "a cross-site inject", method: "POST", target: "/api/override/inject", header: map[string]string{"Origin": "http://attacker.example"},
			body: `{"agent": "researcher", "message": "sell everything"}`, want: 403},
		{name: "a cross-site mailbox message", method: "POST", target: "/api/mailboxes/researcher", header: map[string]string{"Sec-Fetch-Site": "cross-site"},
			body: `{"message": "sell everything"}`, want: 403},
		{name: "a cross-site reload", method: "POST", target: "/api/admin/reload", header: map[string]string{"Referer": "http://attacker.example/page"}, want: 403},
		{name: "a cross-site callback", method: "POST", target: "/api/execution/callback", header: map[string]string{"Origin": "null"}, sign: true,
			body: `{"strategy_id": "strat-000042", "status": "completed"}`, want: 403},
		{name: "inject as text/plain", method: "POST", target: "/api/override/inject", contentType: "text/plain",
			body: `{"agent": "researcher", "message": "sell everything"}`, want: 415},
		{name: "mailbox message as a form", method: "POST", target: "/api/mailboxes/researcher", contentType: "application/x-www-form-urlencoded",
			body: `{"message": "hi"}`, want: 415},
		{name: "reload without Content-Type", method: "POST", target: "/api/admin/reload", contentType: "-", body: `{}`, want: 415},
		{name: "callback as text/plain", method: "POST", target: "/api/execution/callback", contentType: "text/plain", sign: true,
			body: `{"strategy_id": "strat-000042", "status": "completed"}`, want: 415},
	}
	cases = append(cases, backlogCases(t, bl, "backlog")...)
	succeeded := map[string]bool{}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			req := localRequest(tc.method, tc.target, strings.NewReader(tc.body))
			for k, v := range tc.header {
				req.Header.Set(k, v)
			}
			if tc.host != "" {
				req.Host = tc.host
			}
			switch tc.contentType {
			case "":
			case "-":
				req.Header.Del("Content-Type")
			default:
				req.Header.Set("Content-Type", tc.contentType)
			}
			if tc.sign {
				req.Header.Set(webhook.SignatureHeader, webhook.Sign(apiCallbackSecret, []byte(tc.body), now))
			}
			rec := httptest.NewRecorder()
			servers[tc.srv].Handler().ServeHTTP(rec, req)
			op := d.match(t, tc.method, req.URL.Path)
			if rec.Code != tc.want {
				t.Fatalf("%s %s answered %d, want %d:\n%s", tc.method, tc.target, rec.Code, tc.want, rec.Body)
			}
			d.checkResponse(t, op, rec)
			if rec.Code < 300 {
				succeeded[op.String()] = true
			}
			if tc.body != "" && json.Valid([]byte(tc.body)) {
				ptr := op.Pointer + jsonPointer("requestBody", "content", "application/json", "schema")
				if _, ok := d.resolve("#" + ptr); !ok {
					t.Fatalf("%s takes a body but documents no JSON request schema", op)
				}
				err := d.validateJSON(t, ptr, []byte(tc.body))
				switch {
				case rec.Code < 300 && err != nil:
					t.Errorf("the server accepted a body the documented schema refuses: %v\n%s", err, tc.body)
				case tc.breaksSchema && err == nil:
					t.Errorf("the documented request schema accepts a body the server refuses:\n%s", tc.body)
				}
			}
		})
	}

	// The event stream, over a real connection: each event's data is the
	// documented event and its id and type are the SSE id and event.
	stream := d.match(t, "GET", "/api/events/stream")
	for _, ev := range readEventStream(t, d, servers[""], w.events-1) {
		if ev.id != ev.data["id"] || ev.event != ev.data["event_type"] {
			t.Errorf("SSE id %v event %q, data id %v event_type %v", ev.id, ev.event, ev.data["id"], ev.data["event_type"])
		}
	}
	succeeded[stream.String()] = true

	for _, op := range d.operations(t) {
		if !succeeded[op.String()] && (bl != nil || !backlogRoute(op)) {
			t.Errorf("no request above exercised a success of %s; add one", op)
		}
	}
}

// sseEvent is one event read from the stream.
type sseEvent struct {
	id    float64
	event string
	data  map[string]any
}

// readEventStream reads n events after event 1 from the server's event
// stream and validates each data line against the documented event schema.
func readEventStream(t *testing.T, d *apiDoc, srv *arhttp.Server, n int) []sseEvent {
	t.Helper()
	ts := httptest.NewServer(srv.Handler())
	defer ts.Close()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, ts.URL+"/api/events/stream", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Last-Event-ID", "1")
	resp, err := ts.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	op := d.match(t, "GET", "/api/events/stream")
	doc, ptr, ok := d.response(op, resp.StatusCode)
	if resp.StatusCode != http.StatusOK || !ok {
		t.Fatalf("GET /api/events/stream: %d, want the documented 200", resp.StatusCode)
	}
	mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	media := objectAt(doc, "content", mt)
	if media == nil || mt != "text/event-stream" {
		t.Fatalf("GET /api/events/stream: Content-Type %q, want the documented text/event-stream", resp.Header.Get("Content-Type"))
	}
	if _, ok := media["x-agentrunner-event-data"]; !ok {
		t.Fatal("the stream's media type documents no x-agentrunner-event-data schema")
	}
	dataSchema := ptr + jsonPointer("content", mt, "x-agentrunner-event-data")

	var out []sseEvent
	var cur sseEvent
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for len(out) < n && sc.Scan() {
		field, value, _ := strings.Cut(sc.Text(), ": ")
		switch field {
		case "retry", "":
		case "id":
			id, err := strconv.ParseInt(value, 10, 64)
			if err != nil {
				t.Fatalf("SSE id %q: %v", value, err)
			}
			cur.id = float64(id)
		case "event":
			cur.event = value
		case "data":
			if err := d.validateJSON(t, dataSchema, []byte(value)); err != nil {
				t.Errorf("SSE data does not match the documented event: %v\n%s", err, value)
			}
			if err := json.Unmarshal([]byte(value), &cur.data); err != nil {
				t.Fatalf("SSE data is not JSON: %v", err)
			}
			out = append(out, cur)
			cur = sseEvent{}
		default:
			t.Fatalf("unexpected SSE line %q", sc.Text())
		}
	}
	if len(out) < n {
		t.Fatalf("the stream ended after %d of %d events: %v", len(out), n, sc.Err())
	}
	return out
}

// TestOpenAPIServedDocumentIsTheFile: GET /api/openapi.json serves the
// document byte for byte, as JSON.
func TestOpenAPIServedDocumentIsTheFile(t *testing.T) {
	d := loadAPIDoc(t)
	srv := newServer(t, arhttp.Options{Store: openStore(t), Config: testConfig(), Clock: clocktest.New(now), Logger: slog.New(slog.DiscardHandler)})
	rec := httptest.NewRecorder()
	srv.Handler().ServeHTTP(rec, localRequest(http.MethodGet, "/api/openapi.json", nil))
	if rec.Code != http.StatusOK || rec.Header().Get("Content-Type") != "application/json" {
		t.Errorf("GET /api/openapi.json: %d %s, want 200 application/json", rec.Code, rec.Header().Get("Content-Type"))
	}
	if !bytes.Equal(rec.Body.Bytes(), d.raw) {
		t.Error("GET /api/openapi.json does not serve openapi.json")
	}
}
