package scheduler_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/agentrunner/agentrunner"
	"github.com/agentrunner/agentrunner/internal/clocktest"
	"github.com/agentrunner/agentrunner/scheduler"
)

// sortedStrings compares lists of strings in any order.
var sortedStrings = cmpopts.SortSlices(func(a, b string) bool { return a < b })

// TestManyRunsCommitInGroupsWhileOthersRead: 200 runs of a graph that fans
// out into two branches and joins them, on the real SQLite store, while
// readers poll the status, the runs, the step runs and the events of the
// same store. Every run completes, every step run succeeded exactly once
// and every step ran once, and the results were committed in groups: far
// fewer commits than step runs closed (one commit per result would be at
// least one each). Run it with -race.
func TestManyRunsCommitInGroupsWhileOthersRead(t *testing.T) {
	const runs = 200
	k := &scriptKind{delay: 5 * time.Millisecond} // so results of many runs overlap
	p := &agentrunner.Pipeline{Name: "fan", Start: "plan", Steps: steps(
		&agentrunner.Step{ID: "plan", Then: []string{"a", "b"}},
		&agentrunner.Step{ID: "a", Next: "merge"},
		&agentrunner.Step{ID: "b", Next: "merge"},
		&agentrunner.Step{ID: "merge", Join: agentrunner.JoinAll, Next: agentrunner.EndStep},
	)}
	h := newHarness(t, k, p)
	h.maxAtt = 100
	for range runs {
		if _, err := h.command(agentrunner.CommandStartRun, "", map[string]any{"pipeline": "fan"}); err != nil {
			t.Fatal(err)
		}
	}
	ctx := context.Background()
	stop := make(chan struct{})
	var readers sync.WaitGroup
	readErrs := make(chan error, 2)
	reads := []func() error{
		func() error { _, err := h.store.RunCounts(ctx); return err },
		func() error { _, err := h.store.Runs(ctx, agentrunner.RunFilter{Limit: 50}); return err },
		func() error {
			_, err := h.store.StepRuns(ctx, agentrunner.StepRunFilter{Status: agentrunner.StepRunOpen, Limit: 100})
			return err
		},
		func() error {
			_, err := h.store.Events(ctx, agentrunner.EventFilter{Newest: true, Limit: 100})
			return err
		},
	}
	for range 2 {
		readers.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				if err := reads[i%len(reads)](); err != nil {
					readErrs <- err
					return
				}
			}
		})
	}
	h.run()
	deadline := time.Now().Add(2 * time.Minute)
	for {
		c, err := h.store.RunCounts(ctx)
		if err != nil {
			t.Fatal(err)
		}
		done, _ := h.store.Runs(ctx, agentrunner.RunFilter{Status: agentrunner.RunCompleted})
		if len(c.Unfinished) == 0 && len(done) == runs {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out: %d runs completed, unfinished %+v", len(done), c.Unfinished)
		}
		time.Sleep(10 * time.Millisecond)
	}
	close(stop)
	readers.Wait()
	close(readErrs)
	for err := range readErrs {
		t.Errorf("a reader: %v", err)
	}

	all, err := h.store.Runs(ctx, agentrunner.RunFilter{})
	if err != nil || len(all) != runs {
		t.Fatalf("%d runs, %v; want %d", len(all), err, runs)
	}
	srs, err := h.store.StepRuns(ctx, agentrunner.StepRunFilter{})
	if err != nil {
		t.Fatal(err)
	}
	perRun := map[string][]string{}
	for _, sr := range srs {
		if sr.Status != agentrunner.StepRunSucceeded {
			t.Errorf("run %s: step run %s is %s", sr.RunID, sr.Key(), sr.Status)
		}
		perRun[sr.RunID] = append(perRun[sr.RunID], sr.Key())
	}
	ran := map[string][]string{}
	for _, c := range k.Calls() {
		ran[c.Run] = append(ran[c.Run], c.Step)
	}
	for _, r := range all {
		if r.Status != agentrunner.RunCompleted {
			t.Errorf("run %s is %s: %s", r.ID, r.Status, r.Error)
		}
		if diff := cmp.Diff([]string{"plan#1", "a#1", "b#1", "merge#1"}, perRun[r.ID], sortedStrings); diff != "" {
			t.Errorf("run %s: step runs (-want +got):\n%s", r.ID, diff)
		}
		if diff := cmp.Diff([]string{"plan", "a", "b", "merge"}, ran[r.ID], sortedStrings); diff != "" {
			t.Errorf("run %s: steps run (-want +got):\n%s", r.ID, diff)
		}
	}
	st := h.sched.Stats()
	closed := int64(len(srs))
	if st.Commits >= closed || st.Commits >= st.Transitions {
		t.Errorf("%d commits for %d step runs closed and %d transitions: no group commit", st.Commits, closed, st.Transitions)
	}
	t.Logf("%d commits, %d transitions, %d step runs", st.Commits, st.Transitions, closed)
}

// TestALoneRunCommitsEachResultAtOnce: with nothing else pending, each
// result of a run is committed as soon as it arrives, in a commit of its
// own: the loop never waits to fill a batch. Its clock never fires and its
// poll is an hour away, so a wait for either would hold the run.
func TestALoneRunCommitsEachResultAtOnce(t *testing.T) {
	clock := clocktest.New(time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC))
	clock.OnAfter = func(time.Duration) bool { return false }
	p := &agentrunner.Pipeline{Name: "chain", Start: "one", Steps: steps(
		&agentrunner.Step{ID: "one", Next: "two"},
		&agentrunner.Step{ID: "two", Next: "three"},
		&agentrunner.Step{ID: "three", Next: agentrunner.EndStep},
	)}
	h := newHarness(t, &scriptKind{}, p)
	h.clock, h.poll = clock, time.Hour
	if _, err := h.command(agentrunner.CommandStartRun, "", map[string]any{"pipeline": "chain"}); err != nil {
		t.Fatal(err)
	}
	h.run()
	runs := []*agentrunner.Run{}
	for deadline := time.Now().Add(30 * time.Second); len(runs) == 0 || runs[0].Status != agentrunner.RunCompleted; {
		if time.Now().After(deadline) {
			t.Fatalf("the run did not complete: %+v", runs)
		}
		time.Sleep(5 * time.Millisecond)
		var err error
		if runs, err = h.store.Runs(context.Background(), agentrunner.RunFilter{}); err != nil {
			t.Fatal(err)
		}
	}
	h.stop()
	// The start, then one commit per result: each closes a step run and
	// opens the next (or ends the run).
	if got := h.sched.Stats(); got != (scheduler.Stats{Commits: 4, Transitions: 6}) {
		t.Errorf("stats %+v, want 4 commits of 6 transitions", got)
	}
}
