package websearch

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/agentrunner/agentrunner/config"
	"github.com/agentrunner/agentrunner/tool"
)

const testKey = "BSA-test-0123456789abcdef"

// fakeBrave is a Brave-shaped search API on 127.0.0.1: it records every
// request and answers with the scripted status, headers and body.
type fakeBrave struct {
	*httptest.Server
	mu       sync.Mutex
	requests []*http.Request
	status   int
	header   http.Header
	body     string
}

func newFakeBrave(t *testing.T) *fakeBrave {
	t.Helper()
	fixture, err := os.ReadFile("testdata/brave_web_search.json")
	if err != nil {
		t.Fatal(err)
	}
	f := &fakeBrave{status: http.StatusOK, header: http.Header{}, body: string(fixture)}
	f.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f.mu.Lock()
		defer f.mu.Unlock()
		f.requests = append(f.requests, r.Clone(context.Background()))
		if r.URL.Path != searchPath || r.Method != http.MethodGet {
			http.Error(w, `{"type":"ErrorResponse","error":{"detail":"no such endpoint","code":"NOT_FOUND"}}`, http.StatusNotFound)
			return
		}
		for k, vs := range f.header {
			w.Header()[k] = vs
		}
		if w.Header().Get("Content-Type") == "" {
			w.Header().Set("Content-Type", "application/json")
		}
		w.WriteHeader(f.status)
		_, _ = w.Write([]byte(f.body))
	}))
	t.Cleanup(f.Close)
	return f
}

func (f *fakeBrave) script(status int, header http.Header, body string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.status, f.header, f.body = status, header, body
}

func (f *fakeBrave) last(t *testing.T) *http.Request {
	t.Helper()
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.requests) == 0 {
		t.Fatal("the fake received no request")
	}
	return f.requests[len(f.requests)-1]
}

func (f *fakeBrave) count() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.requests)
}

func env(vars map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) {
		v, ok := vars[k]
		return v, ok
	}
}

func newTool(t *testing.T, f *fakeBrave) (tool.Spec, *searcher) {
	t.Helper()
	spec, h, err := New(&config.Tool{Name: "web_search"}, &Settings{BaseURL: f.URL}, env(map[string]string{DefaultAPIKeyEnv: testKey}))
	if err != nil {
		t.Fatal(err)
	}
	return spec, h.(*searcher)
}

func TestSearchNormalisesBraveResults(t *testing.T) {
	f := newFakeBrave(t)
	_, s := newTool(t, f)

	out, err := s.Call(t.Context(), json.RawMessage(`{"query": "bitcoin etf flows"}`))
	if err != nil {
		t.Fatal(err)
	}
	var got []Result
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatalf("output is not a JSON array of results: %v\n%s", err, out)
	}
	want := []Result{
		{
			Title:       "Spot Bitcoin ETF Flows - Daily Data",
			URL:         "https://farside.co.uk/btc/",
			Description: "Daily net flows of the US spot bitcoin ETFs, in US$m. IBIT & FBTC lead; GBTC outflows continue.",
			Age:         "2 days ago",
			Source:      "Farside Investors",
		},
		{
			Title:       "Bitcoin ETFs see $1B weekly inflows as price nears record",
			URL:         "https://www.coindesk.com/markets/2025/03/01/bitcoin-etfs-see-1b-weekly-inflows",
			Description: "U.S.-listed spot bitcoin exchange-traded funds drew $1.1 billion last week, the most since January — analysts expect more.",
			Age:         "March 1, 2025",
			Source:      "CoinDesk",
		},
		{
			Title:       "What is a spot bitcoin ETF?",
			URL:         "https://www.investopedia.com/spot-bitcoin-etf-8358373",
			Description: "A spot bitcoin ETF holds actual bitcoin. Learn how they work.",
			Age:         "2024-01-11T00:00:00",
			Source:      "www.investopedia.com",
		},
		{
			Title:       "ETF flows tracker",
			URL:         "https://theblock.example/data/etf-flows",
			Description: "Charts of ETF flows by issuer.",
			Source:      "theblock.example",
		},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("results (-want +got):\n%s", diff)
	}
	if strings.Contains(out, "<strong>") || strings.Contains(out, `\u0026`) {
		t.Errorf("output still has markup or escaped HTML:\n%s", out)
	}

	r := f.last(t)
	gotReq := map[string]string{
		"q":         r.URL.Query().Get("q"),
		"count":     r.URL.Query().Get("count"),
		"freshness": r.URL.Query().Get("freshness"),
		"token":     r.Header.Get("X-Subscription-Token"),
		"accept":    r.Header.Get("Accept"),
	}
	wantReq := map[string]string{"q": "bitcoin etf flows", "count": "10", "freshness": "", "token": testKey, "accept": "application/json"}
	if diff := cmp.Diff(wantReq, gotReq); diff != "" {
		t.Errorf("request (-want +got):\n%s", diff)
	}
}

func TestSearchArguments(t *testing.T) {
	f := newFakeBrave(t)
	_, s := newTool(t, f)
	tests := []struct {
		name string
		args string
		// want is the query string sent, or wantErr a fragment of the error.
		want    url.Values
		wantErr string
	}{
		{name: "defaults", args: `{"query":"eth staking"}`, want: url.Values{"q": {"eth staking"}, "count": {"10"}}},
		{name: "day", args: `{"query":"q","recency":"day"}`, want: url.Values{"q": {"q"}, "count": {"10"}, "freshness": {"pd"}}},
		{name: "week", args: `{"query":"q","recency":"week"}`, want: url.Values{"q": {"q"}, "count": {"10"}, "freshness": {"pw"}}},
		{name: "month", args: `{"query":"q","recency":"month"}`, want: url.Values{"q": {"q"}, "count": {"10"}, "freshness": {"pm"}}},
		{name: "year", args: `{"query":"q","recency":"year"}`, want: url.Values{"q": {"q"}, "count": {"10"}, "freshness": {"py"}}},
		{name: "one result", args: `{"query":"q","num_results":1}`, want: url.Values{"q": {"q"}, "count": {"1"}}},
		{name: "twenty results", args: `{"query":"q","num_results":20}`, want: url.Values{"q": {"q"}, "count": {"20"}}},
		{name: "integral float", args: `{"query":"q","num_results":5.0}`, want: url.Values{"q": {"q"}, "count": {"5"}}},
		{name: "query trimmed", args: `{"query":"  sol  "}`, want: url.Values{"q": {"sol"}, "count": {"10"}}},
		{name: "special characters", args: `{"query":"a&b=c #d"}`, want: url.Values{"q": {"a&b=c #d"}, "count": {"10"}}},
		{name: "400 characters", args: `{"query":"` + strings.Repeat("é", 400) + `"}`, want: url.Values{"q": {strings.Repeat("é", 400)}, "count": {"10"}}},

		{name: "zero results", args: `{"query":"q","num_results":0}`, wantErr: "num_results must be an integer from 1 to 20"},
		{name: "too many results", args: `{"query":"q","num_results":21}`, wantErr: "num_results must be an integer from 1 to 20"},
		{name: "fractional", args: `{"query":"q","num_results":2.5}`, wantErr: "num_results must be an integer"},
		{name: "string count", args: `{"query":"q","num_results":"ten"}`, wantErr: "invalid arguments"},
		{name: "bad recency", args: `{"query":"q","recency":"hour"}`, wantErr: `recency must be one of day, week, month, year, got "hour"`},
		{name: "missing query", args: `{}`, wantErr: "query is required"},
		{name: "blank query", args: `{"query":"   "}`, wantErr: "query is required"},
		{name: "401 characters", args: `{"query":"` + strings.Repeat("x", 401) + `"}`, wantErr: "query has 401 characters; at most 400"},
		{name: "unknown field", args: `{"query":"q","site":"x.com"}`, wantErr: `unknown field "site"`},
		{name: "not an object", args: `["q"]`, wantErr: "invalid arguments"},
		{name: "empty", args: ``, wantErr: "expected a JSON object"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := f.count()
			_, err := s.Call(t.Context(), json.RawMessage(tt.args))
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error = %v, want one containing %q", err, tt.wantErr)
				}
				if tool.IsTransient(err) {
					t.Errorf("bad arguments must not be retried: %v", err)
				}
				if f.count() != before {
					t.Errorf("a request was sent for invalid arguments")
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, f.last(t).URL.Query()); diff != "" {
				t.Errorf("query string (-want +got):\n%s", diff)
			}
		})
	}
}

func TestSearchRateLimit(t *testing.T) {
	now := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	tests := []struct {
		name      string
		header    http.Header
		transient bool
		wait      time.Duration
	}{
		{name: "per-second window", header: http.Header{"X-Ratelimit-Reset": {"1, 1419704"}, "X-Ratelimit-Remaining": {"0, 9000"}}, transient: true, wait: time.Second},
		{name: "single value", header: http.Header{"X-Ratelimit-Reset": {"7"}}, transient: true, wait: 7 * time.Second},
		{name: "reset wins over retry-after", header: http.Header{"X-Ratelimit-Reset": {"2, 50"}, "Retry-After": {"30"}}, transient: true, wait: 2 * time.Second},
		{name: "retry-after seconds", header: http.Header{"Retry-After": {"3"}}, transient: true, wait: 3 * time.Second},
		{name: "retry-after date", header: http.Header{"Retry-After": {now.Add(90 * time.Second).Format(http.TimeFormat)}}, transient: true, wait: 90 * time.Second},
		{name: "no headers: executor backs off", header: http.Header{}, transient: true, wait: 0},
		{name: "garbage reset ignored", header: http.Header{"X-Ratelimit-Reset": {"soon"}}, transient: true, wait: 0},
		{name: "monthly quota used up", header: http.Header{"X-Ratelimit-Reset": {"1, 86400"}, "X-Ratelimit-Remaining": {"1, 0"}}, transient: false},
		{name: "wait too long", header: http.Header{"Retry-After": {"3600"}}, transient: false},
		{name: "wait beyond any bound", header: http.Header{"Retry-After": {"99999999999"}}, transient: false},
		{name: "retry-after in the past: executor backs off", header: http.Header{"Retry-After": {now.Add(-time.Minute).Format(http.TimeFormat)}}, transient: true, wait: 0},
		{name: "signed retry-after ignored", header: http.Header{"Retry-After": {"+3"}}, transient: true, wait: 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFakeBrave(t)
			_, s := newTool(t, f)
			s.now = func() time.Time { return now }
			f.script(http.StatusTooManyRequests, tt.header, `{"type":"ErrorResponse","error":{"id":"x","status":429,"code":"RATE_LIMITED","detail":"Request rate limit exceeded for plan."}}`)
			_, err := s.Call(t.Context(), json.RawMessage(`{"query":"q"}`))
			if err == nil {
				t.Fatal("want an error")
			}
			got := struct {
				Transient bool
				Wait      time.Duration
			}{tool.IsTransient(err), tool.RetryAfterOf(err)}
			want := struct {
				Transient bool
				Wait      time.Duration
			}{tt.transient, tt.wait}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("%v (-want +got):\n%s", err, diff)
			}
			if !strings.Contains(err.Error(), "429") {
				t.Errorf("error %q does not say it was a rate limit", err)
			}
		})
	}
}

func TestSearchUpstreamErrors(t *testing.T) {
	tests := []struct {
		name      string
		status    int
		body      string
		transient bool
		want      []string
	}{
		{name: "500", status: 500, body: `oops`, transient: true, want: []string{"unavailable", "HTTP 500"}},
		{name: "503 html page", status: 503, body: `<html><body>Service Unavailable</body></html>`, transient: true, want: []string{"HTTP 503"}},
		{name: "401", status: 401, body: `{"type":"ErrorResponse","error":{"code":"SUBSCRIPTION_TOKEN_INVALID","detail":"The provided subscription token ` + testKey + ` is invalid."}}`,
			want: []string{"rejected the API key", "HTTP 401", DefaultAPIKeyEnv}},
		{name: "403", status: 403, body: `{}`, want: []string{"rejected the API key", "HTTP 403"}},
		{name: "422 with Brave's message", status: 422, body: `{"type":"ErrorResponse","error":{"id":"1","status":422,"code":"VALIDATION","detail":"Unable to validate request parameter 'count'."}}`,
			want: []string{"refused the request (HTTP 422)", "Unable to validate request parameter 'count'. (VALIDATION)"}},
		{name: "400 echoing the key", status: 400, body: `{"error":{"detail":"bad token ` + testKey + `"}}`, want: []string{"HTTP 400", "bad token [redacted]"}},
		{name: "redirect not followed", status: 302, body: ``, want: []string{"redirect"}},
		{name: "malformed JSON", status: 200, body: `{"type":"search","web":{"results":[{"title":`, transient: true, want: []string{"malformed response"}},
		{name: "not a search", status: 200, body: `{"type":"ErrorResponse"}`, transient: true, want: []string{"malformed response"}},
		{name: "results of the wrong type", status: 200, body: `{"type":"search","web":{"results":{"title":"x"}}}`, transient: true, want: []string{"malformed response"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFakeBrave(t)
			_, s := newTool(t, f)
			h := http.Header{}
			if tt.status == 302 {
				h.Set("Location", "http://127.0.0.1:1/elsewhere")
			}
			f.script(tt.status, h, tt.body)
			_, err := s.Call(t.Context(), json.RawMessage(`{"query":"q"}`))
			if err == nil {
				t.Fatal("want an error")
			}
			if got := tool.IsTransient(err); got != tt.transient {
				t.Errorf("transient = %v, want %v (%v)", got, tt.transient, err)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
			if strings.Contains(err.Error(), testKey) {
				t.Errorf("error shows the API key: %q", err)
			}
			if f.count() != 1 {
				t.Errorf("%d requests were sent, want exactly 1 (no retries or redirects inside the handler)", f.count())
			}
		})
	}
}

func TestSearchNoResults(t *testing.T) {
	for _, body := range []string{
		`{"type":"search","query":{"original":"zzqx"}}`,
		`{"type":"search","web":{"type":"search","results":[]}}`,
	} {
		f := newFakeBrave(t)
		_, s := newTool(t, f)
		f.script(200, nil, body)
		out, err := s.Call(t.Context(), json.RawMessage(`{"query":"zzqx"}`))
		if err != nil {
			t.Fatal(err)
		}
		if want := `No results found for "zzqx".`; out != want {
			t.Errorf("Call = %q, want %q", out, want)
		}
	}
}

func TestSearchNetworkErrorIsTransient(t *testing.T) {
	f := newFakeBrave(t)
	_, s := newTool(t, f)
	f.Close()
	_, err := s.Call(t.Context(), json.RawMessage(`{"query":"q"}`))
	if err == nil || !tool.IsTransient(err) || !strings.Contains(err.Error(), "could not be reached") {
		t.Fatalf("error = %v, want a transient 'could not be reached'", err)
	}
}

func TestSearchReadsRotatedKey(t *testing.T) {
	f := newFakeBrave(t)
	vars := map[string]string{"MY_BRAVE": "first-key"}
	var mu sync.Mutex
	lookup := func(k string) (string, bool) {
		mu.Lock()
		defer mu.Unlock()
		v, ok := vars[k]
		return v, ok
	}
	_, h, err := New(nil, &Settings{BaseURL: f.URL + "/", APIKeyEnv: "MY_BRAVE"}, lookup)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, key := range []string{"", "second-key", "-"} {
		mu.Lock()
		switch key {
		case "":
		case "-":
			delete(vars, "MY_BRAVE") // gone: the key read at start is used
		default:
			vars["MY_BRAVE"] = key
		}
		mu.Unlock()
		if _, err := h.Call(t.Context(), json.RawMessage(`{"query":"q"}`)); err != nil {
			t.Fatal(err)
		}
		got = append(got, f.last(t).Header.Get("X-Subscription-Token"))
	}
	if diff := cmp.Diff([]string{"first-key", "second-key", "first-key"}, got); diff != "" {
		t.Errorf("keys sent (-want +got):\n%s", diff)
	}
}

func TestNewFailsWithoutKey(t *testing.T) {
	tests := []struct {
		name string
		cfg  *config.Tool
		set  *Settings
		env  map[string]string
		want string
	}{
		{name: "default variable unset", cfg: &config.Tool{}, env: nil, want: "set the environment variable BRAVE_API_KEY"},
		{name: "named variable unset", set: &Settings{APIKeyEnv: "SEARCH_KEY"}, env: map[string]string{DefaultAPIKeyEnv: testKey}, want: "set the environment variable SEARCH_KEY"},
		{name: "empty", cfg: &config.Tool{}, env: map[string]string{DefaultAPIKeyEnv: "  "}, want: "BRAVE_API_KEY is empty"},
		{name: "newline inside", cfg: &config.Tool{}, env: map[string]string{DefaultAPIKeyEnv: "abc\ndef"}, want: "BRAVE_API_KEY holds characters"},
		{name: "bad base url", set: &Settings{BaseURL: "ftp://search.example"}, env: map[string]string{DefaultAPIKeyEnv: testKey}, want: "must be an http or https URL"},
		{name: "base url with credentials", set: &Settings{BaseURL: "https://u:p@search.example"}, env: map[string]string{DefaultAPIKeyEnv: testKey}, want: "must not contain a user name"},
		{name: "wrong kind", cfg: &config.Tool{Name: "search", Kind: "web_fetch"}, env: map[string]string{DefaultAPIKeyEnv: testKey}, want: `kind is "web_fetch", not web_search`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, h, err := New(tt.cfg, tt.set, env(tt.env))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("New error = %v, want one containing %q", err, tt.want)
			}
			if h != nil {
				t.Error("a handler was returned with the error")
			}
			if strings.Contains(err.Error(), "abc") {
				t.Errorf("error shows the key's value: %v", err)
			}
		})
	}
}

func TestSpec(t *testing.T) {
	key := env(map[string]string{DefaultAPIKeyEnv: testKey})
	three := 3
	tests := []struct {
		name string
		cfg  *config.Tool
		want tool.Spec
	}{
		{
			name: "defaults",
			cfg:  nil,
			want: tool.Spec{Name: "web_search", Description: description, Parameters: json.RawMessage(parameters), Timeout: 30 * time.Second, Retries: 2, Backoff: time.Second},
		},
		{
			name: "overrides",
			cfg: &config.Tool{
				Name: "search", Kind: Kind, Description: "Find pages.", Parameters: config.JSON(`{"type":"object"}`),
				Timeout: config.Duration(5 * time.Second), Retries: &config.Retries{Max: &three, Backoff: []config.Duration{config.Duration(2 * time.Second)}},
				Breaker: config.Breaker{Failures: 4, OpenFor: config.Duration(time.Minute)},
			},
			want: tool.Spec{Name: "search", Description: "Find pages.", Parameters: json.RawMessage(`{"type":"object"}`), Timeout: 5 * time.Second, Retries: 3, Backoff: 2 * time.Second, BreakerFailures: 4, BreakerOpenFor: time.Minute},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			spec, _, err := New(tt.cfg, nil, key)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, spec); diff != "" {
				t.Errorf("spec (-want +got):\n%s", diff)
			}
		})
	}
}

// TestSpecRegisters checks that the default schema is one the registry
// accepts, and that it rejects what the handler rejects.
func TestSpecRegisters(t *testing.T) {
	spec, h, err := New(nil, nil, env(map[string]string{DefaultAPIKeyEnv: testKey}))
	if err != nil {
		t.Fatal(err)
	}
	if err := tool.NewRegistry().Register(spec, h); err != nil {
		t.Fatal(err)
	}
	var schema map[string]any
	if err := json.Unmarshal(spec.Parameters, &schema); err != nil {
		t.Fatal(err)
	}
	if schema["additionalProperties"] != false {
		t.Error("the schema allows unknown arguments")
	}
}
