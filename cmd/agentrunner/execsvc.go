package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"os"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/agentrunner/agentrunner/execsvc"
	"github.com/spf13/cobra"
)

// defaultMockListen is where the mock listens unless told otherwise: the
// execution_service.url the examples' configurations name, so a workspace
// fresh from init finds it without a setting.
const defaultMockListen = "127.0.0.1:9090"

// envName is what an environment variable's name may be.
var envName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// mockFlags are the flags of `execsvc mock`.
type mockFlags struct {
	listen                        string
	executingAfter, completeAfter int
	failWith                      string
	advance, heartbeatTimeout     time.Duration
	tokenEnv                      string
	callbackURL, callbackSecret   string
	record                        string
}

func newExecsvcCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "execsvc",
		Short: "Execution Service tools (mock: a mock service to run against offline)",
		Args:  cobra.NoArgs,
		RunE:  func(cmd *cobra.Command, _ []string) error { return cmd.Help() },
	}
	cmd.AddCommand(newExecsvcMockCommand())
	return cmd
}

func newExecsvcMockCommand() *cobra.Command {
	var f mockFlags
	cmd := &cobra.Command{
		Use:   "mock",
		Short: "Serve the mock Execution Service in the foreground, until interrupted",
		Long: `mock serves the Execution Service contract (docs/execution-service.md) on --listen, as
demo does, so that run --once and serve complete a cycle offline. Point the runner at the
URL it prints: execution_service.url in agentrunner.yaml (the examples name
http://127.0.0.1:9090, the default --listen) or AGENTRUNNER_EXECUTION_SERVICE_URL.

Every request is printed as a line; --record FILE also appends each as a JSON line. A
strategy is completed at its first status poll unless --executing-after and
--completed-after say after how many polls; --fail-with ends it in error instead.
--advance D moves each strategy on by itself, one status every D (then polls only report,
unless --executing-after or --completed-after are given), as a real service would. With
--callback-url (serve's /api/execution/callback) and --callback-secret-env, each change of
status is pushed to the runner, signed. --heartbeat-timeout arms the dead man's switch: the
mock enters safe mode when the runner's heartbeats stop for that long. --token-env names a
variable holding a bearer token every request must carry.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runMock(cmd, f)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.listen, "listen", defaultMockListen, "address to listen on (port 0: any free port)")
	fl.IntVar(&f.executingAfter, "executing-after", 0, "polls of a strategy before it is executing")
	fl.IntVar(&f.completeAfter, "completed-after", 0, "polls of a strategy before it is completed (0: at the first poll)")
	fl.StringVar(&f.failWith, "fail-with", "", "end strategies in error with this message instead of completed")
	fl.DurationVar(&f.advance, "advance", 0, "move each strategy on by itself, one status every this long (0: only polls move it)")
	fl.DurationVar(&f.heartbeatTimeout, "heartbeat-timeout", 0, "enter safe mode when the runner's heartbeats stop for this long (0: no dead man's switch)")
	fl.StringVar(&f.tokenEnv, "token-env", "", "variable holding the bearer token requests must carry (execution_service.token_env)")
	fl.StringVar(&f.callbackURL, "callback-url", "", "push status changes here, e.g. http://127.0.0.1:8080/api/execution/callback")
	fl.StringVar(&f.callbackSecret, "callback-secret-env", "", "variable holding the secret pushes are signed with (execution_service.callback_secret_env)")
	fl.StringVar(&f.record, "record", "", "append each request to this file as a JSON line")
	return cmd
}

// runMock serves the mock until the command's context ends (Ctrl-C,
// SIGTERM), then prints what it received.
func runMock(cmd *cobra.Command, f mockFlags) error {
	opts, err := mockOptions(cmd, f)
	if err != nil {
		return usageError(err)
	}
	out := &lockedWriter{w: cmd.OutOrStdout()}
	rec, err := openRecord(f.record)
	if err != nil {
		return failureError(err)
	}
	defer rec.close()
	opts.OnRequest = func(r execsvc.Request) {
		fmt.Fprintln(out, requestLine(r))
		if err := rec.write(r); err != nil {
			fmt.Fprintf(cmd.ErrOrStderr(), "agentrunner: warning: --record: %v\n", err)
		}
	}
	opts.OnPush = func(p execsvc.Push) { fmt.Fprintln(out, pushLine(p)) }
	es := execsvc.NewMock(opts)
	url, err := es.Start(f.listen)
	if err != nil {
		return failureError(err)
	}
	defer es.Close()
	mockBanner(out, cmd.ErrOrStderr(), url, f)
	watchSafeMode(cmd, es, out)
	if err := es.Close(); err != nil {
		return failureError(err)
	}
	fmt.Fprintf(out, "stopped: %d request(s), %d strategy(ies) accepted, %d status push(es)\n", len(es.Requests()), len(es.Strategies()), len(es.Pushes()))
	return nil
}

// mockOptions checks the flags and reads the secrets the variables they
// name hold.
func mockOptions(cmd *cobra.Command, f mockFlags) (execsvc.MockOptions, error) {
	if _, _, err := net.SplitHostPort(f.listen); err != nil {
		return execsvc.MockOptions{}, fmt.Errorf("--listen %q: want host:port, such as %s: %v", f.listen, defaultMockListen, err)
	}
	if f.executingAfter < 0 || f.completeAfter < 0 || f.advance < 0 || f.heartbeatTimeout < 0 {
		return execsvc.MockOptions{}, errors.New("--executing-after, --completed-after, --advance and --heartbeat-timeout must not be negative")
	}
	opts := execsvc.MockOptions{ExecutingAfter: f.executingAfter, CompletedAfter: f.completeAfter, FailWith: f.failWith,
		Advance: f.advance, HeartbeatTimeout: f.heartbeatTimeout}
	if f.advance > 0 && !cmd.Flags().Changed("executing-after") && !cmd.Flags().Changed("completed-after") {
		// Strategies move on by time alone; polls only report.
		opts.ExecutingAfter, opts.CompletedAfter = math.MaxInt, math.MaxInt
	}
	var err error
	if f.tokenEnv != "" {
		if opts.Token, err = secretEnv("--token-env", f.tokenEnv); err != nil {
			return opts, err
		}
	}
	opts.Callback, err = mockCallback(f)
	return opts, err
}

// mockCallback is the push target the flags give, checked.
func mockCallback(f mockFlags) (execsvc.MockCallback, error) {
	if f.callbackURL == "" && f.callbackSecret == "" {
		return execsvc.MockCallback{}, nil
	}
	if f.callbackURL == "" || f.callbackSecret == "" {
		return execsvc.MockCallback{}, errors.New("--callback-url and --callback-secret-env go together: the runner refuses unsigned callbacks")
	}
	secret, err := secretEnv("--callback-secret-env", f.callbackSecret)
	if err != nil {
		return execsvc.MockCallback{}, err
	}
	cb := execsvc.MockCallback{URL: f.callbackURL, Secret: []byte(secret)}
	if err := cb.Validate(); err != nil {
		return execsvc.MockCallback{}, fmt.Errorf("--callback-url: %w", err)
	}
	return cb, nil
}

// secretEnv reads the secret in the variable a flag names; secrets are
// never flags themselves, so they stay out of shell histories and ps.
func secretEnv(flag, name string) (string, error) {
	if !envName.MatchString(name) {
		return "", fmt.Errorf("%s %q is not an environment variable name", flag, name)
	}
	v := os.Getenv(name)
	if v == "" {
		return "", fmt.Errorf("%s: environment variable %s is not set", flag, name)
	}
	return v, nil
}

// mockBanner says where the mock listens and how to point a runner at it.
func mockBanner(out, errOut io.Writer, url string, f mockFlags) {
	fmt.Fprintf(out, "mock Execution Service listening on %s\n", url)
	fmt.Fprintf(out, "point the runner at it: execution_service.url: %s in agentrunner.yaml, or AGENTRUNNER_EXECUTION_SERVICE_URL=%s\n", url, url)
	if f.tokenEnv != "" {
		fmt.Fprintf(out, "requests must carry the token in %s: set execution_service.token_env: %s\n", f.tokenEnv, f.tokenEnv)
	}
	if f.heartbeatTimeout > 0 {
		fmt.Fprintf(out, "dead man's switch: safe mode when no heartbeat comes for %s (the runner beats every execution_service.heartbeat_interval)\n", f.heartbeatTimeout)
	}
	if f.tokenEnv == "" && requireLoopback(f.listen) != nil {
		fmt.Fprintf(errOut, "agentrunner: warning: --listen %s is not loopback and no --token-env is set: anyone who reaches it can hand over strategies\n", f.listen)
	}
	fmt.Fprintln(out, "each request is printed below; stop with Ctrl-C")
}

// watchSafeMode prints each change of the mock's safe mode, the dead
// man's switch included, which trips without a request, until the
// command's context ends.
func watchSafeMode(cmd *cobra.Command, es *execsvc.Mock, out io.Writer) {
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
	var was execsvc.SafeModeState
	for {
		select {
		case <-cmd.Context().Done():
			return
		case <-tick.C:
		}
		now := es.SafeMode()
		if now.SafeMode != was.SafeMode {
			if now.SafeMode {
				fmt.Fprintf(out, "safe mode since %s (reason %s): no new strategy is taken until DELETE /v1/safe-mode\n", now.Since.Format(time.RFC3339), now.Reason)
			} else {
				fmt.Fprintln(out, "safe mode lifted")
			}
		}
		was = now
	}
}

// requestLine is one request as the mock prints it.
func requestLine(r execsvc.Request) string {
	line := fmt.Sprintf("%s %s %s %d", r.Time.UTC().Format(time.RFC3339), r.Method, r.Path, r.StatusCode)
	if r.IdempotencyKey != "" {
		line += " key=" + r.IdempotencyKey
	}
	return line
}

// pushLine is one status push as the mock prints it.
func pushLine(p execsvc.Push) string {
	line := fmt.Sprintf("%s push %s %s", p.Time.UTC().Format(time.RFC3339), p.StrategyID, p.Status)
	switch {
	case p.StatusCode == 0:
		line += ": not delivered: " + p.Failure
	case p.Failure != "":
		line += fmt.Sprintf(": refused with %d: %s", p.StatusCode, p.Failure)
	default:
		line += fmt.Sprintf(": %d", p.StatusCode)
	}
	return line
}

// recordFile appends requests to --record as JSON lines.
type recordFile struct {
	mu  sync.Mutex
	f   *os.File
	enc *json.Encoder
}

// recordLine is one recorded request. The body is kept as JSON when it is
// JSON, else as text; the Authorization header is never recorded.
type recordLine struct {
	Time           time.Time       `json:"time"`
	Method         string          `json:"method"`
	Path           string          `json:"path"`
	IdempotencyKey string          `json:"idempotency_key,omitempty"`
	Status         int             `json:"status"`
	Body           json.RawMessage `json:"body,omitempty"`
	BodyText       string          `json:"body_text,omitempty"`
}

// openRecord opens path for appending; "" records nothing.
func openRecord(path string) (*recordFile, error) {
	if path == "" {
		return &recordFile{}, nil
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("--record: %w", err)
	}
	return &recordFile{f: f, enc: json.NewEncoder(f)}, nil
}

func (rf *recordFile) write(r execsvc.Request) error {
	if rf.f == nil {
		return nil
	}
	line := recordLine{Time: r.Time.UTC(), Method: r.Method, Path: r.Path, IdempotencyKey: r.IdempotencyKey, Status: r.StatusCode}
	if json.Valid(r.Body) {
		line.Body = r.Body
	} else if len(r.Body) > 0 {
		line.BodyText = strings.ToValidUTF8(string(r.Body), "\uFFFD")
	}
	rf.mu.Lock()
	defer rf.mu.Unlock()
	return rf.enc.Encode(line)
}

func (rf *recordFile) close() {
	if rf.f != nil {
		rf.f.Close()
	}
}

// lockedWriter serialises the lines of concurrent requests.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}
