package http_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"

	"github.com/agentrunner/agentrunner"
	"github.com/agentrunner/agentrunner/config"
	arhttp "github.com/agentrunner/agentrunner/http"
	"github.com/agentrunner/agentrunner/webhook"
)

// The fuzz targets send requests through the real handler, over a real
// store, and check what every answer must be, whatever the input:
//   - never 500: bad input is the caller's error, not an internal one;
//   - an error is {"error": {"code", "message"}} with the status of its code;
//   - no configured secret in the answer;
//   - a command is stored exactly when the answer is 202 Accepted.

// callbackSecret signs the Execution Service's callbacks in the fuzz
// targets; it is one of the secrets no answer may hold.
const callbackSecret = "callback-secret-0123456789"

// fuzzFixture is the API fixture serving the callback too, with the
// secrets its answers must never hold.
type fuzzFixture struct {
	*apiFixture
	secrets []string
}

// newFuzzFixture builds the API fixture (edit changes its configuration)
// and enables the callback.
func newFuzzFixture(f *testing.F, edit func(*config.Config)) *fuzzFixture {
	fx := &fuzzFixture{apiFixture: newAPIFixture(f, edit), secrets: []string{viewerKey, operatorKey, adminKey, callbackSecret}}
	fx.srv.WithCallback([]byte(callbackSecret), func() { fx.woken++ })
	return fx
}

// header is one request header; a value "" sends none.
type header struct{ name, value string }

// rawRequest parses the request as the server reads it off the wire, so
// only what a client can really send reaches the handler; the rest is
// skipped. Values with line breaks are skipped: they would be other
// headers.
func rawRequest(t *testing.T, method, target string, headers []header, body []byte) *http.Request {
	t.Helper()
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s HTTP/1.1\r\n", method, target)
	host := false
	for _, h := range headers {
		if h.value == "" {
			continue
		}
		if strings.ContainsAny(h.value, "\r\n") {
			t.Skip("a header value with a line break")
		}
		host = host || strings.EqualFold(h.name, "Host")
		fmt.Fprintf(&b, "%s: %s\r\n", h.name, h.value)
	}
	if !host {
		fmt.Fprintf(&b, "Host: 127.0.0.1:8080\r\n")
	}
	fmt.Fprintf(&b, "Content-Length: %d\r\n\r\n", len(body))
	req, err := http.ReadRequest(bufio.NewReader(io.MultiReader(strings.NewReader(b.String()), bytes.NewReader(body))))
	if err != nil {
		t.Skipf("the server refuses this request before routing it: %v", err)
	}
	req.RemoteAddr = "127.0.0.1:40000"
	return req
}

// flushRecorder records an answer and ends the request's context at its
// first flush, so an event stream returns once it has started.
type flushRecorder struct {
	*httptest.ResponseRecorder
	cancel context.CancelFunc
}

func (r flushRecorder) Flush() {
	r.ResponseRecorder.Flush()
	r.cancel()
}

// serve sends req through the handler and checks the answer's properties;
// body is the request's body.
func (fx *fuzzFixture) serve(t *testing.T, req *http.Request, body []byte) *httptest.ResponseRecorder {
	t.Helper()
	fx.skipSecrets(t, req, body)
	before, woken := fx.newestCommand(t), fx.woken
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	rec := flushRecorder{httptest.NewRecorder(), cancel}
	fx.srv.Handler().ServeHTTP(rec, req.WithContext(ctx))
	checkAnswer(t, req, rec.ResponseRecorder)
	fx.checkNoSecret(t, req, rec.ResponseRecorder)
	after := fx.newestCommand(t)
	switch {
	case rec.Code == http.StatusAccepted && (after != before+1 || fx.woken != woken+1):
		t.Fatalf("%s %s: accepted, but the newest command went from %d to %d and the engine was woken %d times", req.Method, req.URL, before, after, fx.woken-woken)
	case rec.Code != http.StatusAccepted && (after != before || fx.woken != woken):
		t.Fatalf("%s %s: refused with %d, but the newest command went from %d to %d; %s", req.Method, req.URL, rec.Code, before, after, rec.Body)
	}
	return rec.ResponseRecorder
}

// newestCommand is the id of the newest stored command, 0 with none.
func (fx *fuzzFixture) newestCommand(t *testing.T) int64 {
	t.Helper()
	cmds, err := fx.store.Commands(t.Context(), agentrunner.CommandFilter{Limit: 1})
	if err != nil {
		t.Fatal(err)
	}
	if len(cmds) == 0 {
		return 0
	}
	return cmds[0].ID
}

// skipSecrets skips a request that carries a secret where an answer may
// rightly quote it back (the path, the query, a header that is not a
// credential, a string of the body), and which could store it for later
// answers to show.
func (fx *fuzzFixture) skipSecrets(t *testing.T, req *http.Request, body []byte) {
	t.Helper()
	quotable := []string{req.URL.Path, req.URL.RawQuery, req.URL.Query().Encode(), req.Host, string(body)}
	for _, vs := range req.URL.Query() {
		quotable = append(quotable, vs...)
	}
	for name, vs := range req.Header {
		if name != "Authorization" && name != http.CanonicalHeaderKey(arhttp.APIKeyHeader) {
			quotable = append(quotable, vs...)
		}
	}
	quotable = append(quotable, jsonStrings(body)...)
	all := strings.Join(quotable, "\n")
	for _, s := range fx.secrets {
		if strings.Contains(all, s) {
			t.Skip("the request quotes a secret itself")
		}
	}
}

// jsonStrings returns the strings of data's JSON values, escapes decoded,
// up to the first syntax error.
func jsonStrings(data []byte) []string {
	var out []string
	dec := json.NewDecoder(bytes.NewReader(data))
	for {
		tok, err := dec.Token()
		if err != nil {
			return out
		}
		if s, ok := tok.(string); ok {
			out = append(out, s)
		}
	}
}

// checkNoSecret fails when the answer's headers or body hold a secret.
func (fx *fuzzFixture) checkNoSecret(t *testing.T, req *http.Request, rec *httptest.ResponseRecorder) {
	t.Helper()
	var answer strings.Builder
	rec.Result().Header.Write(&answer)
	answer.Write(rec.Body.Bytes())
	for _, s := range fx.secrets {
		if strings.Contains(answer.String(), s) {
			t.Fatalf("%s %s: the answer holds the secret %q:\n%s", req.Method, req.URL, s, answer.String())
		}
	}
}

// artifactPath is the route of an artifact, which net/http's ServeContent
// answers: 412 and 416 are its answers to conditional and range requests,
// without a JSON body (as openapi.json describes).
var artifactPath = regexp.MustCompile(`^/api/cycles/[^/]+/artifacts/[^/]+$`)

// streamPath is the route of the event stream, whose answer is not JSON.
const streamPath = "/api/events/stream"

// checkAnswer fails on a 500, an error that is not in the error format or
// whose status is not its code's, and a JSON route answering anything but
// JSON.
func checkAnswer(t *testing.T, req *http.Request, rec *httptest.ResponseRecorder) {
	t.Helper()
	where := fmt.Sprintf("%s %s", req.Method, req.URL)
	if rec.Code == http.StatusInternalServerError {
		t.Fatalf("%s: 500 for the caller's input: %s", where, rec.Body)
	}
	if artifactPath.MatchString(req.URL.Path) && (rec.Code == http.StatusPreconditionFailed || rec.Code == http.StatusRequestedRangeNotSatisfiable) {
		return
	}
	if rec.Code < 400 && (rec.Code >= 300 || artifactPath.MatchString(req.URL.Path) || req.URL.Path == streamPath || req.URL.Path == "/metrics") {
		return // redirects (of unclean paths), files, the stream, metrics
	}
	if ct := rec.Header().Get("Content-Type"); ct != "application/json" {
		t.Fatalf("%s: %d with Content-Type %q: %s", where, rec.Code, ct, rec.Body)
	}
	if rec.Code < 400 {
		if !json.Valid(rec.Body.Bytes()) {
			t.Fatalf("%s: %d with a body that is not JSON: %s", where, rec.Code, rec.Body)
		}
		return
	}
	var e struct {
		Error *struct {
			Code    string `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	dec := json.NewDecoder(bytes.NewReader(rec.Body.Bytes()))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&e); err != nil || e.Error == nil || e.Error.Code == "" || e.Error.Message == "" || dec.More() {
		t.Fatalf("%s: %d, not in the error format (%v): %s", where, rec.Code, err, rec.Body)
	}
	if want, ok := arhttp.StatusOf[e.Error.Code]; !ok || want != rec.Code {
		t.Fatalf("%s: status %d for the error code %q (its status: %d)", where, rec.Code, e.Error.Code, want)
	}
}

// pick returns the i-th of choices, wrapping around.
func pick[T any](choices []T, i uint8) T { return choices[int(i)%len(choices)] }

// bodyRoutes are the endpoints that read a JSON body.
var bodyRoutes = []string{
	"/api/override/pause", "/api/override/resume", "/api/override/abort", "/api/override/inject", "/api/override/force-cycle",
	"/api/mailboxes/research", "/api/admin/reload", "/api/execution/callback",
}

// FuzzRequestBodies sends fuzzed bodies and Content-Types to every endpoint
// that reads a JSON body, as the admin, and to the callback with a valid
// signature over the fuzzed body.
func FuzzRequestBodies(f *testing.F) {
	fx := newFuzzFixture(f, nil)
	seeds := []struct {
		route string
		body  string
	}{
		{"/api/override/pause", `{"reason": "maintenance"}`},
		{"/api/override/pause", `{"reason": 3}`},
		{"/api/override/resume", ``},
		{"/api/override/abort", `{"reason": "x", "force": true}`},
		{"/api/override/abort", `{} {}`},
		{"/api/override/abort", `{"reason": "` + strings.Repeat("x", 1100) + `"}`},
		{"/api/override/inject", `{"agent": "research", "message": "look at ETH"}`},
		{"/api/override/inject", `{"agent": "ghost", "message": "hi"}`},
		{"/api/override/inject", `{"agent": "plan", "message": " "}`},
		{"/api/override/inject", `{"agent": "plan"}`},
		{"/api/override/force-cycle", `{"message": "hi"}`},
		{"/api/override/force-cycle", `null`},
		{"/api/mailboxes/research", `{"message": "check the funding rates"}`},
		{"/api/mailboxes/research", `{"message": null}`},
		{"/api/mailboxes/research", `["message"]`},
		{"/api/admin/reload", `{"reason": "new keys"}`},
		{"/api/admin/reload", `{"reason": "\ud800"}`},
		{"/api/execution/callback", `{"strategy_id":"20260314_060000","status":"completed"}`},
		{"/api/execution/callback", `{"strategy_id":"20260314_060000","status":"error","error":"rejected"}`},
		{"/api/execution/callback", `{"strategy_id":"","status":"completed"}`},
		{"/api/execution/callback", `{"strategy_id":"x","status":"done","filled":1}`},
	}
	for _, s := range seeds {
		for _, ct := range []string{"application/json", "application/json; charset=utf-8", "text/plain"} {
			f.Add(uint8(indexOf(bodyRoutes, s.route)), ct, []byte(s.body))
		}
	}
	f.Fuzz(func(t *testing.T, route uint8, contentType string, body []byte) {
		path := pick(bodyRoutes, route)
		headers := []header{{"Content-Type", contentType}, {"Authorization", "Bearer " + adminKey}}
		if path == "/api/execution/callback" {
			headers = append(headers, header{webhook.SignatureHeader, webhook.Sign([]byte(callbackSecret), body, now)})
		}
		fx.serve(t, rawRequest(t, http.MethodPost, path, headers, body), body)
	})
}

func indexOf(s []string, v string) int {
	for i, x := range s {
		if x == v {
			return i
		}
	}
	panic("no " + v)
}

// queryRoutes are the GET endpoints; the list endpoints read query
// parameters and the others must ignore them.
var queryRoutes = []string{
	"/api/cycles", "/api/errors", "/api/events", "/api/audit", "/api/events/stream", "/api/tools",
	"/api/status", "/api/mailboxes/research", "/api/config", "/api/openapi.json", "/health/ready", "/health/live",
}

// FuzzQueryParameters sends fuzzed raw query strings to every GET endpoint.
func FuzzQueryParameters(f *testing.F) {
	fx := newFuzzFixture(f, nil)
	seeds := []struct {
		route string
		query string
	}{
		{"/api/cycles", "limit=1"},
		{"/api/cycles", "limit=500&status=running&before=20260314_082653"},
		{"/api/cycles", "limit=0"},
		{"/api/cycles", "limit=501"},
		{"/api/cycles", "limit=-1"},
		{"/api/cycles", "limit=9223372036854775808"},
		{"/api/cycles", "status=done"},
		{"/api/cycles", "before=yesterday"},
		{"/api/cycles", "before=20260314_08265%00"},
		{"/api/errors", "limit=1&before=2"},
		{"/api/errors", "before=-1"},
		{"/api/errors", "before=1e3"},
		{"/api/events", "since=2&limit=3"},
		{"/api/events", "since=2026-03-14T00:00:00Z&type=tool.call&level=warn"},
		{"/api/events", "since=2026-03-14T00:00:00+25:00"},
		{"/api/events", "since=-5"},
		{"/api/events", "since=yesterday"},
		{"/api/events", "cycle_id=20260314_082653&level=debug"},
		{"/api/events", "cycle_id=x&level=loud"},
		{"/api/events", "type=%ff%fe&limit=%31"},
		{"/api/events", "limit=1;since=2"},
		{"/api/events/stream", "since=1"},
		{"/api/events/stream", "level=loud"},
		{"/api/audit", "limit=2&before=1"},
		{"/api/audit", "limit=&before="},
		{"/api/tools", "limit=x"},
		{"/api/status", "%zz"},
	}
	for _, s := range seeds {
		f.Add(uint8(indexOf(queryRoutes, s.route)), s.query)
	}
	f.Fuzz(func(t *testing.T, route uint8, query string) {
		target := pick(queryRoutes, route) + "?" + query
		fx.serve(t, rawRequest(t, http.MethodGet, target, []header{{"Authorization", "Bearer " + adminKey}}, nil), nil)
	})
}

// pathRoutes are the endpoints with path values; %s marks each value.
var pathRoutes = []struct{ method, format, body string }{
	{"GET", "/api/cycles/%s", ""},
	{"GET", "/api/cycles/%s/artifacts/%s", ""},
	{"GET", "/api/cycles/20260314_082653/artifacts/%s", ""},
	{"GET", "/api/mailboxes/%s", ""},
	{"POST", "/api/mailboxes/%s", `{"message": "hi"}`},
	{"POST", "/api/override/%s", `{}`},
	{"POST", "/api/override/%s", `{"agent": "plan", "message": "hi"}`},
}

// FuzzPathValues sends fuzzed path values (cycle ids, artifact names,
// agents, override kinds), raw as they appear in the request line.
func FuzzPathValues(f *testing.F) {
	fx := newFuzzFixture(f, nil)
	for i, vs := range [][][2]string{
		{{"20260314_082653", ""}, {"20990101_000000", ""}, {"latest", ""}, {"20260314_082653%2F..", ""}},
		{{"20260314_082653", "plan.md"}, {"20260314_082653", "%2e%2e%2f%2e%2e%2fstate.db"}, {"x", "plan.md"}, {"20990101_000000", "plan.md"}},
		{{"plan.md", ""}, {"strategy.json", ""}, {".plan.md.tmp", ""}, {"plan..md", ""}, {"missing.md", ""}, {"%00", ""}},
		{{"research", ""}, {"plan", ""}, {"ghost", ""}, {"..%2F..", ""}},
		{{"research", ""}, {"Research", ""}, {"", ""}},
		{{"pause", ""}, {"resume", ""}, {"abort", ""}, {"force-cycle", ""}, {"reboot", ""}, {"pause%2F", ""}},
		{{"inject", ""}, {"INJECT", ""}},
	} {
		for _, v := range vs {
			f.Add(uint8(i), v[0], v[1])
		}
	}
	f.Fuzz(func(t *testing.T, route uint8, a, b string) {
		rt := pick(pathRoutes, route)
		target := rt.format
		if strings.Count(target, "%s") == 2 {
			target = fmt.Sprintf(target, a, b)
		} else {
			target = fmt.Sprintf(target, a)
		}
		headers := []header{{"Authorization", "Bearer " + adminKey}, {"Content-Type", "application/json"}}
		fx.serve(t, rawRequest(t, rt.method, target, headers, []byte(rt.body)), []byte(rt.body))
	})
}

// headerRoutes are requests whose headers are fuzzed: each endpoint group
// that reads a header.
var headerRoutes = []struct{ method, target, body string }{
	{"GET", "/api/status", ""},
	{"GET", "/api/config", ""},
	{"GET", "/api/cycles/20260314_082653/artifacts/plan.md", ""},
	{"GET", "/api/events/stream", ""},
	{"GET", "/health/ready", ""},
	{"POST", "/api/override/pause", `{"reason": "r"}`},
	{"POST", "/api/mailboxes/research", `{"message": "hi"}`},
	{"POST", "/api/admin/reload", ``},
	{"POST", "/api/execution/callback", `{"strategy_id":"20260314_060000","status":"completed"}`},
}

// headerInput is one fuzzed set of headers.
type headerInput struct {
	authorization, apiKey, contentType, origin, referer, host, rangeValue, lastEventID, signature string
}

// FuzzHeaders sends fuzzed headers (credentials, Content-Type, Origin,
// Referer, Host, Range, Last-Event-ID, the callback's signature) with and
// without credentials configured. A signature "" signs the body validly.
func FuzzHeaders(f *testing.F) {
	fixtures := []*fuzzFixture{
		newFuzzFixture(f, nil),
		newFuzzFixture(f, func(c *config.Config) { c.Server.Auth = config.Auth{} }),
	}
	for _, in := range []headerInput{
		{authorization: "Bearer " + adminKey, contentType: "application/json", host: "127.0.0.1:8080"},
		{authorization: "bearer  " + operatorKey + " ", contentType: "application/json; charset=utf-8", origin: "http://127.0.0.1:8080"},
		{apiKey: viewerKey, host: "localhost:8080", lastEventID: "1"},
		{authorization: "Bearer " + adminKey, apiKey: adminKey},
		{apiKey: adminKey + "0"},
		{authorization: "Bearer " + operatorKey + "."},
		{authorization: "Bearer " + viewerKey, contentType: "application/json"},
		{authorization: "Basic YWRtaW46YWRtaW4="},
		{authorization: "Bearer a.b.c"},
		{authorization: "Bearer " + strings.Repeat("k", 9000)},
		{contentType: "text/plain", origin: "https://attacker.example", host: "attacker.example"},
		{contentType: "application/x-www-form-urlencoded", referer: "https://attacker.example/page"},
		{host: "[::1]:8080", origin: "null"},
		{host: "127.0.0.1.nip.io:8080"},
		{rangeValue: "bytes=0-5"},
		{rangeValue: "bytes=100000-"},
		{rangeValue: "bytes=5-1"},
		{lastEventID: "-1"},
		{lastEventID: "x"},
		{signature: "t=1,v1=00"},
		{signature: "garbage"},
	} {
		for route := range headerRoutes {
			for mode := range fixtures {
				f.Add(uint8(mode), uint8(route), in.authorization, in.apiKey, in.contentType, in.origin, in.referer, in.host, in.rangeValue, in.lastEventID, in.signature)
			}
		}
	}
	f.Fuzz(func(t *testing.T, mode, route uint8, authorization, apiKey, contentType, origin, referer, host, rangeValue, lastEventID, signature string) {
		fx, rt := pick(fixtures, mode), pick(headerRoutes, route)
		if signature == "" {
			signature = webhook.Sign([]byte(callbackSecret), []byte(rt.body), now)
		}
		headers := []header{
			{"Authorization", authorization}, {arhttp.APIKeyHeader, apiKey}, {"Content-Type", contentType},
			{"Origin", origin}, {"Referer", referer}, {"Host", host}, {"Range", rangeValue},
			{"Last-Event-ID", lastEventID}, {webhook.SignatureHeader, signature},
		}
		fx.serve(t, rawRequest(t, rt.method, rt.target, headers, []byte(rt.body)), []byte(rt.body))
	})
}
