package http_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentrunner/agentrunner"
	"github.com/agentrunner/agentrunner/config"
	arhttp "github.com/agentrunner/agentrunner/http"
	"github.com/agentrunner/agentrunner/internal/clocktest"
	"github.com/agentrunner/agentrunner/sqlite"
	"github.com/agentrunner/agentrunner/step/execution"
	"github.com/agentrunner/agentrunner/webhook"
	"github.com/google/go-cmp/cmp"
)

// now is the fake clock's time in every test.
var now = time.Date(2026, 3, 14, 9, 26, 53, 0, time.UTC)

// testConfig is what the server reads of a configuration: the pipeline's
// name and its schedule (every 6h, never sooner than 1h).
func testConfig() *config.Config {
	return &config.Config{
		Name: "crypton",
		Schedule: config.Schedule{
			Every:    config.Duration(6 * time.Hour),
			MinCycle: config.Duration(time.Hour),
			MaxCycle: config.Duration(24 * time.Hour),
		},
	}
}

// newServer returns a server with opts, without credentials (loopback).
func newServer(t testing.TB, opts arhttp.Options) *arhttp.Server {
	t.Helper()
	srv, err := arhttp.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	return srv
}

func openStore(t testing.TB) *sqlite.Store {
	t.Helper()
	store, err := sqlite.Open(t.Context(), filepath.Join(t.TempDir(), "state.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	return store
}

// localRequest is httptest.NewRequest as the CLI sends it to a server on
// loopback: addressed to 127.0.0.1, with a body declared JSON.
func localRequest(method, target string, body io.Reader) *http.Request {
	req := httptest.NewRequest(method, target, body)
	req.Host = "127.0.0.1"
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	return req
}

// get serves one GET through the server's handler and returns the status,
// the Content-Type and the body decoded as JSON.
func get(t *testing.T, h http.Handler, path string) (int, string, any) {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, localRequest(http.MethodGet, path, nil))
	var body any
	if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil {
		t.Fatalf("GET %s: body is not JSON: %v\n%s", path, err, rec.Body)
	}
	return rec.Code, rec.Header().Get("Content-Type"), body
}

// decode decodes a JSON literal of the expected body.
func decode(t testing.TB, s string) any {
	t.Helper()
	var v any
	if err := json.Unmarshal([]byte(s), &v); err != nil {
		t.Fatalf("bad expectation %s: %v", s, err)
	}
	return v
}

func running(id, step, lastCompleted string, started time.Time) *agentrunner.Cycle {
	return &agentrunner.Cycle{
		ID: id, Pipeline: "crypton", Status: agentrunner.CycleRunning, Step: step,
		LastCompletedStep: lastCompleted, Dir: "/artifacts/cycles/" + id, StartedAt: started,
	}
}

func TestStatus(t *testing.T) {
	started := now.Add(-2 * time.Hour)
	ended := now.Add(-time.Hour)
	tests := []struct {
		name string
		// changes are applied to the store in order before the request.
		changes []*agentrunner.Change
		want    string
	}{
		{
			name: "no cycle yet",
			want: `{"pipeline": "crypton", "current_state": "Idle", "current_cycle_id": "", "last_completed_step": "",
				"next_scheduled_time": "2026-03-14T09:26:53Z",
				"schedules": [{"pipeline": "crypton", "schedule": "every 6h0m0s", "next_fire_time": "2026-03-14T09:26:53Z", "overlap": "queue", "catch_up": "one"}], "last_cycle": null, "paused": false}`,
		},
		{
			name:    "paused by an operator",
			changes: []*agentrunner.Change{{Control: &agentrunner.Control{Paused: true, PausedBy: "alice", PausedAt: ended}}},
			want: `{"pipeline": "crypton", "current_state": "Idle", "current_cycle_id": "", "last_completed_step": "",
				"next_scheduled_time": "2026-03-14T09:26:53Z",
				"schedules": [{"pipeline": "crypton", "schedule": "every 6h0m0s", "next_fire_time": "2026-03-14T09:26:53Z", "overlap": "queue", "catch_up": "one"}], "last_cycle": null,
				"paused": true, "paused_by": "alice", "paused_at": "2026-03-14T08:26:53Z"}`,
		},
		{
			name: "a cycle running",
			changes: []*agentrunner.Change{
				{From: agentrunner.StateIdle, Cycle: running("20260314_072653", "research", "plan", started)},
			},
			want: `{"pipeline": "crypton", "current_state": "research", "current_cycle_id": "20260314_072653",
				"last_completed_step": "plan", "next_scheduled_time": "2026-03-14T13:26:53Z",
				"schedules": [{"pipeline": "crypton", "schedule": "every 6h0m0s", "next_fire_time": "2026-03-14T13:26:53Z", "overlap": "queue", "catch_up": "one"}],
				"last_cycle": {"id": "20260314_072653", "status": "running", "started_at": "2026-03-14T07:26:53Z", "ended_at": null}, "paused": false}`,
		},
		{
			name: "the cycle completed",
			changes: []*agentrunner.Change{
				{From: agentrunner.StateIdle, Cycle: running("20260314_072653", "evaluate", "execute", started)},
				{From: "evaluate", Cycle: &agentrunner.Cycle{
					ID: "20260314_072653", Pipeline: "crypton", Status: agentrunner.CycleCompleted,
					LastCompletedStep: "evaluate", StartedAt: started, EndedAt: ended,
				}},
			},
			want: `{"pipeline": "crypton", "current_state": "WaitingForNextCycle", "current_cycle_id": "20260314_072653",
				"last_completed_step": "evaluate", "next_scheduled_time": "2026-03-14T13:26:53Z",
				"schedules": [{"pipeline": "crypton", "schedule": "every 6h0m0s", "next_fire_time": "2026-03-14T13:26:53Z", "overlap": "queue", "catch_up": "one"}],
				"last_cycle": {"id": "20260314_072653", "status": "completed", "started_at": "2026-03-14T07:26:53Z",
					"ended_at": "2026-03-14T08:26:53Z"}, "paused": false}`,
		},
		{
			name: "the cycle failed",
			changes: []*agentrunner.Change{
				{From: agentrunner.StateIdle, Cycle: running("20260314_072653", "execute", "synthesize", started)},
				{From: "execute", Cycle: &agentrunner.Cycle{
					ID: "20260314_072653", Pipeline: "crypton", Status: agentrunner.CycleFailed,
					LastCompletedStep: "synthesize", StartedAt: started, EndedAt: ended,
					Error: "step execute failed after 4 attempt(s)",
				}},
			},
			want: `{"pipeline": "crypton", "current_state": "WaitingForNextCycle", "current_cycle_id": "20260314_072653",
				"last_completed_step": "synthesize", "next_scheduled_time": "2026-03-14T13:26:53Z",
				"schedules": [{"pipeline": "crypton", "schedule": "every 6h0m0s", "next_fire_time": "2026-03-14T13:26:53Z", "overlap": "queue", "catch_up": "one"}],
				"last_cycle": {"id": "20260314_072653", "status": "failed", "started_at": "2026-03-14T07:26:53Z",
					"ended_at": "2026-03-14T08:26:53Z", "error": "step execute failed after 4 attempt(s)"}, "paused": false}`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			store := openStore(t)
			for _, ch := range tt.changes {
				if err := store.Apply(t.Context(), ch); err != nil {
					t.Fatal(err)
				}
			}
			srv := newServer(t, arhttp.Options{Store: store, Config: testConfig(), Clock: clocktest.New(now), Logger: slog.New(slog.DiscardHandler)})
			code, contentType, body := get(t, srv.Handler(), "/api/status")
			if code != http.StatusOK || contentType != "application/json" {
				t.Errorf("GET /api/status: %d %s, want 200 application/json", code, contentType)
			}
			if diff := cmp.Diff(decode(t, tt.want), body); diff != "" {
				t.Errorf("GET /api/status (-want +got):\n%s", diff)
			}
		})
	}
}

func TestHealthLive(t *testing.T) {
	srv := newServer(t, arhttp.Options{Store: failingStore{errors.New("the store is not needed")}, Config: testConfig(), Clock: clocktest.New(now), Logger: slog.New(slog.DiscardHandler)})
	code, contentType, body := get(t, srv.Handler(), "/health/live")
	if code != http.StatusOK || contentType != "application/json" {
		t.Errorf("GET /health/live: %d %s, want 200 application/json", code, contentType)
	}
	if diff := cmp.Diff(decode(t, `{"status": "ok"}`), body); diff != "" {
		t.Errorf("GET /health/live (-want +got):\n%s", diff)
	}
}

func TestUnknownRouteIsNotFound(t *testing.T) {
	srv := newServer(t, arhttp.Options{Store: openStore(t), Config: testConfig(), Clock: clocktest.New(now), Logger: slog.New(slog.DiscardHandler)})
	for _, path := range []string{"/", "/api/statuses", "/api/status/extra", "/health"} {
		code, contentType, body := get(t, srv.Handler(), path)
		if code != http.StatusNotFound || contentType != "application/json" {
			t.Errorf("GET %s: %d %s, want 404 application/json", path, code, contentType)
		}
		want := `{"error": {"code": "not_found", "message": "no route GET ` + path + `"}}`
		if diff := cmp.Diff(decode(t, want), body); diff != "" {
			t.Errorf("GET %s (-want +got):\n%s", path, diff)
		}
	}
}

// failingStore is a Store whose every method fails with err.
type failingStore struct{ err error }

func (s failingStore) Apply(context.Context, *agentrunner.Change) error { return s.err }
func (s failingStore) Cycle(context.Context, string) (*agentrunner.Cycle, error) {
	return nil, s.err
}
func (s failingStore) UnfinishedCycle(context.Context, string) (*agentrunner.Cycle, error) {
	return nil, s.err
}
func (s failingStore) ApplyAll(context.Context, ...*agentrunner.Change) error { return s.err }
func (s failingStore) ApplyGroup(context.Context, ...*agentrunner.Change) ([]error, error) {
	return nil, s.err
}
func (s failingStore) Run(context.Context, string) (*agentrunner.Run, error) {
	return nil, s.err
}
func (s failingStore) Runs(context.Context, agentrunner.RunFilter) ([]*agentrunner.Run, error) {
	return nil, s.err
}
func (s failingStore) StepRuns(context.Context, agentrunner.StepRunFilter) ([]*agentrunner.StepRun, error) {
	return nil, s.err
}
func (s failingStore) RunCounts(context.Context) (agentrunner.RunCounts, error) {
	return agentrunner.RunCounts{}, s.err
}
func (s failingStore) Cycles(context.Context, agentrunner.CycleFilter) ([]*agentrunner.Cycle, error) {
	return nil, s.err
}
func (s failingStore) Attempts(context.Context, string) ([]*agentrunner.Attempt, error) {
	return nil, s.err
}
func (s failingStore) Events(context.Context, agentrunner.EventFilter) ([]*agentrunner.Event, error) {
	return nil, s.err
}
func (s failingStore) OutboxMessage(context.Context, string) (*agentrunner.OutboxMessage, error) {
	return nil, s.err
}
func (s failingStore) RecordOutboxFailure(context.Context, string, string, time.Time) error {
	return s.err
}
func (s failingStore) Outbox(context.Context, agentrunner.OutboxFilter) ([]*agentrunner.OutboxMessage, error) {
	return nil, s.err
}
func (s failingStore) AddCommand(context.Context, *agentrunner.Command) error { return s.err }
func (s failingStore) PendingCommands(context.Context) ([]*agentrunner.Command, error) {
	return nil, s.err
}
func (s failingStore) Commands(context.Context, agentrunner.CommandFilter) ([]*agentrunner.Command, error) {
	return nil, s.err
}
func (s failingStore) Control(context.Context) (*agentrunner.Control, error) { return nil, s.err }
func (s failingStore) PruneEvents(context.Context, time.Time) (int64, error) { return 0, s.err }
func (s failingStore) PruneFiles(context.Context, time.Time, ...agentrunner.FileKind) (int64, error) {
	return 0, s.err
}
func (s failingStore) ToolUsage(context.Context, time.Time) ([]*agentrunner.ToolUsage, error) {
	return nil, s.err
}
func (s failingStore) Files(context.Context, agentrunner.FileFilter) ([]*agentrunner.StoredFile, error) {
	return nil, s.err
}
func (s failingStore) Mailbox(context.Context, string) ([][]byte, error) { return nil, s.err }
func (s failingStore) Close() error                                      { return nil }
func (s failingStore) PutCapsule(context.Context, *agentrunner.Capsule, bool) (*agentrunner.Capsule, error) {
	return nil, s.err
}
func (s failingStore) CapsuleByName(context.Context, string, string) (*agentrunner.Capsule, error) {
	return nil, s.err
}
func (s failingStore) CapsuleByID(context.Context, int64) (*agentrunner.Capsule, error) {
	return nil, s.err
}
func (s failingStore) UpdateCapsule(context.Context, *agentrunner.Capsule, int) (*agentrunner.Capsule, error) {
	return nil, s.err
}
func (s failingStore) DeleteCapsule(context.Context, int64, time.Time) error { return s.err }
func (s failingStore) Capsules(context.Context, agentrunner.CapsuleFilter) ([]*agentrunner.Capsule, error) {
	return nil, s.err
}
func (s failingStore) SearchCapsules(context.Context, string, agentrunner.CapsuleFilter) ([]*agentrunner.CapsuleHit, error) {
	return nil, s.err
}
func (s failingStore) CapsuleInventory(context.Context) ([]agentrunner.CapsuleCount, error) {
	return nil, s.err
}
func (s failingStore) UpdateCapsules(context.Context, agentrunner.CapsuleFilter, agentrunner.CapsuleChanges, time.Time) (int, error) {
	return 0, s.err
}
func (s failingStore) DeleteCapsules(context.Context, agentrunner.CapsuleFilter, time.Time) (int, error) {
	return 0, s.err
}
func (s failingStore) AppendMemory(context.Context, *agentrunner.MemoryEntry) (*agentrunner.MemoryEntry, error) {
	return nil, s.err
}
func (s failingStore) MemoryEntries(context.Context, string, int64, int) ([]*agentrunner.MemoryEntry, error) {
	return nil, s.err
}
func (s failingStore) SearchMemory(context.Context, string, []string, int) ([]*agentrunner.MemoryHit, error) {
	return nil, s.err
}
func (s failingStore) WriteTodos(context.Context, *agentrunner.TodoList, int) (*agentrunner.TodoList, error) {
	return nil, s.err
}
func (s failingStore) Todos(context.Context, string, int) (*agentrunner.TodoList, error) {
	return nil, s.err
}
func (s failingStore) TodoHistory(context.Context, string) ([]*agentrunner.TodoList, error) {
	return nil, s.err
}

func (s failingStore) SaveConversation(context.Context, *agentrunner.Conversation) error {
	return s.err
}
func (s failingStore) Conversation(context.Context, string, string, int) (*agentrunner.Conversation, error) {
	return nil, s.err
}
func (s failingStore) EndSession(context.Context, string, time.Time, time.Time) error { return s.err }
func (s failingStore) SessionEnded(context.Context, string) (bool, error)             { return false, s.err }

var _ agentrunner.Store = failingStore{}

func TestStoreFailures(t *testing.T) {
	const secret = "/var/lib/agentrunner/state.db"
	tests := []struct {
		name string
		err  error
		code int
		want string
		// logged: the error is logged, with its detail, for the operator.
		logged bool
	}{
		{
			name: "an error without a code is internal",
			err:  errors.New("query cycles in " + secret + ": disk I/O error"),
			code: http.StatusInternalServerError,
			want: `{"error": {"code": "internal", "message": "internal error"}}`, logged: true,
		},
		{
			name: "an internal error keeps its message to itself",
			err:  &agentrunner.Error{Code: agentrunner.EINTERNAL, Message: "corrupt row in " + secret},
			code: http.StatusInternalServerError,
			want: `{"error": {"code": "internal", "message": "internal error"}}`, logged: true,
		},
		{
			name: "an unavailable error is shown",
			err:  agentrunner.Errorf(agentrunner.EUNAVAILABLE, "the state database is busy"),
			code: http.StatusServiceUnavailable,
			want: `{"error": {"code": "unavailable", "message": "the state database is busy"}}`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var logs bytes.Buffer
			log := slog.New(slog.NewTextHandler(&logs, nil))
			srv := newServer(t, arhttp.Options{Store: failingStore{tt.err}, Config: testConfig(), Clock: clocktest.New(now), Logger: log})
			rec := httptest.NewRecorder()
			srv.Handler().ServeHTTP(rec, localRequest(http.MethodGet, "/api/status", nil))
			if rec.Code != tt.code {
				t.Errorf("status %d, want %d", rec.Code, tt.code)
			}
			if strings.Contains(rec.Body.String(), secret) {
				t.Errorf("the body leaks the internal error:\n%s", rec.Body)
			}
			var body any
			if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil {
				t.Fatalf("body is not JSON: %v\n%s", err, rec.Body)
			}
			if diff := cmp.Diff(decode(t, tt.want), body); diff != "" {
				t.Errorf("body (-want +got):\n%s", diff)
			}
			if got := strings.Contains(logs.String(), secret); got != tt.logged {
				t.Errorf("the error's detail logged = %v, want %v; logs:\n%s", got, tt.logged, logs.String())
			}
		})
	}
}

func TestServeStopsWhenTheContextEnds(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := newServer(t, arhttp.Options{Store: openStore(t), Config: testConfig(), Clock: clocktest.New(now), Logger: slog.New(slog.DiscardHandler)})
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx, ln) }()

	// The listener is open before Serve starts, so the request waits for
	// it rather than failing.
	client := &http.Client{Timeout: 5 * time.Second}
	resp, err := client.Get("http://" + ln.Addr().String() + "/health/live")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), `"ok"`) {
		t.Errorf("GET /health/live: %d %s", resp.StatusCode, body)
	}

	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("Serve returned %v after its context ended, want nil", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Serve did not return within 10s of its context ending")
	}
	if _, err := client.Get("http://" + ln.Addr().String() + "/health/live"); err == nil {
		t.Error("the server still answers after Serve returned")
	}
}

// TestExecutionCallback: a signed, well-formed status report becomes a
// command for the engine and wakes it; anything else is refused with the
// reason and stores nothing.
func TestExecutionCallback(t *testing.T) {
	secret := []byte("callback secret")
	const good = `{"strategy_id":"20260314_060000","status":"error","error":"exchange rejected the order"}`
	tests := []struct {
		name string
		body string
		// sign signs the body; nil sends no signature.
		sign func(body []byte) string
		code int
		want string
	}{
		{
			name: "a signed report is accepted",
			body: good,
			sign: func(b []byte) string { return webhook.Sign(secret, b, now) },
			code: http.StatusAccepted,
			want: `{"accepted": true, "command": 1}`,
		},
		{
			name: "no signature",
			body: good,
			code: http.StatusUnauthorized,
			want: `{"error": {"code": "unauthorized", "message": "the callback's signature does not verify"}}`,
		},
		{
			name: "signed with another secret",
			body: good,
			sign: func(b []byte) string { return webhook.Sign([]byte("guess"), b, now) },
			code: http.StatusUnauthorized,
			want: `{"error": {"code": "unauthorized", "message": "the callback's signature does not verify"}}`,
		},
		{
			name: "a replayed signature older than five minutes",
			body: good,
			sign: func(b []byte) string { return webhook.Sign(secret, b, now.Add(-6*time.Minute)) },
			code: http.StatusUnauthorized,
			want: `{"error": {"code": "unauthorized", "message": "the callback's signature does not verify"}}`,
		},
		{
			name: "an unknown status",
			body: `{"strategy_id":"20260314_060000","status":"done"}`,
			sign: func(b []byte) string { return webhook.Sign(secret, b, now) },
			code: http.StatusBadRequest,
			want: `{"error": {"code": "invalid", "message": "strategy_id is required and status must be acknowledged, executing, completed or error"}}`,
		},
		{
			name: "no strategy",
			body: `{"status":"completed"}`,
			sign: func(b []byte) string { return webhook.Sign(secret, b, now) },
			code: http.StatusBadRequest,
			want: `{"error": {"code": "invalid", "message": "strategy_id is required and status must be acknowledged, executing, completed or error"}}`,
		},
		{
			name: "an unknown field",
			body: `{"strategy_id":"20260314_060000","status":"completed","filled":3}`,
			sign: func(b []byte) string { return webhook.Sign(secret, b, now) },
			code: http.StatusBadRequest,
			want: `{"error": {"code": "invalid", "message": "the body is not a status callback: json: unknown field \"filled\""}}`,
		},
		{
			name: "trailing data after the report",
			body: good + ` {"status": "completed"}`,
			sign: func(b []byte) string { return webhook.Sign(secret, b, now) },
			code: http.StatusBadRequest,
			want: `{"error": {"code": "invalid", "message": "the body holds more than one JSON value"}}`,
		},
		{
			name: "a body over 64 KiB",
			body: `{"strategy_id":"` + strings.Repeat("x", 64<<10) + `","status":"completed"}`,
			sign: func(b []byte) string { return webhook.Sign(secret, b, now) },
			code: http.StatusBadRequest,
			want: `{"error": {"code": "invalid", "message": "the body is unreadable or longer than 65536 bytes"}}`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			store := openStore(t)
			woken := 0
			srv := newServer(t, arhttp.Options{Store: store, Config: testConfig(), Clock: clocktest.New(now), Logger: slog.New(slog.DiscardHandler)}).WithCallback(secret, func() { woken++ })
			req := localRequest(http.MethodPost, "/api/execution/callback", strings.NewReader(tt.body))
			if tt.sign != nil {
				req.Header.Set(webhook.SignatureHeader, tt.sign([]byte(tt.body)))
			}
			rec := httptest.NewRecorder()
			srv.Handler().ServeHTTP(rec, req)
			if rec.Code != tt.code {
				t.Errorf("status %d, want %d", rec.Code, tt.code)
			}
			var body any
			if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil {
				t.Fatalf("body is not JSON: %v\n%s", err, rec.Body)
			}
			if diff := cmp.Diff(decode(t, tt.want), body); diff != "" {
				t.Errorf("body (-want +got):\n%s", diff)
			}
			pending, err := store.PendingCommands(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			if tt.code != http.StatusAccepted {
				if len(pending) != 0 || woken != 0 {
					t.Errorf("a refused callback stored %d commands and woke the engine %d times", len(pending), woken)
				}
				return
			}
			want := []*agentrunner.Command{{ID: 1, Kind: execution.CommandExecutionStatus, Operator: "execution-service", CreatedAt: now,
				Args: map[string]any{"strategy_id": "20260314_060000", "status": "error", "error": "exchange rejected the order"}}}
			if diff := cmp.Diff(want, pending); diff != "" {
				t.Errorf("stored commands (-want +got):\n%s", diff)
			}
			if woken != 1 {
				t.Errorf("the engine was woken %d times, want 1", woken)
			}
		})
	}
}

// TestWrongMethodIs405WithAllow: a known path asked with a method it does
// not have is answered 405 with the Allow header and the API's error
// body; an unknown path is still a 404; a right method still answers.
// Served on a real listener, as a client sees it.
func TestWrongMethodIs405WithAllow(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := newServer(t, arhttp.Options{Store: openStore(t), Config: testConfig(), Clock: clocktest.New(now), Logger: slog.New(slog.DiscardHandler)})
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	go srv.Serve(ctx, ln)
	base := "http://" + ln.Addr().String()
	tests := []struct {
		name, method, path string
		status             int
		allow, code, says  string
	}{
		{"DELETE of a GET route", http.MethodDelete, "/api/status", 405, "GET, HEAD", agentrunner.EMETHOD, "DELETE is not allowed on /api/status; allowed: GET, HEAD"},
		{"GET of a POST route", http.MethodGet, "/api/admin/reload", 405, "POST", agentrunner.EMETHOD, "GET is not allowed on /api/admin/reload; allowed: POST"},
		{"PUT of a path with GET and POST", http.MethodPut, "/api/backlog", 405, "GET, HEAD, POST", agentrunner.EMETHOD, "PUT is not allowed on /api/backlog; allowed: GET, HEAD, POST"},
		{"unknown path", http.MethodGet, "/api/nothing", 404, "", agentrunner.ENOTFOUND, "no route GET /api/nothing"},
		{"unknown path, other method", http.MethodDelete, "/nothing", 404, "", agentrunner.ENOTFOUND, "no route DELETE /nothing"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req, _ := http.NewRequest(tt.method, base+tt.path, nil)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			var body struct {
				Error struct{ Code, Message string } `json:"error"`
			}
			if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
				t.Fatalf("body: %v", err)
			}
			got := []string{resp.Status, resp.Header.Get("Allow"), body.Error.Code, body.Error.Message}
			want := []string{fmt.Sprintf("%d %s", tt.status, http.StatusText(tt.status)), tt.allow, tt.code, tt.says}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("status, Allow, code, message (-want +got):\n%s", diff)
			}
		})
	}
	resp, err := http.Get(base + "/api/status")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("GET /api/status: %d, want 200", resp.StatusCode)
	}
}
