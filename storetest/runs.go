package storetest

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/agentrunner/agentrunner"
	"github.com/google/go-cmp/cmp"
)

// runTests are the cases of runs and step runs: the graph scheduler's
// part of the store.
var runTests = []struct {
	name string
	fn   func(t *testing.T, s agentrunner.Store)
}{
	{"RunRoundTrip", testRunRoundTrip},
	{"StepRunRoundTrip", testStepRunRoundTrip},
	{"RunsFilter", testRunsFilter},
	{"StepRunsFilter", testStepRunsFilter},
	{"ManyUnfinishedRunsButOneSerial", testSerialRuns},
	{"RunIDIsUniqueAcrossPipelines", testRunIDUnique},
	{"GuardIsPerPipeline", testGuardPerPipeline},
	{"ApplyAllWritesAllOrNothing", testApplyAllAtomic},
	{"GateIsDecidedOnce", testGateDecidedOnce},
	{"RunCountsCountUnfinishedRunsAndWaitingGates", testRunCounts},
	{"StoredFilesRoundTripAndLatest", testFiles},
	{"StoredFilesAreCommittedWithTheChange", testFilesAtomic},
	{"PruneFilesKeepsArtifacts", testPruneFiles},
	{"PruneFilesPassAfterPass", testPruneFilesInPasses},
	{"PruneEventsKeepsTheFilterByTime", testPruneEventsSince},
	{"MailboxDepositsReplaceInPlaceAndKeepTheNewest", testMail},
	{"MailboxDepositsOfOneBatchAreAllKept", testMailBatch},
	{"MailboxDepositsAreCommittedWithTheChange", testMailAtomic},
	{"MailboxDepositsOfARefusedChangeAreRefusedWithIt", testMailGroup},
}

// run is a run of the review pipeline, which is not serial.
func run(id string, status agentrunner.RunStatus) *agentrunner.Run {
	r := &agentrunner.Run{ID: id, Pipeline: "review", Status: status, Dir: "/w/runs/" + id, StartedAt: t0}
	if status.Finished() {
		r.EndedAt = t0.Add(time.Hour)
	}
	return r
}

func runIDs(rs []*agentrunner.Run) []string {
	var out []string
	for _, r := range rs {
		out = append(out, r.ID)
	}
	return out
}

func stepRunKeys(srs []*agentrunner.StepRun) []string {
	var out []string
	for _, sr := range srs {
		out = append(out, sr.RunID+"/"+sr.Key())
	}
	return out
}

func testRunRoundTrip(t *testing.T, s agentrunner.Store) {
	ctx := context.Background()
	parent := run("review-000001", agentrunner.RunRunning)
	r := &agentrunner.Run{ID: "review-000002", Pipeline: "review", Status: agentrunner.RunQueued, Dir: "/w/runs/review-000002",
		StartedAt: t0.Add(time.Second), Parent: parent.ID,
		Inputs: map[string]any{"pr": "42", "draft": true, "files": float64(3), "labels": []any{"bug", "ui"}, "meta": map[string]any{"by": "alice"}}}
	mustApply(t, s, &agentrunner.Change{Runs: []*agentrunner.Run{parent, r}})
	got, err := s.Run(ctx, r.ID)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(r, got); diff != "" {
		t.Errorf("queued run (-want +got):\n%s", diff)
	}
	done := *r
	done.Status, done.Step, done.LastCompletedStep, done.EndedAt, done.Error = agentrunner.RunFailed, "", "review", t0.Add(time.Hour), "fix: crash"
	mustApply(t, s, &agentrunner.Change{Runs: []*agentrunner.Run{&done}})
	got, err = s.Run(ctx, r.ID)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(&done, got); diff != "" {
		t.Errorf("failed run (-want +got):\n%s", diff)
	}
	// A cycle is a run: the loop's reads see every run.
	if c, err := s.Cycle(ctx, r.ID); err != nil || !cmp.Equal(c, got) {
		t.Errorf("Cycle(%s) = %+v, %v; want the run", r.ID, c, err)
	}
	loop := cycle("20261122_140000", agentrunner.CycleRunning, "plan")
	mustApply(t, s, &agentrunner.Change{From: agentrunner.StateIdle, Cycle: loop})
	if got, err := s.Run(ctx, loop.ID); err != nil || !cmp.Equal(loop, got) {
		t.Errorf("Run(%s) = %+v, %v; want the cycle %+v", loop.ID, got, err, loop)
	}
	if _, err := s.Run(ctx, "nope"); agentrunner.ErrorCode(err) != agentrunner.ENOTFOUND {
		t.Errorf("Run of an unknown id: %v, want not found", err)
	}
	bad := run("review-000003", agentrunner.RunRunning)
	bad.Inputs = map[string]any{"f": func() {}}
	if err := s.Apply(ctx, &agentrunner.Change{Runs: []*agentrunner.Run{bad}}); agentrunner.ErrorCode(err) != agentrunner.EINVALID {
		t.Errorf("inputs that are no JSON: %v, want invalid", err)
	}
}

func testStepRunRoundTrip(t *testing.T, s agentrunner.Store) {
	ctx := context.Background()
	r := run("review-000001", agentrunner.RunRunning)
	review := &agentrunner.StepRun{RunID: r.ID, Step: "review", Visit: 1, Status: agentrunner.StepRunOpen, OpenedAt: t0}
	join := &agentrunner.StepRun{RunID: r.ID, Step: "merge", Visit: 1, Status: agentrunner.StepRunJoining, From: "lint#1",
		Arrived: []string{"lint", "test"}, OpenedAt: t0.Add(time.Second)}
	gate := &agentrunner.StepRun{RunID: r.ID, Step: "approve", Visit: 2, Status: agentrunner.StepRunWaiting, From: "review#3", OpenedAt: t0.Add(2 * time.Second)}
	mustApply(t, s, &agentrunner.Change{Runs: []*agentrunner.Run{r}, StepRuns: []*agentrunner.StepRun{review, join, gate}})
	reviewed := *review
	reviewed.Status, reviewed.Label, reviewed.Output, reviewed.EndedAt = agentrunner.StepRunSucceeded, "APPROVE", "/w/runs/review-000001/review.md", t0.Add(time.Minute)
	decided := *gate
	decided.Status, decided.Label, decided.EndedAt = agentrunner.StepRunSucceeded, string(agentrunner.DecisionRoute), t0.Add(time.Hour)
	decided.Decision = &agentrunner.Decision{Action: agentrunner.DecisionRoute, To: "fix", Comment: "one more pass", Operator: "alice", DecidedAt: t0.Add(time.Hour)}
	failed := *join
	failed.Status, failed.Error, failed.EndedAt = agentrunner.StepRunFailed, `label "MAYBE" matches no route (APPROVE, REJECT)`, t0.Add(time.Minute)
	mustApply(t, s, &agentrunner.Change{StepRuns: []*agentrunner.StepRun{&decided, &reviewed, &failed}})
	got, err := s.StepRuns(ctx, agentrunner.StepRunFilter{RunID: r.ID})
	if err != nil {
		t.Fatal(err)
	}
	// Updates keep the order the step runs were opened in.
	if diff := cmp.Diff([]*agentrunner.StepRun{&reviewed, &failed, &decided}, got); diff != "" {
		t.Errorf("step runs (-want +got):\n%s", diff)
	}
	orphan := &agentrunner.StepRun{RunID: "no-such-run", Step: "x", Visit: 1, Status: agentrunner.StepRunOpen, OpenedAt: t0}
	if err := s.Apply(ctx, &agentrunner.Change{StepRuns: []*agentrunner.StepRun{orphan}}); agentrunner.ErrorCode(err) != agentrunner.EINVALID {
		t.Errorf("a step run of an unknown run: %v, want invalid", err)
	}
	zero := &agentrunner.StepRun{RunID: r.ID, Step: "x", Visit: 0, Status: agentrunner.StepRunOpen, OpenedAt: t0}
	if err := s.Apply(ctx, &agentrunner.Change{StepRuns: []*agentrunner.StepRun{zero}}); agentrunner.ErrorCode(err) != agentrunner.EINVALID {
		t.Errorf("visit 0: %v, want invalid", err)
	}
	odd := &agentrunner.StepRun{RunID: r.ID, Step: "x", Visit: 1, Status: "paused", OpenedAt: t0}
	if err := s.Apply(ctx, &agentrunner.Change{StepRuns: []*agentrunner.StepRun{odd}}); agentrunner.ErrorCode(err) != agentrunner.EINVALID {
		t.Errorf("an unknown status: %v, want invalid", err)
	}
	// An attempt of the loop engine, which sets no visit, is of the first.
	a := &agentrunner.Attempt{CycleID: r.ID, Step: "lint", Number: 1, Status: agentrunner.AttemptRunning, StartedAt: t0}
	mustApply(t, s, &agentrunner.Change{Attempts: []*agentrunner.Attempt{a}})
	if atts, err := s.Attempts(ctx, r.ID); err != nil || len(atts) != 1 || atts[0].Visit != 1 {
		t.Errorf("attempts %+v, %v; want one of visit 1", atts, err)
	}
}

// seedRuns writes runs of two pipelines, in an order that is not their
// ids', and a cycle of the loop.
func seedRuns(t *testing.T, s agentrunner.Store) {
	t.Helper()
	rs := []*agentrunner.Run{
		run("review-000003", agentrunner.RunHalted), run("review-000001", agentrunner.RunCompleted),
		run("review-000004", agentrunner.RunQueued), run("review-000002", agentrunner.RunRunning),
		run("review-000005", agentrunner.RunRunning), run("review-000006", agentrunner.RunAborted),
	}
	for _, st := range []agentrunner.RunStatus{agentrunner.RunCompleted, agentrunner.RunQueued} {
		r := run("triage-"+string(st), st)
		r.Pipeline = "triage"
		r.Parent = "review-000002" // a lead's sub-agents
		rs = append(rs, r)
	}
	mustApply(t, s, &agentrunner.Change{Runs: rs})
	mustApply(t, s, &agentrunner.Change{Cycle: cycle("20261122_140000", agentrunner.CycleRunning, "plan")})
}

func testRunsFilter(t *testing.T, s agentrunner.Store) {
	ctx := context.Background()
	seedRuns(t, s)
	for _, tt := range []struct {
		name string
		f    agentrunner.RunFilter
		want []string
	}{
		{"all", agentrunner.RunFilter{}, []string{"triage-queued", "triage-completed", "review-000006", "review-000005", "review-000004",
			"review-000003", "review-000002", "review-000001", "20261122_140000"}},
		{"a pipeline", agentrunner.RunFilter{Pipeline: "review"}, []string{"review-000006", "review-000005", "review-000004",
			"review-000003", "review-000002", "review-000001"}},
		{"a status", agentrunner.RunFilter{Status: agentrunner.RunRunning}, []string{"review-000005", "review-000002", "20261122_140000"}},
		{"a pipeline's runs of a status", agentrunner.RunFilter{Pipeline: "review", Status: agentrunner.RunRunning}, []string{"review-000005", "review-000002"}},
		{"unfinished", agentrunner.RunFilter{Unfinished: true}, []string{"triage-queued", "review-000005", "review-000004",
			"review-000003", "review-000002", "20261122_140000"}},
		{"a pipeline's unfinished runs", agentrunner.RunFilter{Pipeline: "review", Unfinished: true}, []string{"review-000005",
			"review-000004", "review-000003", "review-000002"}},
		{"unfinished and queued", agentrunner.RunFilter{Status: agentrunner.RunQueued, Unfinished: true}, []string{"triage-queued", "review-000004"}},
		{"finished and unfinished", agentrunner.RunFilter{Status: agentrunner.RunCompleted, Unfinished: true}, nil},
		{"a page", agentrunner.RunFilter{Pipeline: "review", Before: "review-000005", Limit: 2}, []string{"review-000004", "review-000003"}},
		{"a page of unfinished runs", agentrunner.RunFilter{Unfinished: true, Before: "review-000004", Limit: 2}, []string{"review-000003", "review-000002"}},
		{"an unknown pipeline", agentrunner.RunFilter{Pipeline: "nope"}, nil},
		{"a run's children", agentrunner.RunFilter{Parent: "review-000002"}, []string{"triage-queued", "triage-completed"}},
		{"a run's unfinished children", agentrunner.RunFilter{Parent: "review-000002", Unfinished: true}, []string{"triage-queued"}},
		{"a run without children", agentrunner.RunFilter{Parent: "review-000001"}, nil},
	} {
		got, err := s.Runs(ctx, tt.f)
		if err != nil {
			t.Fatalf("%s: %v", tt.name, err)
		}
		if diff := cmp.Diff(tt.want, runIDs(got)); diff != "" {
			t.Errorf("%s (-want +got):\n%s", tt.name, diff)
		}
	}
	cycles, err := s.Cycles(ctx, agentrunner.CycleFilter{Pipeline: "crypton"})
	if err != nil || !cmp.Equal([]string{"20261122_140000"}, runIDs(cycles)) {
		t.Errorf("the cycles of crypton: %v, %v", runIDs(cycles), err)
	}
	page, err := s.Cycles(ctx, agentrunner.CycleFilter{Pipeline: "review", Status: agentrunner.RunRunning, Before: "review-000005"})
	if err != nil || !cmp.Equal([]string{"review-000002"}, runIDs(page)) {
		t.Errorf("a page of review's running cycles: %v, %v", runIDs(page), err)
	}
}

func testStepRunsFilter(t *testing.T, s agentrunner.Store) {
	ctx := context.Background()
	a, b := run("review-000001", agentrunner.RunRunning), run("review-000002", agentrunner.RunRunning)
	open := func(r *agentrunner.Run, step string, visit int, st agentrunner.StepRunStatus) *agentrunner.StepRun {
		return &agentrunner.StepRun{RunID: r.ID, Step: step, Visit: visit, Status: st, OpenedAt: t0}
	}
	mustApply(t, s, &agentrunner.Change{Runs: []*agentrunner.Run{a, b}, StepRuns: []*agentrunner.StepRun{
		open(b, "review", 1, agentrunner.StepRunSucceeded), open(a, "review", 1, agentrunner.StepRunSucceeded),
	}})
	mustApply(t, s, &agentrunner.Change{StepRuns: []*agentrunner.StepRun{
		open(a, "fix", 1, agentrunner.StepRunSucceeded), open(b, "gate", 1, agentrunner.StepRunWaiting),
		open(a, "review", 2, agentrunner.StepRunOpen), open(a, "merge", 1, agentrunner.StepRunJoining),
	}})
	// A later update does not move a step run in the order.
	mustApply(t, s, &agentrunner.Change{StepRuns: []*agentrunner.StepRun{open(b, "review", 1, agentrunner.StepRunSucceeded)}})
	for _, tt := range []struct {
		name string
		f    agentrunner.StepRunFilter
		want []string
	}{
		{"all", agentrunner.StepRunFilter{}, []string{"review-000002/review#1", "review-000001/review#1", "review-000001/fix#1",
			"review-000002/gate#1", "review-000001/review#2", "review-000001/merge#1"}},
		{"a run", agentrunner.StepRunFilter{RunID: a.ID}, []string{"review-000001/review#1", "review-000001/fix#1",
			"review-000001/review#2", "review-000001/merge#1"}},
		{"a status", agentrunner.StepRunFilter{Status: agentrunner.StepRunSucceeded}, []string{"review-000002/review#1",
			"review-000001/review#1", "review-000001/fix#1"}},
		{"a run's of a status", agentrunner.StepRunFilter{RunID: b.ID, Status: agentrunner.StepRunWaiting}, []string{"review-000002/gate#1"}},
		{"limited", agentrunner.StepRunFilter{RunID: a.ID, Limit: 2}, []string{"review-000001/review#1", "review-000001/fix#1"}},
		{"an unknown run", agentrunner.StepRunFilter{RunID: "nope"}, nil},
	} {
		got, err := s.StepRuns(ctx, tt.f)
		if err != nil {
			t.Fatalf("%s: %v", tt.name, err)
		}
		if diff := cmp.Diff(tt.want, stepRunKeys(got)); diff != "" {
			t.Errorf("%s (-want +got):\n%s", tt.name, diff)
		}
	}
}

// testSerialRuns: a pipeline has many runs in flight; a serial one (the
// loop's) at most one running or halted, but any number queued.
func testSerialRuns(t *testing.T, s agentrunner.Store) {
	ctx := context.Background()
	var many []*agentrunner.Run
	for i := range 5 {
		many = append(many, run(fmt.Sprintf("review-%06d", i+1), []agentrunner.RunStatus{agentrunner.RunRunning, agentrunner.RunHalted}[i%2]))
	}
	mustApply(t, s, &agentrunner.Change{Runs: many})
	serial := func(pipeline, id string, status agentrunner.RunStatus) *agentrunner.Run {
		r := run(id, status)
		r.Pipeline, r.Serial = pipeline, true
		return r
	}
	mustApply(t, s, &agentrunner.Change{Runs: []*agentrunner.Run{
		serial("nightly", "nightly-1", agentrunner.RunRunning), serial("weekly", "weekly-1", agentrunner.RunHalted),
		serial("nightly", "nightly-2", agentrunner.RunQueued), serial("nightly", "nightly-3", agentrunner.RunQueued),
	}})
	err := s.Apply(ctx, &agentrunner.Change{Runs: []*agentrunner.Run{serial("nightly", "nightly-2", agentrunner.RunRunning)}})
	if agentrunner.ErrorCode(err) != agentrunner.ECONFLICT {
		t.Fatalf("a second running run of a serial pipeline: %v, want conflict", err)
	}
	if got, _ := s.Run(ctx, "nightly-2"); got.Status != agentrunner.RunQueued {
		t.Errorf("the refused run is %s, want queued", got.Status)
	}
	c, err := s.UnfinishedCycle(ctx, "nightly")
	if err != nil || c.ID != "nightly-1" {
		t.Errorf("UnfinishedCycle(nightly) = %+v, %v; want nightly-1", c, err)
	}
	if _, err := s.UnfinishedCycle(ctx, "review"); agentrunner.ErrorCode(err) != agentrunner.ENOTFOUND {
		t.Errorf("UnfinishedCycle of a pipeline that is not serial: %v, want not found", err)
	}
	done := serial("nightly", "nightly-1", agentrunner.RunCompleted)
	mustApply(t, s, &agentrunner.Change{Runs: []*agentrunner.Run{done, serial("nightly", "nightly-2", agentrunner.RunRunning)}})
	if c, err := s.UnfinishedCycle(ctx, "nightly"); err != nil || c.ID != "nightly-2" {
		t.Errorf("UnfinishedCycle(nightly) after nightly-1 = %+v, %v; want nightly-2", c, err)
	}
}

// testRunIDUnique: a run id names one run in the workspace; a run of
// another pipeline cannot take it, as a new run or by an update.
func testRunIDUnique(t *testing.T, s agentrunner.Store) {
	ctx := context.Background()
	c := cycle("20261122_140000", agentrunner.CycleRunning, "plan")
	mustApply(t, s, &agentrunner.Change{Cycle: c})
	other := run(c.ID, agentrunner.RunCompleted)
	if err := s.Apply(ctx, &agentrunner.Change{Runs: []*agentrunner.Run{other}}); agentrunner.ErrorCode(err) != agentrunner.ECONFLICT {
		t.Errorf("a run of review with the id of crypton's cycle: %v, want conflict", err)
	}
	if err := s.Apply(ctx, &agentrunner.Change{Cycle: other}); agentrunner.ErrorCode(err) != agentrunner.ECONFLICT {
		t.Errorf("a cycle of review with the id of crypton's cycle: %v, want conflict", err)
	}
	if got, _ := s.Run(ctx, c.ID); !cmp.Equal(c, got) {
		t.Errorf("the cycle after the refused runs: %+v, want %+v", got, c)
	}
}

// testGuardPerPipeline: From guards the state of the change's pipeline;
// runs of other pipelines do not move it.
func testGuardPerPipeline(t *testing.T, s agentrunner.Store) {
	ctx := context.Background()
	mustApply(t, s, &agentrunner.Change{Runs: []*agentrunner.Run{run("review-000001", agentrunner.RunRunning), run("review-000002", agentrunner.RunCompleted)}})
	c := cycle("20261122_140000", agentrunner.CycleRunning, "plan")
	if err := s.Apply(ctx, &agentrunner.Change{From: agentrunner.StateWaiting, Cycle: c}); agentrunner.ErrorCode(err) != agentrunner.ECONFLICT {
		t.Fatalf("the first cycle from Waiting: %v, want conflict (crypton is Idle, whatever review runs)", err)
	}
	mustApply(t, s, &agentrunner.Change{From: agentrunner.StateIdle, Cycle: c})
	a := &agentrunner.Attempt{CycleID: c.ID, Step: "plan", Number: 1, Status: agentrunner.AttemptRunning, StartedAt: t0}
	mustApply(t, s, &agentrunner.Change{From: "plan", Attempts: []*agentrunner.Attempt{a}})
	done := *a
	done.Status = agentrunner.AttemptSucceeded
	if err := s.Apply(ctx, &agentrunner.Change{From: "research", Attempts: []*agentrunner.Attempt{&done}}); agentrunner.ErrorCode(err) != agentrunner.ECONFLICT {
		t.Errorf("an attempt's change from the wrong step: %v, want conflict", err)
	}
	if err := s.Apply(ctx, &agentrunner.Change{From: "plan", Control: &agentrunner.Control{Paused: true}}); agentrunner.ErrorCode(err) != agentrunner.EINVALID {
		t.Errorf("a guarded change that names no run: %v, want invalid", err)
	}
	if ctl, _ := s.Control(ctx); ctl.Paused {
		t.Error("a refused change paused the loop")
	}
}

// testApplyAllAtomic: ApplyAll commits every change or none: one bad
// change leaves nothing of the others; a guard sees the changes before it.
func testApplyAllAtomic(t *testing.T, s agentrunner.Store) {
	ctx := context.Background()
	r1, r2 := run("review-000001", agentrunner.RunRunning), run("review-000002", agentrunner.RunRunning)
	mustApply(t, s, &agentrunner.Change{Runs: []*agentrunner.Run{r2}})
	start := &agentrunner.Change{Runs: []*agentrunner.Run{r1}, StepRuns: []*agentrunner.StepRun{{RunID: r1.ID, Step: "review", Visit: 1, Status: agentrunner.StepRunOpen, OpenedAt: t0}},
		Events: []*agentrunner.Event{{Timestamp: t0, Type: "run.started", CycleID: r1.ID, Level: agentrunner.LevelInfo}}}
	r2done := *r2
	r2done.Status, r2done.EndedAt = agentrunner.RunCompleted, t0.Add(time.Minute)
	finish := &agentrunner.Change{Runs: []*agentrunner.Run{&r2done}, Outbox: []*agentrunner.OutboxMessage{{Key: "review-000002/done", Kind: agentrunner.OutboxWebhook, Payload: []byte(`{}`), CreatedAt: t0}}}
	bad := &agentrunner.Change{StepRuns: []*agentrunner.StepRun{{RunID: "no-such-run", Step: "x", Visit: 1, Status: agentrunner.StepRunOpen, OpenedAt: t0}}}
	if err := s.ApplyAll(ctx, start, finish, bad); err == nil {
		t.Fatal("ApplyAll with a step run of an unknown run succeeded")
	}
	if _, err := s.Run(ctx, r1.ID); agentrunner.ErrorCode(err) != agentrunner.ENOTFOUND {
		t.Errorf("a failed batch wrote run %s: %v", r1.ID, err)
	}
	if got, _ := s.Run(ctx, r2.ID); got.Status != agentrunner.RunRunning {
		t.Errorf("a failed batch moved run %s to %s", r2.ID, got.Status)
	}
	if srs, _ := s.StepRuns(ctx, agentrunner.StepRunFilter{}); len(srs) != 0 {
		t.Errorf("a failed batch wrote step runs %v", stepRunKeys(srs))
	}
	if evs, _ := s.Events(ctx, agentrunner.EventFilter{}); len(evs) != 0 {
		t.Errorf("a failed batch wrote %d events", len(evs))
	}
	if _, err := s.OutboxMessage(ctx, "review-000002/done"); agentrunner.ErrorCode(err) != agentrunner.ENOTFOUND {
		t.Errorf("a failed batch wrote an outbox message: %v", err)
	}
	// The loop's cycle started and moved on in one batch: the second
	// change's guard sees the first.
	c := cycle("20261122_140000", agentrunner.CycleRunning, "plan")
	next := *c
	next.Status, next.Step, next.LastCompletedStep = agentrunner.CycleHalted, "research", "plan"
	if err := s.ApplyAll(ctx, start, finish, &agentrunner.Change{From: agentrunner.StateIdle, Cycle: c}, &agentrunner.Change{From: "plan", Cycle: &next}); err != nil {
		t.Fatalf("ApplyAll: %v", err)
	}
	got, _ := s.Runs(ctx, agentrunner.RunFilter{})
	if diff := cmp.Diff([]*agentrunner.Run{&r2done, r1, &next}, got); diff != "" {
		t.Errorf("runs after the batch (-want +got):\n%s", diff)
	}
	if srs, _ := s.StepRuns(ctx, agentrunner.StepRunFilter{}); len(srs) != 1 {
		t.Errorf("step runs after the batch: %v", stepRunKeys(srs))
	}
}

// testGateDecidedOnce: a second command with the kind and target of one
// given before (a second decision on one gate) is refused, and not stored.
func testGateDecidedOnce(t *testing.T, s agentrunner.Store) {
	ctx := context.Background()
	decide := func(target, operator string) *agentrunner.Command {
		return &agentrunner.Command{Kind: agentrunner.CommandGateDecision, Operator: operator, CreatedAt: t0, Target: target,
			Args: map[string]any{"action": "approve", "comment": "ship it"}}
	}
	first := decide("review-000001/approve#1", "alice")
	if err := s.AddCommand(ctx, first); err != nil {
		t.Fatal(err)
	}
	if err := s.AddCommand(ctx, decide("review-000001/approve#1", "bob")); agentrunner.ErrorCode(err) != agentrunner.ECONFLICT {
		t.Errorf("a second decision on one gate: %v, want conflict", err)
	}
	// Another visit of the gate, and commands without a target, are
	// separate.
	for _, c := range []*agentrunner.Command{decide("review-000001/approve#2", "bob"),
		{Kind: agentrunner.CommandPause, Operator: "bob", CreatedAt: t0}, {Kind: agentrunner.CommandPause, Operator: "carol", CreatedAt: t0}} {
		if err := s.AddCommand(ctx, c); err != nil {
			t.Errorf("AddCommand(%s %q): %v", c.Kind, c.Target, err)
		}
	}
	audit, err := s.Commands(ctx, agentrunner.CommandFilter{})
	if err != nil || len(audit) != 4 {
		t.Fatalf("audit %+v, %v; want 4 commands", audit, err)
	}
	if diff := cmp.Diff(first, audit[3]); diff != "" {
		t.Errorf("the first decision (-want +got):\n%s", diff)
	}
}

// testRunCounts: the counts follow the runs and step runs as they change;
// finished runs and decided gates drop out.
func testRunCounts(t *testing.T, s agentrunner.Store) {
	ctx := context.Background()
	if got, err := s.RunCounts(ctx); err != nil || !cmp.Equal(agentrunner.RunCounts{}, got) {
		t.Errorf("an empty store's counts: %+v, %v", got, err)
	}
	seedRuns(t, s)
	gate := func(runID string, st agentrunner.StepRunStatus) *agentrunner.StepRun {
		return &agentrunner.StepRun{RunID: runID, Step: "signoff", Visit: 1, Status: st, OpenedAt: t0}
	}
	mustApply(t, s, &agentrunner.Change{StepRuns: []*agentrunner.StepRun{gate("review-000002", agentrunner.StepRunWaiting),
		gate("review-000005", agentrunner.StepRunWaiting), gate("review-000003", agentrunner.StepRunOpen)}})
	want := agentrunner.RunCounts{Unfinished: []agentrunner.RunCount{
		{Pipeline: "crypton", Status: agentrunner.RunRunning, N: 1},
		{Pipeline: "review", Status: agentrunner.RunHalted, N: 1},
		{Pipeline: "review", Status: agentrunner.RunQueued, N: 1},
		{Pipeline: "review", Status: agentrunner.RunRunning, N: 2},
		{Pipeline: "triage", Status: agentrunner.RunQueued, N: 1},
	}, WaitingGates: 2}
	if got, err := s.RunCounts(ctx); err != nil || !cmp.Equal(want, got) {
		t.Errorf("counts (-want +got):\n%s%v", cmp.Diff(want, got), err)
	}
	done := run("review-000005", agentrunner.RunCompleted)
	mustApply(t, s, &agentrunner.Change{Runs: []*agentrunner.Run{done}, StepRuns: []*agentrunner.StepRun{gate(done.ID, agentrunner.StepRunSucceeded)}})
	want.Unfinished[3].N, want.WaitingGates = 1, 1
	if got, err := s.RunCounts(ctx); err != nil || !cmp.Equal(want, got) {
		t.Errorf("counts after review-000005 completed (-want +got):\n%s%v", cmp.Diff(want, got), err)
	}
}
