package scheduler

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/agentrunner/agentrunner"
	"github.com/agentrunner/agentrunner/internal/clocktest"
	"github.com/agentrunner/agentrunner/sqlite"
)

// noKind is a step kind the scheduler is never asked to run here.
type noKind struct{}

func (noKind) Run(context.Context, *agentrunner.StepAttempt) (*agentrunner.StepResult, error) {
	return nil, fmt.Errorf("not run")
}

// TestAnAttemptThatFailsAfterTheDeadlineIsNotRetried: the outcome of an
// attempt that failed as its run's deadline passed, when it arrives before
// the deadline's timer: not retried, the run forced to its final step.
// (Through the loop, which of the two comes first is a race.)
func TestAnAttemptThatFailsAfterTheDeadlineIsNotRetried(t *testing.T) {
	start := time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)
	for _, tt := range []struct {
		name string
		at   time.Duration
		want []string
	}{
		{"before the deadline: retried", 59 * time.Minute, []string{
			"attempt work#1 failed[timeout]", "attempt work#2 running",
			"event attempt.failed work", "event retry.scheduled work", "event attempt.started work",
		}},
		{"after the deadline: forced", 61 * time.Minute, []string{
			"attempt work#1 failed[timeout]", "attempt judge#1 running",
			"step run work#1 failed", "step run judge#1 open",
			"event attempt.failed work", "event run.forced work", "event attempt.started judge",
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			st, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "state.db"))
			if err != nil {
				t.Fatal(err)
			}
			defer st.Close()
			p := &agentrunner.Pipeline{Name: "bounded", Start: "work", MaxDuration: time.Hour, Final: "judge", Steps: map[string]*agentrunner.Step{
				"work":  {ID: "work", Kind: "none", Next: "judge", Retry: agentrunner.RetryPolicy{Max: 2}},
				"judge": {ID: "judge", Kind: "none", Next: agentrunner.EndStep},
			}}
			clock := clocktest.New(start)
			s, err := New(Options{
				Store: st, Pipelines: map[string]*agentrunner.Pipeline{p.Name: p}, Kinds: map[string]agentrunner.StepKind{"none": noKind{}}, Clock: clock,
				RunDir: func(p, id string) string { return id }, AttemptDir: func(id, step string, n int) string { return step },
			})
			if err != nil {
				t.Fatal(err)
			}
			rs := newRunState(&agentrunner.Run{ID: "r1", Pipeline: p.Name, Status: agentrunner.RunRunning, StartedAt: start}, p)
			s.runs[rs.run.ID], s.batch = rs, newBatch()
			s.open(s.batch.change(), rs, "work", nil, 0)
			clock.Advance(tt.at)
			s.batch = newBatch()
			ss := rs.latest("work")
			s.failAttempt(s.batch.change(), rs, ss, agentrunner.Fail(agentrunner.ClassTimeout, "attempt timed out"), nil)
			if diff := cmp.Diff(tt.want, summary(s.batch.changes)); diff != "" {
				t.Errorf("changes (-want +got):\n%s", diff)
			}
		})
	}
}

// summary lists what changes record: attempts, step runs, then events.
func summary(chs []*agentrunner.Change) []string {
	var out []string
	for _, ch := range chs {
		for _, a := range ch.Attempts {
			out = append(out, fmt.Sprintf("attempt %s#%d %s", a.Step, a.Number, a.Status)+cls(a.ErrorClass))
		}
		for _, sr := range ch.StepRuns {
			out = append(out, fmt.Sprintf("step run %s %s", sr.Key(), sr.Status))
		}
		for _, ev := range ch.Events {
			out = append(out, fmt.Sprintf("event %s %s", ev.Type, ev.Step))
		}
	}
	return out
}

func cls(c agentrunner.ErrorClass) string {
	if c == "" {
		return ""
	}
	return "[" + string(c) + "]"
}
