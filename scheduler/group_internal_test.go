package scheduler

import (
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/agentrunner/agentrunner"
	"github.com/agentrunner/agentrunner/internal/syncbuf"
	"github.com/agentrunner/agentrunner/sqlite"
)

// heldKind holds the attempts of step s1 until released, and records
// every attempt it ran as "run/step".
type heldKind struct {
	release chan struct{}
	mu      sync.Mutex
	calls   []string
	held    int
}

func (k *heldKind) Run(ctx context.Context, a *agentrunner.StepAttempt) (*agentrunner.StepResult, error) {
	k.mu.Lock()
	k.calls = append(k.calls, a.Run.ID+"/"+a.Step.ID)
	held := a.Step.ID == "s1"
	if held {
		k.held++
	}
	k.mu.Unlock()
	if held {
		select {
		case <-k.release:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	return &agentrunner.StepResult{Output: []byte("ok")}, nil
}

func (k *heldKind) ran() (calls []string, held int) {
	k.mu.Lock()
	defer k.mu.Unlock()
	return slices.Clone(k.calls), k.held
}

// groupCall is one group commit a heldStore passed on: each change's
// guarded runs, and its error.
type groupCall struct {
	guarded [][]string
	errs    []error
}

// heldStore holds the next group commit once armed, until released, and
// records every group commit.
type heldStore struct {
	Store
	mu      sync.Mutex
	hold    chan struct{}
	entered chan struct{}
	calls   []groupCall
}

func (s *heldStore) ApplyGroup(ctx context.Context, chs ...*agentrunner.Change) ([]error, error) {
	s.mu.Lock()
	hold := s.hold
	s.hold = nil
	s.mu.Unlock()
	if hold != nil {
		s.entered <- struct{}{}
		<-hold
	}
	errs, err := s.Store.ApplyGroup(ctx, chs...)
	c := groupCall{errs: errs}
	for _, ch := range chs {
		var runs []string
		for _, g := range ch.Guards {
			runs = append(runs, g.RunID)
		}
		c.guarded = append(c.guarded, runs)
	}
	s.mu.Lock()
	s.calls = append(s.calls, c)
	s.mu.Unlock()
	return errs, err
}

// refusedIn returns the guarded runs of the changes refused and of those
// committed, in the group commit that refused one.
func (s *heldStore) refusedIn() (refused, committed []string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, c := range s.calls {
		if !slices.ContainsFunc(c.errs, func(err error) bool { return err != nil }) {
			continue
		}
		for i, runs := range c.guarded {
			if agentrunner.ErrorCode(c.errs[i]) == agentrunner.ECONFLICT {
				refused = append(refused, runs...)
			} else {
				committed = append(committed, runs...)
			}
		}
	}
	slices.Sort(refused)
	slices.Sort(committed)
	return refused, committed
}

// pollUntil polls cond until it holds, or fails the test after a while.
func pollUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); !cond(); {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// TestAGuardFailsOnlyItsOwnTransition: three runs finish a step in one
// batch, and the store moved one run's attempt on behind the scheduler's
// back (another writer failed it). The others commit and go on to their
// next step and end; that one commits nothing, reports nothing, starts
// nothing, and an error names it.
func TestAGuardFailsOnlyItsOwnTransition(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	db, err := sqlite.Open(ctx, filepath.Join(dir, "state.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	store := &heldStore{Store: db, entered: make(chan struct{})}
	p := &agentrunner.Pipeline{Name: "p", Start: "s1", RunID: agentrunner.RunIDSeq, Steps: map[string]*agentrunner.Step{
		"s1": {ID: "s1", Kind: "held", Next: "s2"},
		"s2": {ID: "s2", Kind: "held", Next: agentrunner.EndStep},
	}}
	for range 3 {
		if err := db.AddCommand(ctx, &agentrunner.Command{Kind: agentrunner.CommandStartRun, Operator: "tester", CreatedAt: time.Now().UTC(),
			Args: map[string]any{"pipeline": "p"}}); err != nil {
			t.Fatal(err)
		}
	}
	kind := &heldKind{release: make(chan struct{})}
	var logs syncbuf.Buffer
	var mu sync.Mutex
	var reported []string
	s, err := New(Options{
		Store: store, Pipelines: map[string]*agentrunner.Pipeline{"p": p}, Kinds: map[string]agentrunner.StepKind{"held": kind},
		RunDir:     func(_, id string) string { return filepath.Join(dir, "runs", id) },
		AttemptDir: func(id, step string, n int) string { return filepath.Join(dir, "attempts", id, step) },
		Logger:     slog.New(slog.NewTextHandler(&logs, nil)),
		OnEvent: func(ev *agentrunner.Event) {
			mu.Lock()
			reported = append(reported, ev.CycleID+"/"+ev.Type+"/"+ev.Step)
			mu.Unlock()
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- s.Run(runCtx) }()
	defer func() {
		stop()
		if err := <-done; err != nil {
			t.Errorf("scheduler: %v", err)
		}
	}()
	pollUntil(t, "three attempts of s1", func() bool { _, held := kind.ran(); return held == 3 })
	runs, err := db.Runs(ctx, agentrunner.RunFilter{})
	if err != nil || len(runs) != 3 {
		t.Fatalf("runs %v, %v", runs, err)
	}
	a, b, c := runs[2].ID, runs[1].ID, runs[0].ID // newest first

	// Another writer fails b's running attempt behind the scheduler's back.
	atts, err := db.Attempts(ctx, b)
	if err != nil || len(atts) != 1 || atts[0].Status != agentrunner.AttemptRunning {
		t.Fatalf("attempts of %s: %v, %v", b, atts, err)
	}
	repaired := *atts[0]
	repaired.Status, repaired.ErrorClass, repaired.Error, repaired.EndedAt = agentrunner.AttemptFailed, agentrunner.ClassAborted, "repaired by hand", time.Now().UTC()
	if err := db.Apply(ctx, &agentrunner.Change{Attempts: []*agentrunner.Attempt{&repaired}}); err != nil {
		t.Fatal(err)
	}

	// Hold the loop in a commit while the three attempts end, so their
	// results wait together for its next pass: one batch.
	store.mu.Lock()
	store.hold = make(chan struct{})
	hold := store.hold
	store.mu.Unlock()
	if err := db.AddCommand(ctx, &agentrunner.Command{Kind: agentrunner.CommandAbortRun, Operator: "tester", CreatedAt: time.Now().UTC(),
		Args: map[string]any{"run": "no-such-run"}}); err != nil {
		t.Fatal(err)
	}
	s.Wake()
	<-store.entered
	close(kind.release)
	pollUntil(t, "the three results", func() bool { return len(s.results) == 3 })
	close(hold)

	for _, id := range []string{a, c} {
		pollUntil(t, "run "+id+" to complete", func() bool {
			r, err := db.Run(ctx, id)
			return err == nil && r.Status == agentrunner.RunCompleted
		})
	}
	refused, committed := store.refusedIn()
	if diff := cmp.Diff([]string{b}, refused); diff != "" {
		t.Errorf("runs refused in the group commit (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{a, c}, committed); diff != "" {
		t.Errorf("runs committed with it (-want +got):\n%s", diff)
	}
	calls, _ := kind.ran()
	slices.Sort(calls)
	if diff := cmp.Diff([]string{a + "/s1", a + "/s2", b + "/s1", c + "/s1", c + "/s2"}, calls); diff != "" {
		t.Errorf("attempts run (-want +got):\n%s", diff)
	}
	mu.Lock()
	for _, ev := range reported {
		if strings.HasPrefix(ev, b+"/") && ev != b+"/"+EventRunStarted+"/" && ev != b+"/"+agentrunner.EventAttemptStarted+"/s1" {
			t.Errorf("event of the refused transition reported: %s", ev)
		}
	}
	mu.Unlock()

	// The store keeps the other writer's record of b: nothing of the
	// refused transition is in it.
	r, _ := db.Run(ctx, b)
	srs, _ := db.StepRuns(ctx, agentrunner.StepRunFilter{RunID: b})
	atts, _ = db.Attempts(ctx, b)
	got := []string{string(r.Status)}
	for _, sr := range srs {
		got = append(got, sr.Key()+":"+string(sr.Status))
	}
	for _, at := range atts {
		got = append(got, fmt.Sprintf("%s-%d:%s:%s", at.Step, at.Number, at.Status, at.Error))
	}
	if diff := cmp.Diff([]string{"running", "s1#1:open", "s1-1:failed:repaired by hand"}, got); diff != "" {
		t.Errorf("run %s in the store (-want +got):\n%s", b, diff)
	}
	evs, _ := db.Events(ctx, agentrunner.EventFilter{CycleID: b})
	for _, ev := range evs {
		if ev.Type != EventRunStarted && ev.Type != agentrunner.EventAttemptStarted {
			t.Errorf("event of the refused transition stored: %s %s", ev.Type, ev.Step)
		}
	}
	if log := logs.String(); !strings.Contains(log, "level=ERROR") || !strings.Contains(log, "run="+b+" step=s1") {
		t.Errorf("no error naming run %s and step s1 in the log:\n%s", b, log)
	}
}
