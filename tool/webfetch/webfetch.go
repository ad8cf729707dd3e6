// Package webfetch is the web_fetch tool (FR-106, FR-119..122): it reads
// one http(s) URL and returns its readable content as markdown or text,
// prefixed with the final URL and the page title.
//
// A model chooses the URL, so the tool is built to be safe to point at
// anything: it reaches only public addresses (see guard.go), bounds the
// size, redirects and time of a fetch, uses no proxy from the environment
// and refuses binary content. A Handler does one try; failures a retry
// may fix are marked with tool.Transient or tool.RetryAfter.
package webfetch

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/agentrunner/agentrunner/config"
	"github.com/agentrunner/agentrunner/internal/neterr"
	"github.com/agentrunner/agentrunner/internal/retryafter"
	"github.com/agentrunner/agentrunner/internal/safeurl"
	"github.com/agentrunner/agentrunner/tool"
)

// Kind is the tool kind this package implements.
const Kind = "web_fetch"

// Defaults of the configuration keys this tool reads.
const (
	// DefaultMaxBytes bounds a fetched body; the rest is not read.
	DefaultMaxBytes = 5 << 20
	// DefaultMaxRedirects bounds the redirects followed.
	DefaultMaxRedirects = 5
	// DefaultTimeout bounds one try (FR-114's default for web operations).
	DefaultTimeout = 30 * time.Second
	// DefaultRetries is how many more tries a transient failure gets.
	DefaultRetries = 2
	// DefaultBackoff is the wait before the first retry.
	DefaultBackoff = time.Second
)

// UserAgent is sent with every fetch: honest about being a program, so
// sites can tell it apart, and common enough in form to be served.
const UserAgent = "Mozilla/5.0 (compatible; agentrunner-web_fetch/1; +https://github.com/agentrunner/agentrunner)"

// maxURLLength bounds the URL argument; browsers and servers stop near it.
const maxURLLength = 8192

// maxRetryAfter is the longest Retry-After honoured; beyond it the fetch
// fails instead of holding the agent.
const maxRetryAfter = 2 * time.Minute

// description is what a model is told unless the configuration says otherwise.
const description = "Fetch a web page (http or https) and return its readable content: the article text " +
	"without navigation, ads or boilerplate, as markdown (default) or plain text, after a header with the " +
	"final URL and the title. Plain text, markdown and JSON are returned as they are; images, PDFs and " +
	"other binary files are refused. Only public internet addresses can be reached."

// parameters is the JSON Schema of the arguments (FR-106).
const parameters = `{
  "type": "object",
  "properties": {
    "url": {"type": "string", "format": "uri", "pattern": "^[Hh][Tt][Tt][Pp][Ss]?://", "maxLength": 8192, "description": "The http or https URL to read."},
    "format": {"type": "string", "enum": ["markdown", "text"], "default": "markdown", "description": "How to render an HTML page."}
  },
  "required": ["url"],
  "additionalProperties": false
}`

// Settings are the keys of a web_fetch tool's section besides those every
// tool has.
type Settings struct {
	// AllowHosts lets the tool reach these hosts (host or host:port) even
	// when they resolve to private addresses.
	AllowHosts []string `yaml:"allow_hosts"`
	// MaxBytes bounds a fetched body; default DefaultMaxBytes.
	MaxBytes int `yaml:"max_bytes"`
	// MaxRedirects bounds redirects; default DefaultMaxRedirects.
	MaxRedirects int `yaml:"max_redirects"`
}

// Check reports negative limits; allowed hosts are checked when the tool
// is built.
func (s *Settings) Check(report config.Reporter) {
	if s.MaxBytes < 0 {
		report("max_bytes", "must not be negative, got %d", s.MaxBytes)
	}
	if s.MaxRedirects < 0 {
		report("max_redirects", "must not be negative, got %d", s.MaxRedirects)
	}
}

// ToolKind is what configuration knows of the kind: its settings.
func ToolKind() config.ToolKind {
	return config.ToolKind{Timeout: DefaultTimeout, Settings: func() config.ToolSettings { return &Settings{} }}
}

// New builds the tool from its configuration and settings (nil means all
// defaults). web_fetch needs no secret, so lookupEnv is not used; it is there so
// every web tool is built the same way.
func New(cfg *config.Tool, set *Settings, lookupEnv func(string) (string, bool)) (tool.Spec, tool.Handler, error) {
	if cfg == nil {
		cfg = &config.Tool{}
	}
	if set == nil {
		set = &Settings{}
	}
	name := cfg.Name
	if name == "" {
		name = Kind
	}
	if cfg.Kind != "" && cfg.Kind != Kind {
		return tool.Spec{}, nil, fmt.Errorf("tool %q: kind is %q, not %s", name, cfg.Kind, Kind)
	}
	spec, err := tool.FromConfig(tool.Spec{Name: Kind, Description: description, Parameters: json.RawMessage(parameters),
		Timeout: DefaultTimeout, Retries: DefaultRetries, Backoff: DefaultBackoff}, cfg)
	if err != nil {
		return tool.Spec{}, nil, err
	}
	f, err := newFetcher(name, set, spec.Timeout)
	if err != nil {
		return tool.Spec{}, nil, err
	}
	return spec, f, nil
}

// fetcher is the web_fetch Handler.
type fetcher struct {
	guard        *guard
	client       *http.Client
	maxBytes     int64
	maxRedirects int
	// now reads the clock for Retry-After dates.
	now func() time.Time
}

var _ tool.Handler = (*fetcher)(nil)

// newFetcher builds the HTTP client: the guard's dialer, no proxy, and a
// redirect policy that re-checks every hop.
func newFetcher(name string, cfg *Settings, timeout time.Duration) (*fetcher, error) {
	if cfg.MaxBytes < 0 {
		return nil, fmt.Errorf("tool %q: max_bytes %d is negative", name, cfg.MaxBytes)
	}
	if cfg.MaxRedirects < 0 {
		return nil, fmt.Errorf("tool %q: max_redirects %d is negative", name, cfg.MaxRedirects)
	}
	g, err := newGuard(cfg.AllowHosts)
	if err != nil {
		return nil, fmt.Errorf("tool %q: %w", name, err)
	}
	f := &fetcher{guard: g, maxBytes: DefaultMaxBytes, maxRedirects: DefaultMaxRedirects, now: time.Now}
	if cfg.MaxBytes > 0 {
		f.maxBytes = int64(cfg.MaxBytes)
	}
	if cfg.MaxRedirects > 0 {
		f.maxRedirects = cfg.MaxRedirects
	}
	transport := &http.Transport{
		Proxy:                  nil, // a proxy would dial for us, past the guard
		DialContext:            g.dialContext,
		ForceAttemptHTTP2:      true,
		TLSHandshakeTimeout:    10 * time.Second,
		MaxIdleConns:           16,
		MaxIdleConnsPerHost:    2,
		IdleConnTimeout:        60 * time.Second,
		MaxResponseHeaderBytes: 256 << 10,
	}
	f.client = &http.Client{
		Transport:     transport,
		Timeout:       timeout,
		CheckRedirect: f.checkRedirect,
	}
	return f, nil
}

// redirectError stops a chain of redirects that is too long.
type redirectError struct{ max int }

func (e *redirectError) Error() string {
	return fmt.Sprintf("stopped after %d redirects (the limit)", e.max)
}

// checkRedirect re-checks each hop as if it were the first URL.
func (f *fetcher) checkRedirect(req *http.Request, via []*http.Request) error {
	if len(via) > f.maxRedirects {
		return &redirectError{max: f.maxRedirects}
	}
	if err := f.guard.checkURL(req.URL); err != nil {
		return fmt.Errorf("redirect to %s refused: %w", safeurl.String(req.URL), err)
	}
	req.Header.Set("User-Agent", UserAgent)
	return nil
}

// args are the arguments of a call.
type args struct {
	URL    string  `json:"url"`
	Format *string `json:"format"`
}

// request is a checked call.
type request struct {
	url    *url.URL
	format string
}

// parseArgs checks the arguments, whatever the executor already checked:
// the handler must be safe on its own.
func (f *fetcher) parseArgs(raw json.RawMessage) (request, error) {
	if len(bytes.TrimSpace(raw)) == 0 {
		return request{}, errors.New(`invalid arguments: expected a JSON object such as {"url": "https://…"}`)
	}
	var a args
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&a); err != nil {
		return request{}, fmt.Errorf(`invalid arguments: %s (expected {"url": string, "format"?: "markdown"|"text"})`,
			strings.TrimPrefix(err.Error(), "json: "))
	}
	r := request{format: FormatMarkdown}
	if a.Format != nil {
		switch *a.Format {
		case FormatMarkdown, FormatText:
			r.format = *a.Format
		default:
			return request{}, fmt.Errorf("invalid arguments: format must be markdown or text, got %q", *a.Format)
		}
	}
	raw1 := strings.TrimSpace(a.URL)
	switch {
	case raw1 == "":
		return request{}, errors.New("invalid arguments: url is required")
	case len(raw1) > maxURLLength:
		return request{}, fmt.Errorf("invalid arguments: url is %d bytes long; at most %d are allowed", len(raw1), maxURLLength)
	case !utf8.ValidString(raw1):
		return request{}, errors.New("invalid arguments: url is not valid UTF-8")
	}
	u, err := url.Parse(raw1)
	if err != nil {
		return request{}, fmt.Errorf("invalid arguments: url is not a valid URL: %v", urlCause(err))
	}
	if !u.IsAbs() {
		return request{}, fmt.Errorf("invalid arguments: url must be absolute, starting with http:// or https://")
	}
	if err := f.guard.checkURL(u); err != nil {
		return request{}, fmt.Errorf("web_fetch refused the URL: %w", err)
	}
	u.Fragment, u.RawFragment = "", "" // never sent; not part of the page
	r.url = u
	return r, nil
}

// urlCause is a url.Parse error without the URL it repeats.
func urlCause(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}

// Call fetches one URL.
func (f *fetcher) Call(ctx context.Context, raw json.RawMessage) (string, error) {
	r, err := f.parseArgs(raw)
	if err != nil {
		return "", err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, r.url.String(), nil)
	if err != nil {
		return "", fmt.Errorf("invalid arguments: cannot request %s: %v", safeurl.String(r.url), urlCause(err))
	}
	req.Header.Set("User-Agent", UserAgent)
	req.Header.Set("Accept", "text/html,application/xhtml+xml,text/markdown;q=0.9,text/plain;q=0.9,application/json;q=0.8,*/*;q=0.5")
	req.Header.Set("Accept-Language", "en;q=1.0, *;q=0.5")
	resp, err := f.client.Do(req)
	if err != nil {
		return "", f.requestError(r.url, err)
	}
	defer resp.Body.Close()
	final := resp.Request.URL
	if err := f.statusError(resp, final); err != nil {
		return "", err
	}
	contentType := resp.Header.Get("Content-Type")
	if mt := mediaType(contentType); classify(mt) == kindBinary {
		// Known binary: refused without downloading it.
		return "", fmt.Errorf("%s: %w", safeurl.String(final), &binaryError{mediaType: mt})
	}
	body, truncated, err := readCapped(resp.Body, f.maxBytes)
	if err != nil {
		return "", tool.Transient(fmt.Errorf("reading %s failed: %s", safeurl.String(final), neterr.Reason(err)))
	}
	if truncated {
		body = dropPartialRune(body)
	}
	doc, err := convert(body, contentType, final, r.format)
	if err != nil {
		return "", fmt.Errorf("%s: %w", safeurl.String(final), err)
	}
	return message(final, doc, truncated, f.maxBytes), nil
}

// message is what the model is shown: a header, then the content.
func message(final *url.URL, doc document, truncated bool, maxBytes int64) string {
	var b strings.Builder
	fmt.Fprintf(&b, "URL: %s\n", safeurl.String(final))
	if doc.Title != "" {
		fmt.Fprintf(&b, "Title: %s\n", doc.Title)
	}
	if truncated {
		fmt.Fprintf(&b, "Note: the content was truncated: only the first %d bytes were read.\n", maxBytes)
	}
	b.WriteString("\n")
	if doc.Content == "" {
		b.WriteString("(the page has no readable text)")
	} else {
		b.WriteString(doc.Content)
	}
	if truncated {
		b.WriteString("\n\n[… truncated]")
	}
	return b.String()
}

// readCapped reads up to max bytes and reports whether there was more.
func readCapped(r io.Reader, max int64) ([]byte, bool, error) {
	body, err := io.ReadAll(io.LimitReader(r, max+1))
	if err != nil {
		return nil, false, err
	}
	if int64(len(body)) > max {
		return body[:max], true, nil
	}
	return body, false, nil
}

// statusError turns a failed HTTP status into the error the model sees;
// nil for success.
func (f *fetcher) statusError(resp *http.Response, final *url.URL) error {
	code := resp.StatusCode
	if code >= 200 && code < 300 {
		return nil
	}
	err := fmt.Errorf("fetching %s failed: HTTP %d %s", safeurl.String(final), code, http.StatusText(code))
	switch {
	case code == http.StatusTooManyRequests || code == http.StatusServiceUnavailable:
		if wait, ok := retryafter.Parse(resp.Header.Get("Retry-After"), f.now()); ok {
			if wait > maxRetryAfter {
				return fmt.Errorf("%w; the server asks to wait %s", err, wait.Round(time.Second))
			}
			return tool.RetryAfter(err, wait)
		}
		return tool.Transient(err)
	case code == http.StatusRequestTimeout || code == http.StatusTooEarly || code >= 500:
		return tool.Transient(err)
	case code >= 300 && code < 400:
		// A redirect without a usable Location, or one not followed.
		return fmt.Errorf("%w (a redirect that could not be followed)", err)
	default:
		return err
	}
}

// requestError classifies a failed request: refusals, bad certificates,
// unknown hosts and redirect loops are final; the rest may pass.
func (f *fetcher) requestError(orig *url.URL, err error) error {
	where := safeurl.String(orig)
	var ue *url.Error
	if errors.As(err, &ue) && ue.URL != "" && ue.URL != orig.String() {
		if u, perr := url.Parse(ue.URL); perr == nil {
			where += " (redirected to " + safeurl.String(u) + ")"
		}
	}
	var (
		refused  *refusedError
		redirect *redirectError
		dnsErr   *net.DNSError
		certErr  *tls.CertificateVerificationError
		unknown  x509.UnknownAuthorityError
		hostErr  x509.HostnameError
		invalid  x509.CertificateInvalidError
		recErr   tls.RecordHeaderError
	)
	switch {
	case errors.As(err, &refused):
		return fmt.Errorf("web_fetch refused %s: %s", where, refused.msg)
	case errors.As(err, &redirect):
		return fmt.Errorf("fetching %s: %s", where, redirect.Error())
	case errors.As(err, &certErr), errors.As(err, &unknown), errors.As(err, &hostErr), errors.As(err, &invalid):
		return fmt.Errorf("fetching %s: the site's TLS certificate is not valid: %s", where, neterr.Reason(err))
	case errors.As(err, &recErr):
		return fmt.Errorf("fetching %s: the server does not speak TLS on this port", where)
	case errors.As(err, &dnsErr) && dnsErr.IsNotFound:
		return fmt.Errorf("fetching %s: the host %s was not found", where, dnsErr.Name)
	case neterr.Classify(err) == neterr.Timeout:
		return tool.Transient(fmt.Errorf("fetching %s timed out", where))
	}
	return tool.Transient(fmt.Errorf("fetching %s failed: %s", where, neterr.Reason(err)))
}
