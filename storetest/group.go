package storetest

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/agentrunner/agentrunner"
	"github.com/google/go-cmp/cmp"
)

// groupTests are the cases of the graph scheduler's group commit:
// ApplyGroup and the attempt guards.
var groupTests = []struct {
	name string
	fn   func(t *testing.T, s agentrunner.Store)
}{
	{"ApplyGroupFailsOnlyTheChangesRefused", testApplyGroup},
	{"ApplyGroupOtherErrorsFailTheWholeGroup", testApplyGroupFails},
	{"AttemptGuardsGuardApplyAndApplyAll", testAttemptGuards},
}

// groupRuns are the runs each case of a group starts from: each one
// running, its step run review#1 open and attempt 1 of it running.
var groupRuns = []string{"a", "b", "c"}

// seedGroup writes the runs of groupRuns, their ids prefixed, and lets
// another writer close attempt 1 of the runs in moved (the store moved on
// without the writer of the group).
func seedGroup(t *testing.T, s agentrunner.Store, prefix string, moved []string) {
	t.Helper()
	for _, id := range groupRuns {
		id = prefix + id
		a := &agentrunner.Attempt{CycleID: id, Step: "review", Number: 1, Visit: 1, Status: agentrunner.AttemptRunning, StartedAt: t0}
		mustApply(t, s, &agentrunner.Change{Runs: []*agentrunner.Run{run(id, agentrunner.RunRunning)}, Attempts: []*agentrunner.Attempt{a},
			StepRuns: []*agentrunner.StepRun{{RunID: id, Step: "review", Visit: 1, Status: agentrunner.StepRunOpen, OpenedAt: t0}}})
	}
	for _, id := range moved {
		a := &agentrunner.Attempt{CycleID: prefix + id, Step: "review", Number: 1, Visit: 1, Status: agentrunner.AttemptFailed,
			ErrorClass: agentrunner.ClassAborted, Error: "repaired by hand", StartedAt: t0, EndedAt: t0.Add(time.Second)}
		mustApply(t, s, &agentrunner.Change{Attempts: []*agentrunner.Attempt{a}})
	}
}

// closing is the change that commits the success of attempt n of run
// id's review#1, guarded by that attempt, and opens attempt n+1 of step
// fix (as a scheduler would open a successor).
func closing(id string, n int) *agentrunner.Change {
	done := &agentrunner.Attempt{CycleID: id, Step: "review", Number: n, Visit: 1, Status: agentrunner.AttemptSucceeded, StartedAt: t0, EndedAt: t0.Add(time.Minute)}
	next := &agentrunner.Attempt{CycleID: id, Step: "fix", Number: n + 1, Visit: 1, Status: agentrunner.AttemptRunning, StartedAt: t0.Add(time.Minute)}
	return &agentrunner.Change{
		Guards:   []agentrunner.AttemptGuard{{RunID: id, Step: "review", Number: n}},
		Attempts: []*agentrunner.Attempt{done, next},
		StepRuns: []*agentrunner.StepRun{
			{RunID: id, Step: "review", Visit: 1, Status: agentrunner.StepRunSucceeded, OpenedAt: t0, EndedAt: t0.Add(time.Minute)},
			{RunID: id, Step: "fix", Visit: 1, Status: agentrunner.StepRunOpen, From: "review#1", OpenedAt: t0.Add(time.Minute)},
		},
		Events: []*agentrunner.Event{{Timestamp: t0.Add(time.Minute), Type: agentrunner.EventAttemptSucceeded, Step: "review", CycleID: id, Level: agentrunner.LevelInfo}},
	}
}

// continuing is the change that closes the attempt of fix closing opened
// (number n+1 of run id), guarded by it.
func continuing(id string, n int) *agentrunner.Change {
	done := &agentrunner.Attempt{CycleID: id, Step: "fix", Number: n + 1, Visit: 1, Status: agentrunner.AttemptSucceeded, StartedAt: t0, EndedAt: t0.Add(2 * time.Minute)}
	return &agentrunner.Change{
		Guards:   []agentrunner.AttemptGuard{{RunID: id, Step: "fix", Number: n + 1}},
		Attempts: []*agentrunner.Attempt{done},
		Events:   []*agentrunner.Event{{Timestamp: t0.Add(2 * time.Minute), Type: agentrunner.EventAttemptSucceeded, Step: "fix", CycleID: id, Level: agentrunner.LevelInfo}},
	}
}

// groupOutcome is what a group left in the store: the steps with a
// succeeded step run and the events, as "run/step", and the code of
// each change's error.
type groupOutcome struct {
	Codes     []string
	Succeeded []string
	Events    []string
}

func testApplyGroup(t *testing.T, s agentrunner.Store) {
	ctx := context.Background()
	used := &agentrunner.Command{Kind: agentrunner.CommandAbortRun, Operator: "alice", CreatedAt: t0, Args: map[string]any{"run": "x"}}
	if err := s.AddCommand(ctx, used); err != nil {
		t.Fatal(err)
	}
	consumed := *used
	consumed.ConsumedAt, consumed.Result = t0, "aborted"
	mustApply(t, s, &agentrunner.Change{Consumed: []*agentrunner.Command{&consumed}})
	tests := []struct {
		name  string
		moved []string
		group func(p string) []*agentrunner.Change
		want  groupOutcome
	}{
		{"every guard holds", nil,
			func(p string) []*agentrunner.Change {
				return []*agentrunner.Change{closing(p+"a", 1), closing(p+"b", 1), closing(p+"c", 1)}
			},
			groupOutcome{Codes: []string{"", "", ""}, Succeeded: []string{"a/review", "b/review", "c/review"}, Events: []string{"a/review", "b/review", "c/review"}}},
		{"one guard fails: the others commit, that one does not", []string{"b"},
			func(p string) []*agentrunner.Change {
				return []*agentrunner.Change{closing(p+"a", 1), closing(p+"b", 1), closing(p+"c", 1)}
			},
			groupOutcome{Codes: []string{"", agentrunner.ECONFLICT, ""}, Succeeded: []string{"a/review", "c/review"}, Events: []string{"a/review", "c/review"}}},
		{"a guard on an attempt the store does not have fails", nil,
			func(p string) []*agentrunner.Change {
				return []*agentrunner.Change{closing(p+"a", 1), closing(p+"b", 7)}
			},
			groupOutcome{Codes: []string{"", agentrunner.ECONFLICT}, Succeeded: []string{"a/review"}, Events: []string{"a/review"}}},
		{"a guard sees the changes committed before it", nil,
			func(p string) []*agentrunner.Change {
				return []*agentrunner.Change{closing(p+"a", 1), continuing(p+"a", 1)}
			},
			groupOutcome{Codes: []string{"", ""}, Succeeded: []string{"a/review"}, Events: []string{"a/review", "a/fix"}}},
		{"a guard does not see a change refused before it", []string{"a"},
			func(p string) []*agentrunner.Change {
				return []*agentrunner.Change{closing(p+"a", 1), continuing(p+"a", 1), closing(p+"c", 1)}
			},
			groupOutcome{Codes: []string{agentrunner.ECONFLICT, agentrunner.ECONFLICT, ""}, Succeeded: []string{"c/review"}, Events: []string{"c/review"}}},
		{"a change alone in its group is refused alone", []string{"b"},
			func(p string) []*agentrunner.Change { return []*agentrunner.Change{closing(p+"b", 1)} },
			groupOutcome{Codes: []string{agentrunner.ECONFLICT}}},
		{"every guard fails", []string{"a", "b"},
			func(p string) []*agentrunner.Change {
				return []*agentrunner.Change{closing(p+"a", 1), closing(p+"b", 1)}
			},
			groupOutcome{Codes: []string{agentrunner.ECONFLICT, agentrunner.ECONFLICT}}},
		{"another conflict fails only its change", nil,
			func(p string) []*agentrunner.Change {
				again := closing(p+"b", 1)
				again.Consumed = []*agentrunner.Command{&consumed}
				return []*agentrunner.Change{closing(p+"a", 1), again, closing(p+"c", 1)}
			},
			groupOutcome{Codes: []string{"", agentrunner.ECONFLICT, ""}, Succeeded: []string{"a/review", "c/review"}, Events: []string{"a/review", "c/review"}}},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := fmt.Sprintf("g%d-", i)
			seedGroup(t, s, p, tt.moved)
			chs := tt.group(p)
			errs, err := s.ApplyGroup(ctx, chs...)
			if err != nil {
				t.Fatalf("ApplyGroup: %v", err)
			}
			got := groupOutcome{Codes: make([]string, len(errs))}
			for j, e := range errs {
				got.Codes[j] = agentrunner.ErrorCode(e)
			}
			got.Succeeded, got.Events = storedOutcome(t, s, p)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("outcome (-want +got):\n%s", diff)
			}
			for j, ch := range chs {
				for _, ev := range ch.Events {
					if committed := errs[j] == nil; committed != (ev.ID != 0) {
						t.Errorf("change %d (error %v): event %s has id %d", j, errs[j], ev.Type, ev.ID)
					}
				}
			}
			for _, id := range tt.moved {
				atts, _ := s.Attempts(ctx, p+id)
				if len(atts) != 1 || atts[0].Status != agentrunner.AttemptFailed || atts[0].Error != "repaired by hand" {
					t.Errorf("run %s: the other writer's attempt was written over: %+v", id, atts)
				}
			}
		})
	}
}

// storedOutcome lists the succeeded step runs and the events of the runs
// of groupRuns prefixed with p, as "run/step" without the prefix.
func storedOutcome(t *testing.T, s agentrunner.Store, p string) (succeeded, events []string) {
	t.Helper()
	ctx := context.Background()
	for _, id := range groupRuns {
		srs, err := s.StepRuns(ctx, agentrunner.StepRunFilter{RunID: p + id, Status: agentrunner.StepRunSucceeded})
		if err != nil {
			t.Fatal(err)
		}
		for _, sr := range srs {
			succeeded = append(succeeded, id+"/"+sr.Step)
		}
		evs, err := s.Events(ctx, agentrunner.EventFilter{CycleID: p + id})
		if err != nil {
			t.Fatal(err)
		}
		for _, ev := range evs {
			events = append(events, id+"/"+ev.Step)
		}
	}
	return succeeded, events
}

// testApplyGroupFails: an error other than a conflict (here a step run of
// a run that does not exist) fails the whole group: nothing is written,
// not even the changes before it, and no change has an error of its own.
func testApplyGroupFails(t *testing.T, s agentrunner.Store) {
	ctx := context.Background()
	seedGroup(t, s, "", []string{"b"})
	bad := &agentrunner.Change{StepRuns: []*agentrunner.StepRun{{RunID: "no-such-run", Step: "x", Visit: 1, Status: agentrunner.StepRunOpen, OpenedAt: t0}}}
	errs, err := s.ApplyGroup(ctx, closing("a", 1), closing("b", 1), bad, closing("c", 1))
	if agentrunner.ErrorCode(err) != agentrunner.EINVALID || errs != nil {
		t.Errorf("ApplyGroup with a step run of an unknown run: %v, %v; want invalid and no errors of changes", errs, err)
	}
	succeeded, events := storedOutcome(t, s, "")
	if len(succeeded) != 0 || len(events) != 0 {
		t.Errorf("a failed group wrote step runs %v and events %v", succeeded, events)
	}
	if errs, err := s.ApplyGroup(ctx); err != nil || len(errs) != 0 {
		t.Errorf("an empty group: %v, %v", errs, err)
	}
}

// testAttemptGuards: Apply and ApplyAll check the attempt guards too; a
// failed one fails them with ECONFLICT and writes nothing.
func testAttemptGuards(t *testing.T, s agentrunner.Store) {
	ctx := context.Background()
	seedGroup(t, s, "", []string{"b"})
	if err := s.Apply(ctx, closing("b", 1)); agentrunner.ErrorCode(err) != agentrunner.ECONFLICT {
		t.Errorf("Apply of a change guarded by an attempt closed by another writer: %v, want conflict", err)
	}
	if err := s.ApplyAll(ctx, closing("a", 1), closing("b", 1)); agentrunner.ErrorCode(err) != agentrunner.ECONFLICT {
		t.Errorf("ApplyAll with such a change: %v, want conflict", err)
	}
	if succeeded, events := storedOutcome(t, s, ""); len(succeeded) != 0 || len(events) != 0 {
		t.Errorf("refused changes wrote step runs %v and events %v", succeeded, events)
	}
	mustApply(t, s, closing("a", 1))
	if err := s.Apply(ctx, closing("a", 1)); agentrunner.ErrorCode(err) != agentrunner.ECONFLICT {
		t.Errorf("a second commit of one attempt's outcome: %v, want conflict", err)
	}
}
