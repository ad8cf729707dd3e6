package agent

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agentrunner/agentrunner"
	"github.com/agentrunner/agentrunner/config"
	"github.com/agentrunner/agentrunner/examples/crypton"
	"github.com/agentrunner/agentrunner/internal/clocktest"
	"github.com/agentrunner/agentrunner/internal/fileop"
	"github.com/agentrunner/agentrunner/mailbox"
	"github.com/agentrunner/agentrunner/runtime/mock"
	"github.com/agentrunner/agentrunner/sqlite"
	"github.com/agentrunner/agentrunner/workspace"
	"github.com/google/go-cmp/cmp"
)

var t0 = time.Date(2026, 11, 22, 14, 0, 0, 0, time.UTC)

// agentFunc is a runtime made of a function.
type agentFunc func(ctx context.Context, inv *agentrunner.Invocation) (*agentrunner.RunResult, error)

func (f agentFunc) Run(ctx context.Context, inv *agentrunner.Invocation) (*agentrunner.RunResult, error) {
	return f(ctx, inv)
}

// env is the shipped example workspace with a real store, mailboxes and a
// run whose directory holds plan.md, ready for the research step.
type env struct {
	ws    *workspace.Workspace
	store *sqlite.Store
	boxes *mailbox.Mailboxes
	clock *clocktest.Clock
	run   *agentrunner.Run
	// mock returns a valid artifact of the invocation's template, in
	// memory; files is the same agent working with files, as a process
	// agent does: it writes its output into the attempt folder.
	mock  *mock.Runtime
	files agentrunner.Runtime
}

func newEnv(t *testing.T) *env {
	t.Helper()
	dir := t.TempDir()
	if _, err := crypton.Write(dir, true, ""); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(filepath.Join(dir, config.FileName))
	if err != nil {
		t.Fatal(err)
	}
	e := &env{clock: clocktest.New(t0)}
	if e.ws, err = workspace.Load(cfg); err != nil {
		t.Fatal(err)
	}
	if e.store, err = sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "state.db")); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.store.Close() })
	if e.boxes, err = mailbox.New(e.ws.Layout.Mailboxes(), cfg.Mailbox.MaxMessages); err != nil {
		t.Fatal(err)
	}
	id := "20261122_140000"
	e.run = &agentrunner.Run{ID: id, Pipeline: cfg.Name, Status: agentrunner.RunRunning, Dir: e.ws.Layout.Cycle(id), StartedAt: t0}
	os.MkdirAll(e.run.Dir, 0o755)
	os.WriteFile(filepath.Join(e.run.Dir, "plan.md"), []byte("# Plan\n"), 0o644)
	e.mock = mock.New(mock.Options{Now: e.clock.Now})
	e.files = agentFunc(func(ctx context.Context, inv *agentrunner.Invocation) (*agentrunner.RunResult, error) {
		if _, err := os.Stat(inv.PromptPath); err != nil {
			return nil, err
		}
		res, err := e.mock.Run(ctx, inv)
		if err != nil {
			return res, err
		}
		out := res.Output
		res.Output = nil
		return res, os.WriteFile(inv.OutputPath, out, 0o644)
	})
	return e
}

func (e *env) kind(t *testing.T, rt agentrunner.Runtime, faults func(string) error) *Kind {
	t.Helper()
	k, err := New(Options{
		Workspace: e.ws, Mailboxes: e.boxes, Store: e.store, Clock: e.clock, Faults: faults,
		Runtimes: map[string]agentrunner.Runtime{"mock": rt},
	})
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// attempt is attempt 1 of the research step of the env's run.
func (e *env) attempt(t *testing.T) *agentrunner.StepAttempt {
	s := e.ws.Config.Pipeline.Steps["research"]
	dir := e.ws.Layout.Attempt(e.run.ID, s.ID, 1)
	os.MkdirAll(dir, 0o755)
	return &agentrunner.StepAttempt{
		Run: e.run, Step: &agentrunner.Step{ID: s.ID, Kind: agentrunner.KindAgent, Config: s},
		StepRun: &agentrunner.StepRun{RunID: e.run.ID, Step: s.ID, Visit: 1, Status: agentrunner.StepRunOpen, OpenedAt: t0},
		Attempt: &agentrunner.Attempt{CycleID: e.run.ID, Step: s.ID, Number: 1, Agent: s.Agent, Dir: dir, Visit: 1},
		Dir:     dir, RunDir: e.run.Dir, Timeout: time.Minute,
	}
}

// outcome is what a test compares of an attempt.
type outcome struct {
	Class  agentrunner.ErrorClass
	Events []string
	// Published is the file in the run directory, if any.
	Published string
}

func summarize(res *agentrunner.StepResult, err error) outcome {
	var o outcome
	if err != nil {
		o.Class = agentrunner.ClassOf(err)
	}
	for _, ev := range res.Events {
		s := ev.Type
		if to, ok := ev.Details["to"]; ok {
			s += ":" + to.(string)
		}
		o.Events = append(o.Events, s)
	}
	if res.Path != "" {
		o.Published = filepath.Base(res.Path)
	}
	return o
}

// TestRun runs the research step's attempt through the kind with
// runtimes that succeed, write an invalid artifact, overrun the time
// limit, and with its input missing from the run directory.
func TestRun(t *testing.T) {
	accepted := []string{"memory.created", "artifact.accepted", "mailbox.delivered:analysis", "mailbox.delivered:plan"}
	hang := func(ctx context.Context, inv *agentrunner.Invocation) (*agentrunner.RunResult, error) {
		<-ctx.Done()
		return nil, agentrunner.Fail(agentrunner.ClassCrash, "the agent was killed")
	}
	invalid := func(ctx context.Context, inv *agentrunner.Invocation) (*agentrunner.RunResult, error) {
		return &agentrunner.RunResult{}, os.WriteFile(inv.OutputPath, []byte("no sections at all\n"), 0o644)
	}
	tests := []struct {
		name string
		// rt, if set, replaces the mock agent.
		rt       agentFunc
		noPlan   bool
		late     bool
		timeout  time.Duration
		want     outcome
		inPrompt string
		inError  string
	}{
		{name: "valid artifact is published and delivered", want: outcome{Events: accepted, Published: "research.md"},
			inPrompt: filepath.Join("cycles", "20261122_140000", "plan.md")},
		{name: "invalid artifact is rejected", rt: invalid,
			want: outcome{Class: agentrunner.ClassInvalidOutput, Events: []string{"memory.created", "artifact.rejected"}}, inError: "missing section"},
		{name: "attempt overruns its time limit", rt: hang, timeout: 20 * time.Millisecond,
			want: outcome{Class: agentrunner.ClassTimeout, Events: []string{"memory.created"}}, inError: "agent timed out after 20ms"},
		{name: "missing input fails the attempt", noPlan: true,
			want: outcome{Class: agentrunner.ClassInternal, Events: []string{"memory.created"}}, inError: "input plan.md is missing"},
		{name: "a late run names its missing input", noPlan: true, late: true, want: outcome{Events: accepted, Published: "research.md"},
			inPrompt: "(missing: the cycle ran out of time before it was produced)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t)
			rt := e.files
			if tt.rt != nil {
				rt = tt.rt
			}
			if tt.noPlan {
				os.Remove(filepath.Join(e.run.Dir, "plan.md"))
			}
			a := e.attempt(t)
			a.Late = tt.late
			if tt.timeout > 0 {
				a.Timeout = tt.timeout
			}
			res, err := e.kind(t, rt, nil).Run(context.Background(), a)
			if diff := cmp.Diff(tt.want, summarize(res, err)); diff != "" {
				t.Errorf("outcome (-want +got):\n%s (error %v)", diff, err)
			}
			if tt.inError != "" && (err == nil || !strings.Contains(err.Error(), tt.inError)) {
				t.Errorf("error %v, want it to say %q", err, tt.inError)
			}
			if p, _ := os.ReadFile(filepath.Join(a.Dir, "prompt.md")); !strings.Contains(string(p), tt.inPrompt) {
				t.Errorf("the prompt does not say %q", tt.inPrompt)
			}
			if p, err := os.ReadFile(filepath.Join(a.Dir, "prompt.md")); err == nil {
				if prompt := storedFile(res, agentrunner.FilePrompt); prompt == nil || string(prompt.Data) != string(p) {
					t.Errorf("the stored prompt %+v is not the prompt the agent read", prompt)
				}
			}
			if tt.want.Published != "" {
				// The kind hands the artifact over; the scheduler commits it,
				// then moves the agent's file into the run directory.
				f := storedFile(res, agentrunner.FileArtifact)
				if f == nil || f.Name != tt.want.Published || string(f.Data) != string(res.Output) || len(f.Data) == 0 || f.From != filepath.Join(a.Dir, f.Name) {
					t.Errorf("stored artifact %+v, want %s with the Output's %d bytes, from the attempt folder", f, tt.want.Published, len(res.Output))
				}
			}
		})
	}
}

// TestInvocation: the runtime is given the attempt's run directory (the
// scheduler's, which need not be Run.Dir) and time limit, and the agent's
// contract and model settings; the artifact is published there.
func TestInvocation(t *testing.T) {
	e := newEnv(t)
	var got *agentrunner.Invocation
	rt := agentFunc(func(ctx context.Context, inv *agentrunner.Invocation) (*agentrunner.RunResult, error) {
		got = inv
		return e.mock.Run(ctx, inv)
	})
	a := e.attempt(t)
	a.Timeout = 7 * time.Minute
	a.RunDir = t.TempDir()
	os.Rename(filepath.Join(e.run.Dir, "plan.md"), filepath.Join(a.RunDir, "plan.md"))
	res, err := e.kind(t, rt, nil).Run(context.Background(), a)
	if err != nil {
		t.Fatal(err)
	}
	type paths struct{ RunDir, Input, Output, Published string }
	want := paths{a.RunDir, filepath.Join(a.RunDir, "plan.md"), filepath.Join(a.Dir, "research.md"), filepath.Join(a.RunDir, "research.md")}
	if diff := cmp.Diff(want, paths{got.CycleDir, got.Inputs[0].Path, got.OutputPath, res.Path}); diff != "" {
		t.Errorf("paths (-want +got):\n%s", diff)
	}
	if got.Timeout != 7*time.Minute {
		t.Errorf("timeout %s, want the attempt's 7m", got.Timeout)
	}
	if got.Output.File != "research.md" || len(got.Output.Problems([]byte("# nothing\n"))) == 0 {
		t.Errorf("the invocation's contract %+v does not check research.md", got.Output)
	}
	research := e.ws.Agents["research"]
	if diff := cmp.Diff(ModelSettings(research.Agent), got.Model); diff != "" || got.Model.MaxTurns == 0 {
		t.Errorf("model settings (-want +got):\n%s", diff)
	}
}

// storedFile is the result's stored file of kind k, nil if none.
func storedFile(res *agentrunner.StepResult, k agentrunner.FileKind) *agentrunner.StoredFile {
	for _, f := range res.Files {
		if f.Kind == k {
			return f
		}
	}
	return nil
}

// TestFaults: each file operation of the kind goes through the fault
// hook under its name, and its failure names it and is a resource
// failure when the system ran out of something.
func TestFaults(t *testing.T) {
	for _, op := range []string{OpMemory, OpMailbox, OpPrompt, OpReadArtifact} {
		t.Run(op, func(t *testing.T) {
			e := newEnv(t)
			var asked []string
			faults := func(o string) error {
				asked = append(asked, o)
				if o == op {
					return &os.PathError{Op: "open", Path: "/x", Err: syscall.EMFILE}
				}
				return nil
			}
			_, err := e.kind(t, e.files, faults).Run(context.Background(), e.attempt(t))
			if agentrunner.ClassOf(err) != agentrunner.ClassResource {
				t.Fatalf("error %v (class %s), want a resource failure", err, agentrunner.ClassOf(err))
			}
			if name, _ := fileop.Name(err); name != op {
				t.Errorf("the error names operation %q, want %q", name, op)
			}
			if asked[len(asked)-1] != op {
				t.Errorf("operations asked %v, want %q last", asked, op)
			}
		})
	}
}

// TestConfigOfAnotherKind: a step whose configuration is not an agent
// step's fails with a configuration error that names the step.
func TestConfigOfAnotherKind(t *testing.T) {
	e := newEnv(t)
	a := e.attempt(t)
	a.Step = &agentrunner.Step{ID: "review", Kind: agentrunner.KindAgent, Config: map[string]any{"agent": "research"}}
	_, err := e.kind(t, e.mock, nil).Run(context.Background(), a)
	if agentrunner.ClassOf(err) != agentrunner.ClassConfig || !strings.Contains(err.Error(), "step review") {
		t.Errorf("error %v, want a configuration error naming step review", err)
	}
}
