package mcp

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/agentrunner/agentrunner/internal/childenv"
	"github.com/agentrunner/agentrunner/tool"
)

// DefaultCallTimeout bounds one call of an imported tool when the server's
// configuration sets none, so a hung server cannot hang an attempt.
const DefaultCallTimeout = 30 * time.Second

// DefaultKillGrace is how long a stdio server gets to exit after its stdin
// is closed, and again after SIGTERM, before it is killed.
const DefaultKillGrace = 2 * time.Second

// maxTools bounds what a server may list, so a broken server that pages
// forever cannot hang the runner's start.
const maxTools = 1000

// stderrTail is how much of a stdio server's stderr is kept to explain a
// failed start.
const stderrTail = 2048

// prefixPattern keeps a prefix within the characters of tool names.
var prefixPattern = regexp.MustCompile(`^[a-zA-Z0-9_-]{0,63}$`)

// ServerConfig is an external MCP server whose tools are imported: a stdio
// command or a streamable-HTTP URL.
type ServerConfig struct {
	// Name identifies the server in errors and tool descriptions.
	Name string
	// Command is the argv of a stdio server (not a shell string).
	Command []string
	// Env is what a stdio server gets besides the base variables of
	// package childenv (PATH, HOME, LANG, TZ, TMPDIR, LC_*): variables of
	// the runner's secrets passed by name (see Lookup), and variables set.
	// Nothing else of the runner's environment, which holds its secrets,
	// reaches the server.
	Env childenv.Spec
	// Lookup, if set, reads the passed variables each time the server is
	// started (at Connect, and again after it died): the runner's secrets
	// (its environment, NAME_FILE files, the secrets file), so a secret
	// rotated and reloaded reaches its next start. nil: the environment.
	Lookup func(string) (string, bool)
	// URL is the endpoint of a streamable-HTTP server.
	URL string
	// BearerToken, when set, is sent as "Authorization: Bearer" to URL's
	// scheme and host only, never to a host a redirect leads to.
	BearerToken string
	// BearerFrom, when set, is read at each request for the token to
	// send instead, so a token rotated and reloaded is used from the next
	// request on; an empty answer keeps BearerToken.
	BearerFrom func() string
	// Prefix is put before each imported tool's name (no default here:
	// the configuration supplies "<name>_").
	Prefix string
	// Tools limits the import to these server tool names (unprefixed);
	// empty: all.
	Tools []string
	// Timeout bounds one call; 0: DefaultCallTimeout.
	Timeout time.Duration
	// KillGrace is how long a stdio server gets to exit at Close before
	// SIGTERM, and after SIGTERM before SIGKILL; 0: DefaultKillGrace.
	KillGrace time.Duration
	// Stderr receives a stdio server's stderr (for the runner's log);
	// nil: discarded.
	Stderr io.Writer
}

// Imported is one tool of an external server, ready for the registry.
type Imported struct {
	Spec    tool.Spec
	Handler tool.Handler
}

// Client is a connection to one external MCP server and the tools
// imported from it. Its handlers are safe for concurrent use. When the
// server goes away (a stdio server crashed, an HTTP server lost the
// session), the next call starts or connects to it again.
type Client struct {
	cfg    ServerConfig
	sdk    *mcpsdk.Client
	http   *http.Client
	stderr *tail
	secret []string // strings never shown in an error
	// passed are the values of the credentials the running stdio server
	// was passed (env.pass), read at its start: never shown either.
	passed atomic.Pointer[[]string]

	tools   []Imported
	skipped []string

	mu     sync.Mutex
	sess   *session // nil: none yet or the last one ended
	closed bool
	wg     sync.WaitGroup // session watchers
}

// session is one MCP session and, for a stdio server, its process.
type session struct {
	cs   *mcpsdk.ClientSession
	cmd  *exec.Cmd
	done chan struct{} // closed when the session has ended

	once     sync.Once
	closeErr error
}

// Connect starts (stdio Command) or connects to (streamable-HTTP URL) a
// server, lists its tools and returns them as registry entries named
// Prefix+name: only those in Tools when it is non-empty, where a name the
// server lacks or cannot offer is an error. Without Tools, a tool whose
// name or schema cannot be used is skipped and reported by Skipped, so one
// odd tool cannot keep the runner from starting. Each Handler calls the
// tool on the server: a result the server flags isError becomes a plain
// error with its text; transport failures and timeouts are tool.Transient.
// Close ends the session and the subprocess.
func Connect(ctx context.Context, cfg ServerConfig) (*Client, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	cfg.Command = slices.Clone(cfg.Command)
	cfg.Tools = slices.Clone(cfg.Tools)
	cfg.Env = childenv.Spec{Pass: slices.Clone(cfg.Env.Pass), Set: maps.Clone(cfg.Env.Set)}
	if cfg.Timeout == 0 {
		cfg.Timeout = DefaultCallTimeout
	}
	if cfg.KillGrace == 0 {
		cfg.KillGrace = DefaultKillGrace
	}
	c := &Client{
		cfg: cfg,
		sdk: mcpsdk.NewClient(&mcpsdk.Implementation{Name: ServerName, Version: Version}, nil),
	}
	c.secret = secrets(cfg)
	if cfg.URL != "" {
		u, _ := url.Parse(cfg.URL) // validated
		rt := http.DefaultTransport
		if dt, ok := rt.(*http.Transport); ok {
			rt = dt.Clone() // our own idle connections, closed by Close
		}
		if cfg.BearerToken != "" {
			rt = &bearer{next: rt, scheme: u.Scheme, host: u.Host, token: cfg.BearerToken, from: cfg.BearerFrom}
		}
		c.http = &http.Client{Transport: rt}
	} else {
		c.stderr = &tail{max: stderrTail, out: cfg.Stderr, redact: c.redact}
	}

	s, err := c.connect(ctx)
	if err != nil {
		return nil, c.startError(err)
	}
	c.mu.Lock()
	c.sess = s
	c.mu.Unlock()
	if err := c.importTools(ctx, s.cs); err != nil {
		_ = c.Close()
		return nil, fmt.Errorf("mcp server %q: %s", cfg.Name, c.redact(err.Error()))
	}
	return c, nil
}

// Tools returns the imported tools, sorted by name.
func (c *Client) Tools() []Imported {
	out := make([]Imported, len(c.tools))
	copy(out, c.tools)
	for i := range out {
		out[i].Spec.Parameters = slices.Clone(out[i].Spec.Parameters)
	}
	return out
}

// Skipped says which of the server's tools were not imported and why
// (only when Tools was empty), for the runner's log.
func (c *Client) Skipped() []string { return slices.Clone(c.skipped) }

// Close ends the session: a stdio server has KillGrace to exit after its
// stdin closes, then gets SIGTERM, then SIGKILL, and whatever it started
// in its process group is killed. Calls after Close fail. It is safe to
// call more than once.
func (c *Client) Close() error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil
	}
	c.closed = true
	s := c.sess
	c.sess = nil
	c.mu.Unlock()

	var err error
	if s != nil {
		err = s.close()
	}
	c.wg.Wait()
	if c.http != nil {
		c.http.CloseIdleConnections()
	}
	if err != nil {
		return fmt.Errorf("mcp server %q: close: %s", c.cfg.Name, c.redact(err.Error()))
	}
	return nil
}

// validate checks the configuration, naming the server and the field.
func (cfg *ServerConfig) validate() error {
	if cfg.Name == "" || strings.IndexFunc(cfg.Name, unicode.IsControl) >= 0 {
		return fmt.Errorf("mcp server %q: name must be non-empty and printable", cfg.Name)
	}
	fail := func(format string, args ...any) error {
		return fmt.Errorf("mcp server %q: %s", cfg.Name, fmt.Sprintf(format, args...))
	}
	switch {
	case len(cfg.Command) > 0 && cfg.URL != "":
		return fail("set either command or url, not both")
	case len(cfg.Command) == 0 && cfg.URL == "":
		return fail("set command (a stdio server) or url (a streamable-HTTP server)")
	case cfg.Timeout < 0:
		return fail("timeout %s is negative", cfg.Timeout)
	case cfg.KillGrace < 0:
		return fail("kill grace %s is negative", cfg.KillGrace)
	case !prefixPattern.MatchString(cfg.Prefix):
		return fail("prefix %q may hold only letters, digits, '_' and '-' (at most 63)", cfg.Prefix)
	}
	if len(cfg.Command) > 0 {
		if cfg.Command[0] == "" {
			return fail("command[0] (the program) is empty")
		}
		for i, a := range cfg.Command {
			if strings.ContainsRune(a, 0) {
				return fail("command[%d] contains a NUL byte", i)
			}
		}
		if cfg.BearerToken != "" {
			return fail("a bearer token is only for url servers")
		}
	}
	if problems := childenv.Check(cfg.Env); len(problems) > 0 {
		return fail("env: %s", strings.Join(problems, "; "))
	}
	if cfg.URL != "" {
		if len(cfg.Env.Pass) > 0 || len(cfg.Env.Set) > 0 {
			return fail("env is only for command servers")
		}
		u, err := url.Parse(cfg.URL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return fail("url must be an absolute http or https URL")
		}
		if strings.ContainsAny(cfg.BearerToken, "\r\n\x00") {
			return fail("the bearer token contains a line break or NUL byte")
		}
	}
	seen := map[string]bool{}
	for i, n := range cfg.Tools {
		if n == "" {
			return fail("tools[%d] is empty", i)
		}
		if seen[n] {
			return fail("tools lists %q twice", n)
		}
		seen[n] = true
	}
	return nil
}

// secrets are the parts of the configuration an error must never show.
func secrets(cfg ServerConfig) []string {
	var s []string
	if cfg.BearerToken != "" {
		s = append(s, cfg.BearerToken)
	}
	if u, err := url.Parse(cfg.URL); err == nil && cfg.URL != "" {
		if p, ok := u.User.Password(); ok && p != "" {
			s = append(s, p, url.QueryEscape(p))
		}
		if u.RawQuery != "" {
			s = append(s, u.RawQuery)
		}
	}
	// Longest first, so a secret containing another is replaced whole.
	sort.Slice(s, func(i, j int) bool { return len(s[i]) > len(s[j]) })
	return s
}

// redact removes the configuration's secrets from an error text.
func (c *Client) redact(s string) string {
	s = childenv.Redact(s, c.secret)
	if p := c.passed.Load(); p != nil {
		s = childenv.Redact(s, *p)
	}
	if c.cfg.BearerFrom != nil {
		if t := c.cfg.BearerFrom(); t != "" {
			s = childenv.Redact(s, []string{t})
		}
	}
	return s
}

// startError explains a failed start, with the end of a stdio server's
// stderr (it usually says why); this error goes to the operator, not to
// a model.
func (c *Client) startError(err error) error {
	msg := fmt.Sprintf("mcp server %q: start: %s", c.cfg.Name, err)
	if c.stderr != nil {
		if t := c.stderr.String(); t != "" {
			msg += "; its stderr ends with: " + t
		}
	}
	return errors.New(c.redact(msg))
}

// connect starts a session. A stdio server's process does not depend on
// ctx: it lives until Close or until it dies.
func (c *Client) connect(ctx context.Context) (*session, error) {
	var (
		t   mcpsdk.Transport
		cmd *exec.Cmd
	)
	if c.cfg.URL != "" {
		t = &mcpsdk.StreamableClientTransport{
			Endpoint:   c.cfg.URL,
			HTTPClient: c.http,
			// Imported tools need no server-initiated messages, so no
			// long-lived GET stream is kept open.
			DisableStandaloneSSE: true,
		}
	} else {
		cmd = exec.Command(c.cfg.Command[0], c.cfg.Command[1:]...)
		// Never os.Environ() as a whole: it holds the runner's secrets.
		cmd.Env = childenv.BuildWith(c.cfg.Lookup, os.Environ(), nil, c.cfg.Env)
		passed := childenv.PassedValues(cmd.Env, c.cfg.Env)
		c.passed.Store(&passed)
		cmd.Stderr = c.stderr
		cmd.SysProcAttr = sysProcAttr()
		// A grandchild holding stderr open must not keep Close waiting.
		cmd.WaitDelay = c.cfg.KillGrace
		t = &mcpsdk.CommandTransport{Command: cmd, TerminateDuration: c.cfg.KillGrace}
	}
	cs, err := c.sdk.Connect(ctx, t, nil)
	if err != nil {
		if cmd != nil && cmd.Process != nil {
			// The SDK closed the session; whatever the server started goes too.
			killGroup(cmd.Process.Pid)
		}
		return nil, err
	}
	s := &session{cs: cs, cmd: cmd, done: make(chan struct{})}
	c.wg.Go(func() {
		_ = cs.Wait()
		if c.stderr != nil {
			c.stderr.flush()
		}
		close(s.done)
		// Reap a server that ended on its own (or whose session was lost).
		_ = s.close()
	})
	return s, nil
}

// close ends the session once; later calls return the first result.
func (s *session) close() error {
	s.once.Do(func() {
		err := s.cs.Close()
		if s.cmd != nil && s.cmd.Process != nil {
			killGroup(s.cmd.Process.Pid)
		}
		// A server that exited non-zero or by our signal has ended, which
		// is what closing asks for.
		var exit *exec.ExitError
		if errors.As(err, &exit) || errors.Is(err, mcpsdk.ErrConnectionClosed) {
			err = nil
		}
		s.closeErr = err
	})
	return s.closeErr
}

// session returns the live session, starting a new one if the last ended.
func (c *Client) session(ctx context.Context) (*session, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil, errClosed
	}
	if c.sess != nil {
		select {
		case <-c.sess.done:
		default:
			return c.sess, nil
		}
	}
	s, err := c.connect(ctx)
	if err != nil {
		return nil, err
	}
	c.sess = s
	return s, nil
}

// forget drops s so the next call starts a new session.
func (c *Client) forget(s *session) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.sess == s {
		c.sess = nil
		c.wg.Go(func() { _ = s.close() })
	}
}

var errClosed = errors.New("the connection was closed")

// importTools lists the server's tools and keeps those that can be used.
func (c *Client) importTools(ctx context.Context, cs *mcpsdk.ClientSession) error {
	want := map[string]bool{}
	for _, n := range c.cfg.Tools {
		want[n] = true
	}
	var (
		offered []string
		found   = map[string]bool{}
	)
	for t, err := range cs.Tools(ctx, nil) {
		if err != nil {
			return fmt.Errorf("list tools: %w", err)
		}
		if len(offered) == maxTools {
			return fmt.Errorf("list tools: the server lists more than %d tools", maxTools)
		}
		offered = append(offered, t.Name)
		if len(want) > 0 && !want[t.Name] {
			continue
		}
		spec, err := c.spec(t)
		if err == nil && found[t.Name] {
			err = fmt.Errorf("tool %q is listed twice", t.Name)
		}
		if err != nil {
			if want[t.Name] {
				return err
			}
			c.skipped = append(c.skipped, err.Error())
			continue
		}
		found[t.Name] = true
		c.tools = append(c.tools, Imported{Spec: spec, Handler: &remoteTool{c: c, name: t.Name}})
	}
	for _, n := range c.cfg.Tools {
		if !found[n] {
			sort.Strings(offered)
			return fmt.Errorf("tools lists %q, which the server does not offer (it offers: %s)", n, orNone(offered))
		}
	}
	sort.Slice(c.tools, func(i, j int) bool { return c.tools[i].Spec.Name < c.tools[j].Spec.Name })
	return nil
}

func orNone(names []string) string {
	if len(names) == 0 {
		return "none"
	}
	return strings.Join(names, ", ")
}

// spec turns a listed tool into a registry spec, or says why it cannot be
// offered to a model.
func (c *Client) spec(t *mcpsdk.Tool) (tool.Spec, error) {
	name := c.cfg.Prefix + t.Name
	if !namePattern.MatchString(name) {
		return tool.Spec{}, fmt.Errorf("tool %q: name %q is not a valid tool name (1 to 64 letters, digits, '_' or '-')", t.Name, name)
	}
	params, err := json.Marshal(t.InputSchema)
	if err != nil {
		return tool.Spec{}, fmt.Errorf("tool %q: input schema cannot be encoded: %v", t.Name, err)
	}
	if err := checkSchema(params); err != nil {
		return tool.Spec{}, fmt.Errorf("tool %q: %v", t.Name, err)
	}
	desc := strings.TrimSpace(t.Description)
	if desc == "" {
		desc = fmt.Sprintf("Tool %s of the MCP server %s.", t.Name, c.cfg.Name)
	}
	return tool.Spec{Name: name, Description: desc, Parameters: params, Timeout: c.cfg.Timeout}, nil
}

// checkSchema accepts what the registry accepts: a self-contained JSON
// Schema of an object (draft 2020-12 unless it says otherwise), so an
// imported tool never fails registration later.
func checkSchema(params []byte) error {
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(params))
	if err != nil {
		return fmt.Errorf("input schema is not valid JSON: %v", err)
	}
	obj, ok := doc.(map[string]any)
	if !ok || obj["type"] != "object" {
		return errors.New(`input schema must be a JSON Schema with "type": "object" at the top`)
	}
	const loc = "urn:agentrunner:mcp:tool"
	comp := jsonschema.NewCompiler()
	comp.DefaultDraft(jsonschema.Draft2020)
	comp.AssertFormat()
	comp.UseLoader(selfContained{})
	if err := comp.AddResource(loc, doc); err != nil {
		return fmt.Errorf("input schema cannot be used: %v", err)
	}
	if _, err := comp.Compile(loc); err != nil {
		return fmt.Errorf("input schema does not compile: %v", err)
	}
	return nil
}

// selfContained loads nothing, so a server's schema can never make the
// runner fetch a URL or read a file.
type selfContained struct{}

func (selfContained) Load(u string) (any, error) {
	return nil, fmt.Errorf("refusing to load %s: the schema must be self-contained", u)
}

// remoteTool is the Handler of one imported tool.
type remoteTool struct {
	c    *Client
	name string // the server's name of the tool
}

var _ tool.Handler = (*remoteTool)(nil)

// Call calls the tool on the server within the configured timeout.
func (r *remoteTool) Call(parent context.Context, args json.RawMessage) (string, error) {
	c := r.c
	if t := bytes.TrimSpace(args); len(t) == 0 || string(t) == "null" {
		args = json.RawMessage("{}")
	}
	var probe map[string]json.RawMessage
	if err := json.Unmarshal(args, &probe); err != nil || probe == nil {
		return "", errors.New("arguments must be a JSON object")
	}
	ctx, cancel := context.WithTimeout(parent, c.cfg.Timeout)
	defer cancel()

	s, err := c.session(ctx)
	if err != nil {
		return "", c.callError(parent, ctx, nil, "cannot reach MCP server %q: %s", err)
	}
	res, err := s.cs.CallTool(ctx, &mcpsdk.CallToolParams{Name: r.name, Arguments: args})
	if err != nil {
		return "", c.callError(parent, ctx, s, "MCP server %q failed: %s", err)
	}
	text := render(res)
	if res.IsError {
		if strings.TrimSpace(text) == "" {
			text = "the tool reported an error without a message"
		}
		return "", errors.New(c.redact(text))
	}
	return c.redact(text), nil
}

// callError classifies a failed call: the caller giving up and answers of
// the server are final; everything else (a dead process, a broken
// connection, no answer in time) is transient, and a broken session is
// dropped so the next call starts a new one.
func (c *Client) callError(parent, ctx context.Context, s *session, format string, err error) error {
	name := c.cfg.Name
	switch {
	case parent.Err() != nil:
		return fmt.Errorf("call of MCP server %q cancelled: %w", name, parent.Err())
	case errors.Is(err, errClosed):
		return fmt.Errorf("MCP server %q: the runner closed the connection", name)
	case ctx.Err() != nil:
		return tool.Transient(fmt.Errorf("MCP server %q did not answer within %s", name, c.cfg.Timeout))
	}
	var wire *jsonrpc.Error
	if errors.As(err, &wire) {
		return fmt.Errorf("MCP server %q refused the call: %s", name, c.redact(wire.Message))
	}
	c.mu.Lock()
	closed := c.closed
	c.mu.Unlock()
	if closed {
		return fmt.Errorf("MCP server %q: the runner closed the connection", name)
	}
	if s != nil {
		// The process died or the connection or session broke; a new
		// session is cheap next to a second failure on a broken one.
		c.forget(s)
	}
	return tool.Transient(fmt.Errorf(format, name, c.redact(err.Error())))
}

// render turns a result's content into the text a model reads: text as
// is, anything else described in brackets.
func render(res *mcpsdk.CallToolResult) string {
	var parts []string
	for _, ct := range res.Content {
		switch v := ct.(type) {
		case *mcpsdk.TextContent:
			parts = append(parts, v.Text)
		case *mcpsdk.ImageContent:
			parts = append(parts, omitted("image", v.MIMEType))
		case *mcpsdk.AudioContent:
			parts = append(parts, omitted("audio", v.MIMEType))
		case *mcpsdk.ResourceLink:
			parts = append(parts, fmt.Sprintf("[resource link: %s]", v.URI))
		case *mcpsdk.EmbeddedResource:
			switch {
			case v.Resource == nil:
				parts = append(parts, "[empty resource omitted]")
			case v.Resource.Text != "":
				parts = append(parts, fmt.Sprintf("[resource %s]\n%s", v.Resource.URI, v.Resource.Text))
			default:
				parts = append(parts, fmt.Sprintf("[binary resource %s omitted]", v.Resource.URI))
			}
		default:
			parts = append(parts, "[unsupported content omitted]")
		}
	}
	if len(parts) == 0 && res.StructuredContent != nil {
		if b, err := json.Marshal(res.StructuredContent); err == nil {
			return string(b)
		}
	}
	return strings.Join(parts, "\n")
}

func omitted(kind, mime string) string {
	if mime == "" {
		return "[" + kind + " omitted]"
	}
	return "[" + kind + " omitted: " + mime + "]"
}

// bearer adds the token to requests for the configured origin only.
type bearer struct {
	next   http.RoundTripper
	scheme string
	host   string
	token  string
	from   func() string // the current token, when it may be rotated
}

// current is the token to send now.
func (b *bearer) current() string {
	if b.from != nil {
		if t := b.from(); t != "" {
			return t
		}
	}
	return b.token
}

func (b *bearer) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.URL.Scheme != b.scheme || req.URL.Host != b.host {
		return b.next.RoundTrip(req)
	}
	r := req.Clone(req.Context())
	r.Header.Set("Authorization", "Bearer "+b.current())
	return b.next.RoundTrip(r)
}

// tail keeps the end of a stream and copies it on to out, a line at a
// time with redact applied, so that a secret the server prints is not
// split across two writes and shown in halves.
type tail struct {
	mu     sync.Mutex
	max    int
	buf    []byte
	out    io.Writer
	redact func(string) string
	line   []byte // the start of a line not yet copied to out
}

// Write never fails, so the server never blocks on a full stderr pipe.
func (t *tail) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, p...)
	if len(t.buf) > t.max {
		t.buf = append(t.buf[:0], t.buf[len(t.buf)-t.max:]...)
	}
	if t.out == nil {
		return len(p), nil
	}
	t.line = append(t.line, p...)
	if i := bytes.LastIndexByte(t.line, '\n'); i >= 0 {
		t.copyOut(t.line[:i+1])
		t.line = append(t.line[:0], t.line[i+1:]...)
	}
	if len(t.line) > t.max { // a line without end: copied in pieces
		t.copyOut(t.line)
		t.line = t.line[:0]
	}
	return len(p), nil
}

// flush copies out what is left of the last line, once the server ended.
func (t *tail) flush() {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.out != nil && len(t.line) > 0 {
		t.copyOut(t.line)
		t.line = t.line[:0]
	}
}

func (t *tail) copyOut(b []byte) {
	s := string(b)
	if t.redact != nil {
		s = t.redact(s)
	}
	_, _ = io.WriteString(t.out, s)
}

// String returns the kept end, trimmed and valid UTF-8.
func (t *tail) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return strings.TrimSpace(strings.ToValidUTF8(string(t.buf), ""))
}
