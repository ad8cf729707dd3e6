// Package storetest is the conformance suite every agentrunner.Store must
// pass, so the SQLite and (later) PostgreSQL stores behave the same.
package storetest

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/agentrunner/agentrunner"
	"github.com/agentrunner/agentrunner/step/execution"
	"github.com/google/go-cmp/cmp"
)

// Run runs the suite; open returns a new, empty store for each test.
func Run(t *testing.T, open func(t *testing.T) agentrunner.Store) {
	tests := []struct {
		name string
		fn   func(t *testing.T, s agentrunner.Store)
	}{
		{"RoundTrip", testRoundTrip},
		{"GuardRejectsWrongStateAndWritesNothing", testGuard},
		{"OneRunningCycle", testOneRunningCycle},
		{"FailedChangeWritesNothing", testAtomic},
		{"AttemptsUpsertKeepsOrder", testAttempts},
		{"EventsFilter", testEvents},
		{"ManyEventsInOneChange", testManyEvents},
		{"Outbox", testOutbox},
		{"CyclesFilter", testCyclesFilter},
		{"NotFound", testNotFound},
		{"HaltedCycleIsUnfinished", testHalted},
		{"CommandsAreConsumedOnce", testCommands},
		{"OutboxDueAndDelivered", testOutboxFilter},
		{"AuditListsCommandsNewestFirst", testAudit},
		{"ControlIsCommittedWithTheChange", testControl},
		{"EventQueries", testEventQueries},
		{"PruneKeepsTheNewestEvent", testPrune},
		{"ToolUsageSumsToolCalls", testToolUsage},
		{"ToolUsageIsCommittedWithTheEvents", testToolUsageAtomic},
		{"ToolUsageSurvivesPruning", testToolUsagePrune},
		{"EventPagesCoverEveryEventOnce", testEventPages},
		{"CyclePagesByStatus", testCyclePages},
		{"AuditPages", testAuditPages},
	}
	for _, tt := range slices.Concat(tests, runTests, groupTests, capsuleTests, memoryTests, todoTests, conversationTests, sessionTests) {
		t.Run(tt.name, func(t *testing.T) {
			s := open(t)
			t.Cleanup(func() { s.Close() })
			tt.fn(t, s)
		})
	}
}

var t0 = time.Date(2026, 11, 22, 14, 0, 0, 123456789, time.UTC)

// cycle is a cycle of the learning loop, whose cycles are serial.
func cycle(id string, status agentrunner.CycleStatus, step string) *agentrunner.Cycle {
	c := &agentrunner.Cycle{ID: id, Pipeline: "crypton", Status: status, Step: step, Dir: "/w/cycles/" + id, StartedAt: t0, Serial: true}
	if status.Finished() {
		c.EndedAt = t0.Add(time.Hour)
	}
	return c
}

func mustApply(t *testing.T, s agentrunner.Store, ch *agentrunner.Change) {
	t.Helper()
	if err := s.Apply(context.Background(), ch); err != nil {
		t.Fatalf("Apply: %v", err)
	}
}

func testRoundTrip(t *testing.T, s agentrunner.Store) {
	ctx := context.Background()
	exit := 3
	c := cycle("20261122_140000", agentrunner.CycleRunning, "plan")
	a := &agentrunner.Attempt{CycleID: c.ID, Step: "plan", Number: 1, Visit: 2, Agent: "plan", Status: agentrunner.AttemptFailed,
		ErrorClass: agentrunner.ClassCrash, Error: "exit 3", StartedAt: t0, EndedAt: t0.Add(time.Second),
		ExitCode: &exit, Dir: "/w/attempts/x", OutputPath: "",
		Usage: agentrunner.Usage{InputTokens: 1200, OutputTokens: 300, CachedTokens: 800, Turns: 4, ToolCalls: 6}, RetryBase: 2}
	e := &agentrunner.Event{Timestamp: t0, Type: agentrunner.EventAttemptFailed, Agent: "plan", Step: "plan",
		CycleID: c.ID, Level: agentrunner.LevelWarn, Details: map[string]any{"error": "exit 3", "attempt": float64(1)}}
	mustApply(t, s, &agentrunner.Change{From: agentrunner.StateIdle, Cycle: c, Attempts: []*agentrunner.Attempt{a}, Events: []*agentrunner.Event{e}})
	if e.ID == 0 {
		t.Error("event ID not assigned")
	}
	got, err := s.Cycle(ctx, c.ID)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(c, got); diff != "" {
		t.Errorf("cycle (-want +got):\n%s", diff)
	}
	un, err := s.UnfinishedCycle(ctx, "crypton")
	if err != nil || un.ID != c.ID {
		t.Errorf("UnfinishedCycle = %v, %v", un, err)
	}
	atts, err := s.Attempts(ctx, c.ID)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]*agentrunner.Attempt{a}, atts); diff != "" {
		t.Errorf("attempts (-want +got):\n%s", diff)
	}
	evs, err := s.Events(ctx, agentrunner.EventFilter{CycleID: c.ID})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]*agentrunner.Event{e}, evs); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
}

func testGuard(t *testing.T, s agentrunner.Store) {
	ctx := context.Background()
	c := cycle("20261122_140000", agentrunner.CycleRunning, "plan")
	err := s.Apply(ctx, &agentrunner.Change{From: agentrunner.StateWaiting, Cycle: c})
	if agentrunner.ErrorCode(err) != agentrunner.ECONFLICT {
		t.Fatalf("Apply from Waiting on an empty store: %v, want conflict (state is Idle)", err)
	}
	if _, err := s.Cycle(ctx, c.ID); agentrunner.ErrorCode(err) != agentrunner.ENOTFOUND {
		t.Fatalf("rejected change was written: %v", err)
	}
	mustApply(t, s, &agentrunner.Change{From: agentrunner.StateIdle, Cycle: c})
	next := *c
	next.Step = "research"
	err = s.Apply(ctx, &agentrunner.Change{From: "analyze", Cycle: &next,
		Events: []*agentrunner.Event{{Timestamp: t0, Type: "x", Level: agentrunner.LevelInfo}}})
	if agentrunner.ErrorCode(err) != agentrunner.ECONFLICT {
		t.Fatalf("Apply from the wrong step: %v, want conflict", err)
	}
	got, _ := s.Cycle(ctx, c.ID)
	if got.Step != "plan" {
		t.Errorf("step = %q after a rejected change, want plan", got.Step)
	}
	if evs, _ := s.Events(ctx, agentrunner.EventFilter{}); len(evs) != 0 {
		t.Errorf("rejected change wrote %d events", len(evs))
	}
	mustApply(t, s, &agentrunner.Change{From: "plan", Cycle: &next})
	done := next
	done.Status, done.Step, done.EndedAt = agentrunner.CycleCompleted, "", t0.Add(time.Hour)
	mustApply(t, s, &agentrunner.Change{From: "research", Cycle: &done})
	if err := s.Apply(ctx, &agentrunner.Change{From: agentrunner.StateWaiting, Cycle: cycle("20261122_150000", agentrunner.CycleRunning, "plan")}); err != nil {
		t.Errorf("Apply from Waiting after a completed cycle: %v", err)
	}
}

func testOneRunningCycle(t *testing.T, s agentrunner.Store) {
	mustApply(t, s, &agentrunner.Change{Cycle: cycle("20261122_140000", agentrunner.CycleRunning, "plan")})
	err := s.Apply(context.Background(), &agentrunner.Change{Cycle: cycle("20261122_150000", agentrunner.CycleRunning, "plan")})
	if agentrunner.ErrorCode(err) != agentrunner.ECONFLICT {
		t.Fatalf("second running cycle: %v, want conflict", err)
	}
}

func testAtomic(t *testing.T, s agentrunner.Store) {
	ctx := context.Background()
	c := cycle("20261122_140000", agentrunner.CycleRunning, "plan")
	bad := &agentrunner.Attempt{CycleID: "no-such-cycle", Step: "plan", Number: 1, Status: agentrunner.AttemptRunning}
	err := s.Apply(ctx, &agentrunner.Change{Cycle: c, Attempts: []*agentrunner.Attempt{bad},
		Events: []*agentrunner.Event{{Timestamp: t0, Type: "x"}}})
	if err == nil {
		t.Fatal("want an error for an attempt of an unknown cycle")
	}
	if _, err := s.Cycle(ctx, c.ID); agentrunner.ErrorCode(err) != agentrunner.ENOTFOUND {
		t.Errorf("the cycle of a failed change was written: %v", err)
	}
	if evs, _ := s.Events(ctx, agentrunner.EventFilter{}); len(evs) != 0 {
		t.Errorf("a failed change wrote %d events", len(evs))
	}
}

func testAttempts(t *testing.T, s agentrunner.Store) {
	ctx := context.Background()
	c := cycle("20261122_140000", agentrunner.CycleRunning, "plan")
	a1 := &agentrunner.Attempt{CycleID: c.ID, Step: "plan", Number: 1, Visit: 1, Status: agentrunner.AttemptRunning, StartedAt: t0}
	mustApply(t, s, &agentrunner.Change{Cycle: c, Attempts: []*agentrunner.Attempt{a1}})
	a1done := *a1
	a1done.Status, a1done.EndedAt, a1done.OutputPath = agentrunner.AttemptSucceeded, t0.Add(time.Minute), "/w/cycles/x/plan.md"
	a2 := &agentrunner.Attempt{CycleID: c.ID, Step: "research", Number: 1, Visit: 1, Status: agentrunner.AttemptPending, NotBefore: t0.Add(5 * time.Minute)}
	mustApply(t, s, &agentrunner.Change{Attempts: []*agentrunner.Attempt{&a1done, a2}})
	got, err := s.Attempts(ctx, c.ID)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]*agentrunner.Attempt{&a1done, a2}, got); diff != "" {
		t.Errorf("attempts (-want +got):\n%s", diff)
	}
	invalid := &agentrunner.Attempt{CycleID: c.ID, Step: "plan", Number: 0, Status: agentrunner.AttemptRunning}
	if err := s.Apply(ctx, &agentrunner.Change{Attempts: []*agentrunner.Attempt{invalid}}); agentrunner.ErrorCode(err) != agentrunner.EINVALID {
		t.Errorf("attempt number 0: %v, want invalid", err)
	}
}

func testEvents(t *testing.T, s agentrunner.Store) {
	ctx := context.Background()
	mustApply(t, s, &agentrunner.Change{Cycle: cycle("20261122_140000", agentrunner.CycleRunning, "plan")})
	var evs []*agentrunner.Event
	for i, id := range []string{"20261122_140000", "", "20261122_140000"} {
		evs = append(evs, &agentrunner.Event{Timestamp: t0.Add(time.Duration(i) * time.Second), Type: "t", CycleID: id, Level: agentrunner.LevelInfo})
	}
	mustApply(t, s, &agentrunner.Change{Events: evs})
	all, _ := s.Events(ctx, agentrunner.EventFilter{})
	if len(all) != 3 || all[0].ID >= all[1].ID || all[1].ID >= all[2].ID {
		t.Fatalf("events not in id order: %+v", all)
	}
	byCycle, _ := s.Events(ctx, agentrunner.EventFilter{CycleID: "20261122_140000"})
	after, _ := s.Events(ctx, agentrunner.EventFilter{AfterID: all[0].ID, Limit: 1})
	if len(byCycle) != 2 || len(after) != 1 || after[0].ID != all[1].ID {
		t.Errorf("filters: by cycle %d (want 2), after/limit %+v", len(byCycle), after)
	}
}

func testOutbox(t *testing.T, s agentrunner.Store) {
	ctx := context.Background()
	m := &agentrunner.OutboxMessage{Key: "c/execute/abc", Kind: execution.OutboxStrategy, CycleID: "c", Payload: []byte(`{"a":1}`), CreatedAt: t0}
	mustApply(t, s, &agentrunner.Change{Outbox: []*agentrunner.OutboxMessage{m}})
	dup := *m
	dup.Payload = []byte(`{"a":2}`)
	mustApply(t, s, &agentrunner.Change{Outbox: []*agentrunner.OutboxMessage{&dup}})
	got, err := s.OutboxMessage(ctx, m.Key)
	if err != nil {
		t.Fatal(err)
	}
	if string(got.Payload) != `{"a":1}` || !got.DeliveredAt.IsZero() {
		t.Errorf("a second insert with the same key changed the message: %+v", got)
	}
	if err := s.RecordOutboxFailure(ctx, m.Key, "connection refused", t0.Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	mustApply(t, s, &agentrunner.Change{Delivered: []*agentrunner.OutboxMessage{{Key: m.Key, DeliveredAt: t0.Add(time.Second), Response: []byte(`{"ok":true}`)}}})
	got, _ = s.OutboxMessage(ctx, m.Key)
	if !got.DeliveredAt.Equal(t0.Add(time.Second)) || string(got.Response) != `{"ok":true}` || got.Attempts != 2 || got.LastError != "connection refused" {
		t.Errorf("after failure and delivery: %+v", got)
	}
	if err := s.Apply(ctx, &agentrunner.Change{Delivered: []*agentrunner.OutboxMessage{{Key: "nope", DeliveredAt: t0}}}); agentrunner.ErrorCode(err) != agentrunner.ENOTFOUND {
		t.Errorf("delivering an unknown key: %v, want not found", err)
	}
	if err := s.RecordOutboxFailure(ctx, "nope", "x", time.Time{}); agentrunner.ErrorCode(err) != agentrunner.ENOTFOUND {
		t.Errorf("failure of an unknown key: %v, want not found", err)
	}
}

func testCyclesFilter(t *testing.T, s agentrunner.Store) {
	ctx := context.Background()
	mustApply(t, s, &agentrunner.Change{Cycle: cycle("20261122_100000", agentrunner.CycleCompleted, "")})
	mustApply(t, s, &agentrunner.Change{Cycle: cycle("20261122_110000", agentrunner.CycleFailed, "")})
	mustApply(t, s, &agentrunner.Change{Cycle: cycle("20261122_120000", agentrunner.CycleCompleted, "")})
	ids := func(cs []*agentrunner.Cycle) []string {
		var out []string
		for _, c := range cs {
			out = append(out, c.ID)
		}
		return out
	}
	all, _ := s.Cycles(ctx, agentrunner.CycleFilter{})
	completed, _ := s.Cycles(ctx, agentrunner.CycleFilter{Status: agentrunner.CycleCompleted, Limit: 1})
	before, _ := s.Cycles(ctx, agentrunner.CycleFilter{Before: "20261122_120000"})
	for _, tt := range []struct {
		got, want []string
	}{
		{ids(all), []string{"20261122_120000", "20261122_110000", "20261122_100000"}},
		{ids(completed), []string{"20261122_120000"}},
		{ids(before), []string{"20261122_110000", "20261122_100000"}},
	} {
		if diff := cmp.Diff(tt.want, tt.got); diff != "" {
			t.Errorf("(-want +got):\n%s", diff)
		}
	}
}

func testNotFound(t *testing.T, s agentrunner.Store) {
	ctx := context.Background()
	if _, err := s.Cycle(ctx, "x"); agentrunner.ErrorCode(err) != agentrunner.ENOTFOUND {
		t.Errorf("Cycle: %v", err)
	}
	if _, err := s.UnfinishedCycle(ctx, "crypton"); agentrunner.ErrorCode(err) != agentrunner.ENOTFOUND {
		t.Errorf("UnfinishedCycle: %v", err)
	}
	if _, err := s.OutboxMessage(ctx, "x"); agentrunner.ErrorCode(err) != agentrunner.ENOTFOUND {
		t.Errorf("OutboxMessage: %v", err)
	}
	if atts, err := s.Attempts(ctx, "x"); err != nil || len(atts) != 0 {
		t.Errorf("Attempts of unknown cycle: %v, %v", atts, err)
	}
}

func testManyEvents(t *testing.T, s agentrunner.Store) {
	ctx := context.Background()
	var evs []*agentrunner.Event
	for i := 0; i < 150; i++ {
		evs = append(evs, &agentrunner.Event{Timestamp: t0, Type: fmt.Sprintf("e%d", i), Level: agentrunner.LevelInfo})
	}
	mustApply(t, s, &agentrunner.Change{Events: evs[:1]})
	mustApply(t, s, &agentrunner.Change{Events: evs[1:]})
	got, err := s.Events(ctx, agentrunner.EventFilter{})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(evs) {
		t.Fatalf("%d events stored, want %d", len(got), len(evs))
	}
	for i, e := range got {
		if e.Type != evs[i].Type || e.ID != evs[i].ID || (i > 0 && e.ID <= got[i-1].ID) {
			t.Fatalf("event %d: stored %s id %d, returned id %d", i, e.Type, e.ID, evs[i].ID)
		}
	}
}

func testHalted(t *testing.T, s agentrunner.Store) {
	ctx := context.Background()
	c := cycle("20261122_140000", agentrunner.CycleRunning, "research")
	mustApply(t, s, &agentrunner.Change{Cycle: c})
	halted := *c
	halted.Status = agentrunner.CycleHalted
	mustApply(t, s, &agentrunner.Change{From: "research", Cycle: &halted})
	un, err := s.UnfinishedCycle(ctx, "crypton")
	if err != nil || un.Status != agentrunner.CycleHalted || un.State() != agentrunner.StateHalted {
		t.Fatalf("UnfinishedCycle = %+v, %v; want the halted cycle", un, err)
	}
	if err := s.Apply(ctx, &agentrunner.Change{From: "research", Cycle: &halted}); agentrunner.ErrorCode(err) != agentrunner.ECONFLICT {
		t.Errorf("the state of a halted cycle is not Halted: %v", err)
	}
	other := cycle("20261122_150000", agentrunner.CycleRunning, "plan")
	if err := s.Apply(ctx, &agentrunner.Change{Cycle: other}); agentrunner.ErrorCode(err) != agentrunner.ECONFLICT {
		t.Errorf("a second cycle started while one is halted: %v", err)
	}
	resumed := halted
	resumed.Status = agentrunner.CycleRunning
	mustApply(t, s, &agentrunner.Change{From: agentrunner.StateHalted, Cycle: &resumed})
}

func testCommands(t *testing.T, s agentrunner.Store) {
	ctx := context.Background()
	a := &agentrunner.Command{Kind: agentrunner.CommandResume, Operator: "alice", CreatedAt: t0, Args: map[string]any{"note": "fixed the key"}}
	b := &agentrunner.Command{Kind: "pause", Operator: "bob", CreatedAt: t0.Add(time.Second)}
	for _, c := range []*agentrunner.Command{a, b} {
		if err := s.AddCommand(ctx, c); err != nil {
			t.Fatal(err)
		}
	}
	if a.ID == 0 || b.ID <= a.ID {
		t.Fatalf("ids %d, %d", a.ID, b.ID)
	}
	pending, err := s.PendingCommands(ctx)
	if err != nil || len(pending) != 2 {
		t.Fatalf("pending: %+v, %v", pending, err)
	}
	if diff := cmp.Diff(a, pending[0]); diff != "" {
		t.Errorf("first pending command (-want +got):\n%s", diff)
	}
	done := *pending[0]
	done.ConsumedAt, done.Result = t0.Add(time.Minute), "resumed research"
	mustApply(t, s, &agentrunner.Change{Consumed: []*agentrunner.Command{&done}})
	if err := s.Apply(ctx, &agentrunner.Change{Consumed: []*agentrunner.Command{&done}}); agentrunner.ErrorCode(err) != agentrunner.ECONFLICT {
		t.Errorf("consuming a command twice: %v, want a conflict", err)
	}
	pending, _ = s.PendingCommands(ctx)
	if len(pending) != 1 || pending[0].ID != b.ID {
		t.Errorf("pending after consuming the first: %+v", pending)
	}
}

func testOutboxFilter(t *testing.T, s agentrunner.Store) {
	ctx := context.Background()
	msgs := []*agentrunner.OutboxMessage{
		{Key: "w1", Kind: agentrunner.OutboxWebhook, Payload: []byte(`{}`), CreatedAt: t0},
		{Key: "w2", Kind: agentrunner.OutboxWebhook, Payload: []byte(`{}`), CreatedAt: t0.Add(time.Second)},
		{Key: "s1", Kind: execution.OutboxSafeMode, Payload: []byte(`{}`), CreatedAt: t0.Add(2 * time.Second)},
	}
	mustApply(t, s, &agentrunner.Change{Outbox: msgs})
	keys := func(ms []*agentrunner.OutboxMessage) []string {
		var out []string
		for _, m := range ms {
			out = append(out, m.Key)
		}
		return out
	}
	due, _ := s.Outbox(ctx, agentrunner.OutboxFilter{Due: t0})
	if diff := cmp.Diff([]string{"w1", "w2", "s1"}, keys(due)); diff != "" {
		t.Errorf("due (-want +got):\n%s", diff)
	}
	if err := s.RecordOutboxFailure(ctx, "w1", "503", t0.Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	mustApply(t, s, &agentrunner.Change{Delivered: []*agentrunner.OutboxMessage{{Key: "s1", DeliveredAt: t0.Add(time.Minute)}}})
	due, _ = s.Outbox(ctx, agentrunner.OutboxFilter{Due: t0.Add(time.Minute), Kind: agentrunner.OutboxWebhook})
	if diff := cmp.Diff([]string{"w2"}, keys(due)); diff != "" {
		t.Errorf("due webhooks before w1's next attempt (-want +got):\n%s", diff)
	}
	due, _ = s.Outbox(ctx, agentrunner.OutboxFilter{Due: t0.Add(2 * time.Hour)})
	if diff := cmp.Diff([]string{"w1", "w2"}, keys(due)); diff != "" {
		t.Errorf("due after w1's next attempt (-want +got):\n%s", diff)
	}
	if due[0].Attempts != 1 || due[0].LastError != "503" || !due[0].NextAttemptAt.Equal(t0.Add(time.Hour)) {
		t.Errorf("w1 after a failure: %+v", due[0])
	}
	delivered, _ := s.Outbox(ctx, agentrunner.OutboxFilter{Delivered: true, Limit: 1})
	if diff := cmp.Diff([]string{"s1"}, keys(delivered)); diff != "" {
		t.Errorf("delivered (-want +got):\n%s", diff)
	}
}

func testAudit(t *testing.T, s agentrunner.Store) {
	ctx := context.Background()
	var cmds []*agentrunner.Command
	for i, kind := range []string{agentrunner.CommandPause, agentrunner.CommandInject, agentrunner.CommandResume} {
		c := &agentrunner.Command{Kind: kind, Operator: "alice", CreatedAt: t0.Add(time.Duration(i) * time.Second)}
		if kind == agentrunner.CommandInject {
			c.Args = map[string]any{"agent": "plan", "message": "look at ETH"}
		}
		if err := s.AddCommand(ctx, c); err != nil {
			t.Fatal(err)
		}
		cmds = append(cmds, c)
	}
	done := *cmds[0]
	done.ConsumedAt, done.Result = t0.Add(time.Minute), "paused"
	mustApply(t, s, &agentrunner.Change{Consumed: []*agentrunner.Command{&done}})
	all, err := s.Commands(ctx, agentrunner.CommandFilter{})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]*agentrunner.Command{cmds[2], cmds[1], &done}, all); diff != "" {
		t.Errorf("audit (-want +got):\n%s", diff)
	}
	page, _ := s.Commands(ctx, agentrunner.CommandFilter{BeforeID: cmds[2].ID, Limit: 1})
	if len(page) != 1 || page[0].ID != cmds[1].ID {
		t.Errorf("page before %d: %+v", cmds[2].ID, page)
	}
}

func testControl(t *testing.T, s agentrunner.Store) {
	ctx := context.Background()
	if c, err := s.Control(ctx); err != nil || c.Paused {
		t.Fatalf("initial control: %+v, %v; want not paused", c, err)
	}
	paused := &agentrunner.Control{Paused: true, PausedBy: "alice", PausedAt: t0}
	// A change that fails writes no control either.
	bad := &agentrunner.Change{From: agentrunner.StateHalted, Control: paused}
	if err := s.Apply(ctx, bad); err == nil {
		t.Fatal("a guarded change in the wrong state was applied")
	}
	if c, _ := s.Control(ctx); c.Paused {
		t.Fatal("a failed change paused the loop")
	}
	mustApply(t, s, &agentrunner.Change{Control: paused})
	if c, _ := s.Control(ctx); !cmp.Equal(c, paused) {
		t.Errorf("control %+v, want %+v", c, paused)
	}
	mustApply(t, s, &agentrunner.Change{Control: &agentrunner.Control{}})
	if c, _ := s.Control(ctx); c.Paused || c.PausedBy != "" {
		t.Errorf("control after resume: %+v", c)
	}
}

func testEventQueries(t *testing.T, s agentrunner.Store) {
	ctx := context.Background()
	levels := []agentrunner.Level{agentrunner.LevelDebug, agentrunner.LevelInfo, agentrunner.LevelWarn, agentrunner.LevelError, agentrunner.LevelInfo}
	var evs []*agentrunner.Event
	for i, l := range levels {
		evs = append(evs, &agentrunner.Event{Timestamp: t0.Add(time.Duration(i) * time.Minute), Type: "t" + string(l), Level: l})
	}
	// Events every step writes, which a store may find without its type
	// index, beside others.
	for i, typ := range []string{agentrunner.EventTransition, "tinfo", agentrunner.EventAttemptStarted, agentrunner.EventTransition} {
		evs = append(evs, &agentrunner.Event{Timestamp: t0.Add(time.Duration(10+i) * time.Minute), Type: typ, Level: agentrunner.LevelDebug})
	}
	mustApply(t, s, &agentrunner.Change{Events: evs})
	ids := func(f agentrunner.EventFilter) []int64 {
		t.Helper()
		got, err := s.Events(ctx, f)
		if err != nil {
			t.Fatal(err)
		}
		var out []int64
		for _, e := range got {
			out = append(out, e.ID)
		}
		return out
	}
	id := func(i int) int64 { return evs[i].ID }
	for _, tt := range []struct {
		name string
		f    agentrunner.EventFilter
		want []int64
	}{
		{"warn and worse", agentrunner.EventFilter{MinLevel: agentrunner.LevelWarn}, []int64{id(2), id(3)}},
		{"errors", agentrunner.EventFilter{MinLevel: agentrunner.LevelError}, []int64{id(3)}},
		{"info and worse", agentrunner.EventFilter{MinLevel: agentrunner.LevelInfo}, []int64{id(1), id(2), id(3), id(4)}},
		{"newest first, limited", agentrunner.EventFilter{Newest: true, Limit: 2}, []int64{id(8), id(7)}},
		{"before an id", agentrunner.EventFilter{BeforeID: id(2)}, []int64{id(0), id(1)}},
		{"since a time", agentrunner.EventFilter{Since: t0.Add(3 * time.Minute), Limit: 2}, []int64{id(3), id(4)}},
		{"by type", agentrunner.EventFilter{Type: "tinfo"}, []int64{id(1), id(4), id(6)}},
		{"by a type every step writes", agentrunner.EventFilter{Type: agentrunner.EventTransition}, []int64{id(5), id(8)}},
		{"by a type every step writes, newest first after an id", agentrunner.EventFilter{Type: agentrunner.EventTransition, Newest: true, AfterID: id(5)}, []int64{id(8)}},
	} {
		if diff := cmp.Diff(tt.want, ids(tt.f)); diff != "" {
			t.Errorf("%s (-want +got):\n%s", tt.name, diff)
		}
	}
	if _, err := s.Events(ctx, agentrunner.EventFilter{MinLevel: "loud"}); agentrunner.ErrorCode(err) != agentrunner.EINVALID {
		t.Errorf("unknown level: %v, want invalid", err)
	}
}

func testPrune(t *testing.T, s agentrunner.Store) {
	ctx := context.Background()
	var evs []*agentrunner.Event
	for i := range 5 {
		evs = append(evs, &agentrunner.Event{Timestamp: t0.Add(time.Duration(i) * time.Hour), Type: "t", Level: agentrunner.LevelInfo})
	}
	mustApply(t, s, &agentrunner.Change{Events: evs})
	if n, err := s.PruneEvents(ctx, t0.Add(2*time.Hour)); err != nil || n != 2 {
		t.Fatalf("pruned %d, %v; want 2", n, err)
	}
	left, _ := s.Events(ctx, agentrunner.EventFilter{})
	if len(left) != 3 || left[0].ID != evs[2].ID {
		t.Fatalf("left %+v", left)
	}
	// Everything is old: the newest event stays, so ids keep growing.
	if n, _ := s.PruneEvents(ctx, t0.Add(100*time.Hour)); n != 2 {
		t.Errorf("pruned %d, want 2", n)
	}
	next := &agentrunner.Event{Timestamp: t0.Add(101 * time.Hour), Type: "t", Level: agentrunner.LevelInfo}
	mustApply(t, s, &agentrunner.Change{Events: []*agentrunner.Event{next}})
	if next.ID <= evs[4].ID {
		t.Errorf("a new event got id %d, not above the pruned %d", next.ID, evs[4].ID)
	}
}

// toolCall is a tool.call event as the tool executor writes it, at t0
// plus min minutes.
func toolCall(min int, tool string, isError bool, ms int) *agentrunner.Event {
	return &agentrunner.Event{Timestamp: t0.Add(time.Duration(min) * time.Minute), Type: agentrunner.EventToolCall, Level: agentrunner.LevelInfo,
		Details: map[string]any{"tool": tool, "is_error": isError, "duration_ms": ms, "arguments": `{"q":"btc"}`}}
}

func testToolUsage(t *testing.T, s agentrunner.Store) {
	ctx := context.Background()
	// t0 is 14:00:00.12; the summary counts per hour, so since counts
	// from the start of its hour.
	mustApply(t, s, &agentrunner.Change{Events: []*agentrunner.Event{
		toolCall(-1, "web_search", false, 100), // 13:59, the hour before since's
		toolCall(1, "web_search", false, 200), toolCall(70, "web_search", true, 300),
		{Timestamp: t0.Add(4 * time.Minute), Type: "attempt.started", Level: agentrunner.LevelInfo, Details: map[string]any{"tool": "x"}},
		{Timestamp: t0.Add(5 * time.Minute), Type: agentrunner.EventToolCall, Level: agentrunner.LevelInfo, Details: map[string]any{"tool": 7}},
	}})
	// A second change adds to the same hour's sums.
	mustApply(t, s, &agentrunner.Change{Events: []*agentrunner.Event{toolCall(3, "bird", false, 50)}})
	got, err := s.ToolUsage(ctx, t0.Add(30*time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	want := []*agentrunner.ToolUsage{
		{Tool: "bird", Calls: 1, Duration: 50 * time.Millisecond, LastCall: t0.Add(3 * time.Minute)},
		{Tool: "web_search", Calls: 2, Errors: 1, Duration: 500 * time.Millisecond, LastCall: t0.Add(70 * time.Minute)},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("tool usage since 14:30, counted from 14:00 (-want +got):\n%s", diff)
	}
	later, err := s.ToolUsage(ctx, t0.Add(61*time.Minute))
	if err != nil || len(later) != 1 || later[0].Tool != "web_search" || later[0].Calls != 1 {
		t.Errorf("tool usage since 15:01: %+v, %v; want web_search's call of 15:10", later, err)
	}
	all, err := s.ToolUsage(ctx, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	want[1].Calls, want[1].Duration = 3, 600*time.Millisecond
	if diff := cmp.Diff(want, all); diff != "" {
		t.Errorf("tool usage of all time (-want +got):\n%s", diff)
	}
}

// testToolUsageAtomic: the summary is written in the transaction of the
// events, so a change that fails adds nothing to it.
func testToolUsageAtomic(t *testing.T, s agentrunner.Store) {
	ctx := context.Background()
	bad := &agentrunner.Attempt{CycleID: "no-such-cycle", Step: "plan", Number: 1, Status: agentrunner.AttemptRunning}
	err := s.Apply(ctx, &agentrunner.Change{Events: []*agentrunner.Event{toolCall(0, "web_search", false, 100)}, Attempts: []*agentrunner.Attempt{bad}})
	if err == nil {
		t.Fatal("want an error for an attempt of an unknown cycle")
	}
	mustApply(t, s, &agentrunner.Change{Events: []*agentrunner.Event{toolCall(1, "bird", false, 10)}})
	for _, since := range []time.Time{{}, t0} {
		got, err := s.ToolUsage(ctx, since)
		if err != nil || len(got) != 1 || got[0].Tool != "bird" {
			t.Errorf("ToolUsage(%v) = %+v, %v; want only bird's call: the failed change's call is counted", since, got, err)
		}
	}
}

// testToolUsagePrune: the summary is the history of the calls; pruning
// the events leaves it whole.
func testToolUsagePrune(t *testing.T, s agentrunner.Store) {
	ctx := context.Background()
	mustApply(t, s, &agentrunner.Change{Events: []*agentrunner.Event{
		toolCall(0, "web_search", false, 100), toolCall(120, "web_search", true, 300), toolCall(240, "bird", false, 5),
	}})
	before, _ := s.ToolUsage(ctx, time.Time{})
	beforeHour, _ := s.ToolUsage(ctx, t0)
	if n, err := s.PruneEvents(ctx, t0.Add(200*time.Minute)); err != nil || n != 2 {
		t.Fatalf("pruned %d, %v; want 2", n, err)
	}
	after, err := s.ToolUsage(ctx, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	afterHour, _ := s.ToolUsage(ctx, t0)
	if diff := cmp.Diff(before, after); diff != "" || len(after) != 2 || after[1].Calls != 2 {
		t.Errorf("all-time usage changed with pruning (-before +after):\n%s", diff)
	}
	if diff := cmp.Diff(beforeHour, afterHour); diff != "" {
		t.Errorf("usage since t0 changed with pruning (-before +after):\n%s", diff)
	}
}

// testEventPages: following the cursor (AfterID of the last event) page
// by page, with each filter, returns every matching event once, in order,
// and the pages newest first (BeforeID) do the same backwards.
func testEventPages(t *testing.T, s agentrunner.Store) {
	ctx := context.Background()
	mustApply(t, s, &agentrunner.Change{Cycle: cycle("20261122_140000", agentrunner.CycleCompleted, "")})
	levels := []agentrunner.Level{agentrunner.LevelInfo, agentrunner.LevelWarn, agentrunner.LevelInfo, agentrunner.LevelError, agentrunner.LevelDebug}
	var evs []*agentrunner.Event
	for i := range 53 {
		e := &agentrunner.Event{Timestamp: t0.Add(time.Duration(i) * time.Minute), Type: []string{"a", "b", "tool.call"}[i%3],
			Level: levels[i%len(levels)]}
		if i%2 == 0 {
			e.CycleID = "20261122_140000"
		}
		evs = append(evs, e)
	}
	// One event stamped before the ones committed ahead of it: a tool call
	// recorded when it ended.
	evs[40].Timestamp = t0.Add(45*time.Minute + time.Second)
	for i := 0; i < len(evs); i += 10 {
		mustApply(t, s, &agentrunner.Change{Events: evs[i:min(i+10, len(evs))]})
	}
	rank := map[agentrunner.Level]int{agentrunner.LevelDebug: 0, agentrunner.LevelInfo: 1, agentrunner.LevelWarn: 2, agentrunner.LevelError: 3}
	for _, tt := range []struct {
		name  string
		f     agentrunner.EventFilter
		match func(e *agentrunner.Event) bool
	}{
		{"all", agentrunner.EventFilter{}, func(*agentrunner.Event) bool { return true }},
		{"type", agentrunner.EventFilter{Type: "tool.call"}, func(e *agentrunner.Event) bool { return e.Type == "tool.call" }},
		{"warn", agentrunner.EventFilter{MinLevel: agentrunner.LevelWarn}, func(e *agentrunner.Event) bool { return rank[e.Level] >= 2 }},
		{"error", agentrunner.EventFilter{MinLevel: agentrunner.LevelError}, func(e *agentrunner.Event) bool { return e.Level == agentrunner.LevelError }},
		{"info", agentrunner.EventFilter{MinLevel: agentrunner.LevelInfo}, func(e *agentrunner.Event) bool { return rank[e.Level] >= 1 }},
		{"cycle", agentrunner.EventFilter{CycleID: "20261122_140000"}, func(e *agentrunner.Event) bool { return e.CycleID != "" }},
		{"since a time", agentrunner.EventFilter{Since: t0.Add(42 * time.Minute)}, func(e *agentrunner.Event) bool { return !e.Timestamp.Before(t0.Add(42 * time.Minute)) }},
		{"type and level since", agentrunner.EventFilter{Type: "a", MinLevel: agentrunner.LevelWarn, Since: t0.Add(10 * time.Minute)},
			func(e *agentrunner.Event) bool {
				return e.Type == "a" && rank[e.Level] >= 2 && !e.Timestamp.Before(t0.Add(10*time.Minute))
			}},
	} {
		var want []int64
		for _, e := range evs {
			if tt.match(e) {
				want = append(want, e.ID)
			}
		}
		var forward, backward []int64
		f := tt.f
		f.Limit = 4
		for pages := 0; ; pages++ {
			page, err := s.Events(ctx, f)
			if err != nil || pages > len(evs) {
				t.Fatalf("%s: page %d: %v", tt.name, pages, err)
			}
			for _, e := range page {
				forward = append(forward, e.ID)
			}
			if len(page) < f.Limit {
				break
			}
			f.AfterID = page[len(page)-1].ID
		}
		b := tt.f
		b.Limit, b.Newest = 3, true
		for pages := 0; ; pages++ {
			page, err := s.Events(ctx, b)
			if err != nil || pages > len(evs) {
				t.Fatalf("%s newest first: page %d: %v", tt.name, pages, err)
			}
			for _, e := range page {
				backward = append([]int64{e.ID}, backward...)
			}
			if len(page) < b.Limit {
				break
			}
			b.BeforeID = page[len(page)-1].ID
		}
		if diff := cmp.Diff(want, forward); diff != "" {
			t.Errorf("%s: pages oldest first (-want +got):\n%s", tt.name, diff)
		}
		if diff := cmp.Diff(want, backward); diff != "" {
			t.Errorf("%s: pages newest first, reversed (-want +got):\n%s", tt.name, diff)
		}
	}
}

// testCyclePages: paging cycles with Before, with and without a status,
// returns each cycle once, newest first.
func testCyclePages(t *testing.T, s agentrunner.Store) {
	ctx := context.Background()
	var all, failed []string
	for i := range 23 {
		status := agentrunner.CycleCompleted
		if i%4 == 1 {
			status = agentrunner.CycleFailed
		}
		c := cycle(fmt.Sprintf("20261122_%02d%02d00", 10+i/60, i%60), status, "")
		mustApply(t, s, &agentrunner.Change{Cycle: c})
		all = append([]string{c.ID}, all...)
		if status == agentrunner.CycleFailed {
			failed = append([]string{c.ID}, failed...)
		}
	}
	for _, tt := range []struct {
		status agentrunner.CycleStatus
		want   []string
	}{{"", all}, {agentrunner.CycleFailed, failed}} {
		var got []string
		f := agentrunner.CycleFilter{Status: tt.status, Limit: 5}
		for pages := 0; pages < 30; pages++ {
			page, err := s.Cycles(ctx, f)
			if err != nil {
				t.Fatal(err)
			}
			for _, c := range page {
				got = append(got, c.ID)
			}
			if len(page) < f.Limit {
				break
			}
			f.Before = page[len(page)-1].ID
		}
		if diff := cmp.Diff(tt.want, got); diff != "" {
			t.Errorf("status %q: pages (-want +got):\n%s", tt.status, diff)
		}
	}
}

// testAuditPages: paging commands with BeforeID returns each once, newest
// first.
func testAuditPages(t *testing.T, s agentrunner.Store) {
	ctx := context.Background()
	var want []int64
	for i := range 11 {
		c := &agentrunner.Command{Kind: agentrunner.CommandPause, Operator: "alice", CreatedAt: t0.Add(time.Duration(i) * time.Second)}
		if err := s.AddCommand(ctx, c); err != nil {
			t.Fatal(err)
		}
		want = append([]int64{c.ID}, want...)
	}
	var got []int64
	f := agentrunner.CommandFilter{Limit: 3}
	for pages := 0; pages < 20; pages++ {
		page, err := s.Commands(ctx, f)
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range page {
			got = append(got, c.ID)
		}
		if len(page) < f.Limit {
			break
		}
		f.BeforeID = page[len(page)-1].ID
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("audit pages (-want +got):\n%s", diff)
	}
}
