package sqlite

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/agentrunner/agentrunner"
	"github.com/agentrunner/agentrunner/internal/cputime"
)

// BenchmarkApplyStep commits what the engine commits after each step of a
// 10-step cycle: the step's attempt done, the cycle moved on, the next
// attempt started, four events. It isolates the store's share of a step.
//
//	TMPDIR=/dev/shm go test -run '^$' -bench ApplyStep -count 8 ./sqlite/
func BenchmarkApplyStep(b *testing.B) {
	ctx := context.Background()
	s, err := Open(ctx, filepath.Join(b.TempDir(), "state.db"))
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	t0 := time.Date(2026, 11, 22, 14, 0, 0, 0, time.UTC)
	var c *agentrunner.Cycle
	var att *agentrunner.Attempt
	step := func(i int) string { return fmt.Sprintf("s%d", i) }
	newAttempt := func(c *agentrunner.Cycle, st string, now time.Time) *agentrunner.Attempt {
		return &agentrunner.Attempt{CycleID: c.ID, Step: st, Number: 1, Agent: "a" + st[1:], Status: agentrunner.AttemptRunning,
			StartedAt: now, Dir: filepath.Join("/srv/loop/artifacts/attempts", c.ID, st+"-1")}
	}
	ev := func(c *agentrunner.Cycle, st, typ string, now time.Time, details map[string]any) *agentrunner.Event {
		return &agentrunner.Event{Timestamp: now, Type: typ, Step: st, Agent: "a", CycleID: c.ID, Level: agentrunner.LevelInfo, Details: details}
	}
	user0, sys0, cpuOK := cputime.Self()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		now := t0.Add(time.Duration(i) * time.Second)
		n := i % 10
		if n == 0 {
			id := now.Format("20060102_150405")
			c = &agentrunner.Cycle{ID: id, Pipeline: "bench", Status: agentrunner.CycleRunning, Step: step(0),
				Dir: "/srv/loop/artifacts/cycles/" + id, StartedAt: now}
			att = newAttempt(c, step(0), now)
			ch := &agentrunner.Change{From: agentrunner.StateWaiting, Cycle: c, Attempts: []*agentrunner.Attempt{att},
				Events: []*agentrunner.Event{ev(c, "", agentrunner.EventCycleStarted, now, nil)}}
			if i == 0 {
				ch.From = agentrunner.StateIdle
			}
			if err := s.Apply(ctx, ch); err != nil {
				b.Fatal(err)
			}
		}
		done := *att
		done.Status, done.EndedAt, done.OutputPath = agentrunner.AttemptSucceeded, now, c.Dir+"/out.md"
		next := *c
		next.LastCompletedStep = c.Step
		ch := &agentrunner.Change{From: agentrunner.State(c.Step), Cycle: &next, Attempts: []*agentrunner.Attempt{&done},
			Events: []*agentrunner.Event{
				ev(c, c.Step, agentrunner.EventArtifactAccepted, now, map[string]any{"artifact": "out.md", "path": done.OutputPath, "bytes": 315, "sha256": "9f2c4e7a1b3d5f60718293a4b5c6d7e8f90a1b2c3d4e5f60718293a4b5c6d7e8"}),
				ev(c, c.Step, agentrunner.EventAttemptSucceeded, now, map[string]any{"attempt": 1, "duration_ms": 1200, "output": done.OutputPath}),
			}}
		if n == 9 {
			next.Status, next.Step, next.EndedAt = agentrunner.CycleCompleted, "", now
			ch.Events = append(ch.Events, ev(c, "", agentrunner.EventTransition, now, map[string]any{"from": c.Step, "to": "WaitingForNextCycle"}))
		} else {
			next.Step = step(n + 1)
			att = newAttempt(c, next.Step, now)
			ch.Attempts = append(ch.Attempts, att)
			ch.Events = append(ch.Events,
				ev(c, "", agentrunner.EventTransition, now, map[string]any{"from": c.Step, "to": next.Step}),
				ev(c, next.Step, agentrunner.EventAttemptStarted, now, map[string]any{"attempt": 1, "dir": att.Dir}))
		}
		if err := s.Apply(ctx, ch); err != nil {
			b.Fatal(err)
		}
		c = &next
	}
	b.StopTimer()
	if user1, sys1, _ := cputime.Self(); cpuOK {
		b.ReportMetric(float64(user1-user0+sys1-sys0)/float64(b.N), "cpu-ns/step")
	}
}
