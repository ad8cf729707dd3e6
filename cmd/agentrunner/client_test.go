package main

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/agentrunner/agentrunner"
	"github.com/agentrunner/agentrunner/config"
	arhttp "github.com/agentrunner/agentrunner/http"
	"github.com/agentrunner/agentrunner/internal/clocktest"
	"github.com/agentrunner/agentrunner/internal/syncbuf"
	"github.com/agentrunner/agentrunner/sqlite"
	"github.com/google/go-cmp/cmp"
)

// Keys of the remote commands' server: a viewer (grafana) and an operator
// (alice).
const (
	remoteViewerKey   = "remote-viewer-key-0123456789"
	remoteOperatorKey = "remote-operator-key-0123456789"
	remoteAdminKey    = "remote-admin-key-0123456789"
)

// The fixture's cycles: one completed, one halted at execute.
const (
	remoteDoneID   = "20260314_002653"
	remoteHaltedID = "20260314_082653"
)

// remoteNow is the server's clock.
var remoteNow = time.Date(2026, 3, 14, 9, 26, 53, 0, time.UTC)

// remoteFixture is the real API server on 127.0.0.1 over a real store.
type remoteFixture struct {
	store *sqlite.Store
	url   string
}

// newRemoteFixture serves a store holding the changes, with API keys.
func newRemoteFixture(t *testing.T, changes ...*agentrunner.Change) *remoteFixture {
	t.Helper()
	return newRemoteFixtureWith(t, nil, changes...)
}

// newRemoteFixtureWith is newRemoteFixture with the server's options
// changed by edit, which may start what they need over the store.
func newRemoteFixtureWith(t *testing.T, edit func(store *sqlite.Store, dir string, o *arhttp.Options), changes ...*agentrunner.Change) *remoteFixture {
	t.Helper()
	dir := t.TempDir()
	store, err := sqlite.Open(t.Context(), filepath.Join(dir, "state.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	for _, ch := range changes {
		if err := store.Apply(t.Context(), ch); err != nil {
			t.Fatal(err)
		}
	}
	cfg := &config.Config{
		Name: "crypton", Dir: dir, ArtifactsDir: filepath.Join(dir, "artifacts"),
		Schedule: config.Schedule{Every: config.Duration(6 * time.Hour), MinCycle: config.Duration(time.Hour), MaxCycle: config.Duration(24 * time.Hour)},
		Agents:   map[string]*config.Agent{"plan": {}, "research": {}},
	}
	cfg.Server.MaxBodyBytes = 64 << 10
	cfg.Server.Auth.APIKeys = []config.APIKey{
		{Name: "grafana", KeyEnv: "REMOTE_VIEWER_KEY", Role: config.RoleViewer},
		{Name: "alice", KeyEnv: "REMOTE_OPERATOR_KEY", Role: config.RoleOperator},
		{Name: "root", KeyEnv: "REMOTE_ADMIN_KEY", Role: config.RoleAdmin},
	}
	env := map[string]string{"REMOTE_VIEWER_KEY": remoteViewerKey, "REMOTE_OPERATOR_KEY": remoteOperatorKey, "REMOTE_ADMIN_KEY": remoteAdminKey}
	auth, err := arhttp.NewAuthenticator(cfg.Server.Auth, dir, func(k string) (string, bool) { v, ok := env[k]; return v, ok }, time.Now)
	if err != nil {
		t.Fatal(err)
	}
	opts := arhttp.Options{Store: store, Config: cfg, Clock: clocktest.New(remoteNow), Auth: auth}
	if edit != nil {
		edit(store, dir, &opts)
	}
	srv, err := arhttp.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(srv.Handler())
	t.Cleanup(ts.Close)
	return &remoteFixture{store: store, url: ts.URL}
}

// remoteHistory is a completed cycle and one halted at execute, with
// events 1 to 4 (3 and 4 a warning and an error).
func remoteHistory() []*agentrunner.Change {
	started := remoteNow.Add(-time.Hour)
	halted := &agentrunner.Cycle{ID: remoteHaltedID, Pipeline: "crypton", Status: agentrunner.CycleHalted, Step: "execute",
		LastCompletedStep: "synthesize", Dir: "/nonexistent/" + remoteHaltedID, StartedAt: started}
	return []*agentrunner.Change{
		{
			Cycle: &agentrunner.Cycle{ID: remoteDoneID, Pipeline: "crypton", Status: agentrunner.CycleCompleted, LastCompletedStep: "evaluate",
				Dir: "/nonexistent/" + remoteDoneID, StartedAt: remoteNow.Add(-9 * time.Hour), EndedAt: remoteNow.Add(-8 * time.Hour)},
			Events: []*agentrunner.Event{{Timestamp: remoteNow.Add(-8 * time.Hour), Type: agentrunner.EventCycleCompleted, CycleID: remoteDoneID, Level: agentrunner.LevelInfo}},
		},
		{
			Cycle: halted,
			Attempts: []*agentrunner.Attempt{
				{CycleID: remoteHaltedID, Step: "synthesize", Number: 1, Agent: "synthesis", Status: agentrunner.AttemptSucceeded,
					StartedAt: started, EndedAt: started.Add(10 * time.Minute), Usage: agentrunner.Usage{InputTokens: 1200, OutputTokens: 340}},
				{CycleID: remoteHaltedID, Step: "execute", Number: 1, Status: agentrunner.AttemptFailed, ErrorClass: agentrunner.ClassUnavailable,
					Error: "the Execution Service answered 503", StartedAt: started.Add(10 * time.Minute), EndedAt: started.Add(11 * time.Minute)},
			},
			Events: []*agentrunner.Event{
				{Timestamp: started, Type: agentrunner.EventCycleStarted, CycleID: remoteHaltedID, Level: agentrunner.LevelInfo},
				{Timestamp: started.Add(11 * time.Minute), Type: agentrunner.EventAttemptFailed, CycleID: remoteHaltedID, Step: "execute", Level: agentrunner.LevelWarn,
					Details: map[string]any{"error": "the Execution Service answered 503", "error_class": "unavailable"}},
				{Timestamp: started.Add(11 * time.Minute), Type: "escalation", CycleID: remoteHaltedID, Step: "execute", Level: agentrunner.LevelError,
					Details: map[string]any{"attempts": 1}},
			},
		},
	}
}

// remoteGet fetches an API path with key and decodes the JSON body.
func remoteGet(t *testing.T, url, key string) any {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d %v %s", url, resp.StatusCode, err, body)
	}
	var v any
	if err := json.Unmarshal(body, &v); err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	return v
}

// remoteAligned checks that in out the header's column title starts where
// the value starts in the line that begins with first.
func remoteAligned(t *testing.T, out, title, first, value string) {
	t.Helper()
	var header, line string
	for l := range strings.SplitSeq(out, "\n") {
		if header == "" && strings.Contains(l, title) {
			header = l
		}
		if strings.HasPrefix(l, first) {
			line = l
		}
	}
	i, j := strings.Index(header, title), strings.Index(line, value)
	if header == "" || line == "" || i < 0 || i != j {
		t.Errorf("column %s (at %d) and %s (at %d) of the row %s are not aligned:\n%s", title, i, value, j, first, out)
	}
}

// TestRemoteReads: the read commands print aligned tables of what the
// server holds, and --json prints the API's JSON.
func TestRemoteReads(t *testing.T) {
	f := newRemoteFixture(t, remoteHistory()...)
	t.Setenv(envAPIKey, remoteViewerKey)
	t.Setenv(envServer, "")
	tests := []struct {
		args []string
		// lines are regular expressions, each matching a whole line.
		lines []string
		// aligned is a column title, the first cell of a row and the
		// value in that row under the title.
		aligned [3]string
	}{
		{
			args: []string{"cycles"},
			lines: []string{
				`ID\s+STATUS\s+STEP\s+LAST COMPLETED\s+STARTED\s+DURATION\s+ERROR`,
				remoteHaltedID + `\s+halted\s+execute\s+synthesize\s+2026-03-14T08:26:53Z\s+1h0m0s\s+-`,
				remoteDoneID + `\s+completed\s+-\s+evaluate\s+2026-03-14T00:26:53Z\s+1h0m0s\s+-`,
			},
			aligned: [3]string{"STARTED", remoteDoneID, "2026-03-14T00:26:53Z"},
		},
		{
			args:  []string{"cycles", "--limit", "1"},
			lines: []string{remoteHaltedID + `\s+halted.*`, `more: agentrunner cycles --before ` + remoteHaltedID},
		},
		{
			args:  []string{"cycles", "--before", remoteDoneID},
			lines: []string{`no cycles`},
		},
		{
			args: []string{"cycle", remoteHaltedID},
			lines: []string{
				`cycle:\s+` + remoteHaltedID,
				`status:\s+halted`,
				`step:\s+execute`,
				`ended:\s+-`,
				`STEP\s+ATTEMPT\s+AGENT\s+STATUS\s+STARTED\s+DURATION\s+TOKENS IN/OUT\s+ERROR`,
				`synthesize\s+1\s+synthesis\s+succeeded\s+2026-03-14T08:26:53Z\s+10m0s\s+1200/340\s+-`,
				`execute\s+1\s+-\s+failed\s+2026-03-14T08:36:53Z\s+1m0s\s+0/0\s+unavailable: the Execution Service answered 503`,
				`no artifacts`,
				`4\s+2026-03-14T08:37:53Z\s+error\s+escalation\s+` + remoteHaltedID + `\s+execute\s+-\s+attempts=1`,
			},
			aligned: [3]string{"DURATION", "execute", "1m0s"},
		},
		{
			args: []string{"errors"},
			lines: []string{
				`ID\s+TIME\s+LEVEL\s+TYPE\s+CYCLE\s+STEP\s+AGENT\s+DETAILS`,
				`4\s+\S+\s+error\s+escalation\s+.*`,
				`3\s+\S+\s+warn\s+attempt.failed\s+` + remoteHaltedID + `\s+execute\s+-\s+error=the Execution Service answered 503 error_class=unavailable`,
			},
		},
		{
			args:  []string{"errors", "--limit", "1"},
			lines: []string{`4\s+.*escalation.*`, `more: agentrunner errors --before 4`},
		},
		{
			args:    []string{"events", "--since", "1", "--limit", "2"},
			lines:   []string{`2\s+2026-03-14T08:26:53Z\s+info\s+cycle.started\s+` + remoteHaltedID + `\s+-\s+-\s+-`, `3\s+.*attempt.failed.*`, `next: agentrunner events --since 3`},
			aligned: [3]string{"TYPE", "3", "attempt.failed"},
		},
		{
			args:  []string{"events", "--level", "error"},
			lines: []string{`4\s+.*escalation.*`},
		},
		{
			args:  []string{"audit"},
			lines: []string{`no commands`},
		},
		{
			args:  []string{"status"},
			lines: []string{`current state:\s+Halted`, `current cycle:\s+` + remoteHaltedID, `last cycle:\s+` + remoteHaltedID + ` halted`},
		},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			code, stdout, stderr := cliRun(t, append(tt.args, "--server", f.url)...)
			if code != exitOK {
				t.Fatalf("exit %d, stderr:\n%s", code, stderr)
			}
			for _, l := range tt.lines {
				if !regexp.MustCompile(`(?m)^` + l + `$`).MatchString(stdout) {
					t.Errorf("no line matches %s in:\n%s", l, stdout)
				}
			}
			if tt.aligned[0] != "" {
				remoteAligned(t, stdout, tt.aligned[0], tt.aligned[1], tt.aligned[2])
			}
			if strings.Contains(stdout+stderr, remoteViewerKey) {
				t.Error("the output holds the API key")
			}
		})
	}

	// --json prints what the API answers.
	for _, tt := range []struct {
		args []string
		path string
	}{
		{[]string{"cycles", "--limit", "1"}, "/api/cycles?limit=1"},
		{[]string{"cycle", remoteHaltedID}, "/api/cycles/" + remoteHaltedID},
		{[]string{"errors"}, "/api/errors"},
		{[]string{"events", "--since", "2", "--type", "attempt.failed"}, "/api/events?since=2&type=attempt.failed"},
		{[]string{"audit"}, "/api/audit"},
		{[]string{"status"}, "/api/status"},
	} {
		t.Run(strings.Join(tt.args, " ")+" --json", func(t *testing.T) {
			code, stdout, stderr := cliRun(t, append(tt.args, "--json", "--server", f.url)...)
			if code != exitOK {
				t.Fatalf("exit %d, stderr:\n%s", code, stderr)
			}
			var got any
			if err := json.Unmarshal([]byte(stdout), &got); err != nil {
				t.Fatalf("stdout is not JSON: %v\n%s", err, stdout)
			}
			if diff := cmp.Diff(remoteGet(t, f.url+tt.path, remoteViewerKey), got); diff != "" {
				t.Errorf("--json (-API +CLI):\n%s", diff)
			}
		})
	}
}

// TestRemoteOverrides: the override commands become commands of the
// store, attributed to the key's name, and audit lists them.
func TestRemoteOverrides(t *testing.T) {
	f := newRemoteFixture(t, remoteHistory()...)
	t.Setenv(envAPIKey, remoteOperatorKey)
	t.Setenv(envServer, f.url)
	for _, args := range [][]string{
		{"pause", "--reason", "provider outage"},
		{"abort"},
		{"force-cycle", "--reason", "new data"},
		{"inject", "research", "mind the FOMC minutes"},
	} {
		code, stdout, stderr := cliRun(t, args...)
		if code != exitOK {
			t.Fatalf("%v: exit %d, stderr:\n%s", args, code, stderr)
		}
		if !regexp.MustCompile(`^` + args[0] + ` requested: command \d+ by alice;`).MatchString(stdout) {
			t.Errorf("%v printed %q", args, stdout)
		}
	}
	code, stdout, stderr := cliRun(t, "pause", "--json")
	if code != exitOK {
		t.Fatalf("pause --json: exit %d, stderr:\n%s", code, stderr)
	}
	var printed arhttp.Command
	if err := json.Unmarshal([]byte(stdout), &printed); err != nil || printed.ID != 5 || printed.Kind != "pause" || printed.Operator != "alice" {
		t.Errorf("pause --json printed %+v (%v):\n%s", printed, err, stdout)
	}

	cmds, err := f.store.Commands(t.Context(), agentrunner.CommandFilter{})
	if err != nil {
		t.Fatal(err)
	}
	type stored struct {
		ID       int64
		Kind     string
		Operator string
		Args     map[string]any
	}
	var got []stored
	for _, c := range cmds {
		got = append(got, stored{c.ID, c.Kind, c.Operator, c.Args})
	}
	want := []stored{
		{5, "pause", "alice", nil},
		{4, "inject", "alice", map[string]any{"agent": "research", "message": "mind the FOMC minutes"}},
		{3, "force-cycle", "alice", map[string]any{"reason": "new data"}},
		{2, "abort", "alice", nil},
		{1, "pause", "alice", map[string]any{"reason": "provider outage"}},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("stored commands (-want +got):\n%s", diff)
	}

	code, stdout, stderr = cliRun(t, "audit", "--limit", "2")
	if code != exitOK {
		t.Fatalf("audit: exit %d, stderr:\n%s", code, stderr)
	}
	for _, l := range []string{
		`ID\s+CREATED\s+KIND\s+OPERATOR\s+ARGS\s+CONSUMED\s+RESULT`,
		`5\s+2026-03-14T09:26:53Z\s+pause\s+alice\s+-\s+pending\s+-`,
		`4\s+2026-03-14T09:26:53Z\s+inject\s+alice\s+agent=research message=mind the FOMC minutes\s+pending\s+-`,
		`more: agentrunner audit --before 4`,
	} {
		if !regexp.MustCompile(`(?m)^` + l + `$`).MatchString(stdout) {
			t.Errorf("audit: no line matches %s in:\n%s", l, stdout)
		}
	}
}

// TestRemoteReload: an admin may reload; an operator is refused.
func TestRemoteReload(t *testing.T) {
	f := newRemoteFixture(t)
	t.Setenv(envServer, f.url)
	t.Setenv(envAPIKey, remoteOperatorKey)
	if code, _, stderr := cliRun(t, "reload"); code != exitFailure || !strings.Contains(stderr, "(forbidden)") {
		t.Errorf("an operator's reload: exit %d\n%s", code, stderr)
	}
	t.Setenv(envAPIKey, remoteAdminKey)
	code, stdout, stderr := cliRun(t, "reload", "--reason", "new prompts")
	if code != exitOK || !regexp.MustCompile(`^reload requested: command \d+ by root;`).MatchString(stdout) {
		t.Fatalf("reload: exit %d %q\n%s", code, stdout, stderr)
	}
	cmds, _ := f.store.Commands(t.Context(), agentrunner.CommandFilter{})
	if len(cmds) != 1 || cmds[0].Kind != agentrunner.CommandReload || cmds[0].Args["reason"] != "new prompts" {
		t.Errorf("stored commands: %+v", cmds)
	}
}

// TestRemoteResumeAndStatus: with --server, status and resume go through
// the API; resume is refused while the loop is neither halted nor paused,
// and lifts a pause through the API.
func TestRemoteResumeAndStatus(t *testing.T) {
	f := newRemoteFixture(t, remoteHistory()...)
	t.Setenv(envAPIKey, remoteOperatorKey)
	t.Setenv(envServer, "")

	code, stdout, stderr := cliRun(t, "resume", "--server", f.url, "--reason", "the service is back")
	if code != exitOK {
		t.Fatalf("resume: exit %d, stderr:\n%s", code, stderr)
	}
	if want := "resume requested (command 1 by alice): resumes cycle " + remoteHaltedID + " at step execute\n"; stdout != want {
		t.Errorf("resume printed %q, want %q", stdout, want)
	}
	cmds, err := f.store.Commands(t.Context(), agentrunner.CommandFilter{})
	if err != nil || len(cmds) != 1 || cmds[0].Kind != agentrunner.CommandResume || cmds[0].Operator != "alice" ||
		!cmp.Equal(cmds[0].Args, map[string]any{"reason": "the service is back"}) {
		t.Fatalf("stored commands %+v (%v), want one resume by alice with the note", cmds, err)
	}

	// The engine resumes the cycle; resuming again is refused.
	running := &agentrunner.Cycle{ID: remoteHaltedID, Pipeline: "crypton", Status: agentrunner.CycleRunning, Step: "execute",
		LastCompletedStep: "synthesize", Dir: "/nonexistent", StartedAt: remoteNow.Add(-time.Hour)}
	if err := f.store.Apply(t.Context(), &agentrunner.Change{Cycle: running}); err != nil {
		t.Fatal(err)
	}
	code, _, stderr = cliRun(t, "resume", "--server", f.url)
	if code != exitFailure || !strings.Contains(stderr, "nothing to resume: the workspace is not paused and the loop is not halted (at step execute)") {
		t.Errorf("resume of a running loop: exit %d, stderr:\n%s", code, stderr)
	}
	// Paused, the running loop is resumed: the order lifts the pause.
	if code, stdout, stderr := cliRun(t, "pause", "--server", f.url, "--reason", "maintenance"); code != exitOK {
		t.Fatalf("pause: exit %d\n%s%s", code, stdout, stderr)
	}
	if err := f.store.Apply(t.Context(), &agentrunner.Change{Control: &agentrunner.Control{Paused: true, PausedBy: "alice", PausedAt: remoteNow}}); err != nil {
		t.Fatal(err)
	}
	code, stdout, stderr = cliRun(t, "resume", "--server", f.url)
	if want := "resume requested (command 3 by alice): lifts the pause by alice\n"; code != exitOK || stdout != want {
		t.Errorf("resume of a paused loop: exit %d, stdout %q, want %q; stderr:\n%s", code, stdout, want, stderr)
	}
	t.Setenv(envServer, f.url)
	code, stdout, stderr = cliRun(t, "status", "--json")
	if code != exitOK {
		t.Fatalf("status through $%s: exit %d, stderr:\n%s", envServer, code, stderr)
	}
	if !strings.Contains(stdout, `"current_state": "execute"`) {
		t.Errorf("status --json through the server:\n%s", stdout)
	}
}

// TestRemoteErrors: what the server refuses and a server that is not
// there exit 1 with one line naming the error code; bad usage exits 2.
func TestRemoteErrors(t *testing.T) {
	f := newRemoteFixture(t, remoteHistory()...)
	t.Setenv(envServer, "")
	tests := []struct {
		name     string
		key      string
		args     []string
		code     int
		mentions []string
	}{
		{"no key", "", []string{"cycles", "--server", f.url}, exitFailure,
			[]string{"the server at " + f.url + " answered", "(unauthorized)", "set AGENTRUNNER_API_KEY"}},
		{"no key for status", "", []string{"status", "--server", f.url}, exitFailure, []string{"(unauthorized)"}},
		{"unknown key", "not-a-key-of-this-server", []string{"events", "--server", f.url}, exitFailure, []string{"unknown API key (unauthorized)"}},
		{"viewer pauses", remoteViewerKey, []string{"pause", "--server", f.url}, exitFailure, []string{"(forbidden)", "operator"}},
		{"unknown cycle", remoteViewerKey, []string{"cycle", "20200101_000000", "--server", f.url}, exitFailure, []string{"(not_found)"}},
		{"bad cycle id", remoteViewerKey, []string{"cycle", "yesterday", "--server", f.url}, exitFailure, []string{"(invalid)"}},
		{"limit above the server's", remoteViewerKey, []string{"cycles", "--limit", "100000", "--server", f.url}, exitFailure, []string{"limit", "(invalid)"}},
		{"inject to an unknown agent", remoteOperatorKey, []string{"inject", "ghost", "boo", "--server", f.url}, exitFailure, []string{"ghost", "(invalid)"}},
		{"nobody listening", remoteViewerKey, []string{"cycles", "--server", "http://" + cliFreeAddr(t)}, exitFailure, []string{"cannot reach the agentrunner server", "(unavailable)"}},
		{"limit 0", remoteViewerKey, []string{"cycles", "--limit", "0", "--server", f.url}, exitUsage, []string{"--limit must be at least 1"}},
		{"limit not a number", remoteViewerKey, []string{"audit", "--limit", "many", "--server", f.url}, exitUsage, []string{"--limit"}},
		{"cycle without an id", remoteViewerKey, []string{"cycle", "--server", f.url}, exitUsage, []string{"accepts 1 arg(s)"}},
		{"inject without a message", remoteOperatorKey, []string{"inject", "plan", "--server", f.url}, exitUsage, []string{"accepts 2 arg(s)"}},
		{"inject an empty message", remoteOperatorKey, []string{"inject", "plan", " ", "--server", f.url}, exitUsage, []string{"the message is empty"}},
		{"follow with a limit", remoteViewerKey, []string{"events", "--follow", "--limit", "3", "--server", f.url}, exitUsage, []string{"--follow"}},
		{"not an http URL", remoteViewerKey, []string{"errors", "--server", "ftp://runner.example"}, exitUsage, []string{"--server: ", "http:// or https://"}},
		{"URL with a password", remoteViewerKey, []string{"audit", "--server", "http://bob:hunter2hunter2@127.0.0.1:1"}, exitUsage, []string{"credentials"}},
		{"key with a space", "two words", []string{"audit", "--server", f.url}, exitUsage, []string{"$AGENTRUNNER_API_KEY: ", "API key"}},
		{"resume as someone", remoteOperatorKey, []string{"resume", "--server", f.url, "--operator", "bob"}, exitUsage, []string{"--operator"}},
		{"missing configuration", remoteViewerKey, []string{"cycles", "-c", filepath.Join(t.TempDir(), "none.yaml")}, exitUsage, []string{"none.yaml does not exist"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv(envAPIKey, tt.key)
			code, stdout, stderr := cliRun(t, tt.args...)
			if code != tt.code {
				t.Errorf("exit %d, want %d; stdout:\n%s\nstderr:\n%s", code, tt.code, stdout, stderr)
			}
			for _, m := range tt.mentions {
				if !strings.Contains(stderr, m) {
					t.Errorf("stderr does not mention %q:\n%s", m, stderr)
				}
			}
			if lines := strings.Count(strings.TrimSpace(stderr), "\n"); lines > 0 {
				t.Errorf("stderr has %d lines, want one:\n%s", lines+1, stderr)
			}
			for _, secret := range []string{remoteViewerKey, remoteOperatorKey, "hunter2"} {
				if strings.Contains(stdout+stderr, secret) {
					t.Errorf("the output holds a secret:\n%s%s", stdout, stderr)
				}
			}
		})
	}
	if cmds, err := f.store.Commands(t.Context(), agentrunner.CommandFilter{}); err != nil || len(cmds) != 0 {
		t.Errorf("refused commands reached the store: %+v (%v)", cmds, err)
	}
}

// TestRemoteServerFromTheConfiguration: without --server or
// $AGENTRUNNER_SERVER, the commands call http://<server.listen> of -c.
func TestRemoteServerFromTheConfiguration(t *testing.T) {
	f := newRemoteFixture(t, remoteHistory()...)
	t.Setenv(envAPIKey, remoteViewerKey)
	t.Setenv(envServer, "")
	dir := cliExample(t)
	cliEdit(t, cliConfigPath(dir), "listen: 127.0.0.1:8080", "listen: "+strings.TrimPrefix(f.url, "http://"))
	code, stdout, stderr := cliRun(t, "cycles", "-c", cliConfigPath(dir))
	if code != exitOK || !strings.Contains(stdout, remoteHaltedID) {
		t.Errorf("cycles -c: exit %d\n%s%s", code, stdout, stderr)
	}
	// $AGENTRUNNER_SERVER wins over the configuration.
	t.Setenv(envServer, "http://"+cliFreeAddr(t))
	if code, _, stderr := cliRun(t, "cycles", "-c", cliConfigPath(dir)); code != exitFailure || !strings.Contains(stderr, "cannot reach") {
		t.Errorf("cycles with $%s set to a closed port: exit %d\n%s", envServer, code, stderr)
	}
	// status without a server stays local: it reads the workspace.
	t.Setenv(envServer, "")
	code, stdout, stderr = cliRun(t, "status", "-c", cliConfigPath(dir))
	if code != exitOK || !regexp.MustCompile(`(?m)^current state:\s+Idle$`).MatchString(stdout) {
		t.Errorf("local status: exit %d\n%s%s", code, stdout, stderr)
	}
}

// TestServerOfConfig: the server is http://<server.listen> of the
// configuration, reached on loopback when it listens everywhere; a
// missing file or one without server.listen is a usage error saying how
// to name the server, never a silent 127.0.0.1:8080.
func TestServerOfConfig(t *testing.T) {
	dir := t.TempDir()
	// write returns the configuration of a new workspace listening there.
	write := func(listen string) string {
		ws := cliExample(t)
		cliEdit(t, cliConfigPath(ws), "listen: 127.0.0.1:8080", "listen: \""+listen+"\"")
		return cliConfigPath(ws)
	}
	unset := cliExample(t)
	cliEdit(t, cliConfigPath(unset), "server:\n  listen: 127.0.0.1:8080\n", "")
	tests := []struct {
		name string
		path string
		want string
		says string // in the error; "": none
	}{
		{"no file", filepath.Join(dir, "agentrunner.yaml"), "", "agentrunner.yaml does not exist; give the server's URL with --server or $AGENTRUNNER_SERVER"},
		{"no server.listen", cliConfigPath(unset), "", "agentrunner.yaml does not set server.listen; give the server's URL with --server or $AGENTRUNNER_SERVER"},
		{"loopback", write("127.0.0.1:9090"), "http://127.0.0.1:9090", ""},
		{"every interface", write(":9090"), "http://127.0.0.1:9090", ""},
		{"every IPv4 interface", write("0.0.0.0:9090"), "http://127.0.0.1:9090", ""},
		{"every IPv6 interface", write("[::]:9090"), "http://[::1]:9090", ""},
		{"a host name", write("runner.internal:9090"), "http://runner.internal:9090", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := serverOfConfig(tt.path)
			var ee *exitError
			if tt.says == "" && err != nil || tt.says != "" && (!errors.As(err, &ee) || ee.code != exitUsage || !strings.Contains(err.Error(), tt.says)) {
				t.Errorf("serverOfConfig(%s) error %v; want a usage error saying %q", tt.path, err, tt.says)
			}
			if got != tt.want {
				t.Errorf("serverOfConfig(%s) = %q, want %q", tt.path, got, tt.want)
			}
		})
	}
}

// TestClientNamesItsServer: without a server named anywhere a client
// command stops with exit 2 and says how to name one, sending nothing;
// with --verbose it names the server it talks to on stderr first, in the
// --log-format asked for.
func TestClientNamesItsServer(t *testing.T) {
	f := newRemoteFixture(t, remoteHistory()...)
	t.Setenv(envAPIKey, remoteViewerKey)
	t.Setenv(envServer, "")
	empty := t.TempDir()
	code, stdout, stderr := cliRun(t, "cycles", "-c", filepath.Join(empty, "agentrunner.yaml"))
	if code != exitUsage || stdout != "" || !strings.Contains(stderr, "no server to talk to") || !strings.Contains(stderr, "--server or $AGENTRUNNER_SERVER") {
		t.Errorf("cycles without a server: exit %d\n%s%s", code, stdout, stderr)
	}
	code, stdout, stderr = cliRun(t, "cycles", "--server", f.url, "-v", "--log-format", "json")
	if code != exitOK || !strings.Contains(stdout, remoteHaltedID) {
		t.Fatalf("cycles -v: exit %d\n%s%s", code, stdout, stderr)
	}
	first, _, _ := strings.Cut(stderr, "\n")
	var line map[string]any
	if err := json.Unmarshal([]byte(first), &line); err != nil {
		t.Fatalf("the first line on stderr is not JSON: %q", first)
	}
	delete(line, "time")
	want := map[string]any{"level": "INFO", "msg": "talking to the server", "url": f.url, "from": "--server"}
	if diff := cmp.Diff(want, line); diff != "" {
		t.Errorf("first line on stderr (-want +got):\n%s", diff)
	}
	code, _, stderr = cliRun(t, "cycles", "--server", f.url, "-v", "--log-format", "text")
	if code != exitOK || !regexp.MustCompile(`^time=\S+ level=INFO msg="talking to the server" url=`+regexp.QuoteMeta(f.url)+` from=--server\n`).MatchString(stderr) {
		t.Errorf("cycles -v --log-format text: exit %d, stderr %q", code, stderr)
	}
	if code, _, stderr := cliRun(t, "cycles", "--server", f.url); code != exitOK || stderr != "" {
		t.Errorf("cycles without -v: exit %d, stderr %q", code, stderr)
	}
}

// TestEventsFollow: events --follow prints the events committed while it
// runs, as table rows or JSON lines, and an interrupt ends it with 0.
func TestEventsFollow(t *testing.T) {
	for _, asJSON := range []bool{false, true} {
		t.Run(map[bool]string{false: "table", true: "json"}[asJSON], func(t *testing.T) {
			f := newRemoteFixture(t, remoteHistory()...)
			t.Setenv(envAPIKey, remoteViewerKey)
			ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
			defer cancel()
			args := []string{"events", "--follow", "--since", "4", "--server", f.url}
			if asJSON {
				args = append(args, "--json")
			}
			var stdout, stderr syncbuf.Buffer
			done := make(chan int, 1)
			go func() { done <- run(ctx, args, &stdout, &stderr) }()
			for _, typ := range []string{"step.one", "step.two"} {
				ev := &agentrunner.Event{Timestamp: remoteNow, Type: typ, CycleID: remoteHaltedID, Level: agentrunner.LevelInfo}
				if err := f.store.Apply(ctx, &agentrunner.Change{Events: []*agentrunner.Event{ev}}); err != nil {
					t.Fatal(err)
				}
			}
			for !strings.Contains(stdout.String(), "step.two") {
				select {
				case code := <-done:
					t.Fatalf("events --follow exited %d before it was interrupted; stderr:\n%s", code, stderr.String())
				case <-ctx.Done():
					t.Fatalf("the events did not arrive within 20s; stdout:\n%s", stdout.String())
				case <-time.After(10 * time.Millisecond):
				}
			}
			cancel()
			if code := <-done; code != exitOK {
				t.Errorf("exit %d after the interrupt, want 0; stderr:\n%s", code, stderr.String())
			}
			lines := strings.Split(strings.TrimSpace(stdout.String()), "\n")
			if asJSON {
				var ids []int64
				for _, l := range lines {
					var e arhttp.Event
					if err := json.Unmarshal([]byte(l), &e); err != nil {
						t.Fatalf("line %q is not an event's JSON: %v", l, err)
					}
					ids = append(ids, e.ID)
				}
				if diff := cmp.Diff([]int64{5, 6}, ids); diff != "" {
					t.Errorf("streamed ids (-want +got):\n%s", diff)
				}
				return
			}
			want := []string{
				`ID\s+TIME\s+LEVEL\s+TYPE\s+CYCLE\s+STEP\s+AGENT\s+DETAILS`,
				`5\s+2026-03-14T09:26:53Z\s+info\s+step.one\s+` + remoteHaltedID + `\s+-\s+-\s+-`,
				`6\s+2026-03-14T09:26:53Z\s+info\s+step.two\s+` + remoteHaltedID + `\s+-\s+-\s+-`,
			}
			if len(lines) != len(want) {
				t.Fatalf("%d lines, want %d:\n%s", len(lines), len(want), stdout.String())
			}
			for i, l := range lines {
				if !regexp.MustCompile(`^` + want[i] + `$`).MatchString(l) {
					t.Errorf("line %d %q does not match %s", i, l, want[i])
				}
			}
			remoteAligned(t, stdout.String(), "TYPE", "6", "step.two")
		})
	}
}
