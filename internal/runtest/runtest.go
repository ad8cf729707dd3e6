// Package runtest runs the graph scheduler for tests of what drives it
// (the API, the CLI): a real scheduler over a real store, with a scripted
// step kind whose attempts a test can hold, and the gate kind.
package runtest

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/agentrunner/agentrunner"
	"github.com/agentrunner/agentrunner/config"
	"github.com/agentrunner/agentrunner/scheduler"
	"github.com/agentrunner/agentrunner/step/gate"
)

// KindScript is the step kind of HoldKind in the pipelines of tests.
const KindScript = "script"

// Workspace writes a workspace into dir, agentrunner.yaml (doc) and files
// by name, with an identity p.md and a template t.md for its agents, and
// loads it: the configuration, with its pipelines' input schemas
// compiled, that a server of its pipelines runs with.
func Workspace(t testing.TB, dir, doc string, files map[string]string) *config.Config {
	t.Helper()
	all := map[string]string{"agentrunner.yaml": doc, "p.md": "You write.\n", "t.md": "# Output\n"}
	maps.Copy(all, files)
	for name, content := range all {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cfg, err := config.Load(filepath.Join(dir, "agentrunner.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// HoldKind is a scripted step kind: an attempt that Hold selects waits
// until the test calls Release (or its run ends); the others succeed at
// once with the output "ok". It counts the attempts in flight.
type HoldKind struct {
	// Hold, if set, selects the attempts to hold; Fail, if set, may fail
	// an attempt instead of letting it succeed.
	Hold func(a *agentrunner.StepAttempt) bool
	Fail func(a *agentrunner.StepAttempt) error

	once    sync.Once
	release chan struct{}

	mu                   sync.Mutex
	running, peak, calls int
}

var _ agentrunner.StepKind = (*HoldKind)(nil)

// HeldInputs holds the attempts of the runs started with {"hold": true}.
func HeldInputs(a *agentrunner.StepAttempt) bool { return a.Run.Inputs["hold"] == true }

func (k *HoldKind) gate() chan struct{} {
	k.once.Do(func() { k.release = make(chan struct{}) })
	return k.release
}

// Release lets every held attempt, and every later one, go on.
func (k *HoldKind) Release() {
	k.mu.Lock()
	defer k.mu.Unlock()
	select {
	case <-k.gate():
	default:
		close(k.gate())
	}
}

// Run runs one attempt.
func (k *HoldKind) Run(ctx context.Context, a *agentrunner.StepAttempt) (*agentrunner.StepResult, error) {
	k.mu.Lock()
	k.running++
	k.calls++
	k.peak = max(k.peak, k.running)
	k.mu.Unlock()
	defer func() { k.mu.Lock(); k.running--; k.mu.Unlock() }()
	if k.Hold != nil && k.Hold(a) {
		select {
		case <-k.gate():
		case <-ctx.Done():
			return nil, agentrunner.Fail(agentrunner.ClassCrash, "stopped: %v", context.Cause(ctx))
		}
	}
	if k.Fail != nil {
		if err := k.Fail(a); err != nil {
			return &agentrunner.StepResult{}, err
		}
	}
	return &agentrunner.StepResult{Output: []byte("ok")}, nil
}

// FailedInputs fails the first attempt of step b of the runs started with
// {"fail": true}: in HaltPipeline such a run halts, and a resume runs b
// again, which succeeds.
func FailedInputs(a *agentrunner.StepAttempt) error {
	if a.Run.Inputs["fail"] == true && a.Step.ID == "b" && a.Attempt.Number == 1 {
		return agentrunner.Fail(agentrunner.ClassCrash, "b crashed on its first attempt")
	}
	return nil
}

// HaltPipeline is two scripted steps, a and b; a run halts when b fails
// for good.
func HaltPipeline() *agentrunner.Pipeline {
	return &agentrunner.Pipeline{Name: "halt", Start: "a", RunID: agentrunner.RunIDSeq, Steps: map[string]*agentrunner.Step{
		"a": {ID: "a", Kind: KindScript, Next: "b", Where: "test.yaml:20"},
		"b": {ID: "b", Kind: KindScript, Next: agentrunner.EndStep, OnFailure: agentrunner.HaltRun, Where: "test.yaml:21"},
	}}
}

// Counts returns the attempts in flight, the most at once, and how many
// started in all.
func (k *HoldKind) Counts() (running, peak, calls int) {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.running, k.peak, k.calls
}

// Scheduler is the scheduler a test runs now. Restart replaces it, as a
// restarted runner's would, while what holds the Scheduler (a server)
// stays; it forwards Wake and Await to the one running.
type Scheduler struct {
	t         testing.TB
	store     agentrunner.Store
	dir       string
	pipelines map[string]*agentrunner.Pipeline
	kind      *HoldKind

	mu   sync.Mutex
	cur  *scheduler.Scheduler
	stop func()
	// reload gives the pipelines of a reload (OnReload).
	reload func() map[string]*agentrunner.Pipeline
}

// OnReload makes an operator's reload give the pipelines next returns,
// on the same kinds; none is the same graph as before (Reloaded.Same).
func (s *Scheduler) OnReload(next func() map[string]*agentrunner.Pipeline) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.reload = next
}

// Start runs a scheduler of pipelines over store, with kind for the steps
// of KindScript and of agents (a configuration's pipelines), and the gate
// kind; runs' directories are under dir. It is
// stopped when the test ends.
func Start(t testing.TB, store agentrunner.Store, dir string, kind *HoldKind, pipelines map[string]*agentrunner.Pipeline) *Scheduler {
	t.Helper()
	s := &Scheduler{t: t, store: store, dir: dir, pipelines: pipelines, kind: kind}
	s.Restart()
	t.Cleanup(s.Stop)
	return s
}

// Restart stops the running scheduler, if any, and starts a new one,
// which recovers the unfinished runs from the store.
func (s *Scheduler) Restart() {
	s.t.Helper()
	s.Stop()
	kinds := map[string]agentrunner.StepKind{
		KindScript: s.kind, agentrunner.KindAgent: s.kind, agentrunner.KindGate: &gate.Kind{},
	}
	sched, err := scheduler.New(scheduler.Options{
		Store: s.store, Pipelines: s.pipelines, Kinds: kinds,
		Reload: func() (*scheduler.Reloaded, error) {
			s.mu.Lock()
			next := s.reload
			s.mu.Unlock()
			if next == nil {
				return nil, errors.New("this runner cannot reload its configuration")
			}
			return &scheduler.Reloaded{Pipelines: next(), Kinds: kinds, Path: "reloaded"}, nil
		},
		RunDir: func(p, id string) string { return filepath.Join(s.dir, "runs", p, id) },
		AttemptDir: func(runDir, step string, n int) string {
			return filepath.Join(runDir, "attempts", fmt.Sprintf("%s-%d", step, n))
		},
	})
	if err != nil {
		s.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- sched.Run(ctx) }()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.cur = sched
	s.stop = func() {
		cancel()
		if err := <-done; err != nil {
			s.t.Errorf("scheduler: %v", err)
		}
	}
}

// Stop stops the running scheduler: commands wait in the store until the
// next Restart.
func (s *Scheduler) Stop() {
	s.mu.Lock()
	stop := s.stop
	s.stop = nil
	s.mu.Unlock()
	if stop != nil {
		stop()
	}
}

func (s *Scheduler) current() *scheduler.Scheduler {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cur
}

// Wake wakes the scheduler running now.
func (s *Scheduler) Wake() { s.current().Wake() }

// Await waits for the result of command id on the scheduler running now.
func (s *Scheduler) Await(ctx context.Context, id int64) (string, error) {
	return s.current().Await(ctx, id)
}

// Pipelines are the pipelines of the scheduler running now.
func (s *Scheduler) Pipelines() map[string]*agentrunner.Pipeline { return s.current().Pipelines() }

// RunPipeline is the graph run runs on in the scheduler running now.
func (s *Scheduler) RunPipeline(run *agentrunner.Run) *agentrunner.Pipeline {
	return s.current().RunPipeline(run)
}

// ReviewPipeline drafts, waits at a gate (signoff, whose timeout of an
// hour rejects) and publishes on approve; reject ends the run.
func ReviewPipeline() *agentrunner.Pipeline {
	return &agentrunner.Pipeline{Name: "review", Start: "draft", RunID: agentrunner.RunIDSeq, Steps: map[string]*agentrunner.Step{
		"draft": {ID: "draft", Kind: KindScript, Next: "signoff", Where: "test.yaml:2"},
		"signoff": {ID: "signoff", Kind: agentrunner.KindGate, Where: "test.yaml:3",
			Gate:   &agentrunner.GateSpec{Timeout: time.Hour, Default: agentrunner.DecisionReject},
			Routes: []agentrunner.Route{{When: "approve", To: "publish"}, {When: "reject", To: agentrunner.EndStep}}},
		"publish": {ID: "publish", Kind: KindScript, Next: agentrunner.EndStep, Where: "test.yaml:6"},
	}}
}

// LoadPipeline is two scripted steps, a and b, at most max runs at once.
func LoadPipeline(max int) *agentrunner.Pipeline {
	return &agentrunner.Pipeline{Name: "load", Start: "a", RunID: agentrunner.RunIDSeq, MaxConcurrentRuns: max, Steps: map[string]*agentrunner.Step{
		"a": {ID: "a", Kind: KindScript, Next: "b", Where: "test.yaml:10"},
		"b": {ID: "b", Kind: KindScript, Next: agentrunner.EndStep, Where: "test.yaml:11"},
	}}
}

// Pipelines maps pipelines by name.
func Pipelines(ps ...*agentrunner.Pipeline) map[string]*agentrunner.Pipeline {
	m := map[string]*agentrunner.Pipeline{}
	for _, p := range ps {
		m[p.Name] = p
	}
	return m
}
