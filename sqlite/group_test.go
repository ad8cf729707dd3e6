package sqlite

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/agentrunner/agentrunner"
)

// transitionsAt returns, for each of runs runs, the change that closes
// attempt n of its step and opens attempt n+1 of the next, guarded by
// attempt n: what the scheduler commits for one result.
func transitionsAt(runs, n int, now time.Time) []*agentrunner.Change {
	chs := make([]*agentrunner.Change, runs)
	for i := range chs {
		id := fmt.Sprintf("bench-%06d", i)
		step := func(n int) string { return fmt.Sprintf("s%d", n) }
		done := &agentrunner.Attempt{CycleID: id, Step: step(n), Number: n, Visit: 1, Status: agentrunner.AttemptSucceeded, StartedAt: now, EndedAt: now}
		next := &agentrunner.Attempt{CycleID: id, Step: step(n + 1), Number: n + 1, Visit: 1, Status: agentrunner.AttemptRunning, StartedAt: now,
			Dir: filepath.Join("/srv/runs", id, "attempts", step(n+1))}
		ev := func(typ, st string) *agentrunner.Event {
			return &agentrunner.Event{Timestamp: now, Type: typ, Step: st, CycleID: id, Level: agentrunner.LevelInfo,
				Details: map[string]any{"attempt": n, "visit": 1, "pipeline": "bench"}}
		}
		chs[i] = &agentrunner.Change{
			Guards:   []agentrunner.AttemptGuard{{RunID: id, Step: step(n), Number: n}},
			Attempts: []*agentrunner.Attempt{done, next},
			StepRuns: []*agentrunner.StepRun{
				{RunID: id, Step: step(n), Visit: 1, Status: agentrunner.StepRunSucceeded, OpenedAt: now, EndedAt: now},
				{RunID: id, Step: step(n + 1), Visit: 1, Status: agentrunner.StepRunOpen, From: step(n) + "#1", OpenedAt: now},
			},
			Events: []*agentrunner.Event{ev(agentrunner.EventAttemptSucceeded, step(n)), ev(agentrunner.EventAttemptStarted, step(n+1))},
		}
	}
	return chs
}

// seedTransitions writes runs runs, each with attempt 1 of step s1
// running.
func seedTransitions(t testing.TB, s *Store, runs int, now time.Time) {
	t.Helper()
	ch := &agentrunner.Change{}
	for i := range runs {
		id := fmt.Sprintf("bench-%06d", i)
		ch.Runs = append(ch.Runs, &agentrunner.Run{ID: id, Pipeline: "bench", Status: agentrunner.RunRunning, Dir: "/srv/runs/" + id, StartedAt: now})
		ch.Attempts = append(ch.Attempts, &agentrunner.Attempt{CycleID: id, Step: "s1", Number: 1, Visit: 1, Status: agentrunner.AttemptRunning, StartedAt: now})
		ch.StepRuns = append(ch.StepRuns, &agentrunner.StepRun{RunID: id, Step: "s1", Visit: 1, Status: agentrunner.StepRunOpen, OpenedAt: now})
	}
	if err := s.Apply(context.Background(), ch); err != nil {
		t.Fatal(err)
	}
}

// TestApplyGroupIsOneCommit: a group is one commit (one WAL fsync) however
// many changes it has, a refused change included; a group whose every
// change is refused commits nothing.
func TestApplyGroupIsOneCommit(t *testing.T) {
	ctx := context.Background()
	s := open(t)
	now := time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)
	seedTransitions(t, s, 10, now)
	chs := transitionsAt(10, 1, now)
	chs[3].Guards[0].Number = 9 // an attempt the store does not have
	before := s.Commits()
	errs, err := s.ApplyGroup(ctx, chs...)
	if err != nil {
		t.Fatal(err)
	}
	for i, e := range errs {
		if (i == 3) != (agentrunner.ErrorCode(e) == agentrunner.ECONFLICT) {
			t.Errorf("change %d: %v", i, e)
		}
	}
	if n := s.Commits() - before; n != 1 {
		t.Errorf("a group of 10 changes took %d commits, want 1", n)
	}
	before = s.Commits()
	again := transitionsAt(10, 1, now)
	again = append(again[:3], again[4:]...) // run 3's attempt 1 still runs
	if _, err := s.ApplyGroup(ctx, again...); err != nil {
		t.Fatal(err)
	}
	if n := s.Commits() - before; n != 0 {
		t.Errorf("a group whose every change was refused took %d commits, want 0", n)
	}
}

// BenchmarkGroupCommit commits groups of 100 transitions (each closing a
// step of its own run and opening the next, with three events, guarded
// by its attempt): all or nothing with ApplyAll, each under a savepoint
// with ApplyGroup, and with ApplyAll without guards, as the scheduler
// committed before. It measures what the savepoints and the guards cost
// a group commit.
//
//	go test -run '^$' -bench GroupCommit -count 8 ./sqlite/ > group.txt
//	benchstat -col /commit group.txt
func BenchmarkGroupCommit(b *testing.B) {
	const runs = 100
	for _, commit := range []string{"ApplyAll-unguarded", "ApplyAll", "ApplyGroup"} {
		b.Run("commit="+commit, func(b *testing.B) {
			ctx := context.Background()
			s, err := Open(ctx, filepath.Join(b.TempDir(), "state.db"))
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			now := time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)
			seedTransitions(b, s, runs, now)
			b.ResetTimer()
			for i := range b.N {
				b.StopTimer()
				chs := transitionsAt(runs, i+1, now.Add(time.Duration(i)*time.Second))
				if commit == "ApplyAll-unguarded" {
					for _, ch := range chs {
						ch.Guards = nil
					}
				}
				b.StartTimer()
				if commit == "ApplyGroup" {
					errs, err := s.ApplyGroup(ctx, chs...)
					if err == nil && errs[0] != nil {
						err = errs[0]
					}
					if err != nil {
						b.Fatal(err)
					}
				} else if err := s.ApplyAll(ctx, chs...); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
