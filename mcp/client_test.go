package mcp

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentrunner/agentrunner/internal/childenv"
	"github.com/agentrunner/agentrunner/internal/syncbuf"
	"github.com/agentrunner/agentrunner/tool"
)

// stdioConfig is a server config that starts the upstream helper.
func stdioConfig(env map[string]string) ServerConfig {
	e := map[string]string{modeEnv: "upstream"}
	for k, v := range env {
		e[k] = v
	}
	return ServerConfig{Name: "up", Command: []string{os.Args[0]}, Env: childenv.Spec{Set: e}, Prefix: "up_"}
}

func connect(t *testing.T, cfg ServerConfig) *Client {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	c, err := Connect(ctx, cfg)
	if err != nil {
		t.Fatalf("Connect: %v", err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func names(c *Client) []string {
	var n []string
	for _, im := range c.Tools() {
		n = append(n, im.Spec.Name)
	}
	return n
}

func handlerOf(t *testing.T, c *Client, name string) tool.Handler {
	t.Helper()
	for _, im := range c.Tools() {
		if im.Spec.Name == name {
			return im.Handler
		}
	}
	t.Fatalf("no imported tool %q among %v", name, names(c))
	return nil
}

// call runs one call with a bound, so a broken handler fails the test
// instead of hanging it.
func call(t *testing.T, h tool.Handler, args string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	return h.Call(ctx, json.RawMessage(args))
}

// TestStdioServerGetsOnlyTheAllowedEnvironment starts a real server process
// while the runner's environment holds secrets: the server sees the base
// variables and what its configuration passes and sets, nothing else.
func TestStdioServerGetsOnlyTheAllowedEnvironment(t *testing.T) {
	secrets := map[string]string{
		"AGENTRUNNER_TEST_SECRET": "test-secret", "OPENAI_API_KEY": "sk-openai", "ANTHROPIC_API_KEY": "sk-ant",
		"BRAVE_API_KEY": "brave", "EXECUTION_SERVICE_TOKEN": "es-token", "AGENTRUNNER_WEBHOOK_SECRET": "hook",
		"AGENTRUNNER_KEY_ALICE": "alice", "REMOTE_TOKEN": "bearer", "FILES_TOKEN": "files-token",
	}
	for k, v := range secrets {
		t.Setenv(k, v)
	}
	t.Setenv("HOME", "/home/operator")
	t.Setenv("LANG", "C.UTF-8")
	cfg := stdioConfig(map[string]string{dumpEnv: "1", "FILES_ROOT": "/srv/files"})
	cfg.Env.Pass = []string{"FILES_TOKEN", "NOT_SET_ANYWHERE"}
	os.Unsetenv("NOT_SET_ANYWHERE")
	c := connect(t, cfg)

	out, err := call(t, handlerOf(t, c, "up_env"), `{}`)
	if err != nil {
		t.Fatal(err)
	}
	got := envDump(t, out)
	want := map[string]string{modeEnv: "upstream", dumpEnv: "1", "FILES_ROOT": "/srv/files", "FILES_TOKEN": "files-token",
		"HOME": "/home/operator", "LANG": "C.UTF-8", "PATH": os.Getenv("PATH")}
	for _, name := range []string{"TZ", "TMPDIR"} {
		if v, ok := os.LookupEnv(name); ok {
			want[name] = v
		}
	}
	for _, kv := range os.Environ() {
		if k, v, _ := strings.Cut(kv, "="); strings.HasPrefix(k, "LC_") {
			want[k] = v
		}
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("the server's environment (-want +got):\n%s", diff)
	}
}

func TestConnectStdioImportsTools(t *testing.T) {
	stderr := &syncbuf.Buffer{}
	cfg := stdioConfig(map[string]string{greetingEnv: "hello from env"})
	cfg.Stderr = stderr
	cfg.Timeout = 45 * time.Second
	c := connect(t, cfg)

	want := []string{"up_boom", "up_crash", "up_echo", "up_env", "up_mixed", "up_pid", "up_slow"}
	if diff := cmp.Diff(want, names(c)); diff != "" {
		t.Errorf("imported tools (-want +got):\n%s", diff)
	}
	wantSkipped := []string{
		`tool "bad.name": name "up_bad.name" is not a valid tool name (1 to 64 letters, digits, '_' or '-')`,
		`tool "stringy": input schema must be a JSON Schema with "type": "object" at the top`,
	}
	skipped := c.Skipped()
	if len(skipped) != 3 {
		t.Fatalf("skipped = %q, want bad.name, stringy and remote", skipped)
	}
	if diff := cmp.Diff(wantSkipped, skipped[:2]); diff != "" {
		t.Errorf("skipped (-want +got):\n%s", diff)
	}
	if !strings.HasPrefix(skipped[2], `tool "remote": input schema does not compile`) || !strings.Contains(skipped[2], "self-contained") {
		t.Errorf("skipped[2] = %q, want the remote $ref refused", skipped[2])
	}

	var echo, boom tool.Spec
	for _, im := range c.Tools() {
		switch im.Spec.Name {
		case "up_echo":
			echo = im.Spec
		case "up_boom":
			boom = im.Spec
		}
	}
	var params any
	if err := json.Unmarshal(echo.Parameters, &params); err != nil {
		t.Fatalf("echo parameters: %v", err)
	}
	wantParams := map[string]any{"type": "object", "properties": map[string]any{"text": map[string]any{"type": "string"}}, "required": []any{"text"}}
	if diff := cmp.Diff(wantParams, params); diff != "" {
		t.Errorf("echo parameters (-want +got):\n%s", diff)
	}
	if echo.Description != "Echoes text." || echo.Timeout != 45*time.Second {
		t.Errorf("echo spec = %q, timeout %s", echo.Description, echo.Timeout)
	}
	if boom.Description != "Tool boom of the MCP server up." {
		t.Errorf("boom description = %q, want a generated one", boom.Description)
	}

	tests := []struct {
		tool, args string
		want       string
		wantErr    string
		transient  bool
	}{
		{tool: "up_echo", args: `{"text":"hi"}`, want: "echo: hi"},
		{tool: "up_env", args: ``, want: "hello from env"},
		{tool: "up_env", args: ` null `, want: "hello from env"},
		{tool: "up_mixed", args: `{}`, want: "chart follows\n[image omitted: image/png]\n[audio omitted: audio/wav]\n[resource link: file:///data/report.csv]\n[resource mem://notes]\nnote one\n[binary resource mem://blob omitted]\nend"},
		{tool: "up_boom", args: `{}`, wantErr: "boom: disk full"},
		{tool: "up_echo", args: `[1]`, wantErr: "arguments must be a JSON object"},
		{tool: "up_echo", args: `{`, wantErr: "arguments must be a JSON object"},
	}
	for _, tt := range tests {
		got, err := call(t, handlerOf(t, c, tt.tool), tt.args)
		if tt.wantErr == "" {
			if err != nil || got != tt.want {
				t.Errorf("%s(%s) = %q, %v; want %q", tt.tool, tt.args, got, err, tt.want)
			}
			continue
		}
		if err == nil || err.Error() != tt.wantErr || tool.IsTransient(err) != tt.transient {
			t.Errorf("%s(%s) = %q, %v (transient %v); want error %q (transient %v)", tt.tool, tt.args, got, err, tool.IsTransient(err), tt.wantErr, tt.transient)
		}
	}

	if err := c.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
	if !strings.Contains(stderr.String(), "upstream ready") {
		t.Errorf("stderr writer got %q, want the server's stderr", stderr.String())
	}
	_, err := call(t, handlerOf(t, c, "up_echo"), `{"text":"late"}`)
	if err == nil || tool.IsTransient(err) || !strings.Contains(err.Error(), "closed the connection") {
		t.Errorf("call after Close = %v, want a final error saying the connection was closed", err)
	}
}

// TestStdioServerGetsTheRunnersSecretsAtEachStart: with Lookup (the
// runner's secrets), a passed variable comes from it rather than the
// environment, read when the server starts: a secret rotated while the
// server runs reaches the server started after it died.
func TestStdioServerGetsTheRunnersSecretsAtEachStart(t *testing.T) {
	t.Setenv("FILES_TOKEN", "from-the-environment")
	var mu sync.Mutex
	token := "from-the-secrets-file"
	cfg := stdioConfig(map[string]string{dumpEnv: "1"})
	cfg.Env.Pass = []string{"FILES_TOKEN"}
	cfg.Lookup = func(name string) (string, bool) {
		mu.Lock()
		defer mu.Unlock()
		return token, name == "FILES_TOKEN"
	}
	c := connect(t, cfg)
	seen := func() string {
		t.Helper()
		out, err := call(t, handlerOf(t, c, "up_env"), `{}`)
		if err != nil {
			t.Fatal(err)
		}
		return envDump(t, out)["FILES_TOKEN"]
	}
	if got := seen(); got != "from-the-secrets-file" {
		t.Fatalf("FILES_TOKEN=%q, want the secrets file's", got)
	}
	mu.Lock()
	token = "rotated"
	mu.Unlock()
	if got := seen(); got != "from-the-secrets-file" {
		t.Errorf("the running server's FILES_TOKEN=%q changed", got)
	}
	if _, err := call(t, handlerOf(t, c, "up_crash"), `{}`); err == nil {
		t.Fatal("crash: no error")
	}
	if got := seen(); got != "rotated" {
		t.Errorf("the restarted server's FILES_TOKEN=%q, want the rotated one", got)
	}
}

// TestStdioServerCrashIsTransientAndRecovers: a server that dies fails
// the call as transient (the executor may retry), and the next call
// starts a new server.
func TestStdioServerCrashIsTransientAndRecovers(t *testing.T) {
	c := connect(t, stdioConfig(nil))
	first, err := call(t, handlerOf(t, c, "up_pid"), `{}`)
	if err != nil {
		t.Fatalf("pid: %v", err)
	}
	_, err = call(t, handlerOf(t, c, "up_crash"), `{}`)
	if err == nil || !tool.IsTransient(err) || !strings.Contains(err.Error(), `MCP server "up"`) {
		t.Fatalf("crash = %v, want a transient error naming the server", err)
	}
	second, err := call(t, handlerOf(t, c, "up_pid"), `{}`)
	if err != nil {
		t.Fatalf("pid after crash: %v", err)
	}
	if second == first {
		t.Errorf("pid after crash = %s, the same process as before", second)
	}
}

// TestStdioTimeoutIsTransient uses a real, short timeout: a server that
// does not answer in time is a transient failure.
func TestStdioTimeoutIsTransient(t *testing.T) {
	cfg := stdioConfig(nil)
	cfg.Timeout = time.Second
	c := connect(t, cfg)
	_, err := call(t, handlerOf(t, c, "up_slow"), `{}`)
	if err == nil || !tool.IsTransient(err) || err.Error() != `MCP server "up" did not answer within 1s` {
		t.Errorf("slow = %v (transient %v), want a transient timeout", err, tool.IsTransient(err))
	}
	// The session survives a slow tool.
	if got, err := call(t, handlerOf(t, c, "up_echo"), `{"text":"still here"}`); err != nil || got != "echo: still here" {
		t.Errorf("echo after timeout = %q, %v", got, err)
	}
	// A caller that gives up is not a transient failure of the tool.
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := handlerOf(t, c, "up_slow").Call(ctx, nil); err == nil || tool.IsTransient(err) {
		t.Errorf("cancelled call = %v (transient %v), want a final error", err, tool.IsTransient(err))
	}
}

func TestConnectAllowlist(t *testing.T) {
	tests := []struct {
		name    string
		tools   []string
		want    []string
		wantErr string
	}{
		{name: "subset", tools: []string{"echo", "boom"}, want: []string{"up_boom", "up_echo"}},
		{name: "missing tool", tools: []string{"echo", "nope"}, wantErr: `mcp server "up": tools lists "nope", which the server does not offer (it offers: bad.name, boom, crash, echo, env, mixed, pid, remote, slow, stringy)`},
		{name: "listed bad name", tools: []string{"bad.name"}, wantErr: `mcp server "up": tool "bad.name": name "up_bad.name" is not a valid tool name`},
		{name: "listed bad schema", tools: []string{"stringy"}, wantErr: `mcp server "up": tool "stringy": input schema must be a JSON Schema with "type": "object"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := stdioConfig(nil)
			cfg.Tools = tt.tools
			ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
			defer cancel()
			c, err := Connect(ctx, cfg)
			if tt.wantErr != "" {
				if err == nil {
					c.Close()
				}
				if err == nil || !strings.HasPrefix(err.Error(), tt.wantErr) {
					t.Fatalf("Connect = %v, want an error starting %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("Connect: %v", err)
			}
			defer c.Close()
			if diff := cmp.Diff(tt.want, names(c)); diff != "" {
				t.Errorf("imported (-want +got):\n%s", diff)
			}
			if len(c.Skipped()) != 0 {
				t.Errorf("skipped %q with an allowlist", c.Skipped())
			}
		})
	}
}

func TestConnectStartFailures(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	cfg := ServerConfig{Name: "broken", Command: []string{os.Args[0]}, Env: childenv.Spec{Set: map[string]string{modeEnv: "badstart"}}}
	_, err := Connect(ctx, cfg)
	if err == nil || !strings.HasPrefix(err.Error(), `mcp server "broken": start: `) || !strings.Contains(err.Error(), "its stderr ends with: fatal: missing API key for upstream") {
		t.Errorf("Connect to a server that exits = %v, want the start error with its stderr", err)
	}
	_, err = Connect(ctx, ServerConfig{Name: "ghost", Command: []string{"/nonexistent/mcp-server"}})
	if err == nil || !strings.Contains(err.Error(), "/nonexistent/mcp-server") {
		t.Errorf("Connect to a missing program = %v, want an error naming it", err)
	}
}

func TestServerConfigValidation(t *testing.T) {
	ok := func(mod func(*ServerConfig)) ServerConfig {
		c := ServerConfig{Name: "s", Command: []string{"srv"}}
		mod(&c)
		return c
	}
	tests := []struct {
		name string
		cfg  ServerConfig
		want string
	}{
		{"no name", ok(func(c *ServerConfig) { c.Name = "" }), `mcp server "": name must be non-empty and printable`},
		{"control in name", ok(func(c *ServerConfig) { c.Name = "a\nb" }), `name must be non-empty and printable`},
		{"neither", ok(func(c *ServerConfig) { c.Command = nil }), `mcp server "s": set command (a stdio server) or url (a streamable-HTTP server)`},
		{"both", ok(func(c *ServerConfig) { c.URL = "http://127.0.0.1:1/mcp" }), `mcp server "s": set either command or url, not both`},
		{"empty program", ok(func(c *ServerConfig) { c.Command = []string{""} }), `command[0] (the program) is empty`},
		{"nul arg", ok(func(c *ServerConfig) { c.Command = []string{"srv", "a\x00"} }), `command[1] contains a NUL byte`},
		{"token on command", ok(func(c *ServerConfig) { c.BearerToken = "t0ps3cret" }), `a bearer token is only for url servers`},
		{"bad env name", ok(func(c *ServerConfig) { c.Env = childenv.Spec{Set: map[string]string{"A=B": "x"}} }), `env: set: "A=B" is not an environment variable name`},
		{"bad passed name", ok(func(c *ServerConfig) { c.Env = childenv.Spec{Pass: []string{"A B"}} }), `env: pass: "A B" is not an environment variable name`},
		{"negative timeout", ok(func(c *ServerConfig) { c.Timeout = -time.Second }), `timeout -1s is negative`},
		{"negative grace", ok(func(c *ServerConfig) { c.KillGrace = -time.Second }), `kill grace -1s is negative`},
		{"bad prefix", ok(func(c *ServerConfig) { c.Prefix = "a.b_" }), `prefix "a.b_" may hold only letters, digits, '_' and '-'`},
		{"empty tool", ok(func(c *ServerConfig) { c.Tools = []string{"a", ""} }), `tools[1] is empty`},
		{"dup tool", ok(func(c *ServerConfig) { c.Tools = []string{"a", "a"} }), `tools lists "a" twice`},
		{"relative url", ServerConfig{Name: "s", URL: "/mcp"}, `url must be an absolute http or https URL`},
		{"ftp url", ServerConfig{Name: "s", URL: "ftp://h/mcp"}, `url must be an absolute http or https URL`},
		{"env on url", ServerConfig{Name: "s", URL: "http://h/mcp", Env: childenv.Spec{Pass: []string{"A"}}}, `env is only for command servers`},
		{"token with newline", ServerConfig{Name: "s", URL: "http://h/mcp", BearerToken: "abc\ndef"}, `the bearer token contains a line break`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Connect(t.Context(), tt.cfg)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Connect = %v, want an error containing %q", err, tt.want)
			}
			if tt.cfg.BearerToken != "" && strings.Contains(err.Error(), tt.cfg.BearerToken) {
				t.Errorf("error %q shows the token", err)
			}
		})
	}
}

// httpUpstream serves the upstream server over streamable HTTP behind a
// bearer check. swap replaces the handler, losing every session, as a
// restarted server would.
type httpUpstream struct {
	srv     *httptest.Server
	handler atomic.Pointer[http.Handler]
	badAuth atomic.Int64
}

func newHTTPUpstream(t *testing.T, token string) *httpUpstream {
	u := &httpUpstream{}
	u.swap()
	u.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer "+token {
			u.badAuth.Add(1)
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		(*u.handler.Load()).ServeHTTP(w, r)
	}))
	t.Cleanup(u.srv.Close)
	return u
}

func (u *httpUpstream) swap() {
	var h http.Handler = mcpsdk.NewStreamableHTTPHandler(func(*http.Request) *mcpsdk.Server { return upstreamServer() }, nil)
	u.handler.Store(&h)
}

func TestConnectStreamableHTTP(t *testing.T) {
	const token = "s3cr3t-t0ken-value"
	up := newHTTPUpstream(t, token)
	c := connect(t, ServerConfig{Name: "web", URL: up.srv.URL, BearerToken: token, Prefix: "web_", Tools: []string{"echo", "boom", "mixed"}})

	if diff := cmp.Diff([]string{"web_boom", "web_echo", "web_mixed"}, names(c)); diff != "" {
		t.Errorf("imported (-want +got):\n%s", diff)
	}
	if got, err := call(t, handlerOf(t, c, "web_echo"), `{"text":"over http"}`); err != nil || got != "echo: over http" {
		t.Errorf("echo = %q, %v", got, err)
	}
	if _, err := call(t, handlerOf(t, c, "web_boom"), `{}`); err == nil || err.Error() != "boom: disk full" || tool.IsTransient(err) {
		t.Errorf("boom = %v, want the server's error, not transient", err)
	}

	// A restarted server has lost the session: the call fails as
	// transient, and the next one opens a new session.
	up.swap()
	if _, err := call(t, handlerOf(t, c, "web_echo"), `{"text":"lost"}`); err == nil || !tool.IsTransient(err) {
		t.Errorf("call on a lost session = %v, want a transient error", err)
	}
	if got, err := call(t, handlerOf(t, c, "web_echo"), `{"text":"again"}`); err != nil || got != "echo: again" {
		t.Errorf("echo after reconnect = %q, %v", got, err)
	}
	if n := up.badAuth.Load(); n != 0 {
		t.Errorf("%d requests came without the bearer token", n)
	}
	if err := c.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
}

func TestConnectHTTPErrorsHideSecrets(t *testing.T) {
	up := newHTTPUpstream(t, "right-token")
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	_, err := Connect(ctx, ServerConfig{Name: "web", URL: up.srv.URL, BearerToken: "wrong-token-123"})
	if err == nil || strings.Contains(err.Error(), "wrong-token-123") {
		t.Errorf("Connect with a wrong token = %v, want an error without the token", err)
	}
	if up.badAuth.Load() == 0 {
		t.Error("the server never saw the wrong token")
	}

	// Nothing listens here; the query may hold a key and must not show.
	dead := httptest.NewServer(http.NotFoundHandler())
	addr := dead.URL
	dead.Close()
	_, err = Connect(ctx, ServerConfig{Name: "web", URL: addr + "/mcp?key=query-secret-42"})
	if err == nil || strings.Contains(err.Error(), "query-secret-42") {
		t.Errorf("Connect to a dead server = %v, want an error without the query", err)
	}
}

func TestBearerOnlyToItsOrigin(t *testing.T) {
	var got []string
	rec := roundTripFunc(func(r *http.Request) (*http.Response, error) {
		got = append(got, r.URL.Host+" "+r.Header.Get("Authorization"))
		return &http.Response{StatusCode: 200, Body: http.NoBody, Request: r}, nil
	})
	b := &bearer{next: rec, scheme: "https", host: "mcp.example:443", token: "tok"}
	for _, u := range []string{"https://mcp.example:443/mcp", "https://elsewhere.example/mcp", "http://mcp.example:443/mcp"} {
		req, _ := http.NewRequest("POST", u, nil)
		if _, err := b.RoundTrip(req); err != nil {
			t.Fatal(err)
		}
		if req.Header.Get("Authorization") != "" {
			t.Error("RoundTrip changed the caller's request")
		}
	}
	want := []string{"mcp.example:443 Bearer tok", "elsewhere.example ", "mcp.example:443 "}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("requests (-want +got):\n%s", diff)
	}
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

func TestRender(t *testing.T) {
	tests := []struct {
		name string
		res  *mcpsdk.CallToolResult
		want string
	}{
		{"empty", &mcpsdk.CallToolResult{}, ""},
		{"structured only", &mcpsdk.CallToolResult{StructuredContent: map[string]any{"price": 42}}, `{"price":42}`},
		{"text wins over structured", &mcpsdk.CallToolResult{Content: []mcpsdk.Content{&mcpsdk.TextContent{Text: "42"}}, StructuredContent: map[string]any{"price": 42}}, "42"},
		{"image without type", &mcpsdk.CallToolResult{Content: []mcpsdk.Content{&mcpsdk.ImageContent{}}}, "[image omitted]"},
		{"nil resource", &mcpsdk.CallToolResult{Content: []mcpsdk.Content{&mcpsdk.EmbeddedResource{}}}, "[empty resource omitted]"},
		{"unsupported", &mcpsdk.CallToolResult{Content: []mcpsdk.Content{&mcpsdk.ToolUseContent{Name: "x"}}}, "[unsupported content omitted]"},
	}
	for _, tt := range tests {
		if got := render(tt.res); got != tt.want {
			t.Errorf("%s: render = %q, want %q", tt.name, got, tt.want)
		}
	}
}

func TestTailKeepsTheEnd(t *testing.T) {
	var out syncbuf.Buffer
	tl := &tail{max: 8, out: &out}
	for _, s := range []string{"0123", "4567", "89ab"} {
		if n, err := tl.Write([]byte(s)); n != len(s) || err != nil {
			t.Fatalf("Write = %d, %v", n, err)
		}
	}
	if got := tl.String(); got != "456789ab" {
		t.Errorf("tail = %q, want the last 8 bytes", got)
	}
	if out.String() != "0123456789ab" {
		t.Errorf("copied = %q, want everything", out.String())
	}
}

// TestARotatedBearerTokenIsSentFromTheNextRequest: with BearerFrom, the
// token read at each request is sent, so a token rotated and reloaded
// reaches the server without reconnecting; it is redacted like the first.
func TestARotatedBearerTokenIsSentFromTheNextRequest(t *testing.T) {
	var want, current atomic.Pointer[string]
	set := func(p *atomic.Pointer[string], s string) { p.Store(&s) }
	set(&want, "first-token-0123")
	set(&current, "first-token-0123")
	var bad atomic.Int64
	var h http.Handler = mcpsdk.NewStreamableHTTPHandler(func(*http.Request) *mcpsdk.Server { return upstreamServer() }, nil)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer "+*want.Load() {
			bad.Add(1)
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	c := connect(t, ServerConfig{Name: "web", URL: srv.URL, BearerToken: "first-token-0123",
		BearerFrom: func() string { return *current.Load() }, Prefix: "web_", Tools: []string{"echo"}})
	set(&want, "second-token-4567")
	set(&current, "second-token-4567")
	if got, err := call(t, handlerOf(t, c, "web_echo"), `{"text":"rotated"}`); err != nil || got != "echo: rotated" {
		t.Fatalf("echo after the rotation = %q, %v", got, err)
	}
	if n := bad.Load(); n != 0 {
		t.Errorf("%d requests came with another token than the current one", n)
	}
	if got := c.redact("token second-token-4567"); strings.Contains(got, "second-token-4567") {
		t.Errorf("redact = %q, shows the rotated token", got)
	}
}

// envDump decodes the env tool's dump: NAME=hex(value) per line.
func envDump(t *testing.T, out string) map[string]string {
	t.Helper()
	got := map[string]string{}
	for _, kv := range strings.Split(out, "\n") {
		k, v, _ := strings.Cut(kv, "=")
		b, err := hex.DecodeString(v)
		if err != nil {
			t.Fatalf("the env dump's %s: %v", k, err)
		}
		got[k] = string(b)
	}
	return got
}

// TestPassedCredentialsAreRedacted: a credential passed to a stdio
// server (env.pass, here from the runner's secrets) never shows in what
// the client passes on: the tool results the model and the event log
// get, the server's stderr copied to the runner's log, and the error of
// a start that failed, which quotes that stderr. A base variable it is
// passed (PATH) is no secret and shows.
func TestPassedCredentialsAreRedacted(t *testing.T) {
	const secret = "sk-live-0123456789abcdef"
	lookup := func(name string) (string, bool) { return secret, name == "UPSTREAM_KEY" }
	stderr := &syncbuf.Buffer{}
	cfg := stdioConfig(map[string]string{leakEnv: "UPSTREAM_KEY"})
	cfg.Env.Pass, cfg.Lookup, cfg.Stderr = []string{"UPSTREAM_KEY", "PATH"}, lookup, stderr
	c := connect(t, cfg)
	out, err := call(t, handlerOf(t, c, "up_env"), `{}`)
	if err != nil || out != "the key is [redacted]" {
		t.Errorf("the tool's result = %q, %v; want the key redacted", out, err)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if log := stderr.String(); strings.Contains(log, secret) || !strings.Contains(log, "using key [redacted]\n") {
		t.Errorf("the server's stderr as logged = %q, want the key redacted", log)
	}

	cfg = stdioConfig(map[string]string{modeEnv: "badstart", leakEnv: "UPSTREAM_KEY"})
	cfg.Env.Pass, cfg.Lookup = []string{"UPSTREAM_KEY"}, lookup
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	_, err = Connect(ctx, cfg)
	if err == nil || strings.Contains(err.Error(), secret) || !strings.Contains(err.Error(), "refused key [redacted]") {
		t.Errorf("a failed start = %v, want its stderr quoted with the key redacted", err)
	}
}

// TestAStderrLineIsRedactedWhole: the stderr copied to the log is
// redacted a line at a time, so a secret the server writes in two pieces
// is still redacted; a last line without its end is copied once the
// server has ended.
func TestAStderrLineIsRedactedWhole(t *testing.T) {
	var out strings.Builder
	tl := &tail{max: 64, out: &out, redact: func(s string) string { return strings.ReplaceAll(s, "hunter2", "[redacted]") }}
	for _, p := range []string{"key hun", "ter2\nnext ", "line hunter2"} {
		tl.Write([]byte(p))
	}
	if got := out.String(); got != "key [redacted]\n" {
		t.Errorf("copied before the end = %q", got)
	}
	tl.flush()
	if got, want := out.String(), "key [redacted]\nnext line [redacted]"; got != want {
		t.Errorf("copied = %q, want %q", got, want)
	}
	if got := tl.String(); got != "key hunter2\nnext line hunter2" {
		t.Errorf("the kept end = %q: it is redacted where it is shown", got)
	}
}
