// Package bird is the bird tool (FR-107, FR-123..126): it reads X/Twitter
// through the `bird` CLI (npm @steipete/bird), which uses the web session
// of a logged-in browser or the AUTH_TOKEN/CT0 cookies in the environment.
//
// The CLI is run with an argv, never a shell, with --json; its tweet
// objects ({id, text, author{username,name}, createdAt, likeCount,
// retweetCount, replyCount}) are turned into a compact list. Rate limits
// and authentication failures are recognised in its exit status and
// output and reported as such.
package bird

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/agentrunner/agentrunner/config"
	"github.com/agentrunner/agentrunner/internal/childenv"
	"github.com/agentrunner/agentrunner/internal/clip"
	"github.com/agentrunner/agentrunner/tool"
)

// Kind is the tool kind in the configuration (tools.<name>.kind).
const Kind = "bird"

// Defaults of the tool's settings.
const (
	// DefaultBinary is the program run, looked up on PATH.
	DefaultBinary = "bird"
	// DefaultTimeout bounds one call: a web operation.
	DefaultTimeout = 30 * time.Second
	DefaultRetries = 2
	DefaultBackoff = time.Second
	// DefaultLimit is how many tweets a call returns unless it asks.
	DefaultLimit = 20
	// MaxLimit is the most tweets one call may ask for.
	MaxLimit = 100
)

// Modes of the arguments.
const (
	ModeTimeline = "timeline"
	ModeSearch   = "search"
	ModeUser     = "user"
)

// Install says how to get the CLI; errors about a missing binary quote it.
const Install = "npm install -g @steipete/bird@0.8.0"

// Description is what a model is told the tool does, unless the
// configuration overrides it.
const Description = "Reads X (Twitter). mode \"search\": tweets matching query, in X search syntax " +
	"(\"$BTC lang:en -filter:replies\", \"from:saylor bitcoin\"), newest first. mode \"user\": the recent " +
	"tweets of the account named in query (@handle). mode \"timeline\": with query \"@handle\", that " +
	"account's tweets; otherwise the home timeline of the logged-in account (query \"following\" for the " +
	"chronological Following feed). limit is 1-100 (default 20). Returns tweets with id, author, text, " +
	"created_at, likes, retweets, replies and url."

// Parameters is the JSON Schema of the arguments (FR-107).
const Parameters = `{
  "type": "object",
  "properties": {
    "query": {"type": "string", "minLength": 1, "maxLength": 500, "description": "search: an X search query; user: a handle such as @saylor; timeline: a handle, or \"home\" / \"following\" for the logged-in account's feed."},
    "mode": {"type": "string", "enum": ["timeline", "search", "user"]},
    "limit": {"type": "integer", "minimum": 1, "maximum": 100, "default": 20, "description": "How many tweets to return."}
  },
  "required": ["query", "mode"],
  "additionalProperties": false
}`

// Settings are the keys of a bird tool's section besides those every tool
// has.
type Settings struct {
	// Binary is the bird program; default DefaultBinary (found in PATH).
	Binary string `yaml:"binary"`
	// Env is what the program gets besides the base variables and the
	// credentials it reads (AUTH_TOKEN, CT0 and their TWITTER_ forms).
	Env config.Env `yaml:"env"`
}

// Check reports an env that names or sets variables it must not.
func (s *Settings) Check(report config.Reporter) { config.CheckEnv(report, "env", s.Env) }

// ToolKind is what configuration knows of the kind: its settings.
func ToolKind() config.ToolKind {
	return config.ToolKind{Timeout: DefaultTimeout, Settings: func() config.ToolSettings { return &Settings{} }}
}

// Check tells whether the configured binary can be run, so the runner can
// refuse to start an agent that may use the tool rather than fail on its
// first call. cfg may be nil.
func Check(cfg *Settings) error {
	bin := binary(cfg)
	path, err := exec.LookPath(bin)
	if err != nil {
		return fmt.Errorf("bird: the X/Twitter CLI %q cannot be run (%v); install it with `%s` or set the tool's binary to its path", bin, err, Install)
	}
	info, err := os.Stat(path)
	if err != nil {
		return fmt.Errorf("bird: %s: %v", path, err)
	}
	if info.IsDir() {
		return fmt.Errorf("bird: %s is a directory, not the bird program", path)
	}
	return nil
}

// Program is the program the tool runs: the configured binary, else
// DefaultBinary. cfg may be nil.
func Program(cfg *Settings) string { return binary(cfg) }

func binary(cfg *Settings) string {
	if cfg != nil && cfg.Binary != "" {
		return cfg.Binary
	}
	return DefaultBinary
}

// New returns the tool's Spec and Handler. cfg and set may be nil (all
// defaults); lookup reads the session cookies at each call (the runner's
// secrets: the environment, NAME_FILE, the secrets file), so cookies
// rotated and reloaded are used from the next call; nil: the environment.
// New does not look for the binary: Check does.
func New(cfg *config.Tool, set *Settings, lookup func(string) (string, bool)) (tool.Spec, tool.Handler, error) {
	spec, h, err := newTool(cfg, set, time.Now)
	if err == nil && lookup != nil {
		h.(*handler).lookup = lookup
	}
	return spec, h, err
}

// newTool is New with the clock that turns a rate limit's reset time into
// a wait.
func newTool(cfg *config.Tool, set *Settings, now func() time.Time) (tool.Spec, tool.Handler, error) {
	if cfg == nil {
		cfg = &config.Tool{}
	}
	if set == nil {
		set = &Settings{}
	}
	spec, err := tool.FromConfig(tool.Spec{Name: Kind, Description: Description, Parameters: json.RawMessage(Parameters),
		Timeout: DefaultTimeout, Retries: DefaultRetries, Backoff: DefaultBackoff}, cfg)
	if err != nil {
		return tool.Spec{}, nil, err
	}
	if strings.ContainsAny(binary(set), "\x00\n") {
		return tool.Spec{}, nil, fmt.Errorf("%s: binary %q is not a program name or path", spec.Name, binary(set))
	}
	env := childenv.Spec{Pass: slices.Concat(secretEnv, set.Env.Pass), Set: maps.Clone(set.Env.Set)}
	if problems := childenv.Check(env); len(problems) > 0 {
		return tool.Spec{}, nil, fmt.Errorf("%s: env: %s", spec.Name, strings.Join(problems, "; "))
	}
	return spec, &handler{name: spec.Name, binary: binary(set), env: env, now: now, lookup: os.LookupEnv}, nil
}

type handler struct {
	name   string
	binary string
	// env is what bird gets besides the base variables: its session
	// cookies and what the tool's configuration passes and sets.
	env childenv.Spec
	now func() time.Time
	// lookup reads the session cookies at each call.
	lookup func(string) (string, bool)
}

var _ tool.Handler = (*handler)(nil)

// Result is what a call returns: what was read, and the tweets.
type Result struct {
	// Source says what the tweets are ("search results for …", "recent
	// tweets of @x", "the home timeline").
	Source string  `json:"source"`
	Count  int     `json:"count"`
	Tweets []Tweet `json:"tweets"`
}

// Tweet is one tweet, compacted for a model.
type Tweet struct {
	ID string `json:"id"`
	// Author is the handle with its @; AuthorName the display name.
	Author     string `json:"author"`
	AuthorName string `json:"author_name,omitempty"`
	Text       string `json:"text"`
	// CreatedAt is RFC 3339 in UTC; bird's own text when it cannot be read.
	CreatedAt string `json:"created_at,omitempty"`
	// Likes, Retweets and Replies are 0 when bird does not report them.
	Likes    int64  `json:"likes"`
	Retweets int64  `json:"retweets"`
	Replies  int64  `json:"replies"`
	URL      string `json:"url"`
}

// request is a validated call and how to run it.
type request struct {
	mode, query string
	limit       int
	// handle is the account of user mode, or of timeline mode with @handle.
	handle    string
	following bool
}

// handlePattern is an X handle, as bird checks it.
var handlePattern = regexp.MustCompile(`^@?([A-Za-z0-9_]{1,15})$`)

// parseArgs validates the arguments; every error names the problem.
func parseArgs(raw json.RawMessage) (request, error) {
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(raw, &fields); err != nil || fields == nil {
		return request{}, errors.New(`arguments must be an object like {"query": "$BTC", "mode": "search"}`)
	}
	for k := range fields {
		if k != "query" && k != "mode" && k != "limit" {
			return request{}, fmt.Errorf("unknown argument %q: the arguments are query, mode and limit", clip.String(k, 40))
		}
	}
	var req request
	if raw, ok := fields["mode"]; ok && json.Unmarshal(raw, &req.mode) != nil {
		return request{}, errors.New("mode must be a string: timeline, search or user")
	}
	switch req.mode {
	case ModeTimeline, ModeSearch, ModeUser:
	case "":
		return request{}, errors.New("mode is required: timeline, search or user")
	default:
		return request{}, fmt.Errorf("mode %q is not timeline, search or user", clip.String(req.mode, 40))
	}
	if raw, ok := fields["query"]; ok && json.Unmarshal(raw, &req.query) != nil {
		return request{}, errors.New("query must be a string")
	}
	req.query = strings.TrimSpace(req.query)
	switch {
	case req.query == "":
		return request{}, errors.New(`query is required: search terms, a @handle, or "home"`)
	case len(req.query) > 500:
		return request{}, fmt.Errorf("query is %d bytes; at most 500", len(req.query))
	case strings.ContainsRune(req.query, 0):
		return request{}, errors.New("query contains a NUL character")
	}
	req.limit = DefaultLimit
	if raw, ok := fields["limit"]; ok && string(raw) != "null" {
		n, err := strconv.ParseFloat(string(bytes.TrimSpace(raw)), 64)
		if err != nil || n != float64(int(n)) {
			return request{}, fmt.Errorf("limit must be a whole number from 1 to %d", MaxLimit)
		}
		if n < 1 || n > MaxLimit {
			return request{}, fmt.Errorf("limit %v is outside 1..%d", n, MaxLimit)
		}
		req.limit = int(n)
	}
	switch req.mode {
	case ModeUser:
		m := handlePattern.FindStringSubmatch(req.query)
		if m == nil {
			return request{}, fmt.Errorf("user mode needs a handle such as @saylor (letters, digits and _, at most 15), not %q", clip.String(req.query, 60))
		}
		req.handle = m[1]
	case ModeTimeline:
		if strings.HasPrefix(req.query, "@") {
			m := handlePattern.FindStringSubmatch(req.query)
			if m == nil {
				return request{}, fmt.Errorf("%q is not a handle (letters, digits and _, at most 15)", clip.String(req.query, 60))
			}
			req.handle = m[1]
		} else {
			req.following = strings.EqualFold(req.query, "following")
		}
	}
	return req, nil
}

// argv is the command line of the request. Global options come first;
// --plain keeps bird's messages free of emoji and colour, which makes them
// stable to recognise. A search query follows "--" so one that starts with
// "-" is not taken for an option.
func (r request) argv(timeout time.Duration) ([]string, string) {
	args := []string{"--plain"}
	if timeout > 0 {
		args = append(args, "--timeout", strconv.FormatInt(timeout.Milliseconds(), 10))
	}
	n := strconv.Itoa(r.limit)
	switch {
	case r.mode == ModeSearch:
		return append(args, "search", "-n", n, "--json", "--", r.query), "search results for " + r.query
	case r.handle != "":
		return append(args, "user-tweets", "@"+r.handle, "-n", n, "--json"), "recent tweets of @" + r.handle
	case r.following:
		return append(args, "home", "--following", "-n", n, "--json"), "the home timeline (Following) of the logged-in account"
	default:
		return append(args, "home", "-n", n, "--json"), "the home timeline (For You) of the logged-in account"
	}
}

// Call runs bird once and returns the tweets as JSON.
func (h *handler) Call(ctx context.Context, args json.RawMessage) (string, error) {
	req, err := parseArgs(args)
	if err != nil {
		return "", err
	}
	argv, source := req.argv(requestTimeout(ctx))
	res, err := run(ctx, h.binary, argv, h.callEnv())
	if err != nil {
		return "", h.runError(ctx, err)
	}
	if res.exitCode != 0 || res.signaled {
		return "", h.failure(ctx, req, res)
	}
	tweets, err := parseTweets(res.stdout.Bytes(), res.stdout.overflow)
	if err != nil {
		return "", err
	}
	if len(tweets) > req.limit {
		tweets = tweets[:req.limit]
	}
	out, err := json.Marshal(Result{Source: source, Count: len(tweets), Tweets: tweets})
	if err != nil {
		return "", fmt.Errorf("encode the tweets: %w", err)
	}
	return string(out), nil
}

// requestTimeout is what bird is told to allow its HTTP requests: the time
// left before ctx ends, less a margin so it can report a timeout itself
// before it is killed. 0 means no flag.
func requestTimeout(ctx context.Context) time.Duration {
	deadline, ok := ctx.Deadline()
	if !ok {
		return 0
	}
	left := time.Until(deadline) - 2*time.Second
	if left < time.Second {
		return 0
	}
	return left.Truncate(time.Millisecond)
}

// runError explains why bird could not be run at all.
func (h *handler) runError(ctx context.Context, err error) error {
	if errors.Is(err, exec.ErrNotFound) || errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("the X/Twitter CLI %q is not installed on this runner; an operator must install it (%s) or set the tool's binary", h.binary, Install)
	}
	if errors.Is(err, os.ErrPermission) {
		return fmt.Errorf("the X/Twitter CLI %q cannot be executed (permission denied); an operator must fix it", h.binary)
	}
	if ctx.Err() != nil {
		return ctxError(ctx)
	}
	return fmt.Errorf("the X/Twitter CLI could not be started: %w", err)
}

func ctxError(ctx context.Context) error {
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return tool.Transient(errors.New("bird did not finish within the time limit; X may be slow, try again later"))
	}
	return fmt.Errorf("the call was cancelled: %w", ctx.Err())
}

// Patterns of bird's (and X's) failure messages.
var (
	rateLimitRE = regexp.MustCompile(`(?i)\b429\b|rate.?limit|too many requests|"code"\s*:\s*88\b`)
	authRE      = regexp.MustCompile(`(?i)missing required credentials|missing auth_token|missing ct0|could not authenticate|bad authentication data|\b401\b|\b403\b|unauthori[sz]ed|no twitter cookies|"code"\s*:\s*(32|215|353)\b|csrf`)
	notFoundRE  = regexp.MustCompile(`(?i)not found or unavailable|could not find user|invalid handle|invalid username|user.{0,40}(suspended|does not exist)`)
	// bird's status prefixes in --plain mode.
	prefixRE = regexp.MustCompile(`\[(err|warn|info|hint|ok)\] `)
)

// failure classifies a run that exited non-zero or was killed.
func (h *handler) failure(ctx context.Context, req request, res *result) error {
	if ctx.Err() != nil {
		return ctxError(ctx)
	}
	text := h.detail(res)
	// Classify on bird's error lines: its warnings (such as "No Twitter
	// cookies found in Safari" before it finds them in Chrome) are noise
	// when something else failed.
	cause := h.redact(errorLines(res.stderr.String()))
	if cause == "" {
		cause = text
	}
	switch {
	case authRE.MatchString(cause):
		return fmt.Errorf("bird is not logged in to X (%s). An operator must log in to x.com in a browser bird reads cookies from (Safari, Chrome or Firefox) or set AUTH_TOKEN and CT0 in the runner's environment; retrying will not help", text)
	case rateLimitRE.MatchString(cause):
		err := fmt.Errorf("X is rate limiting this account (%s); wait before asking again", text)
		if wait, ok := resetWait(text, h.now()); ok {
			return tool.RetryAfter(err, wait)
		}
		return tool.Transient(err)
	case notFoundRE.MatchString(cause):
		who := "the account"
		if req.handle != "" {
			who = "@" + req.handle
		}
		return fmt.Errorf("%s was not found on X or is unavailable (%s)", who, text)
	case res.signaled:
		return tool.Transient(fmt.Errorf("bird was killed by a signal (%s)", text))
	case res.exitCode == 2:
		return fmt.Errorf("bird refused the request as invalid (%s)", text)
	default:
		// bird exits 1 for network and API trouble; most of it passes.
		return tool.Transient(fmt.Errorf("bird failed with exit status %d (%s)", res.exitCode, text))
	}
}

// detail is bird's error output, made fit for a message: secrets from the
// environment redacted, status prefixes and control characters removed,
// length bounded.
func (h *handler) detail(res *result) string {
	text := strings.TrimSpace(res.stderr.String())
	if out := strings.TrimSpace(res.stdout.String()); out != "" {
		text += " " + out
	}
	text = h.redact(text)
	text = prefixRE.ReplaceAllString(text, "")
	text = strings.Map(func(r rune) rune {
		if r == utf8.RuneError || unicode.IsControl(r) {
			return ' '
		}
		return r
	}, text)
	text = strings.Join(strings.Fields(text), " ")
	if text == "" {
		return "no output"
	}
	return clip.String(text, 600)
}

// callEnv is what bird gets for one call: the tool's env, with the session
// cookies the runner's secrets hold now set by name.
func (h *handler) callEnv() childenv.Spec {
	env := childenv.Spec{Pass: h.env.Pass, Set: maps.Clone(h.env.Set)}
	for _, k := range secretEnv {
		if v, ok := h.lookup(k); ok && v != "" {
			if env.Set == nil {
				env.Set = map[string]string{}
			}
			env.Set[k] = v
		}
	}
	return env
}

// redact removes the session cookies the runner holds now, should bird
// ever echo them.
func (h *handler) redact(s string) string {
	for _, k := range secretEnv {
		if v, _ := h.lookup(k); len(v) >= 4 {
			s = strings.ReplaceAll(s, v, "[redacted]")
		}
	}
	return s
}

// errorLines returns the lines of bird's output that report an error.
func errorLines(s string) string {
	var errs []string
	for line := range strings.Lines(s) {
		if strings.Contains(line, "[err]") || strings.Contains(line, "Error:") {
			errs = append(errs, strings.TrimSpace(line))
		}
	}
	return strings.Join(errs, " ")
}

// secretEnv are the variables bird takes X session cookies from.
var secretEnv = []string{"AUTH_TOKEN", "CT0", "TWITTER_AUTH_TOKEN", "TWITTER_CT0"}

// Rate-limit reset hints in X's and bird's messages.
var (
	resetUnixRE    = regexp.MustCompile(`(?i)x-rate-limit-reset\D{0,5}(\d{9,11})\b`)
	retryAfterRE   = regexp.MustCompile(`(?i)retry.after\D{0,5}(\d{1,6})\b`)
	tryAgainRE     = regexp.MustCompile(`(?i)(?:try again|retry) in (\d{1,6}) ?(seconds?|secs?|s|minutes?|mins?|m)\b`)
	resetRFC3339RE = regexp.MustCompile(`(?i)resets? at (\d{4}-\d\d-\d\dT[0-9:.]+(?:Z|[+-]\d\d:\d\d))`)
)

// maxWait bounds a wait taken from a message: X's windows are 15 minutes.
const maxWait = time.Hour

// resetWait finds when a rate limit ends, if the message says.
func resetWait(text string, now time.Time) (time.Duration, bool) {
	var d time.Duration
	switch {
	case resetUnixRE.MatchString(text):
		secs, _ := strconv.ParseInt(resetUnixRE.FindStringSubmatch(text)[1], 10, 64)
		d = time.Unix(secs, 0).Sub(now)
	case resetRFC3339RE.MatchString(text):
		t, err := time.Parse(time.RFC3339Nano, resetRFC3339RE.FindStringSubmatch(text)[1])
		if err != nil {
			return 0, false
		}
		d = t.Sub(now)
	case retryAfterRE.MatchString(text):
		secs, _ := strconv.Atoi(retryAfterRE.FindStringSubmatch(text)[1])
		d = time.Duration(secs) * time.Second
	case tryAgainRE.MatchString(text):
		m := tryAgainRE.FindStringSubmatch(text)
		n, _ := strconv.Atoi(m[1])
		d = time.Duration(n) * time.Second
		if strings.HasPrefix(strings.ToLower(m[2]), "m") {
			d = time.Duration(n) * time.Minute
		}
	default:
		return 0, false
	}
	if d <= 0 {
		return 0, false
	}
	return min(d, maxWait), true
}

// birdTweet is a tweet as bird --json prints it.
type birdTweet struct {
	ID     *string `json:"id"`
	Text   *string `json:"text"`
	Author *struct {
		Username string `json:"username"`
		Name     string `json:"name"`
	} `json:"author"`
	CreatedAt    string   `json:"createdAt"`
	LikeCount    *float64 `json:"likeCount"`
	RetweetCount *float64 `json:"retweetCount"`
	ReplyCount   *float64 `json:"replyCount"`
}

// maxText bounds one tweet's text: bird includes whole Notes and Articles.
const maxText = 4000

// twitterTime is the layout of X's created_at ("Wed Oct 10 20:19:24 +0000 2018").
const twitterTime = "Mon Jan 02 15:04:05 -0700 2006"

var tweetIDPattern = regexp.MustCompile(`^[0-9]{1,25}$`)

// parseTweets reads bird's JSON: an array of tweets, or {"tweets": [...],
// "nextCursor": ...} when it paged.
func parseTweets(out []byte, overflow bool) ([]Tweet, error) {
	if overflow {
		return nil, fmt.Errorf("bird printed more than %d MiB; ask for fewer tweets", maxStdout>>20)
	}
	out = bytes.TrimSpace(out)
	if len(out) == 0 {
		return nil, errors.New("bird printed nothing; it may not support --json for this command (bird 0.8.0 is expected)")
	}
	var list []json.RawMessage
	if out[0] == '{' {
		var paged struct {
			Tweets []json.RawMessage `json:"tweets"`
		}
		if err := json.Unmarshal(out, &paged); err != nil || paged.Tweets == nil {
			return nil, fmt.Errorf("bird printed an object without tweets (bird 0.8.0 is expected): %s", clip.String(strings.Join(strings.Fields(string(out)), " "), 200))
		}
		list = paged.Tweets
	} else if err := json.Unmarshal(out, &list); err != nil {
		return nil, fmt.Errorf("bird printed something that is not tweet JSON (bird 0.8.0 is expected): %s", clip.String(strings.Join(strings.Fields(string(out)), " "), 200))
	}
	tweets := make([]Tweet, 0, len(list))
	for i, raw := range list {
		var b birdTweet
		if err := json.Unmarshal(raw, &b); err != nil {
			return nil, fmt.Errorf("bird's tweet %d is not a tweet object: %v", i, err)
		}
		switch {
		case b.ID == nil || !tweetIDPattern.MatchString(*b.ID):
			return nil, fmt.Errorf("bird's tweet %d has no valid id", i)
		case b.Author == nil || !handlePattern.MatchString(b.Author.Username):
			return nil, fmt.Errorf("bird's tweet %d (%s) has no valid author", i, *b.ID)
		case b.Text == nil:
			return nil, fmt.Errorf("bird's tweet %d (%s) has no text", i, *b.ID)
		}
		tw := Tweet{
			ID:         *b.ID,
			Author:     "@" + b.Author.Username,
			AuthorName: b.Author.Name,
			Text:       clip.String(*b.Text, maxText),
			CreatedAt:  b.CreatedAt,
			Likes:      count(b.LikeCount),
			Retweets:   count(b.RetweetCount),
			Replies:    count(b.ReplyCount),
			URL:        "https://x.com/" + b.Author.Username + "/status/" + *b.ID,
		}
		if t, err := time.Parse(twitterTime, b.CreatedAt); err == nil {
			tw.CreatedAt = t.UTC().Format(time.RFC3339)
		} else if t, err := time.Parse(time.RFC3339Nano, b.CreatedAt); err == nil {
			tw.CreatedAt = t.UTC().Format(time.RFC3339)
		}
		tweets = append(tweets, tw)
	}
	return tweets, nil
}

// count reads a counter; missing, negative or absurd values read as 0.
func count(f *float64) int64 {
	if f == nil || !(*f >= 0) || *f > 1e15 {
		return 0
	}
	return int64(*f)
}
