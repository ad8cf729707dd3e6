package scheduler_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentrunner/agentrunner"
	"github.com/agentrunner/agentrunner/scheduler"
	"github.com/agentrunner/agentrunner/sqlite"
	"github.com/agentrunner/agentrunner/step/gate"
	"github.com/agentrunner/agentrunner/webhook"
)

// call is one attempt a scripted step ran.
type call struct {
	Run, Step     string
	Visit, Number int
}

// scriptKind is a step kind whose outputs a test scripts: by step, the
// outputs of its successive visits (the last one repeats).
type scriptKind struct {
	mu      sync.Mutex
	outputs map[string][]string
	calls   []call
	// fail, if set, may fail an attempt instead.
	fail func(a *agentrunner.StepAttempt) error
	// block, if set, holds attempts of these steps until their context ends.
	block map[string]bool
	// running counts attempts in flight; peak is the most at once.
	running, peak int
	// delay is how long each attempt takes.
	delay time.Duration
	// seen, if set, is called with each attempt as it starts.
	seen func(a *agentrunner.StepAttempt)
}

func (k *scriptKind) Run(ctx context.Context, a *agentrunner.StepAttempt) (*agentrunner.StepResult, error) {
	k.mu.Lock()
	k.calls = append(k.calls, call{a.Run.ID, a.Step.ID, a.StepRun.Visit, a.Attempt.Number})
	k.running++
	k.peak = max(k.peak, k.running)
	outs := k.outputs[a.Step.ID]
	block := k.block[a.Step.ID]
	k.mu.Unlock()
	defer func() { k.mu.Lock(); k.running--; k.mu.Unlock() }()
	if k.seen != nil {
		k.seen(a)
	}
	if block {
		<-ctx.Done()
		return nil, agentrunner.Fail(agentrunner.ClassCrash, "stopped: %v", context.Cause(ctx))
	}
	if k.delay > 0 {
		select {
		case <-time.After(k.delay):
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	if k.fail != nil {
		if err := k.fail(a); err != nil {
			return &agentrunner.StepResult{}, err
		}
	}
	out := ""
	if len(outs) > 0 {
		out = outs[min(a.StepRun.Visit, len(outs))-1]
	}
	return &agentrunner.StepResult{Output: []byte(out)}, nil
}

func (k *scriptKind) Calls() []call {
	k.mu.Lock()
	defer k.mu.Unlock()
	return append([]call(nil), k.calls...)
}

// harness runs a scheduler over a real SQLite store in a temporary
// workspace.
type harness struct {
	t         *testing.T
	dir       string
	store     *sqlite.Store
	kind      *scriptKind
	pipelines map[string]*agentrunner.Pipeline
	sched     *scheduler.Scheduler
	stop      func()
	shutdown  func()
	clock     agentrunner.Clock
	maxAtt    int
	maxInt    int
	poll      time.Duration
	// kinds are more step kinds; alert, if set, is the scheduler's Alert.
	kinds map[string]agentrunner.StepKind
	alert func(*agentrunner.Change, webhook.Event)
	// options, if set, changes the scheduler's options before it starts.
	options func(*scheduler.Options)
}

func newHarness(t *testing.T, kind *scriptKind, ps ...*agentrunner.Pipeline) *harness {
	t.Helper()
	dir := t.TempDir()
	st, err := sqlite.Open(context.Background(), filepath.Join(dir, "state.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	h := &harness{t: t, dir: dir, store: st, kind: kind, pipelines: map[string]*agentrunner.Pipeline{}}
	for _, p := range ps {
		h.pipelines[p.Name] = p
	}
	return h
}

// run starts a scheduler; a running one is stopped first (a restart).
func (h *harness) run() {
	h.t.Helper()
	if h.stop != nil {
		h.stop()
	}
	kinds := map[string]agentrunner.StepKind{"script": h.kind, agentrunner.KindGate: &gate.Kind{Notify: true}}
	maps.Copy(kinds, h.kinds)
	opts := scheduler.Options{
		Store: h.store, Pipelines: h.pipelines, Clock: h.clock, MaxAttempts: h.maxAtt, MaxInterruptions: h.maxInt, Poll: h.poll,
		Kinds: kinds, Alert: h.alert,
		RunDir: func(p, id string) string { return filepath.Join(h.dir, "runs", p, id) },
		AttemptDir: func(runID, step string, n int) string {
			return filepath.Join(h.dir, "attempts", runID, fmt.Sprintf("%s-%d", step, n))
		},
	}
	if h.options != nil {
		h.options(&opts)
	}
	s, err := scheduler.New(opts)
	if err != nil {
		h.t.Fatal(err)
	}
	ctx, cancel := context.WithCancelCause(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	h.sched = s
	// stop stops it as a crash would; shutdown as SIGTERM does.
	stopWith := func(cause error) {
		cancel(cause)
		if err := <-done; err != nil {
			h.t.Errorf("scheduler: %v", err)
		}
		h.stop, h.shutdown = nil, nil
	}
	h.stop = func() { stopWith(context.Canceled) }
	h.shutdown = func() { stopWith(agentrunner.ErrShutdown) }
	h.t.Cleanup(func() {
		if h.stop != nil {
			h.stop()
		}
	})
}

// command writes an operator's command and wakes the scheduler.
func (h *harness) command(kind, target string, args map[string]any) (int64, error) {
	c := &agentrunner.Command{Kind: kind, Args: args, Operator: "tester", CreatedAt: time.Now().UTC(), Target: target}
	if err := h.store.AddCommand(context.Background(), c); err != nil {
		return 0, err
	}
	if h.sched != nil {
		h.sched.Wake()
	}
	return c.ID, nil
}

// startRun starts a run of pipeline and returns its id.
func (h *harness) startRun(pipeline string, inputs map[string]any) string {
	h.t.Helper()
	id, err := h.command(agentrunner.CommandStartRun, "", map[string]any{"pipeline": pipeline, "inputs": inputs})
	if err != nil {
		h.t.Fatal(err)
	}
	return h.await(id)
}

// await waits for the run.start command id and returns the run's id.
func (h *harness) await(id int64) string {
	h.t.Helper()
	res := h.commandResult(id)
	run, ok := strings.CutPrefix(res, "started run ")
	if !ok {
		h.t.Fatalf("command %d: %s", id, res)
	}
	return run
}

// decide decides the gate step of run.
func (h *harness) decide(run, step string, visit int, action agentrunner.DecisionAction, to string) error {
	_, err := h.command(agentrunner.CommandGateDecision, fmt.Sprintf("%s/%s", run, agentrunner.StepRunKey(step, visit)),
		map[string]any{"run": run, "step": step, "visit": visit, "action": string(action), "to": to, "comment": "looked at it"})
	return err
}

// waitFor polls the store until cond holds for the run, or fails.
func (h *harness) waitFor(id string, what string, cond func(*agentrunner.Run, []*agentrunner.StepRun) bool) (*agentrunner.Run, []*agentrunner.StepRun) {
	h.t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		r, err := h.store.Run(context.Background(), id)
		if err != nil && !errors.Is(err, context.Canceled) && agentrunner.ErrorCode(err) != agentrunner.ENOTFOUND {
			h.t.Fatal(err)
		}
		var srs []*agentrunner.StepRun
		if r != nil {
			if srs, err = h.store.StepRuns(context.Background(), agentrunner.StepRunFilter{RunID: id}); err != nil {
				h.t.Fatal(err)
			}
			if cond(r, srs) {
				return r, srs
			}
		}
		if time.Now().After(deadline) {
			h.t.Fatalf("run %s: timed out waiting for %s; run %+v, step runs %s", id, what, r, describe(srs))
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func (h *harness) waitDone(id string) (*agentrunner.Run, []*agentrunner.StepRun) {
	return h.waitFor(id, "its end", func(r *agentrunner.Run, _ []*agentrunner.StepRun) bool {
		return r.Status.Finished() || r.Status == agentrunner.RunHalted
	})
}

// waitGate waits until visit 1 of the run's gate step waits.
func (h *harness) waitGate(id, step string) []*agentrunner.StepRun {
	return h.waitGateVisit(id, step, 1)
}

// waitGateVisit waits until the given visit of the run's gate step waits.
func (h *harness) waitGateVisit(id, step string, visit int) []*agentrunner.StepRun {
	_, srs := h.waitFor(id, "gate "+agentrunner.StepRunKey(step, visit), func(_ *agentrunner.Run, srs []*agentrunner.StepRun) bool {
		for _, sr := range srs {
			if sr.Step == step && sr.Visit == visit && sr.Status == agentrunner.StepRunWaiting {
				return true
			}
		}
		return false
	})
	return srs
}

// describe lists step runs as "step#visit:status[label]" in order.
func describe(srs []*agentrunner.StepRun) string {
	var b []string
	for _, sr := range srs {
		s := sr.Key() + ":" + string(sr.Status)
		if sr.Label != "" {
			s += "[" + sr.Label + "]"
		}
		b = append(b, s)
	}
	return strings.Join(b, " ")
}
