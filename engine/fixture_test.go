package engine

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/agentrunner/agentrunner"
	"github.com/agentrunner/agentrunner/config"
	"github.com/agentrunner/agentrunner/examples/crypton"
	"github.com/agentrunner/agentrunner/execsvc"
	"github.com/agentrunner/agentrunner/internal/clocktest"
	"github.com/agentrunner/agentrunner/runtime/mock"
	"github.com/agentrunner/agentrunner/sqlite"
	"github.com/agentrunner/agentrunner/workspace"
)

var t0 = time.Date(2026, 11, 22, 14, 0, 0, 0, time.UTC)

// fixture is the shipped example workspace on mock agents, a fake clock, a
// real SQLite store and a mock Execution Service on loopback.
type fixture struct {
	t     *testing.T
	dir   string
	ws    *workspace.Workspace
	store *sqlite.Store
	clock *clocktest.Clock
	es    *execsvc.Mock
	// faults[step][n-1] is the fault attempt n of step acts out.
	mu     sync.Mutex
	faults map[string][]mock.Fault
	// onRun, if set, is called at the start of each mock run.
	onRun func(inv *agentrunner.Invocation)
	// skew shifts the time mock agents write into their outputs.
	skew time.Duration
	// withFiles: the mock agents work with files, as process agents do
	// (fileAgent), not in memory.
	withFiles bool
	events    []*agentrunner.Event
}

func writeExample(t *testing.T, dir string) {
	t.Helper()
	if _, err := crypton.Write(dir, true, ""); err != nil {
		t.Fatal(err)
	}
}

func newFixture(t *testing.T, esOpts execsvc.MockOptions, edit func(*config.Config)) *fixture {
	t.Helper()
	f := &fixture{t: t, dir: t.TempDir(), clock: clocktest.New(t0), faults: map[string][]mock.Fault{}}
	writeExample(t, f.dir)
	if esOpts.Now == nil {
		esOpts.Now = f.clock.Now
	}
	f.es = execsvc.NewMock(esOpts)
	url, err := f.es.Start("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.es.Close() })
	cfg, err := config.Load(filepath.Join(f.dir, config.FileName))
	if err != nil {
		t.Fatal(err)
	}
	cfg.ExecutionService.URL = url
	if edit != nil {
		edit(cfg)
	}
	if f.ws, err = workspace.Load(cfg); err != nil {
		t.Fatal(err)
	}
	if f.store, err = sqlite.Open(context.Background(), filepath.Join(f.dir, "artifacts", "state.db")); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.store.Close() })
	return f
}

// reload reads the fixture's workspace again, as `serve` does on an
// operator's reload, with the fixture's Execution Service.
func (f *fixture) reload() (*workspace.Workspace, error) {
	cfg, err := config.Load(filepath.Join(f.dir, config.FileName))
	if err != nil {
		return nil, err
	}
	cfg.ExecutionService.URL = f.ws.Config.ExecutionService.URL
	return workspace.Load(cfg)
}

// fail makes attempts 1..len(faults) of a step act out the faults.
func (f *fixture) fail(step string, faults ...mock.Fault) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.faults[step] = faults
}

// engine returns a new engine on the fixture, as a restarted runner would
// build it.
func (f *fixture) engine() *Engine {
	f.t.Helper()
	return f.engineWith(nil)
}

// engineWith returns a new engine on the fixture with its options edited.
func (f *fixture) engineWith(edit func(*Options)) *Engine {
	f.t.Helper()
	now := func() time.Time { return f.clock.Now().Add(f.skew) }
	rt := mock.New(mock.Options{Now: now, Fault: func(inv *agentrunner.Invocation) mock.Fault {
		if f.onRun != nil {
			f.onRun(inv)
		}
		f.mu.Lock()
		defer f.mu.Unlock()
		if fs := f.faults[inv.Step]; inv.Attempt <= len(fs) {
			return fs[inv.Attempt-1]
		}
		return mock.NoFault
	}})
	exec, err := execsvc.NewClient(f.ws.Config.ExecutionService.URL, "", 5*time.Second)
	if err != nil {
		f.t.Fatal(err)
	}
	opts := Options{
		Workspace: f.ws, Store: f.store, Exec: exec, Clock: f.clock, Reload: f.reload,
		Runtimes: map[string]agentrunner.Runtime{"mock": rt},
		OnEvent: func(ev *agentrunner.Event) {
			f.mu.Lock()
			f.events = append(f.events, ev)
			f.mu.Unlock()
		},
	}
	if f.withFiles {
		opts.Runtimes["mock"] = fileAgent{rt}
	}
	if edit != nil {
		edit(&opts)
	}
	e, err := New(opts)
	if err != nil {
		f.t.Fatal(err)
	}
	return e
}

func (f *fixture) runOnce(e *Engine) *agentrunner.Cycle {
	f.t.Helper()
	c, err := e.RunOnce(context.Background())
	if err != nil {
		f.t.Fatalf("RunOnce: %v", err)
	}
	return c
}

// attempts returns "step#n:status[:class]" for each attempt of a cycle.
func (f *fixture) attempts(cycleID string) []string {
	f.t.Helper()
	atts, err := f.store.Attempts(context.Background(), cycleID)
	if err != nil {
		f.t.Fatal(err)
	}
	var out []string
	for _, a := range atts {
		s := a.Step + "#" + itoa(a.Number) + ":" + string(a.Status)
		if a.ErrorClass != "" {
			s += ":" + string(a.ErrorClass)
		}
		out = append(out, s)
	}
	return out
}

func itoa(n int) string { return strconv.Itoa(n) }

// eventsOf returns the committed events of one type.
func (f *fixture) eventsOf(typ string) []*agentrunner.Event {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []*agentrunner.Event
	for _, e := range f.events {
		if e.Type == typ {
			out = append(out, e)
		}
	}
	return out
}

// files lists the names in a directory.
func files(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range entries {
		out = append(out, e.Name())
	}
	return out
}

// toNextCycle moves the clock to when the next cycle is due, as the
// scheduler's wait for it would.
func (f *fixture) toNextCycle() {
	f.t.Helper()
	cs, err := f.store.Cycles(context.Background(), agentrunner.CycleFilter{Pipeline: f.ws.Config.Name, Limit: 1})
	if err != nil {
		f.t.Fatal(err)
	}
	var last *agentrunner.Cycle
	if len(cs) > 0 {
		last = cs[0]
	}
	if wait := NextStart(f.ws.Config.Schedule, last, f.clock.Now()).Sub(f.clock.Now()); wait > 0 {
		f.clock.Advance(wait)
	}
}

// command stores an operator's command, as the API does, and wakes e.
func (f *fixture) command(e *Engine, kind, operator string, args map[string]any) *agentrunner.Command {
	f.t.Helper()
	cmd := &agentrunner.Command{Kind: kind, Operator: operator, Args: args, CreatedAt: f.clock.Now()}
	if err := f.store.AddCommand(context.Background(), cmd); err != nil {
		f.t.Fatal(err)
	}
	if e != nil {
		e.Wake()
	}
	return cmd
}

// audit returns "kind:result" of every command, oldest first.
func (f *fixture) audit() []string {
	f.t.Helper()
	cmds, err := f.store.Commands(context.Background(), agentrunner.CommandFilter{})
	if err != nil {
		f.t.Fatal(err)
	}
	var out []string
	for i := len(cmds) - 1; i >= 0; i-- {
		out = append(out, cmds[i].Kind+":"+cmds[i].Result)
	}
	return out
}

// runAsync runs RunOnce in the background; the returned func waits for it.
func (f *fixture) runAsync(e *Engine) func() *agentrunner.Cycle {
	type result struct {
		c   *agentrunner.Cycle
		err error
	}
	done := make(chan result, 1)
	go func() {
		c, err := e.RunOnce(context.Background())
		done <- result{c, err}
	}()
	return func() *agentrunner.Cycle {
		f.t.Helper()
		select {
		case r := <-done:
			if r.err != nil {
				f.t.Fatalf("RunOnce: %v", r.err)
			}
			return r.c
		case <-time.After(30 * time.Second):
			f.t.Fatal("the engine did not finish")
			return nil
		}
	}
}

// waitFor polls cond (real time, short) until it holds.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// stored is the store's copy of a file of attempt n of step in run: its
// prompt, or why its output was rejected (validation); "" if none.
func (f *fixture) stored(run, step string, n int, kind agentrunner.FileKind) string {
	f.t.Helper()
	files, err := f.store.Files(context.Background(), agentrunner.FileFilter{RunID: run, Step: step, Attempt: n, Kind: kind})
	if err != nil {
		f.t.Fatal(err)
	}
	if len(files) == 0 {
		return ""
	}
	return string(files[0].Data)
}

// fileAgent is an agent that works with files, as a process agent does:
// it checks its prompt file is there and writes its output into the
// attempt folder.
type fileAgent struct{ inner agentrunner.Runtime }

func (a fileAgent) Run(ctx context.Context, inv *agentrunner.Invocation) (*agentrunner.RunResult, error) {
	if _, err := os.Stat(inv.PromptPath); err != nil {
		return nil, agentrunner.Fail(agentrunner.ClassCrash, "no prompt: %v", err)
	}
	res, err := a.inner.Run(ctx, inv)
	if err != nil || res.Output == nil {
		return res, err
	}
	out := res.Output
	res.Output = nil
	return res, os.WriteFile(inv.OutputPath, out, 0o644)
}
