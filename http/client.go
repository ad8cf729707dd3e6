package http

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/agentrunner/agentrunner"
	"github.com/agentrunner/agentrunner/engine"
	"github.com/agentrunner/agentrunner/internal/clip"
	"github.com/agentrunner/agentrunner/internal/neterr"
	"github.com/agentrunner/agentrunner/mailbox"
)

// Limits of the client.
const (
	// MaxResponseBytes bounds an answer of the API, and one event of a
	// stream, so a wrong URL or a broken server cannot fill the memory.
	MaxResponseBytes = 16 << 20
	// maxErrorBytes bounds the body of an error answer read for its code.
	maxErrorBytes = 64 << 10
	// clientHeaderTimeout bounds the wait for an answer's headers with the
	// default HTTP client; bodies are bounded by the caller's context.
	clientHeaderTimeout = 30 * time.Second
	// snippetBytes is how much of an unexpected body an error quotes.
	snippetBytes = 200
)

// Client calls the operator API of an agentrunner server: what the CLI's
// remote commands use, and what programs driving a runner can use, with the
// same types the API answers.
//
// Every error is an *agentrunner.Error, so callers switch on
// agentrunner.ErrorCode. Those the server answers with its {"error": {...}}
// body carry the server's code and message and no cause (Err is nil). A
// server that cannot be reached is EUNAVAILABLE with the network error as
// cause; an answer that is not the API's is EUNAVAILABLE (502, 503, 504,
// 429) or EINTERNAL with ErrUnexpectedAnswer as cause. No error contains
// the API key.
//
// A Client is safe for concurrent use.
type Client struct {
	// base is the server's URL without a trailing slash.
	base string
	key  string
	hc   *http.Client
}

// NewClient returns a client of the server at baseURL (http or https, with
// an optional path prefix, without credentials, query or fragment). apiKey,
// when not empty, is sent as "Authorization: Bearer <key>". hc nil uses a
// client that waits at most 30s for an answer's headers and follows no
// redirects (a redirected POST would become a GET, and a redirect to
// another host would take the key along); pass one for TLS settings or a
// proxy (a Timeout there also cuts event streams short). Errors are
// EINVALID and never quote the key or a password.
func NewClient(baseURL, apiKey string, hc *http.Client) (*Client, error) {
	baseURL = strings.TrimSpace(baseURL)
	if !strings.Contains(baseURL, "://") {
		// Parsing "127.0.0.1:8080" fails with a message about colons.
		return nil, agentrunner.Errorf(agentrunner.EINVALID, "the server URL must be an http:// or https:// URL, such as http://127.0.0.1:8080")
	}
	u, err := url.Parse(baseURL)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err // without the URL, which could carry a password
		}
		return nil, agentrunner.Errorf(agentrunner.EINVALID, "the server URL is not a URL: %v", err)
	}
	switch {
	case u.User != nil:
		return nil, agentrunner.Errorf(agentrunner.EINVALID, "the server URL must not carry credentials (user:password@); give the API key instead")
	case u.Scheme != "http" && u.Scheme != "https":
		return nil, agentrunner.Errorf(agentrunner.EINVALID, "the server URL %s must be an http:// or https:// URL", u)
	case u.Host == "" || u.Hostname() == "":
		return nil, agentrunner.Errorf(agentrunner.EINVALID, "the server URL %s has no host", u)
	case u.RawQuery != "" || u.ForceQuery || u.Fragment != "":
		return nil, agentrunner.Errorf(agentrunner.EINVALID, "the server URL %s must not have a query or a fragment", u)
	}
	if port := u.Port(); port != "" {
		if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
			return nil, agentrunner.Errorf(agentrunner.EINVALID, "the server URL %s: the port must be from 1 to 65535", u)
		}
	}
	if len(apiKey) > MaxCredentialBytes {
		return nil, agentrunner.Errorf(agentrunner.EINVALID, "the API key is longer than %d bytes", MaxCredentialBytes)
	}
	// A header value cannot carry these; the server refuses such keys too.
	if strings.ContainsFunc(apiKey, func(r rune) bool { return r > unicode.MaxASCII || !unicode.IsPrint(r) || r == ' ' }) {
		return nil, agentrunner.Errorf(agentrunner.EINVALID, "the API key holds a space, a control or a non-ASCII character")
	}
	if hc == nil {
		tr := http.DefaultTransport.(*http.Transport).Clone()
		tr.ResponseHeaderTimeout = clientHeaderTimeout
		hc = &http.Client{
			Transport: tr,
			CheckRedirect: func(*http.Request, []*http.Request) error {
				return http.ErrUseLastResponse
			},
		}
	}
	u.Path = strings.TrimRight(u.Path, "/")
	u.RawPath = strings.TrimRight(u.RawPath, "/")
	return &Client{base: u.String(), key: apiKey, hc: hc}, nil
}

// BaseURL returns the server's URL, for messages.
func (c *Client) BaseURL() string { return c.base }

// Cycle is a cycle as the API shows it.
type Cycle struct {
	ID                string                  `json:"id"`
	Pipeline          string                  `json:"pipeline"`
	Status            agentrunner.CycleStatus `json:"status"`
	Step              string                  `json:"step,omitempty"`
	LastCompletedStep string                  `json:"last_completed_step"`
	StartedAt         time.Time               `json:"started_at"`
	// EndedAt is nil while the cycle runs.
	EndedAt *time.Time `json:"ended_at"`
	// DurationMS runs until now while the cycle runs.
	DurationMS int64  `json:"duration_ms"`
	Error      string `json:"error,omitempty"`
}

// CycleList is a page of cycles, newest first; NextBefore, when set, asks
// for the next page.
type CycleList struct {
	Cycles     []Cycle `json:"cycles"`
	NextBefore string  `json:"next_before,omitempty"`
}

// CycleDetail is one cycle with its steps, artifacts and events (FR-064).
type CycleDetail struct {
	Cycle     Cycle      `json:"cycle"`
	Steps     []Step     `json:"steps"`
	Artifacts []Artifact `json:"artifacts"`
	Events    []Event    `json:"events"`
	// EventsTruncated says Events holds only the cycle's first events.
	EventsTruncated bool `json:"events_truncated,omitempty"`
}

// Step is a step of a cycle with its attempts, in the order they ran.
type Step struct {
	Step  string `json:"step"`
	Agent string `json:"agent,omitempty"`
	// Status is its last attempt's.
	Status     string    `json:"status"`
	DurationMS int64     `json:"duration_ms"`
	Attempts   []Attempt `json:"attempts"`
}

// Attempt is one try of a step.
type Attempt struct {
	Number       int                       `json:"number"`
	Status       agentrunner.AttemptStatus `json:"status"`
	ErrorClass   agentrunner.ErrorClass    `json:"error_class,omitempty"`
	Error        string                    `json:"error,omitempty"`
	StartedAt    *time.Time                `json:"started_at,omitempty"`
	EndedAt      *time.Time                `json:"ended_at,omitempty"`
	NotBefore    *time.Time                `json:"not_before,omitempty"`
	DurationMS   int64                     `json:"duration_ms"`
	ExitCode     *int                      `json:"exit_code,omitempty"`
	InputTokens  int                       `json:"input_tokens"`
	OutputTokens int                       `json:"output_tokens"`
	ToolCalls    int                       `json:"tool_calls"`
}

// Artifact is a file of a cycle directory.
type Artifact struct {
	Name     string    `json:"name"`
	Size     int64     `json:"size"`
	SHA256   string    `json:"sha256"`
	Modified time.Time `json:"modified"`
}

// Event is an event as the API and the stream show it (FR-057).
type Event struct {
	ID        int64             `json:"id"`
	Timestamp time.Time         `json:"timestamp"`
	Type      string            `json:"event_type"`
	Agent     string            `json:"agent,omitempty"`
	Step      string            `json:"step,omitempty"`
	CycleID   string            `json:"cycle_id,omitempty"`
	Level     agentrunner.Level `json:"level"`
	Details   map[string]any    `json:"details,omitempty"`
}

// ErrorList is a page of warnings and errors, newest first; NextBefore,
// when set, asks for the next page.
type ErrorList struct {
	Errors     []Event `json:"errors"`
	NextBefore int64   `json:"next_before,omitempty"`
}

// EventList is a page of events, oldest first; NextSince continues it.
type EventList struct {
	Events    []Event `json:"events"`
	NextSince int64   `json:"next_since"`
}

// EventFilter narrows Events and Stream; empty fields select everything.
type EventFilter struct {
	CycleID string
	Type    string
	// Level is the lowest level: debug, info, warn or error.
	Level agentrunner.Level
}

// Tool is a registered tool with the agents that may call it and its
// recorded usage (FR-104, FR-143).
type Tool struct {
	Name        string          `json:"name"`
	Description string          `json:"description"`
	Parameters  json.RawMessage `json:"parameters,omitempty"`
	Agents      []string        `json:"agents"`
	Usage       ToolUsage       `json:"usage"`
	// Breaker is the circuit breaker's state in the server's process,
	// when known.
	Breaker string `json:"breaker_state,omitempty"`
}

// ToolList is a page of tools, sorted by name; NextAfter, when set, asks
// for the next page.
type ToolList struct {
	Tools     []Tool `json:"tools"`
	NextAfter string `json:"next_after,omitempty"`
}

// ToolUsage sums a tool's recorded calls.
type ToolUsage struct {
	Calls         int        `json:"calls"`
	Errors        int        `json:"errors"`
	AvgDurationMS int64      `json:"avg_duration_ms"`
	LastCall      *time.Time `json:"last_call,omitempty"`
}

// Mailbox is an agent's mailbox (FR-034/035).
type Mailbox struct {
	Agent       string            `json:"agent"`
	MaxMessages int               `json:"max_messages"`
	Messages    []mailbox.Message `json:"messages"`
}

// Command is an operator's command as the audit log shows it (FR-167).
type Command struct {
	ID       int64          `json:"id"`
	Kind     string         `json:"kind"`
	Operator string         `json:"operator"`
	Args     map[string]any `json:"args,omitempty"`
	// Target is what a one-decision command decides ("run/step#visit"
	// for a gate decision).
	Target string `json:"target,omitempty"`
	// CreatedAt is when it was given; ConsumedAt when the engine applied
	// it (nil until then), with Result saying what it did.
	CreatedAt  time.Time  `json:"created_at"`
	ConsumedAt *time.Time `json:"consumed_at"`
	Result     string     `json:"result,omitempty"`
}

// CommandList is a page of the audit log, newest first; NextBefore, when
// set, asks for the next page.
type CommandList struct {
	Commands   []Command `json:"commands"`
	NextBefore int64     `json:"next_before,omitempty"`
}

// OverrideRequest is the body of an override. Agent and Message are for
// inject only.
type OverrideRequest struct {
	Reason  string `json:"reason,omitempty"`
	Agent   string `json:"agent,omitempty"`
	Message string `json:"message,omitempty"`
}

// commandAnswer is what the API answers when it accepted a command.
type commandAnswer struct {
	Command *Command `json:"command"`
}

// Status returns the loop's state (FR-062).
func (c *Client) Status(ctx context.Context) (*engine.Status, error) {
	var st engine.Status
	if err := c.do(ctx, http.MethodGet, []string{"api", "status"}, nil, nil, &st); err != nil {
		return nil, err
	}
	return &st, nil
}

// Cycles lists up to limit cycles (0: the server's default) started
// before the cycle id before (empty: the newest), newest first.
func (c *Client) Cycles(ctx context.Context, limit int, before string) (*CycleList, error) {
	q := url.Values{}
	setLimit(q, limit)
	if before != "" {
		q.Set("before", before)
	}
	var out CycleList
	if err := c.do(ctx, http.MethodGet, []string{"api", "cycles"}, q, nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// Cycle returns one cycle with its steps, attempts, artifacts and events;
// ENOTFOUND when there is no such cycle.
func (c *Client) Cycle(ctx context.Context, id string) (*CycleDetail, error) {
	var out CycleDetail
	if err := c.do(ctx, http.MethodGet, []string{"api", "cycles", id}, nil, nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// Errors lists up to limit warnings and errors (0: the server's default)
// with ids below before (0: the newest), newest first (FR-065).
func (c *Client) Errors(ctx context.Context, limit int, before int64) (*ErrorList, error) {
	q := url.Values{}
	setLimit(q, limit)
	setBefore(q, before)
	var out ErrorList
	if err := c.do(ctx, http.MethodGet, []string{"api", "errors"}, q, nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// Events lists up to limit events (0: the server's default) after since,
// oldest first. since is an event id (events after it), an RFC 3339 time
// (events at or after it) or empty (the oldest retained).
func (c *Client) Events(ctx context.Context, since string, limit int, f EventFilter) (*EventList, error) {
	q := f.query(since)
	setLimit(q, limit)
	var out EventList
	if err := c.do(ctx, http.MethodGet, []string{"api", "events"}, q, nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// Tools lists the registered tools with their usage of all time, every
// page of them.
func (c *Client) Tools(ctx context.Context) ([]Tool, error) {
	var tools []Tool
	q := url.Values{}
	for {
		var out ToolList
		if err := c.do(ctx, http.MethodGet, []string{"api", "tools"}, q, nil, &out); err != nil {
			return nil, err
		}
		tools = append(tools, out.Tools...)
		if out.NextAfter == "" {
			return tools, nil
		}
		if out.NextAfter <= q.Get("after") {
			return nil, unexpected(agentrunner.EINTERNAL, "GET /api/tools: next_after %q does not move past %q", clip.String(out.NextAfter, snippetBytes), clip.String(q.Get("after"), snippetBytes))
		}
		q.Set("after", out.NextAfter)
	}
}

// Mailbox returns an agent's mailbox; ENOTFOUND for an unknown agent.
func (c *Client) Mailbox(ctx context.Context, agent string) (*Mailbox, error) {
	var out Mailbox
	if err := c.do(ctx, http.MethodGet, []string{"api", "mailboxes", agent}, nil, nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// PostMailbox puts an operator's message into an agent's mailbox: it
// returns the inject command the engine will apply.
func (c *Client) PostMailbox(ctx context.Context, agent, message string) (*Command, error) {
	body := struct {
		Message string `json:"message"`
	}{message}
	return c.command(ctx, []string{"api", "mailboxes", agent}, body)
}

// Override gives the engine an operator's command (pause, resume, abort,
// inject, force-cycle; agentrunner.OverrideKinds) and returns it as stored,
// attributed to the API key's name. The engine applies it later; Audit
// shows its result.
func (c *Client) Override(ctx context.Context, kind string, req OverrideRequest) (*Command, error) {
	return c.command(ctx, []string{"api", "override", kind}, req)
}

// Reload asks the engine to read its configuration and files again
// (admin); the audit log says whether it took them.
func (c *Client) Reload(ctx context.Context, reason string) (*Command, error) {
	return c.command(ctx, []string{"api", "admin", "reload"}, struct {
		Reason string `json:"reason,omitempty"`
	}{reason})
}

// Audit lists up to limit commands (0: the server's default) with ids
// below before (0: the newest), newest first (FR-167).
func (c *Client) Audit(ctx context.Context, limit int, before int64) (*CommandList, error) {
	q := url.Values{}
	setLimit(q, limit)
	setBefore(q, before)
	var out CommandList
	if err := c.do(ctx, http.MethodGet, []string{"api", "audit"}, q, nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

func (c *Client) command(ctx context.Context, path []string, body any) (*Command, error) {
	var out commandAnswer
	if err := c.do(ctx, http.MethodPost, path, nil, body, &out); err != nil {
		return nil, err
	}
	if out.Command == nil {
		return nil, unexpected(agentrunner.EINTERNAL, "POST %s: the server accepted the command but did not return it", "/"+strings.Join(path, "/"))
	}
	return out.Command, nil
}

// Stream calls fn with each event the server streams (GET
// /api/events/stream), in order, until ctx ends, fn returns an error or the
// stream ends. since is as for Events; empty starts with the events
// committed from now on. Stream returns fn's error as is, ctx.Err() (in an
// EUNAVAILABLE error, so errors.Is finds it) when ctx ended, and an
// EUNAVAILABLE error naming the last event received when the server or the
// network ended the stream; the caller may then stream again from that
// event's id. It does not reconnect by itself: Follow does.
func (c *Client) Stream(ctx context.Context, since string, f EventFilter, fn func(Event) error) error {
	return c.stream(ctx, since, -1, f, fn)
}

// stream is Stream, resumed after the event lastID when it is not
// negative: sent as Last-Event-ID, which the server takes over since.
func (c *Client) stream(ctx context.Context, since string, lastID int64, f EventFilter, fn func(Event) error) error {
	path := []string{"api", "events", "stream"}
	var header http.Header
	if lastID >= 0 {
		header = http.Header{"Last-Event-Id": {strconv.FormatInt(lastID, 10)}}
	}
	resp, err := c.sendWith(ctx, http.MethodGet, path, f.query(since), nil, "text/event-stream", header)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return c.answerError(resp)
	}
	if mt := mediaType(resp); mt != "text/event-stream" {
		return unexpected(agentrunner.EINTERNAL, "GET %s: the server answered with %s, not an event stream", "/"+strings.Join(path, "/"), orUnknown(mt))
	}
	var last int64 = -1
	err = readSSE(resp.Body, func(id, data string) error {
		var ev Event
		if err := json.Unmarshal([]byte(data), &ev); err != nil {
			return unexpected(agentrunner.EINTERNAL, "the event stream sent an event (id %q) that does not decode (%v)", clip.String(id, snippetBytes), err)
		}
		last = ev.ID
		return fn(ev)
	})
	var sse *sseError
	if err != nil && !errors.As(err, &sse) {
		return err // fn's, or a bad event
	}
	if ctx.Err() != nil {
		return &agentrunner.Error{Code: agentrunner.EUNAVAILABLE, Message: "the event stream was stopped", Err: ctx.Err()}
	}
	after := "before any event"
	if last >= 0 {
		after = fmt.Sprintf("after event %d", last)
	}
	if err != nil {
		return &agentrunner.Error{Code: agentrunner.EUNAVAILABLE, Message: fmt.Sprintf("the event stream from %s broke %s", c.base, after), Err: sse.err}
	}
	return &agentrunner.Error{Code: agentrunner.EUNAVAILABLE, Message: fmt.Sprintf("the server %s ended the event stream %s", c.base, after), Err: io.ErrUnexpectedEOF}
}

// ErrUnexpectedAnswer is the cause of the errors about answers that did not
// come from the agentrunner API (a proxy's error page, another server,
// a broken body), so that callers tell them from the API's own errors,
// which have no cause.
var ErrUnexpectedAnswer = errors.New("not an answer of the agentrunner API")

// unexpected is an error about an answer that is not the API's.
func unexpected(code, format string, args ...any) error {
	return &agentrunner.Error{Code: code, Message: fmt.Sprintf(format, args...), Err: ErrUnexpectedAnswer}
}

// sseError is a failure to read the stream itself (the network, a line
// too long), told apart from the callback's errors.
type sseError struct{ err error }

func (e *sseError) Error() string { return e.err.Error() }
func (e *sseError) Unwrap() error { return e.err }

// readSSE parses Server-Sent Events from r and calls dispatch with each
// event's id and data (data lines joined by newlines). Comments, retry and
// unknown fields are ignored; an event without data is not dispatched, as
// the SSE specification says. Lines end in \n or \r\n (the server sends
// \n; a lone \r is not taken as a line end). It returns nil at the end
// of r.
func readSSE(r io.Reader, dispatch func(id, data string) error) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), MaxResponseBytes)
	var id string
	var data strings.Builder
	hasData := false
	for sc.Scan() {
		line := sc.Text()
		if line == "" {
			if hasData {
				d := strings.TrimSuffix(data.String(), "\n")
				data.Reset()
				hasData = false
				if err := dispatch(id, d); err != nil {
					return err
				}
			}
			continue
		}
		if strings.HasPrefix(line, ":") {
			continue // a comment: keep-alive
		}
		field, value, _ := strings.Cut(line, ":")
		value = strings.TrimPrefix(value, " ")
		switch field {
		case "data":
			if data.Len()+len(value)+1 > MaxResponseBytes {
				return &sseError{fmt.Errorf("an event is longer than %d bytes", MaxResponseBytes)}
			}
			data.WriteString(value)
			data.WriteByte('\n')
			hasData = true
		case "id":
			if !strings.ContainsRune(value, 0) {
				id = value
			}
		}
		// event, retry and unknown fields need nothing here: the event's
		// JSON has its type, and the caller decides about reconnecting.
	}
	if err := sc.Err(); err != nil {
		return &sseError{err}
	}
	return nil
}

func (f EventFilter) query(since string) url.Values {
	q := url.Values{}
	if since != "" {
		q.Set("since", since)
	}
	if f.CycleID != "" {
		q.Set("cycle_id", f.CycleID)
	}
	if f.Type != "" {
		q.Set("type", f.Type)
	}
	if f.Level != "" {
		q.Set("level", string(f.Level))
	}
	return q
}

func setLimit(q url.Values, limit int) {
	if limit != 0 {
		q.Set("limit", strconv.Itoa(limit))
	}
}

func setBefore(q url.Values, before int64) {
	if before != 0 {
		q.Set("before", strconv.FormatInt(before, 10))
	}
}

// do sends a request with body (JSON, when not nil) and decodes a 2xx
// answer into out.
func (c *Client) do(ctx context.Context, method string, path []string, q url.Values, body, out any) error {
	resp, err := c.send(ctx, method, path, q, body, "application/json")
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return c.answerError(resp)
	}
	where := method + " " + resp.Request.URL.Path
	if mt := mediaType(resp); mt != "application/json" {
		return unexpected(agentrunner.EINTERNAL, "%s: the server answered with %s, not JSON", where, orUnknown(mt))
	}
	data, err := io.ReadAll(io.LimitReader(resp.Body, MaxResponseBytes+1))
	if err != nil {
		return c.transportError(ctx, err)
	}
	if len(data) > MaxResponseBytes {
		return unexpected(agentrunner.EINTERNAL, "%s: the answer is longer than %d bytes", where, MaxResponseBytes)
	}
	if err := json.Unmarshal(data, out); err != nil {
		return unexpected(agentrunner.EINTERNAL, "%s: the answer does not decode (%v)", where, err)
	}
	return nil
}

// send builds and sends a request. Path segments are escaped one by one,
// and "." or ".." is refused, so a caller's id can neither leave its
// segment nor be cleaned into another route.
func (c *Client) send(ctx context.Context, method string, path []string, q url.Values, body any, accept string) (*http.Response, error) {
	return c.sendWith(ctx, method, path, q, body, accept, nil)
}

// sendWith is send with more request headers.
func (c *Client) sendWith(ctx context.Context, method string, path []string, q url.Values, body any, accept string, header http.Header) (*http.Response, error) {
	segs := make([]string, len(path))
	for i, s := range path {
		if s == "" || s == "." || s == ".." {
			return nil, agentrunner.Errorf(agentrunner.EINVALID, "%s %s: a path element is empty, . or ..", method, strings.Join(path[:i], "/"))
		}
		segs[i] = url.PathEscape(s)
	}
	target := c.base + "/" + strings.Join(segs, "/")
	if len(q) > 0 {
		target += "?" + q.Encode()
	}
	var rd io.Reader
	if body != nil {
		data, err := json.Marshal(body)
		if err != nil {
			return nil, agentrunner.Errorf(agentrunner.EINTERNAL, "%s %s: encode the body: %v", method, "/"+strings.Join(path, "/"), err)
		}
		rd = bytes.NewReader(data)
	}
	req, err := http.NewRequestWithContext(ctx, method, target, rd)
	if err != nil {
		return nil, agentrunner.Errorf(agentrunner.EINVALID, "%s %s: %v", method, "/"+strings.Join(path, "/"), err)
	}
	for k, vs := range header {
		req.Header[k] = vs
	}
	req.Header.Set("Accept", accept)
	req.Header.Set("User-Agent", "agentrunner-client")
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.key != "" {
		req.Header.Set("Authorization", "Bearer "+c.key)
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return nil, c.transportError(ctx, err)
	}
	return resp, nil
}

// transportError is a request that got no (complete) answer.
func (c *Client) transportError(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return &agentrunner.Error{Code: agentrunner.EUNAVAILABLE, Message: "the request was stopped", Err: ctx.Err()}
	}
	err = neterr.Unwrap(err) // the message names the server already
	if neterr.Classify(err) == neterr.Timeout {
		return &agentrunner.Error{Code: agentrunner.EUNAVAILABLE, Message: fmt.Sprintf("the agentrunner server at %s did not answer in time", c.base), Err: redactErr{err, c.key}}
	}
	return &agentrunner.Error{Code: agentrunner.EUNAVAILABLE, Message: fmt.Sprintf("cannot reach the agentrunner server at %s", c.base), Err: redactErr{err, c.key}}
}

// redactErr hides the key should a transport's message ever hold it.
type redactErr struct {
	err error
	key string
}

func (e redactErr) Error() string { return redact(e.err.Error(), e.key) }
func (e redactErr) Unwrap() error { return e.err }

func redact(s, key string) string {
	if key == "" {
		return s
	}
	return strings.ReplaceAll(s, key, "[redacted]")
}

// answerError turns a non-2xx answer into an error: the API's code and
// message when the body is its error JSON, else a code from the status.
func (c *Client) answerError(resp *http.Response) error {
	data, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBytes))
	var body struct {
		Error *struct {
			Code    string `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	if mediaType(resp) == "application/json" && json.Unmarshal(data, &body) == nil && body.Error != nil && knownCode(body.Error.Code) {
		msg := redact(body.Error.Message, c.key)
		if msg == "" {
			msg = http.StatusText(resp.StatusCode)
		}
		return &agentrunner.Error{Code: body.Error.Code, Message: msg}
	}
	code := agentrunner.EINTERNAL
	switch resp.StatusCode {
	case http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout, http.StatusTooManyRequests:
		code = agentrunner.EUNAVAILABLE
	}
	msg := fmt.Sprintf("%s %s: the server answered %s", resp.Request.Method, resp.Request.URL.Path, resp.Status)
	if loc := resp.Header.Get("Location"); resp.StatusCode >= 300 && resp.StatusCode < 400 && loc != "" {
		msg += fmt.Sprintf(", redirecting to %s; use that address as the server URL", clip.String(redact(loc, c.key), snippetBytes))
	} else if s := snippet(data, c.key); s != "" {
		msg += fmt.Sprintf(" with %s (%s)", orUnknown(mediaType(resp)), s)
	}
	return &agentrunner.Error{Code: code, Message: msg, Err: ErrUnexpectedAnswer}
}

// knownCode reports whether code is one of agentrunner's error codes; an
// answer with another one did not come from the API.
func knownCode(code string) bool {
	switch code {
	case agentrunner.EINVALID, agentrunner.ENOTFOUND, agentrunner.ECONFLICT, agentrunner.EUNAVAILABLE,
		agentrunner.EUNAUTHORIZED, agentrunner.EFORBIDDEN, agentrunner.EINTERNAL, agentrunner.EUNPROCESSABLE:
		return true
	}
	return false
}

// snippet is the start of an unexpected body, on one line, printable.
func snippet(data []byte, key string) string {
	s := strings.ToValidUTF8(string(data), "?")
	s = strings.Join(strings.FieldsFunc(s, func(r rune) bool { return unicode.IsSpace(r) || unicode.IsControl(r) }), " ")
	return clip.String(redact(s, key), snippetBytes)
}

func mediaType(resp *http.Response) string {
	mt, _, err := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	if err != nil {
		return ""
	}
	return mt
}

func orUnknown(mediaType string) string {
	if mediaType == "" {
		return "no content type"
	}
	return mediaType
}
