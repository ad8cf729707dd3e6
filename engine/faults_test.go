package engine

import (
	"context"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/agentrunner/agentrunner"
	"github.com/agentrunner/agentrunner/config"
	"github.com/agentrunner/agentrunner/execsvc"
	"github.com/agentrunner/agentrunner/runtime/mock"
)

// TestFaultInjection runs 50 cycles against mock agents that randomly time
// out, crash and write invalid output, with analysis and evaluation
// skipping to their last good artifact, the other steps halting (an
// operator resumes them), and checks the invariants of the issue:
//   - every cycle ends as its policies say: completed, possibly with named
//     fallbacks, after any halts were resumed;
//   - every failure has an event with its context;
//   - no artifact in any cycle directory is invalid;
//   - the Execution Service never received the same strategy twice.
func TestFaultInjection(t *testing.T) {
	f := newFixture(t, execsvc.MockOptions{CompletedAfter: 1}, func(c *config.Config) {
		for _, a := range c.Agents {
			a.Timeout = config.Duration(5 * time.Millisecond) // a hang times out fast (real time)
		}
		c.Pipeline.Steps["analyze"].OnFailure = config.PolicySkip
		c.Pipeline.Steps["evaluate"].OnFailure = config.PolicySkip
	})
	rng := rand.New(rand.NewPCG(2026, 11))
	faults := map[mock.Fault]int{}
	rt := mock.New(mock.Options{Now: f.clock.Now, Fault: func(inv *agentrunner.Invocation) mock.Fault {
		var fault mock.Fault
		switch r := rng.IntN(100); {
		case r < 12:
			fault = mock.Hang
		case r < 24:
			fault = mock.Crash
		case r < 32:
			fault = mock.Invalid
		case r < 36:
			fault = mock.Silent
		}
		faults[fault]++
		return fault
	}})
	e := f.engineWith(func(o *Options) { o.Runtimes["mock"] = rt })
	ctx := context.Background()
	resumes, skips := 0, 0
	for i := 0; i < 50; i++ {
		if i > 0 {
			f.toNextCycle()
		}
		c := f.runOnce(e)
		for tries := 0; c.Status == agentrunner.CycleHalted; tries++ {
			if tries == 20 {
				t.Fatalf("cycle %s still halted after 20 resumes", c.ID)
			}
			if err := f.store.AddCommand(ctx, &agentrunner.Command{Kind: agentrunner.CommandResume, Operator: "test", CreatedAt: f.clock.Now()}); err != nil {
				t.Fatal(err)
			}
			resumes++
			c = f.runOnce(e)
		}
		if c.Status != agentrunner.CycleCompleted {
			t.Fatalf("cycle %d (%s) ended %s: %s", i, c.ID, c.Status, c.Error)
		}
	}
	if faults[mock.Hang] == 0 || faults[mock.Crash] == 0 || faults[mock.Invalid] == 0 || resumes == 0 {
		t.Fatalf("the run exercised too little: faults %v, %d resumes", faults, resumes)
	}

	cycles, _ := f.store.Cycles(ctx, agentrunner.CycleFilter{})
	if len(cycles) != 50 {
		t.Fatalf("%d cycles, want 50", len(cycles))
	}
	events, _ := f.store.Events(ctx, agentrunner.EventFilter{})
	failureEvents := map[string]*agentrunner.Event{}
	for _, ev := range events {
		switch ev.Type {
		case agentrunner.EventAttemptFailed, agentrunner.EventAttemptInterrupted:
			failureEvents[ev.CycleID+"/"+ev.Step+"/"+itoa2(ev.Details["attempt"])] = ev
		case EventSkipped:
			skips++
			if ev.Details["fallback"] == "" || ev.Details["fallback_cycle"] == "" {
				t.Errorf("a skip does not name its fallback: %+v", ev.Details)
			}
		}
	}
	failures := 0
	for _, c := range cycles {
		atts, _ := f.store.Attempts(ctx, c.ID)
		for _, a := range atts {
			if a.Status != agentrunner.AttemptFailed {
				continue
			}
			failures++
			ev := failureEvents[c.ID+"/"+a.Step+"/"+itoa2(a.Number)]
			if ev == nil || ev.Details["error_class"] != string(a.ErrorClass) || ev.Details["error"] == "" {
				t.Errorf("failure %s/%s#%d has no event with its context: %+v", c.ID, a.Step, a.Number, ev)
			}
		}
		for _, agent := range f.ws.Agents {
			data, err := os.ReadFile(filepath.Join(c.Dir, agent.Output.File))
			if err != nil {
				t.Errorf("cycle %s lacks %s: %v", c.ID, agent.Output.File, err)
				continue
			}
			if ps := agent.Contract.Validate(data); len(ps) > 0 {
				t.Errorf("cycle %s: %s is invalid: %v", c.ID, agent.Output.File, ps)
			}
		}
		entries, _ := os.ReadDir(c.Dir)
		if len(entries) != 5 {
			t.Errorf("cycle %s holds %d files, want the 5 artifacts", c.ID, len(entries))
		}
	}
	seen := map[string]bool{}
	for _, s := range f.es.Strategies() {
		if seen[s.SHA256] {
			t.Errorf("the Execution Service received strategy %s twice", s.SHA256)
		}
		seen[s.SHA256] = true
	}
	posts := 0
	for _, r := range f.es.Requests() {
		if r.Method == "POST" && r.Path == "/v1/strategies" {
			posts++
		}
	}
	if posts != 50 || len(seen) != 50 {
		t.Errorf("%d strategy POSTs, %d distinct strategies; want one each per cycle (50)", posts, len(seen))
	}
	t.Logf("50 cycles: %d failed attempts, faults %v, %d resumes, %d skips", failures, faults, resumes, skips)
}

func itoa2(v any) string {
	switch n := v.(type) {
	case int:
		return itoa(n)
	case float64:
		return itoa(int(n))
	}
	return "?"
}
