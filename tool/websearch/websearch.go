// Package websearch is the web_search tool (FR-105, FR-115..118): one call
// is one query to the Brave Search API, whose web results are normalised to
// a JSON array of {title, url, description, age, source}.
//
// A Handler does one try; it marks what a retry may fix (rate limits, 5xx,
// network failures, malformed responses) with tool.Transient or
// tool.RetryAfter and leaves retrying to the executor.
package websearch

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"golang.org/x/net/html"

	"github.com/agentrunner/agentrunner/config"
	"github.com/agentrunner/agentrunner/internal/clip"
	"github.com/agentrunner/agentrunner/internal/neterr"
	"github.com/agentrunner/agentrunner/internal/retryafter"
	"github.com/agentrunner/agentrunner/tool"
)

// Kind is the tool kind this package implements.
const Kind = "web_search"

// Defaults of the configuration keys this tool reads.
const (
	// DefaultBaseURL is Brave's API; tests and proxies set base_url.
	DefaultBaseURL = "https://api.search.brave.com"
	// DefaultAPIKeyEnv names the variable holding the subscription token.
	DefaultAPIKeyEnv = "BRAVE_API_KEY"
	// DefaultTimeout bounds one try (FR-114's default for web operations).
	DefaultTimeout = 30 * time.Second
	// DefaultRetries is how many more tries a transient failure gets.
	DefaultRetries = 2
	// DefaultBackoff is the wait before the first retry.
	DefaultBackoff = time.Second
)

// Limits of the arguments, as Brave documents them.
const (
	maxQueryChars     = 400
	defaultNumResults = 10
	maxNumResults     = 20
)

// searchPath is Brave's web search endpoint, below the base URL.
const searchPath = "/res/v1/web/search"

// maxBody bounds how much of a response is read: a page of 20 results is
// tens of kilobytes; anything far larger is not a search response.
const maxBody = 8 << 20

// maxMessage bounds an upstream message quoted in an error.
const maxMessage = 300

// maxRateLimitWait is the longest wait a rate limit may ask for and still
// be worth a retry; beyond it (a monthly quota used up) the call fails.
const maxRateLimitWait = 2 * time.Minute

// userAgent identifies the runner to Brave.
const userAgent = "agentrunner-web_search/1"

// description is what a model is told unless the configuration says otherwise.
const description = "Search the web (Brave Search). Returns a JSON array of results, best first, each " +
	`{"title", "url", "description", "age", "source"}. Use it to find pages worth reading. ` +
	"recency limits results to those published within the last day, week, month or year."

// parameters is the JSON Schema of the arguments (FR-105).
const parameters = `{
  "type": "object",
  "properties": {
    "query": {"type": "string", "minLength": 1, "maxLength": 400, "description": "What to search for."},
    "num_results": {"type": "integer", "minimum": 1, "maximum": 20, "default": 10, "description": "How many results to return."},
    "recency": {"type": "string", "enum": ["day", "week", "month", "year"], "description": "Only results published within this period."}
  },
  "required": ["query"],
  "additionalProperties": false
}`

// freshness maps recency to Brave's freshness parameter.
var freshness = map[string]string{"day": "pd", "week": "pw", "month": "pm", "year": "py"}

// Settings are the keys of a web_search tool's section besides those
// every tool has.
type Settings struct {
	// BaseURL of the Brave Search API; default DefaultBaseURL.
	BaseURL string `yaml:"base_url"`
	// APIKeyEnv names the variable holding the API key; default
	// DefaultAPIKeyEnv.
	APIKeyEnv string `yaml:"api_key_env"`
}

// Check reports a base URL that is not http(s) and a key variable that is
// not a variable's name (the key itself, pasted by mistake).
func (s *Settings) Check(report config.Reporter) {
	if s.BaseURL != "" {
		config.CheckURL(report, "base_url", s.BaseURL)
	}
	if s.APIKeyEnv != "" && !config.IsEnvName(s.APIKeyEnv) {
		report("api_key_env", "%q is not an environment variable name (give the name of the variable that holds the key, not the key)", s.APIKeyEnv)
	}
}

// ToolKind is what configuration knows of the kind: its settings.
func ToolKind() config.ToolKind {
	return config.ToolKind{Timeout: DefaultTimeout, Settings: func() config.ToolSettings { return &Settings{} }}
}

// KeyEnv is the variable the tool reads its API key from.
func (s *Settings) KeyEnv() string {
	if s == nil || s.APIKeyEnv == "" {
		return DefaultAPIKeyEnv
	}
	return s.APIKeyEnv
}

// New builds the tool from its configuration and settings (nil means all
// defaults). lookupEnv reads secrets (os.LookupEnv in production; nil means that). It
// fails with an error naming the variable when the API key is missing
// (FR-139). The key is read again on each call, so a changed variable
// takes effect without a restart (FR-140).
func New(cfg *config.Tool, set *Settings, lookupEnv func(string) (string, bool)) (tool.Spec, tool.Handler, error) {
	if cfg == nil {
		cfg = &config.Tool{}
	}
	if set == nil {
		set = &Settings{}
	}
	if lookupEnv == nil {
		lookupEnv = os.LookupEnv
	}
	name := cfg.Name
	if name == "" {
		name = Kind
	}
	if cfg.Kind != "" && cfg.Kind != Kind {
		return tool.Spec{}, nil, fmt.Errorf("tool %q: kind is %q, not %s", name, cfg.Kind, Kind)
	}
	base := set.BaseURL
	if base == "" {
		base = DefaultBaseURL
	}
	endpoint, err := endpointURL(base)
	if err != nil {
		return tool.Spec{}, nil, fmt.Errorf("tool %q: base_url: %w", name, err)
	}
	keyEnv := set.KeyEnv()
	key, err := readKey(lookupEnv, keyEnv)
	if err != nil {
		return tool.Spec{}, nil, fmt.Errorf("tool %q: %w", name, err)
	}
	spec, err := tool.FromConfig(tool.Spec{Name: Kind, Description: description, Parameters: json.RawMessage(parameters),
		Timeout: DefaultTimeout, Retries: DefaultRetries, Backoff: DefaultBackoff}, cfg)
	if err != nil {
		return tool.Spec{}, nil, err
	}
	s := &searcher{
		endpoint:  endpoint,
		keyEnv:    keyEnv,
		key:       key,
		lookupEnv: lookupEnv,
		client: &http.Client{
			Timeout: spec.Timeout,
			// The token travels in a custom header that net/http does not
			// strip on a redirect to another host, so none is followed.
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		},
		now: time.Now,
	}
	return spec, s, nil
}

// endpointURL checks the base URL and returns the search endpoint under it.
func endpointURL(base string) (*url.URL, error) {
	u, err := url.Parse(base)
	if err != nil {
		// The parse error quotes the URL, which could hold credentials.
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return nil, fmt.Errorf("not a valid URL: %v", err)
	}
	switch {
	case u.User != nil:
		return nil, errors.New("must not contain a user name or password (the key comes from api_key_env)")
	case u.Scheme != "http" && u.Scheme != "https":
		return nil, fmt.Errorf("%q must be an http or https URL", base)
	case u.Host == "":
		return nil, fmt.Errorf("%q has no host", base)
	case u.RawQuery != "" || u.Fragment != "":
		return nil, fmt.Errorf("%q must not have a query or fragment", base)
	}
	u.Path = strings.TrimRight(u.Path, "/") + searchPath
	u.RawPath = ""
	return u, nil
}

// readKey reads the API key from the environment, without ever putting
// its value into an error.
func readKey(lookupEnv func(string) (string, bool), env string) (string, error) {
	key, ok := lookupEnv(env)
	if !ok {
		return "", fmt.Errorf("the Brave Search API key is missing: set the environment variable %s", env)
	}
	key = strings.TrimSpace(key)
	if key == "" {
		return "", fmt.Errorf("the Brave Search API key is missing: the environment variable %s is empty", env)
	}
	for _, r := range key {
		if r < 0x21 || r > 0x7e {
			return "", fmt.Errorf("the environment variable %s holds characters that cannot be in an API key (spaces, control or non-ASCII characters)", env)
		}
	}
	return key, nil
}

// searcher is the web_search Handler.
type searcher struct {
	endpoint  *url.URL
	keyEnv    string
	key       string // read at New; the fallback when the variable disappears
	lookupEnv func(string) (string, bool)
	client    *http.Client
	// now reads the clock for Retry-After dates.
	now func() time.Time
}

var _ tool.Handler = (*searcher)(nil)

// args are the arguments of a call.
type args struct {
	Query      string   `json:"query"`
	NumResults *float64 `json:"num_results"`
	Recency    *string  `json:"recency"`
}

// query is a checked call.
type query struct {
	q       string
	count   int
	recency string
}

// parseArgs checks the arguments, whatever the executor already checked:
// the handler must be safe on its own.
func parseArgs(raw json.RawMessage) (query, error) {
	var a args
	if len(bytes.TrimSpace(raw)) == 0 {
		return query{}, errors.New(`invalid arguments: expected a JSON object such as {"query": "…"}`)
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&a); err != nil {
		return query{}, fmt.Errorf("invalid arguments: %s (expected {\"query\": string, \"num_results\"?: integer 1..20, \"recency\"?: \"day\"|\"week\"|\"month\"|\"year\"})",
			strings.TrimPrefix(err.Error(), "json: "))
	}
	if dec.More() {
		return query{}, errors.New("invalid arguments: unexpected data after the JSON object")
	}
	q := query{q: strings.TrimSpace(a.Query), count: defaultNumResults}
	switch n := utf8.RuneCountInString(q.q); {
	case !utf8.ValidString(q.q):
		return query{}, errors.New("invalid arguments: query is not valid UTF-8")
	case n == 0:
		return query{}, errors.New("invalid arguments: query is required and must not be blank")
	case n > maxQueryChars:
		return query{}, fmt.Errorf("invalid arguments: query has %d characters; at most %d are allowed", n, maxQueryChars)
	}
	if a.NumResults != nil {
		n := *a.NumResults
		if n != math.Trunc(n) || n < 1 || n > maxNumResults {
			return query{}, fmt.Errorf("invalid arguments: num_results must be an integer from 1 to %d, got %v", maxNumResults, n)
		}
		q.count = int(n)
	}
	if a.Recency != nil {
		f, ok := freshness[*a.Recency]
		if !ok {
			return query{}, fmt.Errorf("invalid arguments: recency must be one of day, week, month, year, got %q", *a.Recency)
		}
		q.recency = f
	}
	return q, nil
}

// Call runs one search.
func (s *searcher) Call(ctx context.Context, raw json.RawMessage) (string, error) {
	q, err := parseArgs(raw)
	if err != nil {
		return "", err
	}
	key := s.key
	if k, err := readKey(s.lookupEnv, s.keyEnv); err == nil {
		key = k
	}
	u := *s.endpoint
	params := url.Values{"q": {q.q}, "count": {strconv.Itoa(q.count)}}
	if q.recency != "" {
		params.Set("freshness", q.recency)
	}
	u.RawQuery = params.Encode()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return "", fmt.Errorf("building the search request: %w", err)
	}
	req.Header.Set("Accept", "application/json")
	req.Header.Set("User-Agent", userAgent)
	req.Header.Set("X-Subscription-Token", key)
	resp, err := s.client.Do(req)
	if err != nil {
		return "", tool.Transient(fmt.Errorf("Brave Search could not be reached: %s", neterr.Reason(err)))
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxBody+1))
	if err != nil {
		return "", tool.Transient(fmt.Errorf("reading the Brave Search response failed: %s", neterr.Reason(err)))
	}
	if resp.StatusCode != http.StatusOK {
		return "", s.statusError(resp, body, key)
	}
	if len(body) > maxBody {
		return "", tool.Transient(fmt.Errorf("malformed response from Brave Search: larger than %d bytes", maxBody))
	}
	results, err := normalize(body)
	if err != nil {
		return "", tool.Transient(fmt.Errorf("malformed response from Brave Search: %v", err))
	}
	if len(results) == 0 {
		return fmt.Sprintf("No results found for %q.", q.q), nil
	}
	var out bytes.Buffer
	enc := json.NewEncoder(&out)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(results); err != nil {
		return "", fmt.Errorf("encoding the results: %w", err)
	}
	return strings.TrimSuffix(out.String(), "\n"), nil
}

// statusError turns a non-200 answer into the error the model sees.
func (s *searcher) statusError(resp *http.Response, body []byte, key string) error {
	code := resp.StatusCode
	msg := upstreamMessage(body, key)
	detail := ""
	if msg != "" {
		detail = ": " + msg
	}
	switch {
	case code == http.StatusTooManyRequests:
		return s.rateLimited(resp.Header, detail)
	case code == http.StatusUnauthorized || code == http.StatusForbidden:
		// Brave's text for a bad token is not needed to act, and may one
		// day quote it: only the status is said.
		return fmt.Errorf("Brave Search rejected the API key (HTTP %d): check the key in the environment variable %s and the plan it belongs to", code, s.keyEnv)
	case code >= 500:
		return tool.Transient(fmt.Errorf("Brave Search is unavailable (HTTP %d)%s", code, detail))
	case code >= 400:
		return fmt.Errorf("Brave Search refused the request (HTTP %d)%s", code, detail)
	case code >= 300 && code < 400:
		return fmt.Errorf("Brave Search answered with a redirect (HTTP %d) that is not followed: check base_url", code)
	default:
		return tool.Transient(fmt.Errorf("Brave Search answered with unexpected HTTP status %d", code))
	}
}

// rateLimited reads Brave's rate-limit headers. X-RateLimit-Reset lists
// the seconds until each window (per second, per month) resets; the first
// is the wait, unless X-RateLimit-Remaining shows a longer window used up,
// in which case retrying soon cannot help. Without those headers
// Retry-After is honoured, else the executor backs off on its own (FR-117).
func (s *searcher) rateLimited(h http.Header, detail string) error {
	err := fmt.Errorf("Brave Search rate limit reached (HTTP 429)%s", detail)
	resets := intList(h.Get("X-RateLimit-Reset"))
	remaining := intList(h.Get("X-RateLimit-Remaining"))
	for i := 1; i < len(resets) && i < len(remaining); i++ {
		if remaining[i] == 0 && resets[i] >= 0 {
			wait := time.Duration(resets[i]) * time.Second
			if wait > maxRateLimitWait {
				return fmt.Errorf("Brave Search quota used up (HTTP 429): it resets in %s; no more searches until then", roundWait(wait))
			}
		}
	}
	if len(resets) > 0 && resets[0] >= 0 {
		return s.withWait(err, time.Duration(resets[0])*time.Second)
	}
	if wait, ok := retryafter.Parse(h.Get("Retry-After"), s.now()); ok {
		return s.withWait(err, wait)
	}
	return tool.Transient(err)
}

// withWait marks err as retryable after wait, or as a failure when the
// wait is too long to be worth it.
func (s *searcher) withWait(err error, wait time.Duration) error {
	if wait > maxRateLimitWait {
		return fmt.Errorf("%w; Brave Search asks to wait %s before the next search", err, roundWait(wait))
	}
	if wait <= 0 {
		return tool.Transient(err)
	}
	return tool.RetryAfter(err, wait)
}

// roundWait prints a long wait readably.
func roundWait(d time.Duration) string {
	if d >= time.Hour {
		return d.Round(time.Minute).String()
	}
	return d.Round(time.Second).String()
}

// intList parses "1, 1419704" into its numbers; a list with any bad entry
// is ignored as a whole, since its positions could not be trusted.
func intList(s string) []int64 {
	if strings.TrimSpace(s) == "" {
		return nil
	}
	parts := strings.Split(s, ",")
	out := make([]int64, 0, len(parts))
	for _, p := range parts {
		n, err := strconv.ParseInt(strings.TrimSpace(p), 10, 64)
		if err != nil || n < 0 || n > math.MaxInt32 {
			return nil
		}
		out = append(out, n)
	}
	return out
}

// upstreamMessage is what Brave said about an error, from its error
// object {"error": {"detail": …, "code": …}} or else the body as text,
// short, on one line and without the key.
func upstreamMessage(body []byte, key string) string {
	var e struct {
		Error struct {
			Code   string `json:"code"`
			Detail string `json:"detail"`
		} `json:"error"`
		Message string `json:"message"`
	}
	msg := ""
	if json.Unmarshal(body, &e) == nil {
		switch {
		case e.Error.Detail != "" && e.Error.Code != "":
			msg = e.Error.Detail + " (" + e.Error.Code + ")"
		case e.Error.Detail != "":
			msg = e.Error.Detail
		case e.Message != "":
			msg = e.Message
		}
	} else if utf8.Valid(body) && !bytes.Contains(bytes.ToLower(body[:min(len(body), 512)]), []byte("<html")) {
		msg = string(body)
	}
	if key != "" {
		msg = strings.ReplaceAll(msg, key, "[redacted]")
	}
	msg = strings.Join(strings.FieldsFunc(msg, func(r rune) bool { return unicode.IsSpace(r) || unicode.IsControl(r) }), " ")
	return clip.Runes(msg, maxMessage)
}

// Result is one normalised search result (FR-118), what the model gets.
type Result struct {
	Title       string `json:"title"`
	URL         string `json:"url"`
	Description string `json:"description"`
	// Age is when the page was published, as Brave says it ("2 days ago",
	// "May 1, 2024"), else its page date; empty when unknown.
	Age string `json:"age"`
	// Source is the publisher's name, else the site's host name.
	Source string `json:"source"`
}

// braveResponse is the part of Brave's web search response that is used.
type braveResponse struct {
	Type string `json:"type"`
	Web  *struct {
		Results []braveResult `json:"results"`
	} `json:"web"`
}

type braveResult struct {
	Title       string `json:"title"`
	URL         string `json:"url"`
	Description string `json:"description"`
	Age         string `json:"age"`
	PageAge     string `json:"page_age"`
	Profile     *struct {
		Name string `json:"name"`
	} `json:"profile"`
	MetaURL *struct {
		Hostname string `json:"hostname"`
	} `json:"meta_url"`
}

// normalize parses a Brave response into results; results without a URL
// are dropped, since a model could do nothing with them.
func normalize(body []byte) ([]Result, error) {
	var r braveResponse
	if err := json.Unmarshal(body, &r); err != nil {
		return nil, fmt.Errorf("not the JSON of a web search: %v", err)
	}
	if r.Type != "" && r.Type != "search" {
		return nil, fmt.Errorf("response type is %q, not search", r.Type)
	}
	if r.Web == nil {
		return nil, nil
	}
	out := make([]Result, 0, len(r.Web.Results))
	for _, br := range r.Web.Results {
		link := strings.TrimSpace(br.URL)
		if link == "" {
			continue
		}
		res := Result{
			Title:       plainText(br.Title),
			URL:         link,
			Description: plainText(br.Description),
			Age:         strings.TrimSpace(br.Age),
		}
		if res.Age == "" {
			res.Age = strings.TrimSpace(br.PageAge)
		}
		if br.Profile != nil {
			res.Source = strings.TrimSpace(br.Profile.Name)
		}
		if res.Source == "" && br.MetaURL != nil {
			res.Source = strings.TrimSpace(br.MetaURL.Hostname)
		}
		if res.Source == "" {
			if u, err := url.Parse(link); err == nil {
				res.Source = u.Hostname()
			}
		}
		out = append(out, res)
	}
	return out, nil
}

// plainText strips the markup Brave puts in titles and snippets
// (<strong>, entities) and collapses whitespace.
func plainText(s string) string {
	if !strings.ContainsAny(s, "<&") {
		return strings.Join(strings.Fields(s), " ")
	}
	var b strings.Builder
	z := html.NewTokenizer(strings.NewReader(s))
	for {
		switch z.Next() {
		case html.ErrorToken:
			return strings.Join(strings.Fields(b.String()), " ")
		case html.TextToken:
			b.Write(z.Text())
		case html.StartTagToken, html.EndTagToken, html.SelfClosingTagToken:
			// Tags like <br> separate words; inline ones like <strong>
			// sit inside a word's surroundings already.
			if name, _ := z.TagName(); string(name) == "br" || string(name) == "p" {
				b.WriteByte(' ')
			}
		}
	}
}
