package webfetch

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/agentrunner/agentrunner/config"
	"github.com/agentrunner/agentrunner/tool"
)

// site is a small web site on 127.0.0.1 with the pages web_fetch meets.
type site struct {
	*httptest.Server
	mu   sync.Mutex
	hits map[string]int
	ua   string
}

// testMaxBytes is the size cap of the tool under test; /huge is larger.
const testMaxBytes = 64 << 10

func newSite(t *testing.T) *site {
	t.Helper()
	s := &site{hits: map[string]int{}}
	png := pngBytes(t)
	mux := http.NewServeMux()
	mux.HandleFunc("/article", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprint(w, boilerplatePage(8))
	})
	mux.HandleFunc("/notes.txt", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		fmt.Fprint(w, "BTC  61,200\nETH   3,050\n\n<not html>\n")
	})
	mux.HandleFunc("/prices.json", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"BTC": 61200, "ETH": 3050}`)
	})
	mux.HandleFunc("/logo.png", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "image/png")
		_, _ = w.Write(png)
	})
	mux.HandleFunc("/report.pdf", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/pdf")
		fmt.Fprint(w, "%PDF-1.7\n%\xe2\xe3\xcf\xd3\n1 0 obj\n")
	})
	mux.HandleFunc("/download", func(w http.ResponseWriter, r *http.Request) {
		w.Header()["Content-Type"] = nil // no type: the bytes decide
		_, _ = w.Write(png)
	})
	mux.HandleFunc("/latin1", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		_, _ = w.Write([]byte("<!DOCTYPE html><html><head><meta charset=\"windows-1252\"><title>Caf\xe9 cr\xe8me</title></head>" +
			"<body><p>Le caf\xe9 co\xfbte 3 \x80 \x96 \x93d\xe9j\xe0 vu\x94.</p></body></html>"))
	})
	mux.HandleFunc("/redirect/", func(w http.ResponseWriter, r *http.Request) {
		var n int
		if _, err := fmt.Sscanf(strings.TrimPrefix(r.URL.Path, "/redirect/"), "%d", &n); err != nil {
			http.NotFound(w, r)
			return
		}
		if n <= 0 {
			http.Redirect(w, r, "/notes.txt", http.StatusFound)
			return
		}
		http.Redirect(w, r, fmt.Sprintf("/redirect/%d", n-1), http.StatusMovedPermanently)
	})
	mux.HandleFunc("/huge", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		for i := 0; i < 4*testMaxBytes/16; i++ {
			fmt.Fprintf(w, "line %09d\n", i)
		}
	})
	mux.HandleFunc("/malformed", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		fmt.Fprint(w, `<html><head><title>Broken</title><body><div class="x"><p>Unclosed <b>bold <i>italic<p>Second paragraph<table><tr><td>Cell one<td>Cell two</table></div></body`)
	})
	mux.HandleFunc("/to", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, r.URL.Query().Get("u"), http.StatusFound)
	})
	mux.HandleFunc("/status/", func(w http.ResponseWriter, r *http.Request) {
		var code int
		_, _ = fmt.Sscanf(strings.TrimPrefix(r.URL.Path, "/status/"), "%d", &code)
		if ra := r.URL.Query().Get("retry_after"); ra != "" {
			w.Header().Set("Retry-After", ra)
		}
		w.WriteHeader(code)
	})
	mux.HandleFunc("/slow", func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-time.After(10 * time.Second):
		}
	})
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		s.hits[r.URL.Path]++
		s.ua = r.Header.Get("User-Agent")
		s.mu.Unlock()
		mux.ServeHTTP(w, r)
	}))
	t.Cleanup(s.Close)
	return s
}

func (s *site) hostPort() string { return strings.TrimPrefix(s.URL, "http://") }

func (s *site) total() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, c := range s.hits {
		n += c
	}
	return n
}

// newFetcherFor builds the tool with the site's host:port allowed.
func newFetcherFor(t *testing.T, s *site, set Settings) *fetcher {
	t.Helper()
	return newFetcherWith(t, s, config.Tool{}, set)
}

// newFetcherWith is newFetcherFor with the settings every tool has.
func newFetcherWith(t *testing.T, s *site, cfg config.Tool, set Settings) *fetcher {
	t.Helper()
	if s != nil {
		set.AllowHosts = append(set.AllowHosts, s.hostPort())
	}
	if set.MaxBytes == 0 {
		set.MaxBytes = testMaxBytes
	}
	_, h, err := New(&cfg, &set, nil)
	if err != nil {
		t.Fatal(err)
	}
	return h.(*fetcher)
}

func call(t *testing.T, f *fetcher, args string) (string, error) {
	t.Helper()
	return f.Call(t.Context(), json.RawMessage(args))
}

func fetchArgs(u, format string) string {
	if format == "" {
		return fmt.Sprintf(`{"url": %q}`, u)
	}
	return fmt.Sprintf(`{"url": %q, "format": %q}`, u, format)
}

func TestFetchArticle(t *testing.T) {
	s := newSite(t)
	f := newFetcherFor(t, s, Settings{})
	for _, format := range []string{"", FormatMarkdown, FormatText} {
		t.Run("format="+format, func(t *testing.T) {
			out, err := call(t, f, fetchArgs(s.URL+"/article#comments", format))
			if err != nil {
				t.Fatal(err)
			}
			header := fmt.Sprintf("URL: %s/article\nTitle: Bitcoin ETF inflows hit a record\n\n", s.URL)
			if !strings.HasPrefix(out, header) {
				t.Errorf("output does not start with %q:\n%.300s", header, out)
			}
			if !strings.Contains(out, "Paragraph 7 ARTICLEMARKER") {
				t.Errorf("article text missing:\n%s", out)
			}
			for _, m := range boilerplateMarkers {
				if strings.Contains(out, m) {
					t.Errorf("boilerplate %s kept", m)
				}
			}
			if got, want := strings.Contains(out, "**$1.1 billion**"), format != FormatText; got != want {
				t.Errorf("markdown emphasis present = %v, want %v", got, want)
			}
		})
	}
	s.mu.Lock()
	ua := s.ua
	s.mu.Unlock()
	if ua != UserAgent {
		t.Errorf("User-Agent = %q, want %q", ua, UserAgent)
	}
}

func TestFetchPages(t *testing.T) {
	s := newSite(t)
	f := newFetcherFor(t, s, Settings{MaxRedirects: 3})
	tests := []struct {
		name, path, format string
		want               string // the whole output, with {site} for the server URL
	}{
		{name: "plain text passes through", path: "/notes.txt",
			want: "URL: {site}/notes.txt\n\nBTC  61,200\nETH   3,050\n\n<not html>\n"},
		{name: "json passes through", path: "/prices.json", format: FormatText,
			want: "URL: {site}/prices.json\n\n" + `{"BTC": 61200, "ETH": 3050}`},
		{name: "windows-1252 by meta charset", path: "/latin1", format: FormatText,
			want: "URL: {site}/latin1\nTitle: Café crème\n\nLe café coûte 3 € – “déjà vu”."},
		{name: "malformed html", path: "/malformed", format: FormatText,
			want: "URL: {site}/malformed\nTitle: Broken\n\nUnclosed bold italic\n\nSecond paragraph\n\nCell one\tCell two"},
		{name: "redirects within the cap", path: "/redirect/2",
			want: "URL: {site}/notes.txt\n\nBTC  61,200\nETH   3,050\n\n<not html>\n"},
		{name: "empty page", path: "/status/204",
			want: "URL: {site}/status/204\n\n(the page has no readable text)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, err := call(t, f, fetchArgs(s.URL+tt.path, tt.format))
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(strings.ReplaceAll(tt.want, "{site}", s.URL), out); diff != "" {
				t.Errorf("output (-want +got):\n%s", diff)
			}
		})
	}
}

func TestFetchTruncatesAtMaxBytes(t *testing.T) {
	s := newSite(t)
	f := newFetcherFor(t, s, Settings{})
	out, err := call(t, f, fetchArgs(s.URL+"/huge", ""))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, fmt.Sprintf("Note: the content was truncated: only the first %d bytes were read.", testMaxBytes)) ||
		!strings.HasSuffix(out, "[… truncated]") {
		t.Errorf("no truncation notice:\n%.300s…%s", out, out[max(0, len(out)-100):])
	}
	if !strings.Contains(out, "line 000000000\n") || strings.Contains(out, fmt.Sprintf("line %09d", testMaxBytes/15+1)) {
		t.Errorf("content is not the first %d bytes", testMaxBytes)
	}
	if len(out) > testMaxBytes+300 {
		t.Errorf("output has %d bytes, more than the cap allows", len(out))
	}
}

func TestFetchFailures(t *testing.T) {
	s := newSite(t)
	f := newFetcherFor(t, s, Settings{MaxRedirects: 3})
	now := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	f.now = func() time.Time { return now }
	tests := []struct {
		name      string
		path      string
		want      string
		transient bool
		wait      time.Duration
	}{
		{name: "png", path: "/logo.png", want: "the content is image/png, not text or HTML"},
		{name: "pdf", path: "/report.pdf", want: "application/pdf"},
		{name: "binary without a type", path: "/download", want: "the content is image/png"},
		{name: "redirect chain over the cap", path: "/redirect/4", want: "stopped after 3 redirects"},
		{name: "404", path: "/status/404", want: "HTTP 404 Not Found"},
		{name: "token in the query", path: "/status/404?page=2&access_token=s3cret#frag", want: "/status/404?page=2&access_token=REDACTED failed: HTTP 404"},
		{name: "403", path: "/status/403", want: "HTTP 403 Forbidden"},
		{name: "500", path: "/status/500", want: "HTTP 500", transient: true},
		{name: "502", path: "/status/502", want: "HTTP 502", transient: true},
		{name: "429 with retry-after", path: "/status/429?retry_after=7", want: "HTTP 429", transient: true, wait: 7 * time.Second},
		{name: "503 with a date", path: "/status/503?retry_after=" + url.QueryEscape(now.Add(time.Minute).Format(http.TimeFormat)), want: "HTTP 503", transient: true, wait: time.Minute},
		{name: "429 asking too long", path: "/status/429?retry_after=86400", want: "asks to wait 24h0m0s"},
		{name: "429 asking beyond any bound", path: "/status/429?retry_after=99999999999", want: "asks to wait"},
		{name: "429 plain", path: "/status/429", want: "HTTP 429", transient: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := call(t, f, fetchArgs(s.URL+tt.path, ""))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error = %v, want one containing %q", err, tt.want)
			}
			got := [2]any{tool.IsTransient(err), tool.RetryAfterOf(err)}
			if diff := cmp.Diff([2]any{tt.transient, tt.wait}, got); diff != "" {
				t.Errorf("[transient, wait] (-want +got):\n%s", diff)
			}
		})
	}
}

func TestFetchTimeoutIsTransient(t *testing.T) {
	s := newSite(t)
	f := newFetcherWith(t, s, config.Tool{Timeout: config.Duration(200 * time.Millisecond)}, Settings{})
	_, err := call(t, f, fetchArgs(s.URL+"/slow", ""))
	if err == nil || !tool.IsTransient(err) || !strings.Contains(err.Error(), "timed out") {
		t.Fatalf("error = %v, want a transient timeout", err)
	}
}

func TestFetchConnectionRefusedIsTransient(t *testing.T) {
	s := newSite(t)
	f := newFetcherFor(t, s, Settings{})
	s.Close()
	_, err := call(t, f, fetchArgs(s.URL+"/article", ""))
	if err == nil || !tool.IsTransient(err) {
		t.Fatalf("error = %v, want a transient one", err)
	}
}

// TestSSRFRefusals: with no allow-list every internal destination is
// refused, before any byte is sent.
func TestSSRFRefusals(t *testing.T) {
	s := newSite(t) // a live server on 127.0.0.1: it must see no request
	port := s.Listener.Addr().(*net.TCPAddr).Port
	f := newFetcherFor(t, nil, Settings{})
	tests := []struct {
		url  string
		want string
	}{
		{s.URL + "/article", "127.0.0.1 is a loopback address"},
		{"http://127.0.0.1/", "127.0.0.1 is a loopback address"},
		{"http://10.0.0.1/", "10.0.0.1 is a private address"},
		{"http://192.168.1.1:8080/admin", "private address"},
		{"http://172.31.255.1/", "private address"},
		{"http://169.254.169.254/latest/meta-data/", "cloud metadata address"},
		{"http://[fd00:ec2::254]/latest/meta-data/", "cloud metadata address"},
		{"http://[::1]/", "::1 is a loopback address"},
		{fmt.Sprintf("http://[::1]:%d/article", port), "loopback address"},
		{"http://[::ffff:127.0.0.1]/", "loopback address"},
		{"http://[::ffff:169.254.169.254]/", "cloud metadata address"},
		{"http://[fe80::1%25eth0]/", "link-local address"},
		{"http://0.0.0.0/", "unspecified address"},
		{"http://100.64.1.1/", "carrier-grade NAT"},
		{"http://224.0.0.251/", "multicast address"},
		{"http://[fc00::5]/", "private address"},
		{fmt.Sprintf("http://localhost:%d/article", port), "localhost is a loopback name"},
		{fmt.Sprintf("http://LOCALHOST.:%d/article", port), "loopback name"},
		{"http://api.localhost/", "loopback name"},
		{"file:///etc/passwd", "only http and https URLs can be fetched, not file:"},
		{"ftp://ftp.example.com/pub/file.txt", "not ftp:"},
		{"gopher://example.com/", "not gopher:"},
		{"javascript:alert(1)", "not javascript:"},
		{"//example.com/x", "must be absolute"},
		{"/relative", "must be absolute"},
		{"http://user:secret@example.com/", "URLs with a user name or password are not fetched"},
		{"http://user@example.com/", "user name or password"},
		{"http:///nohost", "the URL has no host"},
		{"http://example.com:99999/", "port"},
	}
	for _, tt := range tests {
		t.Run(tt.url, func(t *testing.T) {
			_, err := call(t, f, fetchArgs(tt.url, ""))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error = %v, want one containing %q", err, tt.want)
			}
			if tool.IsTransient(err) {
				t.Errorf("a refusal must not be retried: %v", err)
			}
			if strings.Contains(err.Error(), "secret") {
				t.Errorf("error shows the URL's password: %v", err)
			}
		})
	}
	if n := s.total(); n != 0 {
		t.Errorf("the internal server received %d requests", n)
	}
}

// TestSSRFRedirects: an allowed host that redirects elsewhere is checked
// again at each hop, by scheme and by the address dialed.
func TestSSRFRedirects(t *testing.T) {
	s := newSite(t)
	other := newSite(t) // another loopback server, not allowed
	otherPort := other.Listener.Addr().(*net.TCPAddr).Port
	f := newFetcherFor(t, s, Settings{})
	tests := []struct {
		target string
		want   string
	}{
		{fmt.Sprintf("http://127.0.0.2:%d/article", otherPort), "127.0.0.2 is a loopback address"},
		{fmt.Sprintf("http://[::1]:%d/article", otherPort), "::1 is a loopback address"},
		{other.URL + "/article", "127.0.0.1 is a loopback address"},
		{fmt.Sprintf("http://localhost:%d/article", otherPort), "localhost is a loopback name"},
		{"http://169.254.169.254/latest/meta-data/iam/", "cloud metadata address"},
		{"http://10.1.2.3/", "private address"},
		{"file:///etc/passwd", "not file:"},
		{"ftp://127.0.0.1/", "not ftp:"},
		{"http://admin:pw@" + other.hostPort() + "/", "user name or password"},
	}
	for _, tt := range tests {
		t.Run(tt.target, func(t *testing.T) {
			start := s.URL + "/to?u=" + url.QueryEscape(tt.target)
			_, err := call(t, f, fetchArgs(start, ""))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error = %v, want one containing %q", err, tt.want)
			}
			if !strings.Contains(err.Error(), "redirect") {
				t.Errorf("error %q does not say a redirect was refused", err)
			}
			if tool.IsTransient(err) {
				t.Errorf("a refusal must not be retried: %v", err)
			}
		})
	}
	if n := other.total(); n != 0 {
		t.Errorf("the server behind the redirect received %d requests", n)
	}
}

// fakeResolver answers lookups from a table, like DNS under an attacker's
// control would.
type fakeResolver map[string][]string

func (r fakeResolver) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	addrs, ok := r[strings.TrimSuffix(host, ".")]
	if !ok {
		return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
	}
	var out []netip.Addr
	for _, a := range addrs {
		out = append(out, netip.MustParseAddr(a))
	}
	return out, nil
}

// TestSSRFResolvedNames: a public-looking name is judged by what it
// resolves to, every address of it, and the allow-list is by name.
func TestSSRFResolvedNames(t *testing.T) {
	s := newSite(t)
	port := s.Listener.Addr().(*net.TCPAddr).Port
	f := newFetcherFor(t, nil, Settings{AllowHosts: []string{fmt.Sprintf("Intranet.Example:%d", port)}})
	f.guard.resolver = fakeResolver{
		"evil.example":     {"127.0.0.1"},
		"v6.example":       {"::1"},
		"rebind.example":   {"203.0.113.7", "10.0.0.8"}, // one public address does not make it safe
		"metadata.example": {"169.254.169.254"},
		"mapped.example":   {"::ffff:192.168.0.1"},
		"intranet.example": {"127.0.0.1"},
	}
	tests := []struct {
		host string
		want string
	}{
		{"evil.example", "evil.example resolves to 127.0.0.1, a loopback address"},
		{"v6.example", "v6.example resolves to ::1, a loopback address"},
		{"rebind.example", "rebind.example resolves to 10.0.0.8, a private address"},
		{"metadata.example", "cloud metadata"},
		{"mapped.example", "private address"},
		{"nowhere.example", "the host nowhere.example was not found"},
	}
	for _, tt := range tests {
		t.Run(tt.host, func(t *testing.T) {
			_, err := call(t, f, fetchArgs(fmt.Sprintf("http://%s:%d/notes.txt", tt.host, port), ""))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error = %v, want one containing %q", err, tt.want)
			}
			if tool.IsTransient(err) {
				t.Errorf("must not be retried: %v", err)
			}
		})
	}
	if n := s.total(); n != 0 {
		t.Fatalf("the internal server received %d requests", n)
	}

	// The allow-listed name reaches its internal address, on its port only.
	out, err := call(t, f, fetchArgs(fmt.Sprintf("http://intranet.example:%d/notes.txt", port), ""))
	if err != nil || !strings.Contains(out, "BTC  61,200") {
		t.Fatalf("allow-listed host: %v\n%s", err, out)
	}
	if _, err := call(t, f, fetchArgs("http://intranet.example:1/notes.txt", "")); err == nil || !strings.Contains(err.Error(), "loopback") {
		t.Errorf("allow-listed name on another port: error = %v, want a refusal", err)
	}
}

// TestControlRefusesInternalSockets checks the last line of defence on
// its own: whatever resolved the name, the socket's address is checked.
func TestControlRefusesInternalSockets(t *testing.T) {
	g, err := newGuard(nil)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]bool{}
	for _, addr := range []string{"127.0.0.1:80", "[::1]:443", "10.9.8.7:80", "169.254.169.254:80", "[::ffff:127.0.0.1]:80", "8.8.8.8:443", "[2606:4700::1111]:443", "garbage"} {
		got[addr] = g.control(false)("tcp", addr, nil) == nil
	}
	want := map[string]bool{"127.0.0.1:80": false, "[::1]:443": false, "10.9.8.7:80": false, "169.254.169.254:80": false,
		"[::ffff:127.0.0.1]:80": false, "8.8.8.8:443": true, "[2606:4700::1111]:443": true, "garbage": false}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("allowed by Control (-want +got):\n%s", diff)
	}
	if err := g.control(true)("tcp", "127.0.0.1:80", nil); err != nil {
		t.Errorf("an allow-listed host was refused: %v", err)
	}
}

func TestNoProxyFromEnvironment(t *testing.T) {
	s := newSite(t)
	proxy := newSite(t)
	for _, v := range []string{"HTTP_PROXY", "http_proxy", "HTTPS_PROXY", "https_proxy", "ALL_PROXY"} {
		t.Setenv(v, proxy.URL)
	}
	t.Setenv("NO_PROXY", "")
	t.Setenv("no_proxy", "")
	port := s.Listener.Addr().(*net.TCPAddr).Port
	// A name, not a loopback literal: net/http never proxies loopback, so
	// only a name can show whether a proxy would be used.
	f := newFetcherFor(t, nil, Settings{AllowHosts: []string{"site.example", proxy.hostPort()}})
	f.guard.resolver = fakeResolver{"site.example": {"127.0.0.1"}}
	if tr, ok := f.client.Transport.(*http.Transport); !ok || tr.Proxy != nil {
		t.Fatal("the transport may use a proxy")
	}
	if _, err := call(t, f, fetchArgs(fmt.Sprintf("http://site.example:%d/notes.txt", port), "")); err != nil {
		t.Fatal(err)
	}
	if n := proxy.total(); n != 0 {
		t.Errorf("the proxy from the environment received %d requests", n)
	}
	if n := s.total(); n != 1 {
		t.Errorf("the site received %d requests, want 1", n)
	}
}

func TestFetchArguments(t *testing.T) {
	f := newFetcherFor(t, nil, Settings{})
	tests := []struct{ args, want string }{
		{`{}`, "url is required"},
		{`{"url": "  "}`, "url is required"},
		{`{"url": 5}`, "invalid arguments"},
		{`{"url": "https://example.com", "format": "html"}`, `format must be markdown or text, got "html"`},
		{`{"url": "https://example.com", "depth": 2}`, `unknown field "depth"`},
		{`{"url": "https://exa mple.com/"}`, "not a valid URL"},
		{`{"url": "https://example.com/` + strings.Repeat("a", maxURLLength) + `"}`, "at most 8192"},
		{``, "expected a JSON object"},
		{`[1]`, "invalid arguments"},
	}
	for _, tt := range tests {
		_, err := call(t, f, tt.args)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%.60s: error = %v, want one containing %q", tt.args, err, tt.want)
		}
		if tool.IsTransient(err) {
			t.Errorf("%.60s: bad arguments must not be retried", tt.args)
		}
	}
}

func TestNew(t *testing.T) {
	five := 5
	tests := []struct {
		name    string
		cfg     *config.Tool
		set     *Settings
		want    tool.Spec
		wantErr string
	}{
		{name: "defaults", cfg: nil,
			want: tool.Spec{Name: Kind, Description: description, Parameters: json.RawMessage(parameters), Timeout: 30 * time.Second, Retries: 2, Backoff: time.Second}},
		{name: "overrides", cfg: &config.Tool{Name: "fetch", Kind: Kind, Description: "Read a page.", Parameters: config.JSON(`{"type":"object","properties":{"url":{"type":"string"}}}`),
			Timeout: config.Duration(10 * time.Second), Retries: &config.Retries{Max: &five, Backoff: []config.Duration{config.Duration(3 * time.Second)}},
			Breaker: config.Breaker{Failures: 5, OpenFor: config.Duration(time.Minute)}},
			want: tool.Spec{Name: "fetch", Description: "Read a page.", Parameters: json.RawMessage(`{"type":"object","properties":{"url":{"type":"string"}}}`),
				Timeout: 10 * time.Second, Retries: 5, Backoff: 3 * time.Second, BreakerFailures: 5, BreakerOpenFor: time.Minute}},
		{name: "wrong kind", cfg: &config.Tool{Name: "x", Kind: "web_search"}, wantErr: `kind is "web_search", not web_fetch`},
		{name: "negative max_bytes", set: &Settings{MaxBytes: -1}, wantErr: "max_bytes -1 is negative"},
		{name: "negative max_redirects", set: &Settings{MaxRedirects: -2}, wantErr: "max_redirects -2 is negative"},
		{name: "allow_hosts with a scheme", set: &Settings{AllowHosts: []string{"ok.example", "http://bad.example/"}}, wantErr: "allow_hosts[1]"},
		{name: "allow_hosts empty entry", set: &Settings{AllowHosts: []string{""}}, wantErr: "allow_hosts[0]: is empty"},
		{name: "allow_hosts bad port", set: &Settings{AllowHosts: []string{"a.example:0"}}, wantErr: "invalid port"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			spec, h, err := New(tt.cfg, tt.set, func(string) (string, bool) { return "", false })
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error = %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, spec); diff != "" {
				t.Errorf("spec (-want +got):\n%s", diff)
			}
			if err := tool.NewRegistry().Register(spec, h); err != nil {
				t.Errorf("the registry refuses the spec: %v", err)
			}
		})
	}
}

func TestAllowKey(t *testing.T) {
	got := map[string]string{}
	for _, in := range []string{"Example.COM", "example.com.", "127.0.0.1:8080", "[::1]:8080", "[::1]", "::1", "Host.Example.:443"} {
		k, err := allowKey(in)
		if err != nil {
			t.Fatalf("allowKey(%q): %v", in, err)
		}
		got[in] = k
	}
	want := map[string]string{"Example.COM": "example.com", "example.com.": "example.com", "127.0.0.1:8080": "127.0.0.1:8080",
		"[::1]:8080": "[::1]:8080", "[::1]": "::1", "::1": "::1", "Host.Example.:443": "host.example:443"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("allow keys (-want +got):\n%s", diff)
	}
	for _, bad := range []string{"", "https://x.example", "x.example/path", "user@x.example", "x.example:http", "[zz::1]"} {
		if _, err := allowKey(bad); err == nil {
			t.Errorf("allowKey(%q) accepted a bad entry", bad)
		}
	}
}

// TestRefusalTypes checks that refusals stay recognisable through the
// HTTP client's wrapping, which is what keeps them from being retried.
func TestRefusalTypes(t *testing.T) {
	err := fmt.Errorf("wrapped: %w", &url.Error{Op: "Get", URL: "http://x", Err: &net.OpError{Op: "dial", Err: refused("no")}})
	var r *refusedError
	if !errors.As(err, &r) {
		t.Fatal("refusedError lost in wrapping")
	}
}
