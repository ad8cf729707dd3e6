package scheduler_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/agentrunner/agentrunner"
	"github.com/agentrunner/agentrunner/scheduler"
)

func steps(ss ...*agentrunner.Step) map[string]*agentrunner.Step {
	m := map[string]*agentrunner.Step{}
	for _, s := range ss {
		if s.Kind == "" {
			s.Kind = "script"
		}
		s.Where = "test.yaml:" + s.ID
		m[s.ID] = s
	}
	return m
}

// signalFlow is spec 2's shape: each agent's SIGNAL BLOCK names the next.
func signalFlow() *agentrunner.Pipeline {
	roles := []string{"orchestrator", "comparator", "diagnoser", "planner", "actor", "verifier"}
	var ss []*agentrunner.Step
	for _, r := range roles {
		st := &agentrunner.Step{ID: r, Label: &agentrunner.LabelSource{Parser: "signal"}, MaxVisits: 3, OnCap: agentrunner.CapAction{Halt: true}}
		for _, to := range roles {
			st.Routes = append(st.Routes, agentrunner.Route{When: to, To: to})
		}
		st.Routes = append(st.Routes, agentrunner.Route{When: "STOP", To: agentrunner.EndStep})
		ss = append(ss, st)
	}
	return &agentrunner.Pipeline{Name: "signal", Start: "orchestrator", Steps: steps(ss...), RunID: agentrunner.RunIDDateSeq}
}

func signal(agent, next string) string {
	return fmt.Sprintf("### %s Output\nDone.\n\nSIGNAL BLOCK\nAgent=%s | Cycle=2026-11-24-001 | Step=ROUTE | Confidence=4 | Risk=low | Next=%s\n", agent, agent, next)
}

func TestSignalRoutingFollowsEachAgentsNext(t *testing.T) {
	k := &scriptKind{outputs: map[string][]string{
		"orchestrator": {signal("orchestrator", "comparator"), signal("orchestrator", "STOP")},
		"comparator":   {signal("comparator", "diagnoser")},
		"diagnoser":    {signal("diagnoser", "verifier")},
		"verifier":     {signal("verifier", "orchestrator")},
	}}
	h := newHarness(t, k, signalFlow())
	h.run()
	id := h.startRun("signal", nil)
	r, srs := h.waitDone(id)
	if r.Status != agentrunner.RunCompleted {
		t.Fatalf("run %s is %s (%s); step runs %s", id, r.Status, r.Error, describe(srs))
	}
	want := "orchestrator#1:succeeded[comparator] comparator#1:succeeded[diagnoser] diagnoser#1:succeeded[verifier] verifier#1:succeeded[orchestrator] orchestrator#2:succeeded[STOP]"
	if got := describe(sortByOpened(srs)); got != want {
		t.Errorf("step runs:\n got %s\nwant %s", got, want)
	}
	if !strings.HasPrefix(id, "20") || len(id) != len("2026-11-24-001") {
		t.Errorf("run id %q is not YYYY-MM-DD-NNN", id)
	}
}

func TestARouteLabelThatMatchesNothingFailsTheStepRunWithoutRetry(t *testing.T) {
	k := &scriptKind{outputs: map[string][]string{"orchestrator": {signal("orchestrator", "janitor")}}}
	p := signalFlow()
	p.Steps["orchestrator"].Retry = agentrunner.RetryPolicy{Max: 3}
	h := newHarness(t, k, p)
	h.run()
	id := h.startRun("signal", nil)
	r, srs := h.waitDone(id)
	if r.Status != agentrunner.RunFailed {
		t.Fatalf("run is %s, want failed; %s", r.Status, describe(srs))
	}
	for _, want := range []string{id, "orchestrator", `"janitor"`, "comparator", "STOP"} {
		if !strings.Contains(r.Error, want) {
			t.Errorf("the run's error %q does not name %s", r.Error, want)
		}
	}
	if n := len(k.Calls()); n != 1 {
		t.Errorf("the step ran %d times, want once: a routing error is not retried", n)
	}
}

func TestAnOutputWithoutItsRoutingFieldFailsNamingWhatWasExpected(t *testing.T) {
	k := &scriptKind{outputs: map[string][]string{"orchestrator": {"I forgot the signal block."}}}
	h := newHarness(t, k, signalFlow())
	h.run()
	id := h.startRun("signal", nil)
	r, _ := h.waitDone(id)
	if r.Status != agentrunner.RunFailed || !strings.Contains(r.Error, "SIGNAL BLOCK") || !strings.Contains(r.Error, "orchestrator") {
		t.Fatalf("run is %s with error %q; want failed, naming the step and the SIGNAL BLOCK", r.Status, r.Error)
	}
}

// reviewLoop is spec 3's shape: review ⇄ fix until APPROVE, capped; at the
// cap a person decides at a gate.
func reviewLoop() *agentrunner.Pipeline {
	return &agentrunner.Pipeline{Name: "review", Start: "write", Steps: steps(
		&agentrunner.Step{ID: "write", Next: "review"},
		&agentrunner.Step{ID: "review", Label: &agentrunner.LabelSource{Field: "Verdict"}, MaxVisits: 3,
			Routes: []agentrunner.Route{{When: "APPROVE", To: agentrunner.EndStep}, {Otherwise: true, To: "fix"}},
			OnCap:  agentrunner.CapAction{To: "escalate"}},
		&agentrunner.Step{ID: "fix", Next: "review", MaxVisits: 3},
		&agentrunner.Step{ID: "escalate", Kind: agentrunner.KindGate,
			Routes: []agentrunner.Route{{When: "approve", To: agentrunner.EndStep}, {When: "reject", To: "fix"}}},
	)}
}

func TestReviewLoopEndsOnApprove(t *testing.T) {
	k := &scriptKind{outputs: map[string][]string{"review": {"Verdict: REVISE", "Verdict: **APPROVE**"}}}
	h := newHarness(t, k, reviewLoop())
	h.run()
	id := h.startRun("review", nil)
	r, srs := h.waitDone(id)
	want := "write#1:succeeded review#1:succeeded[REVISE] fix#1:succeeded review#2:succeeded[APPROVE]"
	if r.Status != agentrunner.RunCompleted || describe(sortByOpened(srs)) != want {
		t.Fatalf("run %s (%s): %s\nwant %s", r.Status, r.Error, describe(sortByOpened(srs)), want)
	}
	// Every event of the run names its pipeline, which the metrics of
	// runs, attempts and gates are labelled with.
	evs, err := h.store.Events(context.Background(), agentrunner.EventFilter{CycleID: id})
	if err != nil || len(evs) == 0 {
		t.Fatalf("events of %s: %d, %v", id, len(evs), err)
	}
	for _, ev := range evs {
		if ev.Details["pipeline"] != "review" {
			t.Errorf("event %s of %s: pipeline %v, want review", ev.Type, id, ev.Details["pipeline"])
		}
	}
}

func TestReviewLoopAtItsCapOpensAGateThatSurvivesARestart(t *testing.T) {
	k := &scriptKind{outputs: map[string][]string{"review": {"Verdict: REVISE"}}}
	h := newHarness(t, k, reviewLoop())
	h.run()
	id := h.startRun("review", nil)
	srs := h.waitGate(id, "escalate")
	want := "write#1:succeeded review#1:succeeded[REVISE] fix#1:succeeded review#2:succeeded[REVISE] fix#2:succeeded review#3:succeeded[REVISE] fix#3:succeeded escalate#1:waiting"
	if got := describe(sortByOpened(srs)); got != want {
		t.Fatalf("step runs:\n got %s\nwant %s", got, want)
	}
	evs, _ := h.store.Events(context.Background(), agentrunner.EventFilter{CycleID: id, Type: "loop.capped"})
	if len(evs) != 1 || evs[0].Step != "review" || evs[0].Details["to"] != "escalate" {
		t.Errorf("loop.capped events: %+v", evs)
	}
	out, _ := h.store.Outbox(context.Background(), agentrunner.OutboxFilter{Kind: agentrunner.OutboxWebhook, Due: farFuture})
	if len(out) != 1 || !strings.Contains(string(out[0].Payload), `"kind":"gate_opened"`) {
		t.Errorf("the gate's webhook: %+v", out)
	}

	h.run() // a restart: the gate still waits, nothing ran again
	before := len(k.Calls())
	if err := h.decide(id, "escalate", 1, agentrunner.DecisionApprove, ""); err != nil {
		t.Fatal(err)
	}
	r, srs := h.waitDone(id)
	if r.Status != agentrunner.RunCompleted {
		t.Fatalf("run is %s (%s) after the approval; %s", r.Status, r.Error, describe(srs))
	}
	if after := len(k.Calls()); after != before {
		t.Errorf("the restart ran %d attempts again", after-before)
	}
	gateRun := srs[slices.IndexFunc(srs, func(sr *agentrunner.StepRun) bool { return sr.Step == "escalate" })]
	if gateRun.Decision == nil || gateRun.Decision.Operator != "tester" || gateRun.Decision.Comment != "looked at it" || gateRun.Label != "approve" {
		t.Errorf("the gate's decision is not recorded: %+v %+v", gateRun, gateRun.Decision)
	}
	if err := h.decide(id, "escalate", 1, agentrunner.DecisionReject, ""); agentrunner.ErrorCode(err) != agentrunner.ECONFLICT {
		t.Errorf("a second decision on the gate: %v, want a conflict", err)
	}
}

func TestFanOutToThreeBranchesAndJoin(t *testing.T) {
	k := &scriptKind{}
	p := &agentrunner.Pipeline{Name: "fan", Start: "plan", Steps: steps(
		&agentrunner.Step{ID: "plan", Then: []string{"a", "b", "c"}},
		&agentrunner.Step{ID: "a", Next: "merge"},
		&agentrunner.Step{ID: "b", Next: "merge"},
		&agentrunner.Step{ID: "c", Next: "merge"},
		&agentrunner.Step{ID: "merge", Join: agentrunner.JoinAll, Next: agentrunner.EndStep},
	)}
	h := newHarness(t, k, p)
	h.run()
	id := h.startRun("fan", nil)
	r, srs := h.waitDone(id)
	if r.Status != agentrunner.RunCompleted {
		t.Fatalf("run %s: %s", r.Status, describe(srs))
	}
	var merge *agentrunner.StepRun
	for _, sr := range srs {
		if sr.Step == "merge" {
			if merge != nil {
				t.Fatalf("the join ran twice: %s", describe(srs))
			}
			merge = sr
		}
	}
	if got := slices.Sorted(slices.Values(merge.Arrived)); !cmp.Equal(got, []string{"a", "b", "c"}) {
		t.Errorf("the join's arrivals are %v", got)
	}
	calls := k.Calls()
	last := calls[len(calls)-1]
	if last.Step != "merge" || len(calls) != 5 {
		t.Errorf("calls %+v: want plan, a, b, c in any order, then merge", calls)
	}
}

func TestAtMostMaxConcurrentRunsRunAtOnce(t *testing.T) {
	k := &scriptKind{delay: 20 * time.Millisecond} // so runs overlap
	p := &agentrunner.Pipeline{Name: "many", Start: "one", MaxConcurrentRuns: 50, Steps: steps(
		&agentrunner.Step{ID: "one", Next: "two"},
		&agentrunner.Step{ID: "two", Next: agentrunner.EndStep},
	)}
	h := newHarness(t, k, p)
	h.maxAtt = 200
	// All 200 are asked for before the scheduler looks: it sees them at once.
	var cmds []int64
	for range 200 {
		id, err := h.command(agentrunner.CommandStartRun, "", map[string]any{"pipeline": "many"})
		if err != nil {
			t.Fatal(err)
		}
		cmds = append(cmds, id)
	}
	h.run()
	for _, cmd := range cmds {
		id := h.await(cmd)
		if r, _ := h.waitDone(id); r.Status != agentrunner.RunCompleted {
			t.Fatalf("run %s is %s: %s", id, r.Status, r.Error)
		}
	}
	if k.peak > 50 {
		t.Errorf("%d attempts ran at once: more runs than max_concurrent_runs (50) were running", k.peak)
	}
	if len(k.Calls()) != 400 {
		t.Errorf("%d attempts ran, want 400", len(k.Calls()))
	}
}

var farFuture = time.Date(2100, 1, 1, 0, 0, 0, 0, time.UTC)

// sortByOpened orders step runs the way they were opened.
func sortByOpened(srs []*agentrunner.StepRun) []*agentrunner.StepRun {
	out := slices.Clone(srs)
	slices.SortStableFunc(out, func(a, b *agentrunner.StepRun) int { return a.OpenedAt.Compare(b.OpenedAt) })
	return out
}

func TestAJoinWhoseBranchWentElsewhereFailsTheRunSayingWhy(t *testing.T) {
	k := &scriptKind{outputs: map[string][]string{"b": {"Verdict: SKIP"}}}
	p := &agentrunner.Pipeline{Name: "fan", Start: "plan", Steps: steps(
		&agentrunner.Step{ID: "plan", Then: []string{"a", "b"}},
		&agentrunner.Step{ID: "a", Next: "merge"},
		&agentrunner.Step{ID: "b", Label: &agentrunner.LabelSource{Field: "Verdict"},
			Routes: []agentrunner.Route{{When: "JOIN", To: "merge"}, {Otherwise: true, To: agentrunner.EndStep}}},
		&agentrunner.Step{ID: "merge", Join: agentrunner.JoinAll, Next: agentrunner.EndStep},
	)}
	h := newHarness(t, k, p)
	h.run()
	id := h.startRun("fan", nil)
	r, srs := h.waitDone(id)
	if r.Status != agentrunner.RunFailed || !strings.Contains(r.Error, "merge#1") || !strings.Contains(r.Error, "[b]") {
		t.Fatalf("run is %s (%q); want failed, naming the join and the branch it waits for; %s", r.Status, r.Error, describe(srs))
	}
	evs, err := h.store.Events(context.Background(), agentrunner.EventFilter{CycleID: id, Type: scheduler.EventRunFailed})
	if err != nil || len(evs) != 1 {
		t.Errorf("run.failed events: %v %v", evs, err)
	}
}

func TestALoopAtItsCapWithOnCapEndEndsTheRunIncompleteAndEscalates(t *testing.T) {
	k := &scriptKind{outputs: map[string][]string{
		"orchestrator": {signal("orchestrator", "verifier")},
		"verifier":     {signal("verifier", "orchestrator")},
	}}
	p := signalFlow()
	p.Steps["orchestrator"].OnCap = agentrunner.CapAction{End: true}
	h := newHarness(t, k, p)
	h.alert = outboxAlert(t)
	h.run()
	id := h.startRun("signal", nil)
	r, srs := h.waitDone(id)
	wantErr := "step orchestrator reached its max_visits (3) before the run reached its end: the run is incomplete"
	if r.Status != agentrunner.RunIncomplete || r.Error != wantErr || r.EndedAt.IsZero() {
		t.Fatalf("run %s (%q, ended %v); want incomplete (%q)", r.Status, r.Error, r.EndedAt, wantErr)
	}
	want := "orchestrator#1:succeeded[verifier] verifier#1:succeeded[orchestrator] orchestrator#2:succeeded[verifier] verifier#2:succeeded[orchestrator] orchestrator#3:succeeded[verifier] verifier#3:succeeded[orchestrator]"
	if got := describe(sortByOpened(srs)); got != want {
		t.Errorf("step runs:\n got %s\nwant %s", got, want)
	}
	wantEsc := []map[string]any{{"pipeline": "signal", "step": "orchestrator", "visits": 3.0, "max_visits": 3.0, "policy": "end", "error": wantErr}}
	if d := cmp.Diff(wantEsc, h.events(id, "escalation")); d != "" {
		t.Errorf("escalation events (-want +got):\n%s", d)
	}
	if n := len(h.events(id, "run.incomplete")); n != 1 {
		t.Errorf("%d run.incomplete events, want 1", n)
	}
	m, err := h.store.OutboxMessage(context.Background(), "escalation/"+id+"/orchestrator/cap")
	if err != nil || !strings.Contains(string(m.Payload), `"policy":"end"`) {
		t.Errorf("the escalation webhook: %+v, %v", m, err)
	}
	h.check()
}

func TestAnInvalidOutputIsRetriedOnlyWhenThePolicySaysSo(t *testing.T) {
	for _, retry := range []bool{false, true} {
		t.Run(fmt.Sprint("invalid_output=", retry), func(t *testing.T) {
			k := &scriptKind{outputs: map[string][]string{"orchestrator": {signal("orchestrator", "STOP")}},
				fail: func(a *agentrunner.StepAttempt) error {
					if a.Attempt.Number == 1 {
						return agentrunner.Fail(agentrunner.ClassInvalidOutput, "the SIGNAL BLOCK (line 3): Next is missing")
					}
					return nil
				}}
			p := signalFlow()
			p.Steps["orchestrator"].Retry = agentrunner.RetryPolicy{Max: 2, InvalidOutput: retry}
			h := newHarness(t, k, p)
			h.run()
			id := h.startRun("signal", nil)
			r, _ := h.waitDone(id)
			want, attempts := agentrunner.RunFailed, []string{"1:failed:0"}
			if retry {
				want, attempts = agentrunner.RunCompleted, []string{"1:failed:0", "2:succeeded:0"}
			}
			if r.Status != want {
				t.Errorf("run %s (%s), want %s", r.Status, r.Error, want)
			}
			if d := cmp.Diff(attempts, h.attempts(id, "orchestrator")); d != "" {
				t.Errorf("attempts (-want +got):\n%s", d)
			}
		})
	}
}
