package engine

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentrunner/agentrunner"
	"github.com/agentrunner/agentrunner/execsvc"
	"github.com/agentrunner/agentrunner/mailbox"
	"github.com/agentrunner/agentrunner/runtime/mock"
	"github.com/google/go-cmp/cmp"
)

// TestPauseHoldsTheNextStep: a pause given while plan runs lets plan
// finish, starts nothing more until a resume, and survives a restart.
func TestPauseHoldsTheNextStep(t *testing.T) {
	f := newFixture(t, execsvc.MockOptions{}, nil)
	e := f.engine()
	paused := make(chan struct{})
	f.onRun = func(inv *agentrunner.Invocation) {
		if inv.Step == "plan" {
			f.command(e, agentrunner.CommandPause, "alice", nil)
			close(paused)
		}
	}
	ctx, stop := context.WithCancel(context.Background())
	stopped := make(chan error, 1)
	go func() { _, err := e.RunOnce(ctx); stopped <- err }()
	<-paused
	waitFor(t, "the pause", func() bool { return len(f.eventsOf(EventPaused)) == 1 })
	ctl, _ := f.store.Control(context.Background())
	if !ctl.Paused || ctl.PausedBy != "alice" {
		t.Fatalf("control %+v, want paused by alice", ctl)
	}
	c, _ := f.store.UnfinishedCycle(context.Background(), f.ws.Config.Name)
	waitFor(t, "plan to finish and research to wait", func() bool {
		return cmp.Equal([]string{"plan#1:succeeded", "research#1:pending"}, f.attempts(c.ID))
	})
	// The runner restarts while paused: still paused, nothing runs.
	stop()
	<-stopped
	f.onRun = nil
	e = f.engine()
	finished := f.runAsync(e)
	f.command(e, agentrunner.CommandPause, "bob", nil) // already paused: ignored
	waitFor(t, "the second pause to be ignored", func() bool { return len(f.eventsOf(EventCommandIgnored)) == 1 })
	if got := f.attempts(c.ID); len(got) != 2 {
		t.Fatalf("a step ran while paused: %v", got)
	}
	f.command(e, agentrunner.CommandResume, "carol", nil)
	c = finished()
	if c.Status != agentrunner.CycleCompleted {
		t.Fatalf("cycle %s (%s), want completed after the resume", c.Status, c.Error)
	}
	want := []string{
		"pause:paused",
		"pause:ignored: the workspace is already paused (by alice)",
		"resume:lifted the pause",
	}
	if diff := cmp.Diff(want, f.audit()); diff != "" {
		t.Errorf("audit (-want +got):\n%s", diff)
	}
	if ev := f.eventsOf(EventUnpaused); len(ev) != 1 || ev[0].Details["operator"] != "carol" || ev[0].Details["paused_by"] != "alice" {
		t.Errorf("loop.resumed events: %+v", ev)
	}
}

// TestAbortCancelsTheRunningAgent: an abort stops a hanging agent at once
// and ends the cycle aborted; the next cycle runs normally.
func TestAbortCancelsTheRunningAgent(t *testing.T) {
	f := newFixture(t, execsvc.MockOptions{}, nil)
	f.fail("research", mock.Hang) // runs until its 45m timeout, unless aborted
	e := f.engine()
	var abort *agentrunner.Command
	f.onRun = func(inv *agentrunner.Invocation) {
		if inv.Step == "research" {
			abort = f.command(e, agentrunner.CommandAbort, "alice", map[string]any{"reason": "bad plan"})
		}
	}
	c := f.runAsync(e)()
	if c.Status != agentrunner.CycleAborted || c.Error != "aborted by alice: bad plan" {
		t.Fatalf("cycle %s: %q, want aborted by alice", c.Status, c.Error)
	}
	if diff := cmp.Diff([]string{"plan#1:succeeded", "research#1:failed:aborted"}, f.attempts(c.ID)); diff != "" {
		t.Errorf("attempts (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"plan.md"}, files(t, c.Dir)); diff != "" {
		t.Errorf("cycle dir (-want +got):\n%s", diff)
	}
	ev := f.eventsOf(agentrunner.EventCycleAborted)
	if len(ev) != 1 || ev[0].Step != "research" || ev[0].Details["status"] != "aborted" {
		t.Errorf("cycle.aborted events: %+v", ev)
	}
	if diff := cmp.Diff([]string{"abort:aborted cycle " + c.ID}, f.audit()); diff != "" {
		t.Errorf("audit of command %d (-want +got):\n%s", abort.ID, diff)
	}
	if len(f.eventsOf(agentrunner.EventRetryScheduled)) != 0 {
		t.Error("an aborted attempt was retried")
	}
	// An abort with nothing to abort is recorded and changes nothing.
	f.command(nil, agentrunner.CommandAbort, "bob", nil)
	f.onRun = nil
	f.fail("research")
	if next := f.runOnce(f.engine()); next.Status != agentrunner.CycleCompleted {
		t.Errorf("the next cycle: %s (%s)", next.Status, next.Error)
	}
	if got := f.audit(); got[1] != "abort:ignored: no cycle is running" {
		t.Errorf("audit: %v", got)
	}
}

// TestAbortEndsABackoff: an abort given while a retry waits out its
// backoff ends the cycle without waiting.
func TestAbortEndsABackoff(t *testing.T) {
	f := newFixture(t, execsvc.MockOptions{}, nil)
	f.fail("research", mock.Crash)
	e := f.engine()
	// The scheduler may wait on the backoff again before it takes the
	// command, even after the cycle ended: the abort is given once.
	var abort sync.Once
	f.clock.OnAfter = func(d time.Duration) bool {
		if d == 5*time.Minute {
			abort.Do(func() { f.command(e, agentrunner.CommandAbort, "alice", nil) })
			return false // the backoff would never end by itself
		}
		return true
	}
	c := f.runAsync(e)()
	if c.Status != agentrunner.CycleAborted {
		t.Fatalf("cycle %s, want aborted", c.Status)
	}
	if diff := cmp.Diff([]string{"plan#1:succeeded", "research#1:failed:crash", "research#2:failed:aborted"}, f.attempts(c.ID)); diff != "" {
		t.Errorf("attempts (-want +got):\n%s", diff)
	}
}

// TestAbortAHaltedCycle: an operator gives up on a halted cycle.
func TestAbortAHaltedCycle(t *testing.T) {
	f := newFixture(t, execsvc.MockOptions{}, nil)
	f.fail("synthesize", mock.Invalid)
	e := f.engine()
	if c := f.runOnce(e); c.Status != agentrunner.CycleHalted {
		t.Fatalf("cycle %s, want halted", c.Status)
	}
	halted, _ := f.store.UnfinishedCycle(context.Background(), f.ws.Config.Name)
	f.command(nil, agentrunner.CommandAbort, "alice", nil)
	f.fail("synthesize")
	// run --once after the abort runs a new cycle.
	if next := f.runOnce(e); next.ID == halted.ID || next.Status != agentrunner.CycleCompleted {
		t.Errorf("run after the abort: cycle %s %s, want a new completed cycle", next.ID, next.Status)
	}
	c, _ := f.store.Cycle(context.Background(), halted.ID)
	if c.Status != agentrunner.CycleAborted || c.Step != "" || c.EndedAt.IsZero() {
		t.Fatalf("the halted cycle is %s at %q, want aborted", c.Status, c.Step)
	}
	if diff := cmp.Diff([]string{"plan#1:succeeded", "research#1:succeeded", "analyze#1:succeeded", "synthesize#1:failed:invalid_output"}, f.attempts(c.ID)); diff != "" {
		t.Errorf("attempts of the aborted cycle (-want +got):\n%s", diff)
	}
}

// TestInject: an operator's message reaches the agent's mailbox once, even
// when the command is applied again after a crash; a message to an agent
// that does not exist is refused in the audit log.
func TestInject(t *testing.T) {
	f := newFixture(t, execsvc.MockOptions{}, nil)
	e := f.engine()
	var prompt string
	f.onRun = func(inv *agentrunner.Invocation) {
		switch inv.Step {
		case "plan":
			f.command(e, agentrunner.CommandInject, "alice", map[string]any{"agent": "research", "message": "Look at ETH staking flows."})
			f.command(e, agentrunner.CommandInject, "alice", map[string]any{"agent": "nobody", "message": "hello"})
		case "research":
			prompt = inv.Prompt
		}
	}
	if c := f.runOnce(e); c.Status != agentrunner.CycleCompleted {
		t.Fatalf("cycle %s (%s)", c.Status, c.Error)
	}
	msgs, err := e.boxes.Read("research", 0)
	if err != nil {
		t.Fatal(err)
	}
	var injected []mailbox.Message
	for _, m := range msgs {
		if m.Kind == mailbox.Inject {
			injected = append(injected, m)
		}
	}
	if len(injected) != 1 || injected[0].Body != "Look at ETH staking flows." || injected[0].From != "operator:alice" {
		t.Fatalf("injected messages: %+v", injected)
	}
	if !strings.Contains(prompt, e.boxes.Path("research")) {
		t.Error("the research prompt does not point at its mailbox")
	}
	want := []string{"inject:delivered to the mailbox of research", `inject:ignored: no agent "nobody"`}
	if diff := cmp.Diff(want, f.audit()); diff != "" {
		t.Errorf("audit (-want +got):\n%s", diff)
	}
	// The same command delivered again (its id is the message's) replaces
	// its own message.
	again := &agentrunner.Command{ID: 1, Kind: agentrunner.CommandInject, Operator: "alice", CreatedAt: t0,
		Args: map[string]any{"agent": "research", "message": "Look at ETH staking flows."}}
	inj, err := e.inject(context.Background(), again)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := f.store.Apply(ctx, &agentrunner.Change{Mail: []*agentrunner.MailDeposit{inj.Mail}}); err != nil {
		t.Fatal(err)
	}
	if err := e.boxes.Sync(ctx, f.store, "research"); err != nil {
		t.Fatal(err)
	}
	msgs, _ = e.boxes.Read("research", 0)
	n := 0
	for _, m := range msgs {
		if m.Kind == mailbox.Inject {
			n++
		}
	}
	if n != 1 {
		t.Errorf("%d injected messages after the replay, want 1", n)
	}
}

// TestForceCycle: a forced cycle starts at once, ignoring the schedule; one
// forced while a cycle runs waits for it to end.
func TestForceCycle(t *testing.T) {
	f := newFixture(t, execsvc.MockOptions{}, nil)
	e := f.engine()
	forced := false
	f.onRun = func(inv *agentrunner.Invocation) {
		if inv.Step == "evaluate" && !forced {
			forced = true
			f.command(e, agentrunner.CommandForceCycle, "alice", nil)
			waitFor(t, "the force-cycle to be taken", func() bool { return len(f.audit()) == 1 && f.audit()[0] != "force-cycle:" })
		}
	}
	first := f.runOnce(e)
	if first.Status != agentrunner.CycleCompleted {
		t.Fatalf("first cycle %s", first.Status)
	}
	// Queued while the first cycle ran, the forced one began as it ended.
	next, err := f.store.UnfinishedCycle(context.Background(), f.ws.Config.Name)
	if err != nil || next.ID == first.ID {
		t.Fatalf("no forced cycle after the first: %+v, %v", next, err)
	}
	if diff := cmp.Diff([]string{"force-cycle:queued cycle " + next.ID}, f.audit()); diff != "" {
		t.Errorf("audit (-want +got):\n%s", diff)
	}
	if evs := f.eventsOf("cycle.queued"); len(evs) != 1 || evs[0].Details["forced_by"] != "alice" {
		t.Errorf("cycle.queued events: %+v", evs)
	}
	c := f.runOnce(e)
	if c.ID != next.ID || c.Status != agentrunner.CycleCompleted {
		t.Fatalf("cycle %s %s, want the forced %s completed", c.ID, c.Status, next.ID)
	}
	if !c.StartedAt.Before(first.StartedAt.Add(f.ws.Config.Schedule.Every.D())) {
		t.Errorf("the forced cycle started at %v, after the schedule's next cycle", c.StartedAt)
	}
}

// TestOneResumeLiftsAPauseAndAHalt: a paused loop whose cycle halted is
// resumed by one command.
func TestOneResumeLiftsAPauseAndAHalt(t *testing.T) {
	f := newFixture(t, execsvc.MockOptions{}, nil)
	f.fail("synthesize", mock.Invalid)
	e := f.engine()
	if c := f.runOnce(e); c.Status != agentrunner.CycleHalted {
		t.Fatalf("cycle %s, want halted", c.Status)
	}
	f.command(nil, agentrunner.CommandPause, "alice", nil)
	f.command(nil, agentrunner.CommandResume, "bob", nil)
	f.command(nil, agentrunner.CommandResume, "bob", nil)
	c := f.runOnce(e)
	if c.Status != agentrunner.CycleCompleted {
		t.Fatalf("cycle %s (%s), want completed", c.Status, c.Error)
	}
	want := []string{
		"pause:paused",
		"resume:lifted the pause; resumed cycle " + c.ID + " at synthesize#1",
		"resume:ignored: nothing to resume: the workspace is not paused; no cycle is halted",
	}
	if diff := cmp.Diff(want, f.audit()); diff != "" {
		t.Errorf("audit (-want +got):\n%s", diff)
	}
}
