package engine

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/agentrunner/agentrunner"
	"github.com/agentrunner/agentrunner/config"
	"github.com/agentrunner/agentrunner/execsvc"
	"github.com/agentrunner/agentrunner/metrics"
	"github.com/agentrunner/agentrunner/step/agent"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// noRetries gives every step a retry policy of max 0: one failure that
// counts escalates, and the default escalation halts the loop.
func noRetries(c *config.Config) {
	for _, s := range c.Pipeline.Steps {
		s.Retries = &config.Retries{Max: new(int)}
	}
}

// faultScript fails the engine's file operations in the order of its
// script, each once, with EMFILE as the system returns it: a hand-written
// fault hook for Options.Faults.
type faultScript struct {
	mu     sync.Mutex
	script []string
	asked  []string
}

func (s *faultScript) fault(op string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.asked = append(s.asked, op)
	if len(s.script) == 0 || s.script[0] != op {
		return nil
	}
	s.script = s.script[1:]
	return &os.PathError{Op: "open", Path: "/x/" + strings.ReplaceAll(op, " ", "_"), Err: syscall.EMFILE}
}

// exhaustedEvents returns "resource/operation" of each resource.exhausted
// event, and checks each is a warning with its wait.
func exhaustedEvents(t *testing.T, f *fixture) []string {
	t.Helper()
	var out []string
	for _, ev := range f.eventsOf(agentrunner.EventResourceExhausted) {
		if ev.Level != agentrunner.LevelWarn || ev.Details["wait"] == "" || ev.Details["error"] == "" {
			t.Errorf("resource.exhausted event is not a warning with a wait and an error: %+v", ev)
		}
		out = append(out, fmt.Sprintf("%s/%s", ev.Details["resource"], ev.Details["operation"]))
	}
	return out
}

// retryBases returns the RetryBase of each attempt of a step.
func retryBases(t *testing.T, f *fixture, cycleID, step string) []int {
	t.Helper()
	atts, err := f.store.Attempts(context.Background(), cycleID)
	if err != nil {
		t.Fatal(err)
	}
	var out []int
	for _, a := range atts {
		if a.Step == step {
			out = append(out, a.RetryBase)
		}
	}
	return out
}

// TestResourceErrorIsRetriedWithoutUsingARetry: an EMFILE while the engine
// writes a step's prompt is the machine's state, not the step's failure:
// with no retries allowed, the step is still tried again, after a second,
// under a new attempt number that does not count as a retry, and the cycle
// completes. The event names the resource and the operation.
func TestResourceErrorIsRetriedWithoutUsingARetry(t *testing.T) {
	f := newFixture(t, execsvc.MockOptions{CompletedAfter: 1}, noRetries)
	f.withFiles = true // the prompt is written for the agent to read
	faults := &faultScript{script: []string{agent.OpPrompt}}
	e := f.engineWith(func(o *Options) { o.Faults = faults.fault })
	c := f.runOnce(e)
	if c.Status != agentrunner.CycleCompleted {
		t.Fatalf("cycle %s: %s", c.Status, c.Error)
	}
	if diff := cmp.Diff([]string{"plan#1:failed:resource", "plan#2:succeeded", "research#1:succeeded"}, f.attempts(c.ID)[:3]); diff != "" {
		t.Errorf("attempts (-want +got):\n%s", diff)
	}
	// plan#2 counts from plan#1: it is the step's first try, not a retry.
	if diff := cmp.Diff([]int{0, 1}, retryBases(t, f, c.ID, "plan")); diff != "" {
		t.Errorf("retry bases of plan (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"file descriptors/write prompt"}, exhaustedEvents(t, f)); diff != "" {
		t.Errorf("resource.exhausted events (-want +got):\n%s", diff)
	}
	if ev := f.eventsOf(agentrunner.EventResourceExhausted)[0]; ev.Step != "plan" || ev.Details["wait"] != "1s" || ev.Details["attempt"] != 1 {
		t.Errorf("resource.exhausted event: %+v, want plan's attempt 1 with a 1s wait", ev)
	}
	if waits := f.clock.Waits(); len(waits) == 0 || waits[0] != time.Second {
		t.Errorf("waits %v, want 1s first", waits)
	}
}

// TestResourceErrorsInARowNeverHaltTheLoop: EMFILE in each of the agent
// step's file operations in turn, five in a row, with no retries allowed:
// the step goes on being tried, waiting 1s, 2s, 4s … between tries, the
// cycle completes, and the metric counts each by resource.
func TestResourceErrorsInARowNeverHaltTheLoop(t *testing.T) {
	f := newFixture(t, execsvc.MockOptions{CompletedAfter: 1}, noRetries)
	f.withFiles = true // the prompt and the output are files
	ops := []string{agent.OpMemory, agent.OpMailbox, agent.OpPrompt, agent.OpReadArtifact}
	faults := &faultScript{script: append([]string(nil), ops...)}
	m := metrics.New(metrics.Options{})
	e := f.engineWith(func(o *Options) {
		o.Faults = faults.fault
		record := o.OnEvent
		o.OnEvent = func(ev *agentrunner.Event) { record(ev); m.Observe(ev) }
	})
	c := f.runOnce(e)
	if c.Status != agentrunner.CycleCompleted {
		t.Fatalf("cycle %s: %s", c.Status, c.Error)
	}
	if len(faults.script) > 0 {
		t.Fatalf("operations %v were never asked for: the engine does them outside the hook", faults.script)
	}
	want := []string{}
	for i := 1; i <= len(ops); i++ {
		want = append(want, "plan#"+itoa(i)+":failed:resource")
	}
	want = append(want, "plan#"+itoa(len(ops)+1)+":succeeded", "research#1:succeeded")
	if diff := cmp.Diff(want, f.attempts(c.ID)[:len(ops)+2]); diff != "" {
		t.Errorf("attempts (-want +got):\n%s", diff)
	}
	var events []string
	for _, op := range ops {
		events = append(events, "file descriptors/"+op)
	}
	if diff := cmp.Diff(events, exhaustedEvents(t, f)); diff != "" {
		t.Errorf("resource.exhausted events (-want +got):\n%s", diff)
	}
	wantWaits := []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second}
	if diff := cmp.Diff(wantWaits, f.clock.Waits()[:len(wantWaits)]); diff != "" {
		t.Errorf("waits (-want +got):\n%s", diff)
	}
	err := testutil.GatherAndCompare(m.Registry(), strings.NewReader(`
# HELP agentrunner_resource_exhausted_total Operations of the runner that failed because it ran out of a resource (file descriptors, disk space, memory, processes), and were tried again.
# TYPE agentrunner_resource_exhausted_total counter
agentrunner_resource_exhausted_total{resource="file_descriptors"} 4
`), "agentrunner_resource_exhausted_total")
	if err != nil {
		t.Error(err)
	}
}

// fullStore is a store whose disk is full for the first n commits of a
// step's result (a change with attempts); everything else goes through.
type fullStore struct {
	agentrunner.Store
	mu sync.Mutex
	n  int
}

func (s *fullStore) ApplyAll(ctx context.Context, chs ...*agentrunner.Change) error {
	if err := s.full(chs); err != nil {
		return err
	}
	return s.Store.ApplyAll(ctx, chs...)
}

func (s *fullStore) ApplyGroup(ctx context.Context, chs ...*agentrunner.Change) ([]error, error) {
	if err := s.full(chs); err != nil {
		return nil, err
	}
	return s.Store.ApplyGroup(ctx, chs...)
}

// full fails a commit of a step's result while the disk is full.
func (s *fullStore) full(chs []*agentrunner.Change) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	full := false
	for _, ch := range chs {
		full = full || (s.n > 0 && len(ch.Attempts) > 0 && ch.Attempts[0].Status == agentrunner.AttemptSucceeded)
	}
	if !full {
		return nil
	}
	s.n--
	return fmt.Errorf("commit: %w", errors.Join(errors.New("database or disk is full (13)"), syscall.ENOSPC))
}

// TestFullDiskAtCommitIsWaitedOut: the store cannot commit a step's
// success for want of disk space, twice: the engine waits 1s, then 2s, and
// commits it, instead of stopping, and no attempt is lost or counted.
func TestFullDiskAtCommitIsWaitedOut(t *testing.T) {
	f := newFixture(t, execsvc.MockOptions{CompletedAfter: 1}, noRetries)
	e := f.engineWith(func(o *Options) { o.Store = &fullStore{Store: f.store, n: 2} })
	c := f.runOnce(e)
	if c.Status != agentrunner.CycleCompleted {
		t.Fatalf("cycle %s: %s", c.Status, c.Error)
	}
	if diff := cmp.Diff([]string{"plan#1:succeeded", "research#1:succeeded"}, f.attempts(c.ID)[:2]); diff != "" {
		t.Errorf("attempts (-want +got):\n%s", diff)
	}
	want := []string{"disk space/commit state change", "disk space/commit state change"}
	if diff := cmp.Diff(want, exhaustedEvents(t, f)); diff != "" {
		t.Errorf("resource.exhausted events (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]time.Duration{time.Second, 2 * time.Second}, f.clock.Waits()[:2]); diff != "" {
		t.Errorf("waits (-want +got):\n%s", diff)
	}
	// The events were recorded, not only reported: the store had room for them.
	evs, err := f.store.Events(context.Background(), agentrunner.EventFilter{Type: agentrunner.EventResourceExhausted})
	if err != nil || len(evs) != 2 || evs[0].CycleID != c.ID {
		t.Errorf("stored resource.exhausted events: %v, %+v", err, evs)
	}
}

// TestLostCycleDirectoryIsMadeAgain: the cycle's directory, a view made
// without an fsync, is lost (as a crash before its entry reached the disk
// would lose it) while the first step runs: the step's artifact is
// committed to the store and its view written into a directory made
// again, and the cycle completes.
func TestLostCycleDirectoryIsMadeAgain(t *testing.T) {
	f := newFixture(t, execsvc.MockOptions{CompletedAfter: 1}, noRetries)
	e := f.engine()
	f.onRun = func(inv *agentrunner.Invocation) {
		if inv.Step == "plan" {
			os.RemoveAll(inv.CycleDir)
		}
	}
	c := f.runOnce(e)
	if c.Status != agentrunner.CycleCompleted {
		t.Fatalf("cycle %s: %s", c.Status, c.Error)
	}
	stored, err := f.store.Files(context.Background(), agentrunner.FileFilter{RunID: c.ID, Kind: agentrunner.FileArtifact, Name: "plan.md", Latest: true})
	if err != nil || len(stored) != 1 {
		t.Fatalf("stored plan.md: %v, %d copies", err, len(stored))
	}
	if got, err := os.ReadFile(filepath.Join(c.Dir, "plan.md")); err != nil || string(got) != string(stored[0].Data) {
		t.Errorf("plan.md in the cycle directory: %v; want the stored copy", err)
	}
}

// failingStart is a runtime whose agent cannot be run n times, with err.
type failingStart struct {
	agentrunner.Runtime
	mu  sync.Mutex
	n   int
	err error
}

func (r *failingStart) Run(ctx context.Context, inv *agentrunner.Invocation) (*agentrunner.RunResult, error) {
	r.mu.Lock()
	fail := r.n > 0
	r.n--
	r.mu.Unlock()
	if fail {
		return nil, r.err
	}
	return r.Runtime.Run(ctx, inv)
}

// TestAgentStartAndAgentFailure: a fork that fails for want of processes
// is the runner's and is tried again without a retry; an agent that fails
// on its own, even for want of file descriptors, crashed, and with no
// retries left the loop halts.
func TestAgentStartAndAgentFailure(t *testing.T) {
	tests := []struct {
		name     string
		err      error
		status   agentrunner.CycleStatus
		attempts []string
		events   []string
	}{
		{
			name: "fork/exec EAGAIN",
			err: agentrunner.Fail(agentrunner.ClassUnavailable, "start agent command %q: %w", "agent",
				&os.PathError{Op: "fork/exec", Path: "/usr/bin/agent", Err: syscall.EAGAIN}),
			status:   agentrunner.CycleCompleted,
			attempts: []string{"plan#1:failed:resource", "plan#2:succeeded"},
			events:   []string{"processes/fork/exec /usr/bin/agent"},
		},
		{
			name: "the agent's own EMFILE",
			err: agentrunner.Fail(agentrunner.ClassCrash, "agent exited with status 1: %s",
				"open /tmp/x: too many open files"),
			status:   agentrunner.CycleHalted,
			attempts: []string{"plan#1:failed:crash"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, execsvc.MockOptions{CompletedAfter: 1}, noRetries)
			e := f.engineWith(func(o *Options) { o.Runtimes["mock"] = &failingStart{Runtime: o.Runtimes["mock"], n: 1, err: tt.err} })
			c := f.runOnce(e)
			if c.Status != tt.status {
				t.Fatalf("cycle %s (%s), want %s", c.Status, c.Error, tt.status)
			}
			if diff := cmp.Diff(tt.attempts, f.attempts(c.ID)[:len(tt.attempts)]); diff != "" {
				t.Errorf("attempts (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.events, exhaustedEvents(t, f), cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("resource.exhausted events (-want +got):\n%s", diff)
			}
		})
	}
}
