package http_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentrunner/agentrunner"
	"github.com/agentrunner/agentrunner/config"
	"github.com/agentrunner/agentrunner/engine"
	arhttp "github.com/agentrunner/agentrunner/http"
	"github.com/agentrunner/agentrunner/internal/clocktest"
	"github.com/agentrunner/agentrunner/internal/mailboxtest"
	"github.com/agentrunner/agentrunner/mailbox"
	"github.com/agentrunner/agentrunner/sqlite"
	"github.com/agentrunner/agentrunner/tool"
	"github.com/google/go-cmp/cmp"
)

// Keys of the client tests: a viewer (grafana) and an operator (alice).
const (
	clientViewerKey   = "client-viewer-key-0123456789"
	clientOperatorKey = "client-operator-key-0123456789"
)

// Cycles of the client fixture: one that failed, one running.
const (
	clientFailedID  = "20260314_002653"
	clientRunningID = "20260314_082653"
)

// clientModified is the modification time of the fixture's artifacts.
var clientModified = time.Date(2026, 3, 14, 9, 0, 0, 0, time.UTC)

// clientFixture is the real API server, over HTTP on 127.0.0.1, over a
// real store holding a failed and a running cycle, their attempts and
// events, two artifacts, a mailbox message and tool calls.
type clientFixture struct {
	store *sqlite.Store
	url   string
}

func newClientFixture(t *testing.T) *clientFixture {
	t.Helper()
	cfg := testConfig()
	cfg.Dir = t.TempDir()
	cfg.ArtifactsDir = filepath.Join(cfg.Dir, "artifacts")
	cfg.Agents = map[string]*config.Agent{
		"plan":     {Tools: []string{"web_search"}},
		"research": {Tools: []string{"web_search", "web_fetch"}},
	}
	cfg.Server.MaxBodyBytes = 64 << 10
	cfg.Server.Auth.APIKeys = []config.APIKey{
		{Name: "grafana", KeyEnv: "CLIENT_VIEWER_KEY", Role: config.RoleViewer},
		{Name: "alice", KeyEnv: "CLIENT_OPERATOR_KEY", Role: config.RoleOperator},
	}
	env := map[string]string{"CLIENT_VIEWER_KEY": clientViewerKey, "CLIENT_OPERATOR_KEY": clientOperatorKey}
	auth, err := arhttp.NewAuthenticator(cfg.Server.Auth, cfg.Dir, func(k string) (string, bool) { v, ok := env[k]; return v, ok }, func() time.Time { return now })
	if err != nil {
		t.Fatal(err)
	}
	boxes, err := mailbox.New(filepath.Join(cfg.ArtifactsDir, "mailboxes"), 5)
	if err != nil {
		t.Fatal(err)
	}
	f := &clientFixture{store: openStore(t)}
	mailboxtest.Deposit(t, f.store, boxes, "research", mailbox.Message{ID: "m1", Time: now, From: "plan", Kind: mailbox.Forward, Body: "look at BTC"})
	f.seed(t, cfg)
	srv, err := arhttp.New(arhttp.Options{
		Store: f.store, Config: cfg, Clock: clocktest.New(now), Logger: slog.New(slog.DiscardHandler), Auth: auth, Mailboxes: boxes,
		Tools:     []tool.Spec{{Name: "web_search", Description: "Search the web.", Parameters: json.RawMessage(`{"type":"object"}`)}},
		ToolStats: func() map[string]tool.Stats { return map[string]tool.Stats{"web_search": {BreakerState: "closed"}} },
	})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(srv.Handler())
	t.Cleanup(ts.Close)
	f.url = ts.URL
	return f
}

// seed writes the cycles: events 1 (the failed cycle's) to 6.
func (f *clientFixture) seed(t *testing.T, cfg *config.Config) {
	t.Helper()
	started := now.Add(-time.Hour)
	failed := &agentrunner.Cycle{ID: clientFailedID, Pipeline: "crypton", Status: agentrunner.CycleFailed, LastCompletedStep: "synthesize",
		Dir: filepath.Join(cfg.ArtifactsDir, "cycles", clientFailedID), StartedAt: now.Add(-9 * time.Hour), EndedAt: now.Add(-8 * time.Hour),
		Error: "step execute failed after 4 attempt(s)"}
	cur := running(clientRunningID, "research", "plan", started)
	cur.Dir = filepath.Join(cfg.ArtifactsDir, "cycles", clientRunningID)
	if err := os.MkdirAll(cur.Dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, body := range map[string]string{"plan.md": "# Plan\n", "strategy.json": `{"ok": true}`} {
		path := filepath.Join(cur.Dir, name)
		if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(path, clientModified, clientModified); err != nil {
			t.Fatal(err)
		}
	}
	ev := func(cycle string, min int, typ, step string, level agentrunner.Level, details map[string]any) *agentrunner.Event {
		return &agentrunner.Event{Timestamp: started.Add(time.Duration(min) * time.Minute), Type: typ, Step: step, CycleID: cycle, Level: level, Details: details}
	}
	changes := []*agentrunner.Change{
		{Cycle: failed, Events: []*agentrunner.Event{
			{Timestamp: failed.EndedAt, Type: agentrunner.EventCycleFailed, CycleID: clientFailedID, Level: agentrunner.LevelError, Details: map[string]any{"error": failed.Error}},
		}},
		{Cycle: cur,
			Attempts: []*agentrunner.Attempt{
				{CycleID: cur.ID, Step: "plan", Number: 1, Agent: "plan", Status: agentrunner.AttemptFailed, ErrorClass: agentrunner.ClassTimeout,
					Error: "timed out", StartedAt: started, EndedAt: started.Add(30 * time.Minute)},
				{CycleID: cur.ID, Step: "plan", Number: 2, Agent: "plan", Status: agentrunner.AttemptSucceeded,
					StartedAt: started.Add(35 * time.Minute), EndedAt: started.Add(45 * time.Minute), Usage: agentrunner.Usage{InputTokens: 900, OutputTokens: 300, ToolCalls: 2}},
				{CycleID: cur.ID, Step: "research", Number: 1, Agent: "research", Status: agentrunner.AttemptRunning, StartedAt: started.Add(45 * time.Minute)},
			},
			Events: []*agentrunner.Event{
				ev(cur.ID, 0, agentrunner.EventCycleStarted, "", agentrunner.LevelInfo, nil),
				ev(cur.ID, 30, agentrunner.EventAttemptFailed, "plan", agentrunner.LevelWarn, map[string]any{"error_class": "timeout", "error": "timed out"}),
				ev(cur.ID, 31, "tool.call", "plan", agentrunner.LevelInfo, map[string]any{"tool": "web_search", "is_error": false, "duration_ms": 120}),
				ev(cur.ID, 32, "tool.call", "plan", agentrunner.LevelWarn, map[string]any{"tool": "web_search", "is_error": true, "duration_ms": 80}),
				ev(cur.ID, 45, agentrunner.EventAttemptSucceeded, "plan", agentrunner.LevelInfo, nil),
			},
		},
	}
	for _, ch := range changes {
		if err := f.store.Apply(t.Context(), ch); err != nil {
			t.Fatal(err)
		}
	}
}

// client returns a client of the fixture's server with key.
func (f *clientFixture) client(t *testing.T, key string) *arhttp.Client {
	t.Helper()
	c, err := arhttp.NewClient(f.url, key, nil)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// clientEvents are the fixture's events, by id.
func clientEvents() map[int64]arhttp.Event {
	started := now.Add(-time.Hour)
	at := func(min int) time.Time { return started.Add(time.Duration(min) * time.Minute) }
	return map[int64]arhttp.Event{
		1: {ID: 1, Timestamp: now.Add(-8 * time.Hour), Type: "cycle.failed", CycleID: clientFailedID, Level: agentrunner.LevelError,
			Details: map[string]any{"error": "step execute failed after 4 attempt(s)"}},
		2: {ID: 2, Timestamp: at(0), Type: "cycle.started", CycleID: clientRunningID, Level: agentrunner.LevelInfo},
		3: {ID: 3, Timestamp: at(30), Type: "attempt.failed", Step: "plan", CycleID: clientRunningID, Level: agentrunner.LevelWarn,
			Details: map[string]any{"error_class": "timeout", "error": "timed out"}},
		4: {ID: 4, Timestamp: at(31), Type: "tool.call", Step: "plan", CycleID: clientRunningID, Level: agentrunner.LevelInfo,
			Details: map[string]any{"tool": "web_search", "is_error": false, "duration_ms": float64(120)}},
		5: {ID: 5, Timestamp: at(32), Type: "tool.call", Step: "plan", CycleID: clientRunningID, Level: agentrunner.LevelWarn,
			Details: map[string]any{"tool": "web_search", "is_error": true, "duration_ms": float64(80)}},
		6: {ID: 6, Timestamp: at(45), Type: "attempt.succeeded", Step: "plan", CycleID: clientRunningID, Level: agentrunner.LevelInfo},
	}
}

func clientEventList(ids ...int64) []arhttp.Event {
	all := clientEvents()
	out := []arhttp.Event{}
	for _, id := range ids {
		out = append(out, all[id])
	}
	return out
}

func clientTime(t time.Time) *time.Time { return &t }

func clientSHA(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

var (
	clientFailedCycle = arhttp.Cycle{ID: clientFailedID, Pipeline: "crypton", Status: agentrunner.CycleFailed, LastCompletedStep: "synthesize",
		StartedAt: now.Add(-9 * time.Hour), EndedAt: clientTime(now.Add(-8 * time.Hour)), DurationMS: time.Hour.Milliseconds(),
		Error: "step execute failed after 4 attempt(s)"}
	clientRunningCycle = arhttp.Cycle{ID: clientRunningID, Pipeline: "crypton", Status: agentrunner.CycleRunning, Step: "research",
		LastCompletedStep: "plan", StartedAt: now.Add(-time.Hour), DurationMS: time.Hour.Milliseconds()}
)

// clientCompactJSON compares raw JSON without its white space.
var clientCompactJSON = cmp.Transformer("compact", func(m json.RawMessage) string {
	var b bytes.Buffer
	if err := json.Compact(&b, m); err != nil {
		return "invalid JSON: " + string(m)
	}
	return b.String()
})

// TestClientReads: every read of the client decodes what the real server
// answers, with paging and filters.
func TestClientReads(t *testing.T) {
	f := newClientFixture(t)
	c := f.client(t, clientViewerKey)
	ctx := t.Context()
	started := now.Add(-time.Hour)

	t.Run("status", func(t *testing.T) {
		got, err := c.Status(ctx)
		if err != nil {
			t.Fatal(err)
		}
		want := &engine.Status{Pipeline: "crypton", CurrentState: "research", CurrentCycleID: clientRunningID, LastCompletedStep: "plan",
			NextScheduledTime: started.Add(6 * time.Hour),
			LastCycle:         &engine.CycleSummary{ID: clientRunningID, Status: agentrunner.CycleRunning, StartedAt: started},
			Schedules: []engine.ScheduleStatus{{Pipeline: "crypton", Schedule: "every 6h0m0s", NextFireTime: started.Add(6 * time.Hour),
				Overlap: agentrunner.OverlapQueue, CatchUp: agentrunner.CatchUpOne}}}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("Status (-want +got):\n%s", diff)
		}
	})

	t.Run("cycles", func(t *testing.T) {
		tests := []struct {
			limit  int
			before string
			want   *arhttp.CycleList
		}{
			{0, "", &arhttp.CycleList{Cycles: []arhttp.Cycle{clientRunningCycle, clientFailedCycle}}},
			{1, "", &arhttp.CycleList{Cycles: []arhttp.Cycle{clientRunningCycle}, NextBefore: clientRunningID}},
			{1, clientRunningID, &arhttp.CycleList{Cycles: []arhttp.Cycle{clientFailedCycle}, NextBefore: clientFailedID}},
			{1, clientFailedID, &arhttp.CycleList{Cycles: []arhttp.Cycle{}}},
		}
		for _, tt := range tests {
			got, err := c.Cycles(ctx, tt.limit, tt.before)
			if err != nil {
				t.Fatalf("Cycles(%d, %q): %v", tt.limit, tt.before, err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Cycles(%d, %q) (-want +got):\n%s", tt.limit, tt.before, diff)
			}
		}
	})

	t.Run("cycle", func(t *testing.T) {
		got, err := c.Cycle(ctx, clientRunningID)
		if err != nil {
			t.Fatal(err)
		}
		want := &arhttp.CycleDetail{
			Cycle: clientRunningCycle,
			Steps: []arhttp.Step{
				{Step: "plan", Agent: "plan", Status: "succeeded", DurationMS: (40 * time.Minute).Milliseconds(), Attempts: []arhttp.Attempt{
					{Number: 1, Status: agentrunner.AttemptFailed, ErrorClass: agentrunner.ClassTimeout, Error: "timed out",
						StartedAt: clientTime(started), EndedAt: clientTime(started.Add(30 * time.Minute)), DurationMS: (30 * time.Minute).Milliseconds()},
					{Number: 2, Status: agentrunner.AttemptSucceeded, StartedAt: clientTime(started.Add(35 * time.Minute)),
						EndedAt: clientTime(started.Add(45 * time.Minute)), DurationMS: (10 * time.Minute).Milliseconds(),
						InputTokens: 900, OutputTokens: 300, ToolCalls: 2},
				}},
				{Step: "research", Agent: "research", Status: "running", DurationMS: (15 * time.Minute).Milliseconds(), Attempts: []arhttp.Attempt{
					{Number: 1, Status: agentrunner.AttemptRunning, StartedAt: clientTime(started.Add(45 * time.Minute)), DurationMS: (15 * time.Minute).Milliseconds()},
				}},
			},
			Artifacts: []arhttp.Artifact{
				{Name: "plan.md", Size: 7, SHA256: clientSHA("# Plan\n"), Modified: clientModified},
				{Name: "strategy.json", Size: 12, SHA256: clientSHA(`{"ok": true}`), Modified: clientModified},
			},
			Events: clientEventList(2, 3, 4, 5, 6),
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("Cycle (-want +got):\n%s", diff)
		}
	})

	t.Run("errors", func(t *testing.T) {
		tests := []struct {
			limit  int
			before int64
			want   *arhttp.ErrorList
		}{
			{0, 0, &arhttp.ErrorList{Errors: clientEventList(5, 3, 1)}},
			{2, 0, &arhttp.ErrorList{Errors: clientEventList(5, 3), NextBefore: 3}},
			{2, 3, &arhttp.ErrorList{Errors: clientEventList(1)}},
		}
		for _, tt := range tests {
			got, err := c.Errors(ctx, tt.limit, tt.before)
			if err != nil {
				t.Fatalf("Errors(%d, %d): %v", tt.limit, tt.before, err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Errors(%d, %d) (-want +got):\n%s", tt.limit, tt.before, diff)
			}
		}
	})

	t.Run("events", func(t *testing.T) {
		tests := []struct {
			since  string
			limit  int
			filter arhttp.EventFilter
			want   *arhttp.EventList
		}{
			{"", 0, arhttp.EventFilter{}, &arhttp.EventList{Events: clientEventList(1, 2, 3, 4, 5, 6), NextSince: 6}},
			{"2", 2, arhttp.EventFilter{}, &arhttp.EventList{Events: clientEventList(3, 4), NextSince: 4}},
			{"6", 0, arhttp.EventFilter{}, &arhttp.EventList{Events: []arhttp.Event{}, NextSince: 6}},
			{started.Add(31 * time.Minute).Format(time.RFC3339), 0, arhttp.EventFilter{}, &arhttp.EventList{Events: clientEventList(4, 5, 6), NextSince: 6}},
			{"", 0, arhttp.EventFilter{CycleID: clientRunningID, Type: "tool.call", Level: agentrunner.LevelWarn}, &arhttp.EventList{Events: clientEventList(5), NextSince: 5}},
		}
		for _, tt := range tests {
			got, err := c.Events(ctx, tt.since, tt.limit, tt.filter)
			if err != nil {
				t.Fatalf("Events(%q, %d, %+v): %v", tt.since, tt.limit, tt.filter, err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Events(%q, %d, %+v) (-want +got):\n%s", tt.since, tt.limit, tt.filter, diff)
			}
		}
	})

	t.Run("tools", func(t *testing.T) {
		got, err := c.Tools(ctx)
		if err != nil {
			t.Fatal(err)
		}
		want := []arhttp.Tool{
			{Name: "web_fetch", Agents: []string{"research"}},
			{Name: "web_search", Description: "Search the web.", Parameters: json.RawMessage(`{"type":"object"}`), Agents: []string{"plan", "research"},
				Usage: arhttp.ToolUsage{Calls: 2, Errors: 1, AvgDurationMS: 100, LastCall: clientTime(started.Add(32 * time.Minute))}, Breaker: "closed"},
		}
		if diff := cmp.Diff(want, got, clientCompactJSON); diff != "" {
			t.Errorf("Tools (-want +got):\n%s", diff)
		}
	})

	t.Run("mailbox", func(t *testing.T) {
		got, err := c.Mailbox(ctx, "research")
		if err != nil {
			t.Fatal(err)
		}
		want := &arhttp.Mailbox{Agent: "research", MaxMessages: 5, Messages: []mailbox.Message{{ID: "m1", Time: now, From: "plan", Kind: mailbox.Forward, Body: "look at BTC"}}}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("Mailbox(research) (-want +got):\n%s", diff)
		}
		got, err = c.Mailbox(ctx, "plan")
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(&arhttp.Mailbox{Agent: "plan", MaxMessages: 5, Messages: []mailbox.Message{}}, got); diff != "" {
			t.Errorf("Mailbox(plan) (-want +got):\n%s", diff)
		}
	})
}

// TestClientOverrides: overrides and mailbox posts become commands
// attributed to the key's name, which the audit log lists newest first.
func TestClientOverrides(t *testing.T) {
	f := newClientFixture(t)
	c := f.client(t, clientOperatorKey)
	ctx := t.Context()

	var got []*arhttp.Command
	for _, o := range []struct {
		kind string
		req  arhttp.OverrideRequest
	}{
		{agentrunner.CommandPause, arhttp.OverrideRequest{Reason: "provider outage"}},
		{agentrunner.CommandInject, arhttp.OverrideRequest{Agent: "research", Message: "mind the FOMC minutes", Reason: "news"}},
		{agentrunner.CommandForceCycle, arhttp.OverrideRequest{}},
	} {
		cmd, err := c.Override(ctx, o.kind, o.req)
		if err != nil {
			t.Fatalf("Override(%s): %v", o.kind, err)
		}
		got = append(got, cmd)
	}
	cmd, err := c.PostMailbox(ctx, "plan", "skip ETH today")
	if err != nil {
		t.Fatal(err)
	}
	got = append(got, cmd)

	want := []*arhttp.Command{
		{ID: 1, Kind: "pause", Operator: "alice", Args: map[string]any{"reason": "provider outage"}, CreatedAt: now},
		{ID: 2, Kind: "inject", Operator: "alice", Args: map[string]any{"agent": "research", "message": "mind the FOMC minutes", "reason": "news"}, CreatedAt: now},
		{ID: 3, Kind: "force-cycle", Operator: "alice", CreatedAt: now},
		{ID: 4, Kind: "inject", Operator: "alice", Args: map[string]any{"agent": "plan", "message": "skip ETH today"}, CreatedAt: now},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("commands returned (-want +got):\n%s", diff)
	}

	// The store holds them as returned: the engine will find them.
	stored, err := f.store.Commands(ctx, agentrunner.CommandFilter{})
	if err != nil {
		t.Fatal(err)
	}
	if len(stored) != len(want) {
		t.Fatalf("the store holds %d commands, want %d", len(stored), len(want))
	}
	for i, s := range stored {
		w := want[len(want)-1-i]
		if s.ID != w.ID || s.Kind != w.Kind || s.Operator != w.Operator || !cmp.Equal(s.Args, w.Args) {
			t.Errorf("stored command %d: %+v, want %+v", i, s, w)
		}
	}

	// Consumed commands show their result in the audit log.
	consumed := &agentrunner.Command{ID: 1, ConsumedAt: now.Add(time.Second), Result: "paused"}
	if err := f.store.Apply(ctx, &agentrunner.Change{Consumed: []*agentrunner.Command{consumed}}); err != nil {
		t.Fatal(err)
	}
	want[0].ConsumedAt, want[0].Result = clientTime(now.Add(time.Second)), "paused"
	tests := []struct {
		limit  int
		before int64
		want   *arhttp.CommandList
	}{
		{0, 0, &arhttp.CommandList{Commands: []arhttp.Command{*want[3], *want[2], *want[1], *want[0]}}},
		{3, 0, &arhttp.CommandList{Commands: []arhttp.Command{*want[3], *want[2], *want[1]}, NextBefore: 2}},
		{3, 2, &arhttp.CommandList{Commands: []arhttp.Command{*want[0]}}},
	}
	viewer := f.client(t, clientViewerKey)
	for _, tt := range tests {
		log, err := viewer.Audit(ctx, tt.limit, tt.before)
		if err != nil {
			t.Fatalf("Audit(%d, %d): %v", tt.limit, tt.before, err)
		}
		if diff := cmp.Diff(tt.want, log); diff != "" {
			t.Errorf("Audit(%d, %d) (-want +got):\n%s", tt.limit, tt.before, diff)
		}
	}
}

// TestClientAPIErrors: the server's error answers come back as
// *agentrunner.Error with its code and message, and never hold the key.
func TestClientAPIErrors(t *testing.T) {
	f := newClientFixture(t)
	viewer, operator := f.client(t, clientViewerKey), f.client(t, clientOperatorKey)
	tests := []struct {
		name     string
		call     func(ctx context.Context) error
		code     string
		mentions string
	}{
		{"unknown cycle", func(ctx context.Context) error { _, err := viewer.Cycle(ctx, "20200101_000000"); return err }, agentrunner.ENOTFOUND, "20200101_000000"},
		{"malformed cycle id", func(ctx context.Context) error { _, err := viewer.Cycle(ctx, "yesterday"); return err }, agentrunner.EINVALID, "YYYYMMDD_HHMMSS"},
		// Escaped, the slash stays in the id instead of reaching /api/status.
		{"id with a slash", func(ctx context.Context) error { _, err := viewer.Cycle(ctx, "../status"); return err }, agentrunner.EINVALID, "cycle id"},
		{"dot-dot id", func(ctx context.Context) error { _, err := viewer.Cycle(ctx, ".."); return err }, agentrunner.EINVALID, "path element"},
		{"limit too large", func(ctx context.Context) error { _, err := viewer.Cycles(ctx, 100000, ""); return err }, agentrunner.EINVALID, "limit"},
		{"bad since", func(ctx context.Context) error {
			_, err := viewer.Events(ctx, "last tuesday", 0, arhttp.EventFilter{})
			return err
		}, agentrunner.EINVALID, "since"},
		{"bad level", func(ctx context.Context) error {
			_, err := viewer.Events(ctx, "", 0, arhttp.EventFilter{Level: "loud"})
			return err
		}, agentrunner.EINVALID, "level"},
		{"no key", func(ctx context.Context) error { _, err := f.client(t, "").Status(ctx); return err }, agentrunner.EUNAUTHORIZED, "missing credentials"},
		{"wrong key", func(ctx context.Context) error {
			_, err := f.client(t, "not-a-key-of-this-server").Status(ctx)
			return err
		}, agentrunner.EUNAUTHORIZED, "unknown API key"},
		{"viewer override", func(ctx context.Context) error {
			_, err := viewer.Override(ctx, agentrunner.CommandPause, arhttp.OverrideRequest{Reason: "x"})
			return err
		}, agentrunner.EFORBIDDEN, "operator"},
		{"viewer mailbox post", func(ctx context.Context) error { _, err := viewer.PostMailbox(ctx, "plan", "hi"); return err }, agentrunner.EFORBIDDEN, "operator"},
		{"unknown override", func(ctx context.Context) error {
			_, err := operator.Override(ctx, "reboot", arhttp.OverrideRequest{})
			return err
		}, agentrunner.ENOTFOUND, "reboot"},
		{"inject to an unknown agent", func(ctx context.Context) error {
			_, err := operator.Override(ctx, agentrunner.CommandInject, arhttp.OverrideRequest{Agent: "ghost", Message: "boo"})
			return err
		}, agentrunner.EINVALID, "ghost"},
		{"inject without a message", func(ctx context.Context) error {
			_, err := operator.Override(ctx, agentrunner.CommandInject, arhttp.OverrideRequest{Agent: "plan"})
			return err
		}, agentrunner.EINVALID, "message"},
		{"mailbox of an unknown agent", func(ctx context.Context) error { _, err := viewer.Mailbox(ctx, "ghost"); return err }, agentrunner.ENOTFOUND, "ghost"},
		{"stream with a bad filter", func(ctx context.Context) error {
			return viewer.Stream(ctx, "", arhttp.EventFilter{CycleID: "../today"}, func(arhttp.Event) error { return nil })
		}, agentrunner.EINVALID, "cycle_id"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.call(t.Context())
			var e *agentrunner.Error
			if !errors.As(err, &e) {
				t.Fatalf("error %v (%T), want an *agentrunner.Error", err, err)
			}
			if e.Code != tt.code || !strings.Contains(e.Message, tt.mentions) {
				t.Errorf("error %s %q, want %s mentioning %q", e.Code, e.Message, tt.code, tt.mentions)
			}
			if e.Err != nil && tt.code != agentrunner.EINVALID {
				t.Errorf("error %v has a cause; the API's errors have none", err)
			}
			for _, key := range []string{clientViewerKey, clientOperatorKey} {
				if strings.Contains(err.Error(), key) {
					t.Errorf("the error holds an API key: %v", err)
				}
			}
		})
	}
	// None of the refused overrides reached the store.
	if cmds, err := f.store.Commands(t.Context(), agentrunner.CommandFilter{}); err != nil || len(cmds) != 0 {
		t.Errorf("the store holds %d commands (%v), want none", len(cmds), err)
	}
}

// clientFake serves h on 127.0.0.1 and returns a client of it with key.
func clientFake(t *testing.T, key string, h http.HandlerFunc) *arhttp.Client {
	t.Helper()
	ts := httptest.NewServer(h)
	t.Cleanup(ts.Close)
	c, err := arhttp.NewClient(ts.URL, key, nil)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestClientUnexpectedAnswers: answers that are not the API's (proxies,
// other servers, a dead port) become clear errors with a code.
func TestClientUnexpectedAnswers(t *testing.T) {
	const key = "fake-key-0123456789abcdef"
	tests := []struct {
		name     string
		handler  http.HandlerFunc
		code     string
		mentions []string
		// fromAPI: the answer has the API's error shape, so its error has
		// no cause; the others' cause is ErrUnexpectedAnswer.
		fromAPI bool
	}{
		{"proxy without upstream", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/html")
			w.WriteHeader(http.StatusBadGateway)
			io.WriteString(w, "<html><body>\n<h1>502 Bad Gateway</h1>\n</body></html>")
		}, agentrunner.EUNAVAILABLE, []string{"502 Bad Gateway", "text/html", "<h1>502 Bad Gateway</h1>"}, false},
		{"plain 500", func(w http.ResponseWriter, r *http.Request) {
			http.Error(w, "boom", http.StatusInternalServerError)
		}, agentrunner.EINTERNAL, []string{"500 Internal Server Error", "boom"}, false},
		{"rate limited without a body", func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(http.StatusTooManyRequests)
		}, agentrunner.EUNAVAILABLE, []string{"429 Too Many Requests", "not an answer of the agentrunner API"}, false},
		{"JSON error with an unknown code", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusTeapot)
			io.WriteString(w, `{"error": {"code": "teapot", "message": "short and stout"}}`)
		}, agentrunner.EINTERNAL, []string{"418"}, false},
		{"an error echoing the key", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusUnauthorized)
			fmt.Fprintf(w, `{"error": {"code": "unauthorized", "message": "you sent %s"}}`, r.Header.Get("Authorization"))
		}, agentrunner.EUNAUTHORIZED, []string{"you sent Bearer [redacted]"}, true},
		{"a web page instead of JSON", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/html")
			io.WriteString(w, "<html>login</html>")
		}, agentrunner.EINTERNAL, []string{"text/html", "not JSON", "not an answer of the agentrunner API"}, false},
		{"malformed JSON", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			io.WriteString(w, `{"pipeline": `)
		}, agentrunner.EINTERNAL, []string{"does not decode"}, false},
		{"redirect", func(w http.ResponseWriter, r *http.Request) {
			http.Redirect(w, r, "https://runner.example/api/status", http.StatusFound)
		}, agentrunner.EINTERNAL, []string{"302", "redirecting to https://runner.example/api/status"}, false},
		{"an answer too long", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			io.WriteString(w, `{"pipeline": "`)
			chunk := strings.Repeat("x", 1<<20)
			for range 17 {
				if _, err := io.WriteString(w, chunk); err != nil {
					return
				}
			}
			io.WriteString(w, `"}`)
		}, agentrunner.EINTERNAL, []string{"longer than"}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var auth string
			c := clientFake(t, key, func(w http.ResponseWriter, r *http.Request) {
				auth = r.Header.Get("Authorization")
				tt.handler(w, r)
			})
			_, err := c.Status(t.Context())
			if code := agentrunner.ErrorCode(err); code != tt.code {
				t.Errorf("code %q (%v), want %q", code, err, tt.code)
			}
			for _, m := range tt.mentions {
				if err == nil || !strings.Contains(err.Error(), m) {
					t.Errorf("error %v does not mention %q", err, m)
				}
			}
			if err != nil && strings.Contains(err.Error(), key) {
				t.Errorf("the error holds the key: %v", err)
			}
			if errors.Is(err, arhttp.ErrUnexpectedAnswer) == tt.fromAPI {
				t.Errorf("error %v: errors.Is(ErrUnexpectedAnswer) = %v, want %v", err, !tt.fromAPI, !tt.fromAPI)
			}
			if auth != "Bearer "+key {
				t.Errorf("Authorization %q, want the bearer key", auth)
			}
		})
	}

	t.Run("nobody listening", func(t *testing.T) {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		url := "http://" + ln.Addr().String()
		ln.Close()
		c, err := arhttp.NewClient(url, key, nil)
		if err != nil {
			t.Fatal(err)
		}
		_, err = c.Status(t.Context())
		if agentrunner.ErrorCode(err) != agentrunner.EUNAVAILABLE || !strings.Contains(err.Error(), "cannot reach the agentrunner server at "+url) {
			t.Errorf("error %v, want unavailable naming %s", err, url)
		}
	})

	t.Run("no answer in time", func(t *testing.T) {
		done := make(chan struct{})
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			select {
			case <-r.Context().Done():
			case <-done:
			}
		}))
		defer srv.Close()
		defer close(done)
		c, err := arhttp.NewClient(srv.URL, key, &http.Client{Timeout: time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		_, err = c.Status(t.Context())
		if agentrunner.ErrorCode(err) != agentrunner.EUNAVAILABLE || !strings.Contains(err.Error(), "the agentrunner server at "+srv.URL+" did not answer in time") {
			t.Errorf("error %v, want unavailable saying %s did not answer in time", err, srv.URL)
		}
	})

	t.Run("canceled", func(t *testing.T) {
		c := clientFake(t, key, func(w http.ResponseWriter, r *http.Request) { <-r.Context().Done() })
		ctx, cancel := context.WithCancel(t.Context())
		cancel()
		_, err := c.Status(ctx)
		if !errors.Is(err, context.Canceled) || agentrunner.ErrorCode(err) != agentrunner.EUNAVAILABLE {
			t.Errorf("error %v, want unavailable wrapping context.Canceled", err)
		}
	})
}

// TestClientPathPrefix: a server behind a proxy path is reached under it.
func TestClientPathPrefix(t *testing.T) {
	var path string
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		path = r.URL.EscapedPath() + "?" + r.URL.RawQuery
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"cycles": []}`)
	}))
	defer ts.Close()
	c, err := arhttp.NewClient(ts.URL+"/runner/", "", nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Cycles(t.Context(), 5, clientRunningID); err != nil {
		t.Fatal(err)
	}
	if want := "/runner/api/cycles?before=" + clientRunningID + "&limit=5"; path != want {
		t.Errorf("request %s, want %s", path, want)
	}
	c.Mailbox(t.Context(), "a b/c")
	if want := "/runner/api/mailboxes/a%20b%2Fc?"; path != want {
		t.Errorf("request %s, want %s: the agent escaped in one segment", path, want)
	}
}

func TestNewClientRefusesBadInput(t *testing.T) {
	tests := []struct {
		name, url, key, mentions string
	}{
		{"not a URL", "http://[::1", "", "not a URL"},
		{"no scheme", "127.0.0.1:8080", "", "http:// or https://"},
		{"host as scheme", "localhost:8080", "", "http:// or https://"},
		{"ftp", "ftp://runner.example", "", "http:// or https://"},
		{"no host", "http:///api", "", "no host"},
		{"credentials", "https://admin:hunter2hunter2@runner.example", "", "must not carry credentials"},
		{"query", "https://runner.example/?x=1", "", "query"},
		{"fragment", "https://runner.example/#top", "", "fragment"},
		{"bad port", "http://127.0.0.1:99999", "", "port"},
		{"key with a space", "http://127.0.0.1:8080", "my secret key 123456", "space"},
		{"key with a newline", "http://127.0.0.1:8080", "secret\r\nX-Evil: 1", "control"},
		{"key too long", "http://127.0.0.1:8080", strings.Repeat("k", arhttp.MaxCredentialBytes+1), "longer than"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := arhttp.NewClient(tt.url, tt.key, nil)
			if agentrunner.ErrorCode(err) != agentrunner.EINVALID || !strings.Contains(err.Error(), tt.mentions) {
				t.Fatalf("error %v, want invalid mentioning %q", err, tt.mentions)
			}
			if strings.Contains(err.Error(), "hunter2") || (tt.key != "" && strings.Contains(err.Error(), tt.key)) {
				t.Errorf("the error holds a secret: %v", err)
			}
		})
	}
	if _, err := arhttp.NewClient("https://runner.example/agentrunner", "a-good-key-0123456789", nil); err != nil {
		t.Errorf("a good URL and key: %v", err)
	}
}

// TestClientStream: events committed while the client is connected reach
// it in order; ending the context ends the stream with the context's
// error, and the callback's error ends it too.
func TestClientStream(t *testing.T) {
	f := newClientFixture(t)
	c := f.client(t, clientViewerKey)
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	got := make(chan arhttp.Event, 10)
	done := make(chan error, 1)
	// From event 6 on, so the test does not depend on when the stream
	// connects relative to the appends below.
	go func() {
		done <- c.Stream(ctx, "6", arhttp.EventFilter{}, func(e arhttp.Event) error { got <- e; return nil })
	}()
	for i, typ := range []string{"step.one", "step.two"} {
		ev := &agentrunner.Event{Timestamp: now.Add(time.Duration(i) * time.Second), Type: typ, CycleID: clientRunningID, Level: agentrunner.LevelInfo,
			Details: map[string]any{"n": i}}
		if err := f.store.Apply(ctx, &agentrunner.Change{Events: []*agentrunner.Event{ev}}); err != nil {
			t.Fatal(err)
		}
	}
	want := []arhttp.Event{
		{ID: 7, Timestamp: now, Type: "step.one", CycleID: clientRunningID, Level: agentrunner.LevelInfo, Details: map[string]any{"n": float64(0)}},
		{ID: 8, Timestamp: now.Add(time.Second), Type: "step.two", CycleID: clientRunningID, Level: agentrunner.LevelInfo, Details: map[string]any{"n": float64(1)}},
	}
	for _, w := range want {
		select {
		case e := <-got:
			if diff := cmp.Diff(w, e); diff != "" {
				t.Errorf("streamed event (-want +got):\n%s", diff)
			}
		case err := <-done:
			t.Fatalf("the stream ended early: %v", err)
		case <-ctx.Done():
			t.Fatal("no event within 20s")
		}
	}
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Errorf("Stream after cancel: %v, want context.Canceled", err)
	}

	// The callback's error ends the stream and comes back as is.
	stop := errors.New("seen enough")
	err := c.Stream(t.Context(), "1", arhttp.EventFilter{Level: agentrunner.LevelWarn}, func(e arhttp.Event) error {
		if e.ID != 3 {
			t.Errorf("first warning streamed after 1: event %d, want 3", e.ID)
		}
		return stop
	})
	if !errors.Is(err, stop) {
		t.Errorf("Stream with a failing callback: %v, want its error", err)
	}
}

// TestClientStreamParsing: the SSE reader takes the wire format's
// variants (comments, retry, several data lines, CRLF) and reports a
// stream that ends with the last event it got.
func TestClientStreamParsing(t *testing.T) {
	const body = "retry: 2000\r\n\r\n" +
		": keep-alive\n\n" +
		"id: 4\nevent: a.b\ndata: {\"id\": 4, \"event_type\": \"a.b\",\n" +
		"data:\"level\": \"info\", \"timestamp\": \"2026-03-14T09:26:53Z\"}\n\n" +
		"event: empty\n\n" +
		"id: 5\r\nevent: c.d\r\ndata: {\"id\": 5, \"event_type\": \"c.d\", \"level\": \"warn\", \"timestamp\": \"2026-03-14T09:26:54Z\"}\r\n\r\n" +
		"unknown: field\n\n"
	var query string
	c := clientFake(t, "", func(w http.ResponseWriter, r *http.Request) {
		query = r.URL.RawQuery
		if r.Header.Get("Accept") != "text/event-stream" {
			t.Errorf("Accept %q", r.Header.Get("Accept"))
		}
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, body)
	})
	var got []arhttp.Event
	err := c.Stream(t.Context(), "3", arhttp.EventFilter{Type: "a.b"}, func(e arhttp.Event) error { got = append(got, e); return nil })
	want := []arhttp.Event{
		{ID: 4, Timestamp: now, Type: "a.b", Level: agentrunner.LevelInfo},
		{ID: 5, Timestamp: now.Add(time.Second), Type: "c.d", Level: agentrunner.LevelWarn},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
	if agentrunner.ErrorCode(err) != agentrunner.EUNAVAILABLE || !strings.Contains(err.Error(), "ended the event stream after event 5") {
		t.Errorf("error %v, want unavailable: ended after event 5", err)
	}
	if query != "since=3&type=a.b" {
		t.Errorf("query %q", query)
	}

	for _, tt := range []struct {
		name, contentType, body, mentions string
	}{
		{"not an event stream", "application/json", `{"events": []}`, "not an event stream"},
		{"an event that is not JSON", "text/event-stream", "id: 1\ndata: hello\n\n", "does not decode"},
		{"nothing at all", "text/event-stream", "", "before any event"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c := clientFake(t, "", func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", tt.contentType)
				io.WriteString(w, tt.body)
			})
			err := c.Stream(t.Context(), "", arhttp.EventFilter{}, func(arhttp.Event) error { return nil })
			if err == nil || !strings.Contains(err.Error(), tt.mentions) {
				t.Errorf("error %v, want one mentioning %q", err, tt.mentions)
			}
		})
	}
}

// TestClientToolsFollowsPages: Tools asks for every page, each after the
// last name of the one before, and refuses a cursor that does not move.
func TestClientToolsFollowsPages(t *testing.T) {
	var afters []string
	c := clientFake(t, "", func(w http.ResponseWriter, r *http.Request) {
		after := r.URL.Query().Get("after")
		afters = append(afters, after)
		w.Header().Set("Content-Type", "application/json")
		switch after {
		case "":
			io.WriteString(w, `{"tools": [{"name": "a", "description": "", "agents": [], "usage": {"calls": 1, "errors": 0, "avg_duration_ms": 3}}], "next_after": "a"}`)
		case "a":
			io.WriteString(w, `{"tools": [{"name": "b", "description": "", "agents": [], "usage": {"calls": 0, "errors": 0, "avg_duration_ms": 0}}], "next_after": "a"}`)
		}
	})
	_, err := c.Tools(t.Context())
	if agentrunner.ErrorCode(err) != agentrunner.EINTERNAL || !strings.Contains(err.Error(), "does not move") {
		t.Errorf("a cursor that stays: %v, want an internal error", err)
	}
	afters = nil
	c = clientFake(t, "", func(w http.ResponseWriter, r *http.Request) {
		after := r.URL.Query().Get("after")
		afters = append(afters, after)
		w.Header().Set("Content-Type", "application/json")
		next := map[string]string{"": `, "next_after": "a"`, "a": `, "next_after": "b"`}[after]
		io.WriteString(w, `{"tools": [{"name": "`+map[string]string{"": "a", "a": "b", "b": "c"}[after]+`", "description": "", "agents": [], "usage": {"calls": 0, "errors": 0, "avg_duration_ms": 0}}]`+next+`}`)
	})
	got, err := c.Tools(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tl := range got {
		names = append(names, tl.Name)
	}
	if diff := cmp.Diff([]string{"a", "b", "c"}, names); diff != "" {
		t.Errorf("tools of three pages (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"", "a", "b"}, afters); diff != "" {
		t.Errorf("after of each request (-want +got):\n%s", diff)
	}
}
