package scheduler_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/agentrunner/agentrunner"
	"github.com/agentrunner/agentrunner/mailbox"
	"github.com/agentrunner/agentrunner/scheduler"
)

// override writes a command and returns its result once the scheduler
// consumed it.
func (h *harness) override(kind string, args map[string]any) string {
	h.t.Helper()
	id, err := h.command(kind, "", args)
	if err != nil {
		h.t.Fatal(err)
	}
	return h.commandResult(id)
}

// commandResult waits until command id is consumed and returns its result.
func (h *harness) commandResult(id int64) string {
	h.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := h.sched.Await(ctx, id)
	if err != nil {
		h.t.Fatalf("command %d: %v", id, err)
	}
	return res
}

// attemptLines lists a run's attempts as "step#number:status".
func attemptLines(t *testing.T, h *harness, run string) []string {
	t.Helper()
	atts, err := h.store.Attempts(context.Background(), run)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, a := range atts {
		out = append(out, fmt.Sprintf("%s#%d:%s", a.Step, a.Number, a.Status))
	}
	return out
}

// eventsOfType returns the workspace's events of one type.
func eventsOfType(t *testing.T, h *harness, typ string) []*agentrunner.Event {
	t.Helper()
	evs, err := h.store.Events(context.Background(), agentrunner.EventFilter{Type: typ})
	if err != nil {
		t.Fatal(err)
	}
	return evs
}

// pair is a pipeline of a then b.
func pair(name string) *agentrunner.Pipeline {
	return &agentrunner.Pipeline{Name: name, Start: "a", Steps: steps(
		&agentrunner.Step{ID: "a", Next: "b"},
		&agentrunner.Step{ID: "b", Next: agentrunner.EndStep},
	)}
}

// holdStep returns a kind whose attempts of step wait until release is
// closed, whatever their context says.
func holdStep(step string) (*scriptKind, chan struct{}) {
	release := make(chan struct{})
	k := &scriptKind{}
	k.fail = func(a *agentrunner.StepAttempt) error {
		if a.Step.ID == step {
			<-release
		}
		return nil
	}
	return k, release
}

func TestAPauseLetsTheRunningAttemptFinishAndHoldsTheNextUntilTheResume(t *testing.T) {
	k, release := holdStep("a")
	h := newHarness(t, k, pair("two"))
	h.run()
	id := h.startRun("two", nil)
	waitCalls(t, k, 1)
	if got := h.override(agentrunner.CommandPause, map[string]any{"reason": "maintenance"}); got != "paused" {
		t.Fatalf("pause: %q", got)
	}
	close(release)
	// a's outcome is committed, and b's attempt, opened in the same
	// commit, waits.
	h.waitFor(id, "a to succeed", func(_ *agentrunner.Run, srs []*agentrunner.StepRun) bool {
		return slices.ContainsFunc(srs, func(sr *agentrunner.StepRun) bool { return sr.Step == "a" && sr.Status == agentrunner.StepRunSucceeded })
	})
	if got, want := attemptLines(t, h, id), []string{"a#1:succeeded", "b#1:pending"}; !cmp.Equal(got, want) {
		t.Fatalf("attempts while paused: %v, want %v", got, want)
	}
	if got := h.override(agentrunner.CommandResume, nil); got != "lifted the pause" {
		t.Fatalf("resume: %q", got)
	}
	if r, srs := h.waitDone(id); r.Status != agentrunner.RunCompleted {
		t.Fatalf("run %s is %s after the resume: %s", id, r.Status, describe(srs))
	}
	if got, want := attemptLines(t, h, id), []string{"a#1:succeeded", "b#1:succeeded"}; !cmp.Equal(got, want) {
		t.Errorf("attempts: %v, want %v", got, want)
	}
	paused, resumed := eventsOfType(t, h, scheduler.EventPaused), eventsOfType(t, h, scheduler.EventUnpaused)
	if len(paused) != 1 || paused[0].Details["operator"] != "tester" || len(resumed) != 1 || resumed[0].Details["paused_by"] != "tester" {
		t.Errorf("events: paused %+v, resumed %+v", paused, resumed)
	}
}

func TestAPauseSurvivesARestart(t *testing.T) {
	k := &scriptKind{}
	h := newHarness(t, k, pair("two"))
	h.run()
	if got := h.override(agentrunner.CommandPause, nil); got != "paused" {
		t.Fatalf("pause: %q", got)
	}
	h.run() // a restart
	id := h.startRun("two", nil)
	// The run's first attempt is recorded in the commit that consumed
	// its start.
	if got, want := attemptLines(t, h, id), []string{"a#1:pending"}; !cmp.Equal(got, want) {
		t.Fatalf("attempts after the restart, paused: %v, want %v", got, want)
	}
	if ctl, err := h.store.Control(context.Background()); err != nil || !ctl.Paused || ctl.PausedBy != "tester" {
		t.Fatalf("stored control: %+v, %v", ctl, err)
	}
	h.override(agentrunner.CommandResume, nil)
	if r, _ := h.waitDone(id); r.Status != agentrunner.RunCompleted {
		t.Fatalf("run %s is %s after the resume", id, r.Status)
	}
	if ctl, err := h.store.Control(context.Background()); err != nil || ctl.Paused {
		t.Errorf("stored control after the resume: %+v, %v", ctl, err)
	}
}

func TestAPauseHoldsScheduledRuns(t *testing.T) {
	k := &scriptKind{}
	p := pair("hourly")
	p.Every = time.Hour
	h := newHarness(t, k, p)
	// The pause is there before the scheduler's first look, when the
	// first scheduled run would start.
	pause, err := h.command(agentrunner.CommandPause, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	h.run()
	if got := h.commandResult(pause); got != "paused" {
		t.Fatalf("pause: %q", got)
	}
	runs := func() []*agentrunner.Run {
		rs, err := h.store.Runs(context.Background(), agentrunner.RunFilter{Pipeline: "hourly"})
		if err != nil {
			t.Fatal(err)
		}
		return rs
	}
	if rs := runs(); len(rs) != 0 {
		t.Fatalf("%d scheduled runs started while paused", len(rs))
	}
	h.override(agentrunner.CommandResume, nil)
	deadline := time.Now().Add(30 * time.Second)
	for len(runs()) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("no scheduled run started after the resume")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestCommandsWithNothingToActOnAreIgnoredSayingWhy(t *testing.T) {
	h := newHarness(t, &scriptKind{}, pair("two"))
	h.run()
	steps := []struct{ kind, want string }{
		{agentrunner.CommandResume, "ignored: nothing to resume: the workspace is not paused; no cycle is halted"},
		{agentrunner.CommandPause, "paused"},
		{agentrunner.CommandPause, "ignored: the workspace is already paused (by tester)"},
		{agentrunner.CommandResume, "lifted the pause"},
		{agentrunner.CommandResume, "ignored: nothing to resume: the workspace is not paused; no cycle is halted"},
		{agentrunner.CommandInject, "ignored: this runner delivers no messages to mailboxes"},
		{agentrunner.CommandForceCycle, "ignored: the command names no pipeline and the workspace has no serial pipeline"},
	}
	var got []string
	for _, s := range steps {
		got = append(got, h.override(s.kind, nil))
	}
	want := make([]string, len(steps))
	for i, s := range steps {
		want[i] = s.want
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("results (-want +got):\n%s", diff)
	}
	var kinds []string
	for _, ev := range eventsOfType(t, h, scheduler.EventCommandIgnored) {
		kinds = append(kinds, ev.Details["kind"].(string))
		if ev.Details["operator"] != "tester" || ev.Details["reason"] == "" {
			t.Errorf("command.ignored event without its operator or reason: %+v", ev.Details)
		}
	}
	if want := []string{"resume", "pause", "resume", "inject", "force-cycle"}; !cmp.Equal(kinds, want) {
		t.Errorf("command.ignored events of kinds %v, want %v", kinds, want)
	}
}

func TestForceCycleStartsARunNowAndWaitsWhilePaused(t *testing.T) {
	k := &scriptKind{}
	loop := pair("loop")
	loop.Serial, loop.Every = true, 24*time.Hour
	h := newHarness(t, k, loop, pair("other"))
	h.run()
	// The schedule starts the loop's first run at once; its next one is
	// a day away.
	first := h.waitForRuns("loop", 1)[0]
	h.waitDone(first.ID)

	if got := h.override(agentrunner.CommandForceCycle, nil); got != "started run loop-000002" {
		t.Fatalf("force-cycle of the serial pipeline: %q", got)
	}
	if got := h.override(agentrunner.CommandForceCycle, map[string]any{"pipeline": "other"}); got != "started run other-000001" {
		t.Fatalf("force-cycle of pipeline other: %q", got)
	}
	if got := h.override(agentrunner.CommandForceCycle, map[string]any{"pipeline": "nope"}); got != `ignored: pipeline "nope" is not configured` {
		t.Fatalf("force-cycle of an unknown pipeline: %q", got)
	}

	h.override(agentrunner.CommandPause, nil)
	force, err := h.command(agentrunner.CommandForceCycle, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	// Commands are applied in order: once this one is, the force was
	// looked at.
	h.override(agentrunner.CommandPause, nil)
	cmds, _ := h.store.PendingCommands(context.Background())
	if len(cmds) != 1 || cmds[0].ID != force {
		t.Fatalf("pending commands while paused: %+v, want the force-cycle", cmds)
	}
	if n := len(h.waitForRuns("loop", 2)); n != 2 {
		t.Fatalf("%d runs of loop while paused, want 2", n)
	}
	h.override(agentrunner.CommandResume, nil)
	if got := h.commandResult(force); got != "started run loop-000003" {
		t.Fatalf("the held force-cycle after the resume: %q", got)
	}
	if r, _ := h.waitDone("loop-000003"); r.Status != agentrunner.RunCompleted {
		t.Errorf("the forced run is %s", r.Status)
	}
}

// waitForRuns waits until pipeline has at least n runs and returns them,
// newest first.
func (h *harness) waitForRuns(pipeline string, n int) []*agentrunner.Run {
	h.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		rs, err := h.store.Runs(context.Background(), agentrunner.RunFilter{Pipeline: pipeline})
		if err != nil {
			h.t.Fatal(err)
		}
		if len(rs) >= n {
			return rs
		}
		if time.Now().After(deadline) {
			h.t.Fatalf("%d runs of %s, want %d", len(rs), pipeline, n)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestInjectGoesThroughTheHookAndIsConsumedWithItsEvent(t *testing.T) {
	var seen []string
	fails := 1 // the first delivery fails for a passing reason
	boxes, err := mailbox.New(t.TempDir(), 5)
	if err != nil {
		t.Fatal(err)
	}
	inject := func(_ context.Context, cmd *agentrunner.Command) (*scheduler.Injection, error) {
		agent, _ := cmd.Args["agent"].(string)
		msg, _ := cmd.Args["message"].(string)
		if agent != "coder" {
			return nil, agentrunner.Errorf(agentrunner.EINVALID, "no agent %q", agent)
		}
		if fails > 0 {
			fails--
			return nil, errors.New("mailbox: write: interrupted")
		}
		seen = append(seen, fmt.Sprintf("%d:%s", cmd.ID, msg))
		ev := &agentrunner.Event{Type: scheduler.EventInjected, Agent: agent, Level: agentrunner.LevelInfo, Details: map[string]any{"to": agent}}
		d := &agentrunner.MailDeposit{Agent: agent, ID: fmt.Sprintf("inject-%d", cmd.ID), Line: []byte(msg), Keep: 5}
		return &scheduler.Injection{Mail: d, Event: ev, Result: "delivered to the mailbox of " + agent}, nil
	}
	h := newHarness(t, &scriptKind{}, pair("two"))
	h.options = func(o *scheduler.Options) { o.Inject, o.Poll, o.Mailboxes = inject, 10*time.Millisecond, boxes }
	h.run()
	id, err := h.command(agentrunner.CommandInject, "", map[string]any{"agent": "coder", "message": "look at the logs"})
	if err != nil {
		t.Fatal(err)
	}
	if got := h.commandResult(id); got != "delivered to the mailbox of coder" {
		t.Fatalf("inject: %q", got)
	}
	if want := []string{fmt.Sprintf("%d:look at the logs", id)}; !cmp.Equal(seen, want) {
		t.Errorf("delivered %v, want %v", seen, want)
	}
	evs := eventsOfType(t, h, scheduler.EventInjected)
	if len(evs) != 1 || evs[0].Agent != "coder" || evs[0].Timestamp.IsZero() {
		t.Errorf("mailbox.injected events: %+v", evs)
	}
	// The message was committed with the command's consumption, and its
	// mailbox's file written after the commit (the result is reported
	// first: the file follows at once).
	lines, err := h.store.Mailbox(context.Background(), "coder")
	if err != nil || len(lines) != 1 || string(lines[0]) != "look at the logs" {
		t.Errorf("the coder's stored mailbox: %q, %v", lines, err)
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		data, err := os.ReadFile(boxes.Path("coder"))
		if err == nil && string(data) == "look at the logs\n" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the coder's mailbox file: %q, %v", data, err)
		}
	}
	if got := h.override(agentrunner.CommandInject, map[string]any{"agent": "ghost", "message": "hi"}); !strings.HasPrefix(got, "ignored: ") || !strings.Contains(got, `no agent "ghost"`) {
		t.Errorf("inject to no agent: %q", got)
	}
}
