package engine

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentrunner/agentrunner"
	"github.com/agentrunner/agentrunner/artifact"
	"github.com/agentrunner/agentrunner/config"
	"github.com/agentrunner/agentrunner/execsvc"
	"github.com/agentrunner/agentrunner/mailbox"
	"github.com/agentrunner/agentrunner/runtime/mock"
	"github.com/agentrunner/agentrunner/step/execution"
	"github.com/agentrunner/agentrunner/tool"
	"github.com/google/go-cmp/cmp"
	"sync"
)

var learningLoop = []string{"plan", "research", "analyze", "synthesize", "execute", "evaluate"}

// TestOneFullCycle runs the learning loop once on mock agents (FR-090) and
// checks every artifact, every mailbox deposit of spec 1 Appendix A, the
// memories, the prompts, the transitions and the Execution Service handoff.
func TestOneFullCycle(t *testing.T) {
	f := newFixture(t, execsvc.MockOptions{ExecutingAfter: 1, CompletedAfter: 2}, nil)
	c := f.runOnce(f.engine())
	if c.Status != agentrunner.CycleCompleted {
		t.Fatalf("cycle %s: %s", c.Status, c.Error)
	}
	if c.ID != "20261122_140000" || c.Dir != filepath.Join(f.ws.Layout.Root, "cycles", c.ID) {
		t.Errorf("cycle id %s dir %s, want the start time and cycles/<id>", c.ID, c.Dir)
	}

	// Exactly the five artifacts, each valid against its contract.
	want := []string{"analysis.md", "evaluation.md", "plan.md", "research.md", "strategy.json"}
	if diff := cmp.Diff(want, files(t, c.Dir)); diff != "" {
		t.Fatalf("cycle dir (-want +got):\n%s", diff)
	}
	for _, a := range f.ws.Agents {
		data, err := os.ReadFile(filepath.Join(c.Dir, a.Output.File))
		if err != nil {
			t.Fatal(err)
		}
		if ps := a.Contract.Validate(data); len(ps) > 0 {
			t.Errorf("%s is invalid: %v", a.Output.File, ps)
		}
	}

	var wantAttempts []string
	for _, s := range learningLoop {
		wantAttempts = append(wantAttempts, s+"#1:succeeded")
	}
	if diff := cmp.Diff(wantAttempts, f.attempts(c.ID)); diff != "" {
		t.Errorf("attempts (-want +got):\n%s", diff)
	}
	var transitions []string
	for _, ev := range f.eventsOf(agentrunner.EventTransition) {
		transitions = append(transitions, ev.Details["from"].(string)+"→"+ev.Details["to"].(string))
	}
	wantTransitions := []string{"Idle→plan", "plan→research", "research→analyze", "analyze→synthesize",
		"synthesize→execute", "execute→evaluate", "evaluate→WaitingForNextCycle"}
	if diff := cmp.Diff(wantTransitions, transitions); diff != "" {
		t.Errorf("transitions (-want +got):\n%s", diff)
	}

	// Appendix A: forward, backward and broadcast deposits, plus the
	// execution outcome for the evaluation agent.
	boxes, err := mailbox.New(f.ws.Layout.Mailboxes(), 5)
	if err != nil {
		t.Fatal(err)
	}
	wantBoxes := map[string][]string{
		"plan":       {"plan/backward", "research/backward", "evaluate/broadcast"},
		"research":   {"plan/forward", "analyze/backward", "evaluate/broadcast"},
		"analysis":   {"research/forward", "synthesize/backward", "evaluate/broadcast"},
		"synthesis":  {"analyze/forward", "evaluate/broadcast"},
		"evaluation": {"synthesize/forward", "execute/status"},
	}
	for agent, wantIDs := range wantBoxes {
		msgs, err := boxes.Read(agent, 0)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, m := range msgs {
			got = append(got, m.From+"/"+string(m.Kind))
			if !strings.HasPrefix(m.ID, c.ID+"/") || m.CycleID != c.ID || m.Time.IsZero() {
				t.Errorf("mailbox.%s: message %+v lacks its id, cycle or time", agent, m)
			}
		}
		if diff := cmp.Diff(wantIDs, got); diff != "" {
			t.Errorf("mailbox.%s (-want +got):\n%s", agent, diff)
		}
	}
	research, _ := boxes.Read("research", 1)
	if !strings.Contains(research[0].Body, "Lessons for All Agents") {
		t.Errorf("the broadcast does not quote the evaluation's lessons: %q", research[0].Body)
	}
	evaluation, _ := boxes.Read("evaluation", 0)
	if !strings.Contains(evaluation[0].Body, "handoff to evaluation") || !strings.Contains(evaluation[1].Body, "completed") {
		t.Errorf("evaluation mailbox does not quote the handoff field and the execution outcome: %+v", evaluation)
	}

	for _, agent := range []string{"plan", "research", "analysis"} {
		if _, err := os.Stat(f.ws.Layout.Memory(agent)); err != nil {
			t.Errorf("memory of %s not created: %v", agent, err)
		}
	}
	if _, err := os.Stat(f.ws.Layout.Memory("synthesis")); err == nil {
		t.Error("synthesis has no memory: true, yet a memory file was created")
	}
	prompt := f.stored(c.ID, "research", 1, agentrunner.FilePrompt)
	for _, want := range []string{filepath.Join(c.Dir, "plan.md"), f.ws.Layout.Memory("research"), f.ws.Layout.Mailboxes(), "### web_search"} {
		if !strings.Contains(string(prompt), want) {
			t.Errorf("research prompt lacks %q", want)
		}
	}

	strategy, _ := os.ReadFile(filepath.Join(c.Dir, "strategy.json"))
	got := f.es.Strategies()
	if len(got) != 1 || got[0].CycleID != c.ID || string(got[0].Strategy) != strings.TrimSpace(string(strategy)) {
		t.Fatalf("Execution Service received %d strategies, want exactly this cycle's strategy.json", len(got))
	}
	var statuses []string
	for _, ev := range f.eventsOf(execution.EventExecutionStatus) {
		statuses = append(statuses, ev.Details["status"].(string))
	}
	if diff := cmp.Diff([]string{"executing", "completed"}, statuses); diff != "" {
		t.Errorf("execution statuses tracked (-want +got):\n%s", diff)
	}

	st, err := ReadStatus(context.Background(), f.store, f.ws.Config, f.clock.Now())
	if err != nil {
		t.Fatal(err)
	}
	if st.CurrentState != agentrunner.StateWaiting || st.LastCompletedStep != "evaluate" || st.CurrentCycleID != c.ID ||
		!st.NextScheduledTime.Equal(t0.Add(6*time.Hour)) {
		t.Errorf("status after the cycle: %+v", st)
	}
}

// TestHistoryInputs checks that later cycles get earlier evaluations: the
// plan agent those of the past 7 days, the evaluation agent the last 3.
func TestHistoryInputs(t *testing.T) {
	f := newFixture(t, execsvc.MockOptions{}, nil)
	var ids []string
	for i := 0; i < 5; i++ {
		e := f.engine()
		if i > 0 {
			f.toNextCycle()
		}
		c := f.runOnce(e)
		if c.Status != agentrunner.CycleCompleted {
			t.Fatalf("cycle %d: %s", i, c.Error)
		}
		ids = append(ids, c.ID)
	}
	if ids[1] != "20261122_200000" {
		t.Errorf("second cycle %s, want 6h after the first", ids[1])
	}
	prompt := func(cycle, step string) string { return f.stored(cycle, step, 1, agentrunner.FilePrompt) }
	last := ids[4]
	eval := prompt(last, "evaluate")
	for i, id := range ids[:4] {
		has := strings.Contains(eval, filepath.Join(f.ws.Layout.Cycle(id), "evaluation.md"))
		if want := i >= 1; has != want {
			t.Errorf("evaluation prompt of %s lists evaluation of %s: %v, want %v (the 3 most recent)", last, id, has, want)
		}
	}
	plan := prompt(last, "plan")
	for _, id := range ids[:4] {
		if !strings.Contains(plan, filepath.Join(f.ws.Layout.Cycle(id), "evaluation.md")) {
			t.Errorf("plan prompt lacks the evaluation of %s (within 7 days)", id)
		}
	}
	if strings.Contains(prompt(ids[0], "plan"), "evaluation.md") {
		t.Error("the first plan prompt lists an evaluation, but there was none")
	}
}

// TestHistoryInputsTakeCompletedCyclesOnly: a cycle that failed after
// its plan step gives later cycles no plan.md of its own through a
// history input; the completed cycles before it do.
func TestHistoryInputsTakeCompletedCyclesOnly(t *testing.T) {
	f := newFixture(t, execsvc.MockOptions{}, func(c *config.Config) {
		c.Escalation.Policy = config.PolicyFail
		plan := c.Agents["plan"]
		plan.Inputs = append(plan.Inputs, config.Input{Artifact: "plan.md", History: &config.History{Last: 5}})
	})
	e := f.engine()
	var ids []string
	for i, want := range []agentrunner.CycleStatus{agentrunner.CycleCompleted, agentrunner.CycleFailed, agentrunner.CycleCompleted} {
		if i > 0 {
			f.toNextCycle()
		}
		f.fail("research")
		if want == agentrunner.CycleFailed {
			f.fail("research", fourCrashes...)
		}
		c := f.runOnce(e)
		if c.Status != want {
			t.Fatalf("cycle %d: %s (%s), want %s", i, c.Status, c.Error, want)
		}
		ids = append(ids, c.ID)
	}
	plan := f.stored(ids[2], "plan", 1, agentrunner.FilePrompt)
	for i, id := range ids[:2] {
		has := strings.Contains(plan, filepath.Join(f.ws.Layout.Cycle(id), "plan.md"))
		if want := i == 0; has != want {
			t.Errorf("the third plan prompt lists plan.md of cycle %s: %v, want %v", id, has, want)
		}
	}
}

// TestRetryScheduleIsExactlyTheBackoff: a step that crashes three times is
// retried after 5m, 15m and 45m, then succeeds (FR-045/046).
func TestRetryScheduleIsExactlyTheBackoff(t *testing.T) {
	f := newFixture(t, execsvc.MockOptions{}, nil)
	f.fail("research", mock.Crash, mock.Crash, mock.Crash)
	c := f.runOnce(f.engine())
	if c.Status != agentrunner.CycleCompleted {
		t.Fatalf("cycle %s: %s", c.Status, c.Error)
	}
	waits := f.clock.Waits()[:3] // the execution step's polls come later
	if diff := cmp.Diff([]time.Duration{5 * time.Minute, 15 * time.Minute, 45 * time.Minute}, waits); diff != "" {
		t.Errorf("backoff (-want +got):\n%s", diff)
	}
	got := f.attempts(c.ID)[1:5]
	want := []string{"research#1:failed:crash", "research#2:failed:crash", "research#3:failed:crash", "research#4:succeeded"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("attempts (-want +got):\n%s", diff)
	}
	if n := len(f.eventsOf(agentrunner.EventRetryScheduled)); n != 3 {
		t.Errorf("%d retry.scheduled events, want 3", n)
	}
}

// TestRetriesExhaustedEndsTheCycle: under the fail policy, after max
// retries the cycle fails with its context recorded, and the cycle dir
// holds only what was accepted.
func TestRetriesExhaustedEndsTheCycle(t *testing.T) {
	f := newFixture(t, execsvc.MockOptions{}, func(c *config.Config) { c.Escalation.Policy = config.PolicyFail })
	f.fail("research", mock.Crash, mock.Crash, mock.Crash, mock.Crash)
	c := f.runOnce(f.engine())
	if c.Status != agentrunner.CycleFailed || !strings.Contains(c.Error, "step research (visit 1) failed after 4 attempt(s)") {
		t.Fatalf("cycle %s: %q", c.Status, c.Error)
	}
	if diff := cmp.Diff([]string{"plan.md"}, files(t, c.Dir)); diff != "" {
		t.Errorf("cycle dir (-want +got):\n%s", diff)
	}
	if n := len(f.eventsOf(agentrunner.EventCycleFailed)); n != 1 {
		t.Errorf("%d cycle.failed events, want 1", n)
	}
	failed := f.eventsOf(EventEscalation)
	if len(failed) != 1 || failed[0].Level != agentrunner.LevelError || failed[0].Details["attempts"] != 4 || failed[0].Details["policy"] != "fail" {
		t.Fatalf("escalation events: %+v", failed)
	}
	inputs := failed[0].Details["inputs"].([]string)
	if !strings.HasSuffix(inputs[0], "plan.md") {
		t.Errorf("failure context lacks the input artifacts: %v", inputs)
	}
	if len(f.es.Requests()) != 0 {
		t.Error("the Execution Service was called by a failed cycle")
	}
	st, _ := ReadStatus(context.Background(), f.store, f.ws.Config, f.clock.Now())
	if st.CurrentState != agentrunner.StateWaiting || st.LastCycle.Status != agentrunner.CycleFailed {
		t.Errorf("status after a failed cycle: %+v", st)
	}
}

// TestBadOutputIsNotRetried: invalid output and no output fail the step at
// once (FR-047), nothing reaches the cycle dir, and the reason is recorded.
func TestBadOutputIsNotRetried(t *testing.T) {
	for _, tt := range []struct {
		name     string
		fault    mock.Fault
		maxBytes int
		want     string
	}{
		{"invalid", mock.Invalid, 0, "artifact strategy.json breaks its contract"},
		{"silent", mock.Silent, 0, "the agent returned no strategy.json"},
		{"too large", mock.NoFault, 100, "the agent's strategy.json is"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, execsvc.MockOptions{}, func(c *config.Config) {
				if tt.maxBytes > 0 {
					c.Agents["synthesis"].Output.MaxBytes = tt.maxBytes
				}
			})
			f.fail("synthesize", tt.fault)
			c := f.runOnce(f.engine())
			if c.Status != agentrunner.CycleHalted || !strings.Contains(c.Error, tt.want) {
				t.Fatalf("cycle %s: %q, want halted with %q", c.Status, c.Error, tt.want)
			}
			atts := f.attempts(c.ID)
			if got := atts[len(atts)-1]; got != "synthesize#1:failed:invalid_output" {
				t.Errorf("last attempt %s, want one failed attempt of synthesize", got)
			}
			if diff := cmp.Diff([]string{"analysis.md", "plan.md", "research.md"}, files(t, c.Dir)); diff != "" {
				t.Errorf("cycle dir (-want +got):\n%s", diff)
			}
			if len(f.eventsOf(agentrunner.EventRetryScheduled)) != 0 || len(f.es.Requests()) != 0 {
				t.Error("bad output was retried or handed to the Execution Service")
			}
			if tt.fault == mock.Invalid {
				rejected := f.eventsOf(agentrunner.EventArtifactRejected)
				if len(rejected) != 1 || len(rejected[0].Details["problems"].([]string)) == 0 {
					t.Errorf("artifact.rejected: %+v", rejected)
				}
				if report := f.stored(c.ID, "synthesize", 1, agentrunner.FileValidation); !strings.Contains(report, "breaks its contract") {
					t.Errorf("validation report: %q", report)
				}
			}
		})
	}
}

// TestTimeoutIsRetried: an agent that hangs is stopped at its timeout and
// the attempt is retried (FR-016/017).
func TestTimeoutIsRetried(t *testing.T) {
	f := newFixture(t, execsvc.MockOptions{}, func(c *config.Config) {
		c.Agents["research"].Timeout = config.Duration(20 * time.Millisecond)
	})
	f.fail("research", mock.Hang)
	c := f.runOnce(f.engine())
	if c.Status != agentrunner.CycleCompleted {
		t.Fatalf("cycle %s: %s", c.Status, c.Error)
	}
	if diff := cmp.Diff([]string{"research#1:failed:timeout", "research#2:succeeded"}, f.attempts(c.ID)[1:3]); diff != "" {
		t.Errorf("attempts (-want +got):\n%s", diff)
	}
}

// TestStepTimeoutOverride: a step's own timeout wins over its agent's (FR-018).
func TestStepTimeoutOverride(t *testing.T) {
	f := newFixture(t, execsvc.MockOptions{}, func(c *config.Config) {
		c.Pipeline.Steps["research"].Timeout = config.Duration(20 * time.Millisecond)
		c.Pipeline.Steps["research"].Retries = &config.Retries{Max: new(int)}
	})
	f.fail("research", mock.Hang)
	c := f.runOnce(f.engine())
	if c.Status != agentrunner.CycleHalted || !strings.Contains(c.Error, "timeout") {
		t.Fatalf("cycle %s: %q, want failed by the step's 20ms timeout with no retry", c.Status, c.Error)
	}
}

// TestRestartDuringBackoffKeepsIt: a runner that stops 2 minutes into a
// 5-minute backoff waits the remaining 3 minutes after its restart.
func TestRestartDuringBackoffKeepsIt(t *testing.T) {
	f := newFixture(t, execsvc.MockOptions{}, nil)
	f.fail("research", mock.Crash)
	ctx, cancel := context.WithCancel(context.Background())
	f.clock.OnAfter = func(d time.Duration) bool {
		if d == 5*time.Minute {
			f.clock.Advance(2 * time.Minute)
			cancel() // the runner dies during the backoff
			return false
		}
		return true
	}
	if _, err := f.engine().RunOnce(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("RunOnce: %v, want it stopped", err)
	}
	f.clock.OnAfter = nil
	c := f.runOnce(f.engine())
	if c.Status != agentrunner.CycleCompleted {
		t.Fatalf("cycle %s: %s", c.Status, c.Error)
	}
	waits := f.clock.Waits()
	if waits[0] != 3*time.Minute {
		t.Errorf("after the restart the engine waited %v, want the remaining 3m", waits[0])
	}
	if diff := cmp.Diff([]string{"research#1:failed:crash", "research#2:succeeded"}, f.attempts(c.ID)[1:3]); diff != "" {
		t.Errorf("attempts (-want +got):\n%s", diff)
	}
}

// TestResumeAfterCrashMidStep: the runner stops while research runs; the
// next start counts that attempt as interrupted, runs research again at
// once, and does nothing already done again (FR-002/003).
func TestResumeAfterCrashMidStep(t *testing.T) {
	f := newFixture(t, execsvc.MockOptions{}, nil)
	ctx, cancel := context.WithCancel(context.Background())
	f.onRun = func(inv *agentrunner.Invocation) {
		if inv.Step == "research" && inv.Attempt == 1 {
			cancel()
		}
	}
	f.fail("research", mock.Hang)
	if _, err := f.engine().RunOnce(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("RunOnce: %v, want it stopped", err)
	}
	if diff := cmp.Diff([]string{"plan#1:succeeded", "research#1:running"}, f.attempts("20261122_140000")); diff != "" {
		t.Fatalf("state after the crash (-want +got):\n%s", diff)
	}
	f.onRun = nil
	waitsBefore := len(f.clock.Waits())
	c := f.runOnce(f.engine())
	if c.Status != agentrunner.CycleCompleted {
		t.Fatalf("cycle %s: %s", c.Status, c.Error)
	}
	want := []string{"plan#1:succeeded", "research#1:failed:interrupted", "research#2:succeeded",
		"analyze#1:succeeded", "synthesize#1:succeeded", "execute#1:succeeded", "evaluate#1:succeeded"}
	if diff := cmp.Diff(want, f.attempts(c.ID)); diff != "" {
		t.Errorf("attempts (-want +got):\n%s", diff)
	}
	for _, w := range f.clock.Waits()[waitsBefore:] {
		if w >= time.Minute {
			t.Errorf("an interrupted attempt was retried after a backoff of %v", w)
		}
	}
	if len(f.eventsOf(agentrunner.EventAttemptInterrupted)) != 1 {
		t.Error("no attempt.interrupted event")
	}
}

// TestResumeAtExecutionNeverSendsTwice: the runner dies after the
// Execution Service accepted the strategy but before that was recorded; the
// retry sends the same idempotency key and the service acts once.
func TestResumeAtExecutionNeverSendsTwice(t *testing.T) {
	f := newFixture(t, execsvc.MockOptions{CompletedAfter: 1}, nil)
	ctx, cancel := context.WithCancel(context.Background())
	e := f.engineWith(func(o *Options) { o.Exec = cancelAfterSubmit{ExecutionService: o.Exec, cancel: cancel} })
	if _, err := e.RunOnce(ctx); err == nil {
		t.Fatal("RunOnce succeeded; want it stopped after the submit")
	}
	c := f.runOnce(f.engine())
	if c.Status != agentrunner.CycleCompleted {
		t.Fatalf("cycle %s: %s", c.Status, c.Error)
	}
	var posts []string
	for _, r := range f.es.Requests() {
		if r.Method == "POST" {
			posts = append(posts, r.IdempotencyKey)
		}
	}
	if len(posts) != 2 || posts[0] != posts[1] {
		t.Errorf("POSTs %v, want the same key twice", posts)
	}
	if n := len(f.es.Strategies()); n != 1 {
		t.Errorf("the Execution Service accepted %d strategies, want 1", n)
	}
	msg, err := f.store.OutboxMessage(context.Background(), posts[0])
	if err != nil || msg.DeliveredAt.IsZero() {
		t.Errorf("outbox message not marked delivered: %+v, %v", msg, err)
	}
}

type cancelAfterSubmit struct {
	ExecutionService
	cancel func()
}

// Submit hands the strategy over, then stops the runner before it can
// learn the answer: the call returns only once the runner stops its
// attempts, as if the process had died there.
func (c cancelAfterSubmit) Submit(ctx context.Context, key string, s execsvc.Submission) (*execsvc.Receipt, error) {
	if _, err := c.ExecutionService.Submit(ctx, key, s); err != nil {
		return nil, err
	}
	c.cancel()
	<-ctx.Done()
	return nil, ctx.Err()
}

// TestExecutionOutcomes: an execution error or timeout still leads to the
// evaluation, with the outcome recorded and given to the evaluation agent
// (FR-084/085); an expired strategy is never handed over.
func TestExecutionOutcomes(t *testing.T) {
	t.Run("error", func(t *testing.T) {
		f := newFixture(t, execsvc.MockOptions{FailWith: "exchange rejected the order"}, nil)
		c := f.runOnce(f.engine())
		if c.Status != agentrunner.CycleCompleted {
			t.Fatalf("cycle %s: %s", c.Status, c.Error)
		}
		boxes, _ := mailbox.New(f.ws.Layout.Mailboxes(), 5)
		msgs, _ := boxes.Read("evaluation", 0)
		if !strings.Contains(msgs[len(msgs)-1].Body, "error: exchange rejected the order") {
			t.Errorf("the evaluation agent is not told about the error: %q", msgs[len(msgs)-1].Body)
		}
		final := f.eventsOf(execution.EventExecutionStatus)
		if last := final[len(final)-1]; last.Level != agentrunner.LevelError || last.Details["status"] != "error" {
			t.Errorf("final execution event: %+v", last)
		}
	})
	t.Run("timeout", func(t *testing.T) {
		f := newFixture(t, execsvc.MockOptions{ExecutingAfter: 1, CompletedAfter: 1 << 30}, func(c *config.Config) {
			c.ExecutionService.Timeout = config.Duration(10 * time.Minute)
		})
		c := f.runOnce(f.engine())
		if c.Status != agentrunner.CycleCompleted {
			t.Fatalf("cycle %s: %s", c.Status, c.Error)
		}
		final := f.eventsOf(execution.EventExecutionStatus)
		if d := final[len(final)-1].Details["detail"].(string); !strings.Contains(d, "timed out after 10m0s") {
			t.Errorf("final execution detail %q", d)
		}
		var total time.Duration
		for _, w := range f.clock.Waits() {
			total += w
		}
		if total != 10*time.Minute {
			t.Errorf("polled for %v, want exactly the 10m timeout", total)
		}
	})
	t.Run("expired", func(t *testing.T) {
		f := newFixture(t, execsvc.MockOptions{}, nil)
		f.onRun = func(inv *agentrunner.Invocation) {
			if inv.Step == "synthesize" {
				f.skew = -7 * time.Hour // the strategy is written 7h in the past: expired
			}
			if inv.Step == "evaluate" {
				t.Error("the cycle went on after an expired strategy")
			}
		}
		c := f.runOnce(f.engine())
		if c.Status != agentrunner.CycleHalted || !strings.Contains(c.Error, "expired") {
			t.Fatalf("cycle %s: %q, want failed: expired", c.Status, c.Error)
		}
		if len(f.es.Requests()) != 0 {
			t.Error("an expired strategy was handed over")
		}
	})
}

// TestOtherPipelineShapes: the engine runs any graph; here a two-step
// review pipeline with no execution step, defined only in configuration.
func TestOtherPipelineShapes(t *testing.T) {
	f := newFixture(t, execsvc.MockOptions{}, func(c *config.Config) {
		c.Pipeline.Start = "research"
		c.Pipeline.Final = ""
		for id := range c.Pipeline.Steps {
			if id != "research" && id != "analyze" {
				delete(c.Pipeline.Steps, id)
			}
		}
		c.Pipeline.Steps["analyze"].Next = config.EndStep
		c.Pipeline.Steps["analyze"].Deliver = nil
		c.Agents["research"].Inputs = nil
		c.Agents["plan"].Inputs = nil
		c.Agents["evaluation"].Inputs = nil
	})
	c := f.runOnce(f.engine())
	if c.Status != agentrunner.CycleCompleted {
		t.Fatalf("cycle %s: %s", c.Status, c.Error)
	}
	if diff := cmp.Diff([]string{"analysis.md", "research.md"}, files(t, c.Dir)); diff != "" {
		t.Errorf("cycle dir (-want +got):\n%s", diff)
	}
}

func TestNextStart(t *testing.T) {
	s := config.Schedule{Every: config.Duration(6 * time.Hour), MinCycle: config.Duration(time.Hour)}
	last := &agentrunner.Cycle{StartedAt: t0}
	if got := NextStart(s, nil, t0); !got.Equal(t0) {
		t.Errorf("no cycle yet: %v, want now", got)
	}
	if got := NextStart(s, last, t0); !got.Equal(t0.Add(6 * time.Hour)) {
		t.Errorf("every 6h: %v", got)
	}
	s.Every = config.Duration(10 * time.Minute)
	if got := NextStart(s, last, t0); !got.Equal(t0.Add(time.Hour)) {
		t.Errorf("every 10m with a 1h minimum cycle: %v, want +1h (FR-005)", got)
	}
}

// TestArtifactsAreValidatedBytes: what lands in the cycle dir is exactly
// what was validated, published without a temporary file left behind.
func TestArtifactsAreValidatedBytes(t *testing.T) {
	f := newFixture(t, execsvc.MockOptions{}, nil)
	c := f.runOnce(f.engine())
	for _, step := range []string{"plan", "research"} {
		a := f.ws.Agents[f.ws.Config.Pipeline.Steps[step].Agent]
		published, _ := os.ReadFile(filepath.Join(c.Dir, a.Output.File))
		accepted := f.eventsOf(agentrunner.EventArtifactAccepted)
		var hash string
		for _, ev := range accepted {
			if ev.Step == step {
				hash = ev.Details["sha256"].(string)
			}
		}
		if hash != artifact.Hash(published) {
			t.Errorf("%s: published bytes differ from the validated ones", step)
		}
		for _, n := range files(t, c.Dir) {
			if strings.Contains(n, ".tmp") {
				t.Errorf("temporary file %s left in the cycle directory", n)
			}
		}
	}
}

// spender is an agent that spends 1000 tokens per attempt unless its
// budget is smaller, as a model agent would stop.
type spender struct {
	agentrunner.Runtime
	budgets map[string]agentrunner.TokenBudget
}

func (s *spender) Run(ctx context.Context, inv *agentrunner.Invocation) (*agentrunner.RunResult, error) {
	s.budgets[inv.Step] = inv.TokenBudget
	if inv.TokenBudget.Limit > 0 && inv.TokenBudget.Limit < 1000 {
		return &agentrunner.RunResult{Usage: agentrunner.Usage{InputTokens: inv.TokenBudget.Limit + 1, Turns: 1}},
			agentrunner.Fail(agentrunner.ClassBudget, "token budget exceeded: %s", inv.TokenBudget.Source)
	}
	res, err := s.Runtime.Run(ctx, inv)
	if res != nil {
		res.Usage = agentrunner.Usage{InputTokens: 800, OutputTokens: 200, Turns: 2, ToolCalls: 3}
	}
	return res, err
}

// TestCycleTokenBudget: the cycle's budget is shared by its attempts; the
// step that would pass it fails for good (a budget is not retried).
func TestCycleTokenBudget(t *testing.T) {
	f := newFixture(t, execsvc.MockOptions{}, func(c *config.Config) { c.Budgets.CycleTokens = 2500 })
	var sp *spender
	e := f.engineWith(func(o *Options) {
		sp = &spender{Runtime: o.Runtimes["mock"], budgets: map[string]agentrunner.TokenBudget{}}
		o.Runtimes["mock"] = sp
	})
	c := f.runOnce(e)
	if c.Status != agentrunner.CycleHalted || !strings.Contains(c.Error, "budget") {
		t.Fatalf("cycle %s: %q, want failed on its budget", c.Status, c.Error)
	}
	if diff := cmp.Diff([]string{"plan#1:succeeded", "research#1:succeeded", "analyze#1:failed:budget"}, f.attempts(c.ID)); diff != "" {
		t.Errorf("attempts (-want +got):\n%s", diff)
	}
	if b := sp.budgets["research"]; b.Limit != 1500 || !strings.Contains(b.Source, "budgets.cycle_tokens") {
		t.Errorf("research's budget %+v, want what is left of the cycle's (1500)", b)
	}
	atts, _ := f.store.Attempts(context.Background(), c.ID)
	if atts[0].Usage != (agentrunner.Usage{InputTokens: 800, OutputTokens: 200, Turns: 2, ToolCalls: 3}) {
		t.Errorf("plan's usage was not recorded: %+v", atts[0].Usage)
	}
}

// childLike acts as a process agent whose tool calls run in its MCP
// server, another process that commits them to the store itself.
type childLike struct {
	store agentrunner.Store
	mock  agentrunner.Runtime
}

func (r childLike) Run(ctx context.Context, inv *agentrunner.Invocation) (*agentrunner.RunResult, error) {
	ev := &agentrunner.Event{Timestamp: t0, Type: tool.EventToolCall, Agent: inv.Agent, Step: inv.Step, CycleID: inv.CycleID,
		Level: agentrunner.LevelInfo, Details: map[string]any{"tool": "web_search", "attempt": inv.Attempt}}
	if err := r.store.Apply(ctx, &agentrunner.Change{Events: []*agentrunner.Event{ev}}); err != nil {
		return nil, err
	}
	return r.mock.Run(ctx, inv)
}

// TestProcessAgentToolCallsReachOnEvent: the tool calls a process agent
// made through its MCP server are committed by that server's process; the
// engine hands them to OnEvent after the attempt, so the runner's metrics
// count them.
func TestProcessAgentToolCallsReachOnEvent(t *testing.T) {
	f := newFixture(t, execsvc.MockOptions{}, func(c *config.Config) {
		c.Agents["research"].Provider = "claude-code"
	})
	var mu sync.Mutex
	var calls []*agentrunner.Event
	rt := mock.New(mock.Options{Now: f.clock.Now})
	exec, err := execsvc.NewClient(f.ws.Config.ExecutionService.URL, "", 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	e, err := New(Options{
		Workspace: f.ws, Store: f.store, Exec: exec, Clock: f.clock, MCPCommand: "/usr/local/bin/agentrunner",
		Runtimes: map[string]agentrunner.Runtime{"mock": rt, "claude-code": childLike{store: f.store, mock: rt}},
		OnEvent: func(ev *agentrunner.Event) {
			if ev.Type == tool.EventToolCall {
				mu.Lock()
				calls = append(calls, ev)
				mu.Unlock()
			}
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	if c := f.runOnce(e); c.Status != agentrunner.CycleCompleted {
		t.Fatalf("cycle %s: %s", c.Status, c.Error)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(calls) != 1 || calls[0].Step != "research" || calls[0].Details["tool"] != "web_search" {
		t.Errorf("tool calls reported: %+v, want research's one web_search", calls)
	}
}
