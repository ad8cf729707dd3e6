package execution

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentrunner/agentrunner"
	"github.com/agentrunner/agentrunner/artifact"
	"github.com/agentrunner/agentrunner/config"
	"github.com/agentrunner/agentrunner/examples/crypton"
	"github.com/agentrunner/agentrunner/execsvc"
	"github.com/agentrunner/agentrunner/internal/clocktest"
	"github.com/agentrunner/agentrunner/runtime/mock"
	"github.com/agentrunner/agentrunner/sqlite"
	"github.com/agentrunner/agentrunner/workspace"
	"github.com/google/go-cmp/cmp"
)

var t0 = time.Date(2026, 11, 22, 14, 0, 0, 0, time.UTC)

// env is the shipped example workspace with a real store, a mock
// Execution Service on loopback and a run whose directory holds a valid
// strategy.json, valid for 6h from t0.
type env struct {
	ws     *workspace.Workspace
	store  *sqlite.Store
	clock  *clocktest.Clock
	es     *execsvc.Mock
	client *execsvc.Client
	run    *agentrunner.Run
	notes  []string
}

func newEnv(t *testing.T, esOpts execsvc.MockOptions) *env {
	t.Helper()
	dir := t.TempDir()
	if _, err := crypton.Write(dir, true, ""); err != nil {
		t.Fatal(err)
	}
	e := &env{clock: clocktest.New(t0)}
	esOpts.Now = e.clock.Now
	e.es = execsvc.NewMock(esOpts)
	url, err := e.es.Start("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.es.Close() })
	if e.client, err = execsvc.NewClient(url, "", time.Second); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(filepath.Join(dir, config.FileName))
	if err != nil {
		t.Fatal(err)
	}
	cfg.ExecutionService.URL = url
	if e.ws, err = workspace.Load(cfg); err != nil {
		t.Fatal(err)
	}
	if e.store, err = sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "state.db")); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.store.Close() })
	id := "20261122_140000"
	e.run = &agentrunner.Run{ID: id, Pipeline: cfg.Name, Status: agentrunner.RunRunning, Dir: e.ws.Layout.Cycle(id), StartedAt: t0}
	if err := os.MkdirAll(e.run.Dir, 0o755); err != nil {
		t.Fatal(err)
	}
	strategy := mock.Generate(e.ws.Producer("strategy.json").Template, ".json", id, "synthesis", t0)
	if err := os.WriteFile(filepath.Join(e.run.Dir, "strategy.json"), strategy, 0o644); err != nil {
		t.Fatal(err)
	}
	return e
}

func (e *env) kind(t *testing.T) *Kind {
	t.Helper()
	k, err := New(Options{
		Workspace: e.ws, Store: e.store, Service: e.client, Clock: e.clock,
		Deliver: func(_ *agentrunner.StepResult, run *agentrunner.Run, step *config.Step, data []byte, note string) error {
			e.notes = append(e.notes, note)
			return nil
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// attempt is attempt 1 of the execute step of the env's run.
func (e *env) attempt() *agentrunner.StepAttempt {
	s := e.ws.Config.Pipeline.Steps["execute"]
	dir := e.ws.Layout.Attempt(e.run.ID, s.ID, 1)
	return &agentrunner.StepAttempt{
		Run: e.run, Step: &agentrunner.Step{ID: s.ID, Kind: agentrunner.KindExecution, Config: s},
		Attempt: &agentrunner.Attempt{CycleID: e.run.ID, Step: s.ID, Number: 1, Dir: dir},
		Dir:     dir, RunDir: e.run.Dir, Timeout: time.Hour,
	}
}

func (e *env) eventTypes(t *testing.T) []string {
	t.Helper()
	evs, err := e.store.Events(context.Background(), agentrunner.EventFilter{})
	if err != nil {
		t.Fatal(err)
	}
	var types []string
	for _, ev := range evs {
		types = append(types, ev.Type+" "+ev.Details["status"].(string))
	}
	return types
}

func (e *env) posts(path string) int {
	n := 0
	for _, r := range e.es.Requests() {
		if r.Method == "POST" && r.Path == path {
			n++
		}
	}
	return n
}

func statuses(res *agentrunner.StepResult) []string {
	var s []string
	for _, ev := range res.Events {
		s = append(s, ev.Type+" "+ev.Details["status"].(string))
	}
	return s
}

// TestRunHandsOverOnceAndFollows: the strategy is handed over through the
// outbox, its status followed by polls to completion, and the outcome is
// the note of the step's messages; a second attempt (a retry, a restart)
// does not hand it over again but follows the stored receipt.
func TestRunHandsOverOnceAndFollows(t *testing.T) {
	e := newEnv(t, execsvc.MockOptions{ExecutingAfter: 1, CompletedAfter: 2})
	k := e.kind(t)
	for range 2 {
		res, err := k.Run(context.Background(), e.attempt())
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff([]string{EventExecutionStatus + " completed"}, statuses(res)); diff != "" {
			t.Errorf("result events (-want +got):\n%s", diff)
		}
	}
	if n := e.posts("/v1/strategies"); n != 1 {
		t.Errorf("%d hand-offs, want 1", n)
	}
	msgs, err := e.store.Outbox(context.Background(), agentrunner.OutboxFilter{Kind: OutboxStrategy, Delivered: true})
	if err != nil || len(msgs) != 1 {
		t.Fatalf("delivered strategies: %v, %v; want 1", msgs, err)
	}
	want := []string{EventExecutionNotified + " acknowledged", EventExecutionStatus + " executing"}
	if diff := cmp.Diff(want, e.eventTypes(t)); diff != "" {
		t.Errorf("committed events (-want +got):\n%s", diff)
	}
	if len(e.notes) != 2 || e.notes[0] != "Execution of strategy.json from cycle 20261122_140000 (strategy strat-000001): completed" {
		t.Errorf("notes = %q", e.notes)
	}
}

// TestRunPollsAtOnce: the first status poll follows the hand-off at once,
// without a poll interval's wait; later polls back off from the interval.
func TestRunPollsAtOnce(t *testing.T) {
	cases := []struct {
		name                     string
		executingAfter, complete int
		waits                    []time.Duration
	}{
		{"completed at the first poll", 0, 0, nil},
		{"completed at the third poll", 1, 2, []time.Duration{30 * time.Second, time.Minute}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, execsvc.MockOptions{ExecutingAfter: tc.executingAfter, CompletedAfter: tc.complete})
			res, err := e.kind(t).Run(context.Background(), e.attempt())
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff([]string{EventExecutionStatus + " completed"}, statuses(res)); diff != "" {
				t.Errorf("result events (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.waits, e.clock.Waits()); diff != "" {
				t.Errorf("waits (-want +got):\n%s", diff)
			}
			var gets []time.Time
			for _, r := range e.es.Requests() {
				if r.Method == "GET" {
					gets = append(gets, r.Time)
				}
			}
			if len(gets) == 0 || !gets[0].Equal(t0) {
				t.Errorf("polls at %v, want the first at the hand-off's time %s", gets, t0)
			}
		})
	}
}

// TestRunTakesTheCallback: a status callback about the strategy is
// consumed and ends the wait without a poll; one about another strategy
// is left for whoever follows that one.
func TestRunTakesTheCallback(t *testing.T) {
	e := newEnv(t, execsvc.MockOptions{CompletedAfter: 100})
	ctx := context.Background()
	for _, id := range []string{"strat-000009", "strat-000001"} {
		cmd := &agentrunner.Command{Kind: CommandExecutionStatus, Operator: "execution-service", CreatedAt: t0,
			Args: map[string]any{"strategy_id": id, "status": "error", "error": "exchange down"}}
		if err := e.store.AddCommand(ctx, cmd); err != nil {
			t.Fatal(err)
		}
	}
	res, err := e.kind(t).Run(ctx, e.attempt())
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{EventExecutionStatus + " error"}, statuses(res)); diff != "" {
		t.Errorf("result events (-want +got):\n%s", diff)
	}
	if res.Events[0].Details["detail"] != "exchange down" {
		t.Errorf("final event: %v", res.Events[0].Details)
	}
	for _, r := range e.es.Requests() {
		if r.Method == "GET" {
			t.Errorf("polled (%s) though the callback had the status", r.Path)
		}
	}
	pending, err := e.store.PendingCommands(ctx)
	if err != nil || len(pending) != 1 || pending[0].Args["strategy_id"] != "strat-000009" {
		t.Errorf("pending commands: %v, %v; want the other strategy's callback", pending, err)
	}
}

// TestRunTimesOut: a strategy still executing when the step's time is up
// ends the step with the timeout as its outcome, not a failure.
func TestRunTimesOut(t *testing.T) {
	e := newEnv(t, execsvc.MockOptions{ExecutingAfter: 1 << 30, CompletedAfter: 1 << 30})
	res, err := e.kind(t).Run(context.Background(), e.attempt())
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{EventExecutionStatus + " acknowledged"}, statuses(res)); diff != "" {
		t.Errorf("result events (-want +got):\n%s", diff)
	}
	if got, want := res.Events[0].Details["detail"], "timed out after 2h0m0s while acknowledged"; got != want {
		t.Errorf("detail = %q, want %q", got, want)
	}
	if got := e.clock.Now(); !got.Equal(t0.Add(time.Hour)) {
		t.Errorf("followed until %s, want the attempt's hour", got)
	}
}

// TestRunRefusesABadStrategy: a strategy that is expired, malformed or
// breaks its contract is not handed over and fails the step as invalid
// output.
func TestRunRefusesABadStrategy(t *testing.T) {
	cases := []struct {
		name  string
		edit  func(e *env, path string)
		class agentrunner.ErrorClass
		says  string
	}{
		{"expired", func(e *env, _ string) { e.clock.Advance(7 * time.Hour) }, agentrunner.ClassInvalidOutput, "strategy expired at 2026-11-22T20:00:00Z"},
		{"not JSON", func(_ *env, p string) { os.WriteFile(p, []byte("{"), 0o644) }, agentrunner.ClassInvalidOutput, "strategy.json"},
		{"window ends before it begins", func(_ *env, p string) {
			data, _ := os.ReadFile(p)
			os.WriteFile(p, bytes.Replace(data, []byte(`"valid_until": "2026-11-22T20:00:00Z"`), []byte(`"valid_until": "2026-11-22T13:00:00Z"`), 1), 0o644)
		}, agentrunner.ClassInvalidOutput, "validity window ends (2026-11-22T13:00:00Z) before it begins"},
		{"missing", func(_ *env, p string) { os.Remove(p) }, agentrunner.ClassInternal, "read strategy.json"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, execsvc.MockOptions{})
			tc.edit(e, filepath.Join(e.run.Dir, "strategy.json"))
			_, err := e.kind(t).Run(context.Background(), e.attempt())
			if got := agentrunner.ClassOf(err); got != tc.class || !strings.Contains(fmt.Sprint(err), tc.says) {
				t.Errorf("error %v of class %q, want %q saying %q", err, got, tc.class, tc.says)
			}
			if n := e.posts("/v1/strategies"); n != 0 {
				t.Errorf("%d hand-offs of a bad strategy", n)
			}
		})
	}
}

// TestRunHandsOverTheCommittedStrategy: strategy.json in the run directory
// is a view of the store's copy. Edited after the commit (a crash left an
// older file, or someone changed it), it is not what is traded: the
// store's copy is handed over, and the file is rewritten from it.
func TestRunHandsOverTheCommittedStrategy(t *testing.T) {
	e := newEnv(t, execsvc.MockOptions{CompletedAfter: 1})
	path := filepath.Join(e.run.Dir, "strategy.json")
	committed, _ := os.ReadFile(path)
	f := &agentrunner.StoredFile{RunID: e.run.ID, Step: "synthesize", Visit: 1, Attempt: 1, Kind: agentrunner.FileArtifact,
		Name: "strategy.json", Data: committed, SHA256: artifact.Hash(committed), CreatedAt: t0}
	if err := e.store.Apply(context.Background(), &agentrunner.Change{Files: []*agentrunner.StoredFile{f}}); err != nil {
		t.Fatal(err)
	}
	stale := mock.Generate(e.ws.Producer("strategy.json").Template, ".json", "20261121_140000", "synthesis", t0)
	os.WriteFile(path, stale, 0o644)

	res, err := e.kind(t).Run(context.Background(), e.attempt())
	if err != nil {
		t.Fatal(err)
	}
	subs := e.es.Strategies()
	if len(subs) != 1 || !strings.Contains(string(subs[0].Strategy), `"cycle_id": "20261122_140000"`) {
		t.Fatalf("handed over %d strategies, want the committed one, of cycle 20261122_140000, not the stale file's", len(subs))
	}
	if got, _ := os.ReadFile(path); string(got) != string(committed) {
		t.Errorf("strategy.json was not rewritten from the store")
	}
	if res.Events[0].Type != agentrunner.EventViewRepaired {
		t.Errorf("first event %s, want %s", res.Events[0].Type, agentrunner.EventViewRepaired)
	}
}
