package engine

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentrunner/agentrunner"
	"github.com/agentrunner/agentrunner/config"
	"github.com/agentrunner/agentrunner/internal/atomicfile"
	"github.com/agentrunner/agentrunner/internal/clocktest"
	"github.com/agentrunner/agentrunner/internal/cputime"
	"github.com/agentrunner/agentrunner/runtime/mock"
	"github.com/agentrunner/agentrunner/sqlite"
	"github.com/agentrunner/agentrunner/workspace"
)

const benchSteps = 10

// benchRoot holds the files of every benchmark run until the process ends.
// Removing a run's files before the next run starts would slow that run
// down: ext4 without a journal, to allocate an inode, passes over every
// inode of the block group freed in the last minute (six while the inode
// table's block is not yet written back), so a benchmark that deletes its
// previous run's thousands of files measures that deletion, not the step.
// The same holds across processes: with keepEnv set to 1, TestMain leaves
// benchRoot in place, for a harness that runs one benchmark per process
// (make bench-peer) to remove once, after the last.
var benchRoot struct {
	once sync.Once
	dir  string
	err  error
}

// benchDir returns a new directory under benchRoot.
func benchDir(b *testing.B) string {
	benchRoot.once.Do(func() { benchRoot.dir, benchRoot.err = os.MkdirTemp("", "agentrunner-bench-") })
	if benchRoot.err != nil {
		b.Fatal(benchRoot.err)
	}
	dir, err := os.MkdirTemp(benchRoot.dir, "run-")
	if err != nil {
		b.Fatal(err)
	}
	return dir
}

// keepEnv, set to 1, keeps benchRoot when the process ends.
const keepEnv = "AGENTRUNNER_BENCH_KEEP"

func TestMain(m *testing.M) {
	code := m.Run()
	if benchRoot.dir != "" && os.Getenv(keepEnv) != "1" {
		os.RemoveAll(benchRoot.dir)
	}
	os.Exit(code)
}

// benchShape is what a benchmark's pipeline and agent do.
type benchShape struct {
	// mail: each step deposits a forward and a backward message, as the
	// learning loop's steps do.
	mail bool
	// files: the agent works with files (fileOutput), not in memory.
	files bool
	// onRead: the pipeline writes its views on read only.
	onRead bool
}

// benchWorkspace writes a pipeline of benchSteps mock agent steps.
func benchWorkspace(b *testing.B, shape benchShape) *workspace.Workspace {
	dir := benchDir(b)
	tmpl := "# Report {{cycle_id}}\n\n## Summary\n\n<!-- two sentences -->\n\n## Findings\n\n| Item | Value |\n|---|---|\n| Signal | {{signal}} |\n\n## Handoff\n\n<!-- for the next agent -->\n"
	os.WriteFile(filepath.Join(dir, "template.md"), []byte(tmpl), 0o644)
	os.WriteFile(filepath.Join(dir, "identity.md"), []byte("You are a research agent.\n"), 0o644)
	var y strings.Builder
	y.WriteString("version: 1\nname: bench\ndefaults: {provider: mock}\nagents:\n")
	for i := 0; i < benchSteps; i++ {
		fmt.Fprintf(&y, "  a%d: {identity: identity.md, output: {file: out%d.md, template: template.md}}\n", i, i)
	}
	y.WriteString("pipeline:\n  start: s0\n")
	if shape.onRead {
		y.WriteString("  views: on_read\n")
	}
	y.WriteString("  steps:\n")
	for i := 0; i < benchSteps; i++ {
		next := fmt.Sprintf("s%d", i+1)
		if i == benchSteps-1 {
			next = "end"
		}
		fmt.Fprintf(&y, "    s%d: {agent: a%d, next: %s", i, i, next)
		if shape.mail {
			fmt.Fprintf(&y, ", deliver: [{kind: forward, to: [a%d], section: Handoff}, {kind: backward, to: [a%d], section: Summary}]", (i+1)%benchSteps, i)
		}
		y.WriteString("}\n")
	}
	path := filepath.Join(dir, config.FileName)
	os.WriteFile(path, []byte(y.String()), 0o644)
	cfg, err := config.Load(path)
	if err != nil {
		b.Fatal(err)
	}
	ws, err := workspace.Load(cfg)
	if err != nil {
		b.Fatal(err)
	}
	return ws
}

// fixedOutput is an agent that returns the same valid output every time,
// in memory as a model agent's conversation does, so the benchmark
// measures the engine, not an agent's work.
type fixedOutput []byte

var _ agentrunner.OutputReturner = fixedOutput(nil)

func (f fixedOutput) ReturnsOutput() {}

func (f fixedOutput) Run(ctx context.Context, inv *agentrunner.Invocation) (*agentrunner.RunResult, error) {
	return &agentrunner.RunResult{Output: f}, nil
}

// fileOutput is fixedOutput as a process agent gives it: it reads its
// prompt from its file and writes its output into the attempt's folder.
type fileOutput []byte

func (f fileOutput) Run(ctx context.Context, inv *agentrunner.Invocation) (*agentrunner.RunResult, error) {
	if _, err := os.Stat(inv.PromptPath); err != nil {
		return nil, err
	}
	return &agentrunner.RunResult{}, os.WriteFile(inv.OutputPath, f, 0o644)
}

// BenchmarkStep measures one step of a pipeline whose agent gives a fixed
// valid output (so the agent's own work is not counted), all durable: the
// attempt's outcome, the artifact's and the prompt's bytes and the
// transition committed to SQLite with synchronous=FULL, then the
// artifact's view written into the run's directory. In publish and
// publish+2-deposits the agent works in memory (as model and mock agents
// do); in publish-file it reads its prompt from the attempt's folder and
// writes its output there (as process agents do). Besides ns/op it reports, per step: CPU time in user
// space (agentrunner's own work) and in the kernel (file creation, fsync),
// store commits, file fsyncs, and commits per state transition (a cycle of
// n steps has n+1 transitions: the cycle's start and one after each step).
//
//	go test -run '^$' -bench BenchmarkStep -count 10 ./engine/ | tee new.txt; benchstat new.txt
func BenchmarkStep(b *testing.B) {
	for _, bc := range []struct {
		name  string
		shape benchShape
	}{
		{"publish", benchShape{}},
		{"publish+2-deposits", benchShape{mail: true}},
		{"publish-file", benchShape{files: true}},
		{"publish-on-read", benchShape{onRead: true}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			e, store, clock := benchEngineAt(b, bc.shape, filepath.Join(benchDir(b), "state.db"))
			ctx := context.Background()
			cycles := (b.N + benchSteps - 1) / benchSteps
			commits0, syncs0 := store.Commits(), atomicfile.Syncs()
			user0, sys0, cpuOK := cputime.Self()
			var ms0, ms1 runtime.MemStats
			runtime.ReadMemStats(&ms0)
			b.ResetTimer()
			for i := 0; i < cycles; i++ {
				c, err := e.RunOnce(ctx)
				if err != nil || c.Status != agentrunner.CycleCompleted {
					b.Fatalf("cycle: %v %+v", err, c)
				}
				clock.Advance(time.Hour)
			}
			b.StopTimer()
			runtime.ReadMemStats(&ms1)
			steps := float64(cycles * benchSteps)
			commits := float64(store.Commits() - commits0)
			user1, sys1, _ := cputime.Self()
			if cpuOK {
				b.ReportMetric(float64(user1-user0)/steps, "user-ns/step")
				b.ReportMetric(float64(sys1-sys0)/steps, "sys-ns/step")
				b.ReportMetric(float64(user1-user0+sys1-sys0)/steps, "cpu-ns/step")
			}
			b.ReportMetric(commits/steps, "commits/step")
			b.ReportMetric(commits/float64(cycles*(benchSteps+1)), "commits/transition")
			b.ReportMetric(float64(atomicfile.Syncs()-syncs0)/steps, "file-fsyncs/step")
			b.ReportMetric(float64(ms1.Mallocs-ms0.Mallocs)/steps, "allocs/step")
		})
	}
}

// benchEngine returns an engine on a benchWorkspace, a SQLite store and a
// fake clock.
func benchEngine(b *testing.B, mail bool) (*Engine, *sqlite.Store, *clocktest.Clock) {
	return benchEngineAt(b, benchShape{mail: mail}, filepath.Join(benchDir(b), "state.db"))
}

// benchEngineAt is benchEngine of a shape, with its state database at path.
func benchEngineAt(b *testing.B, shape benchShape, path string) (*Engine, *sqlite.Store, *clocktest.Clock) {
	ws := benchWorkspace(b, shape)
	store, err := sqlite.Open(context.Background(), path)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { store.Close() })
	clock := clocktest.New(t0)
	tmpl, _ := os.ReadFile(ws.Agents["a0"].TemplatePath)
	out := mock.Generate(tmpl, ".md", "20261122_140000", "a0", t0)
	var agent agentrunner.Runtime = fixedOutput(out)
	if shape.files {
		agent = fileOutput(out)
	}
	e, err := New(Options{Workspace: ws, Store: store, Clock: clock,
		Runtimes: map[string]agentrunner.Runtime{"mock": agent}})
	if err != nil {
		b.Fatal(err)
	}
	return e, store, clock
}

// BenchmarkStepOverFloor alternates a cycle of benchSteps engine steps
// with as many BenchmarkDurabilityFloor steps, so both meet the same file
// system state, which drifts on a shared machine; it reports the CPU and
// wall time of each per step and the engine's CPU above the floor.
//
//	go test -run '^$' -bench StepOverFloor -benchtime 3000x -count 10 ./engine/
func BenchmarkStepOverFloor(b *testing.B) {
	if _, _, ok := cputime.Self(); !ok {
		b.Skip("this system does not report the CPU time this benchmark measures")
	}
	e, _, clock := benchEngine(b, false)
	f := newFloor(b)
	ctx := context.Background()
	var stepCPU, floorCPU, stepWall, floorWall time.Duration
	cycles := (b.N + benchSteps - 1) / benchSteps
	b.ResetTimer()
	for i := 0; i < cycles; i++ {
		u0, s0, _ := cputime.Self()
		w0 := time.Now()
		if c, err := e.RunOnce(ctx); err != nil || c.Status != agentrunner.CycleCompleted {
			b.Fatalf("cycle: %v %+v", err, c)
		}
		w1 := time.Now()
		u1, s1, _ := cputime.Self()
		for j := 0; j < benchSteps; j++ {
			f.step(b)
		}
		w2 := time.Now()
		u2, s2, _ := cputime.Self()
		stepCPU += u1 - u0 + s1 - s0
		floorCPU += u2 - u1 + s2 - s1
		stepWall += w1.Sub(w0)
		floorWall += w2.Sub(w1)
		clock.Advance(time.Hour)
	}
	b.StopTimer()
	steps := float64(cycles * benchSteps)
	b.ReportMetric(float64(stepCPU)/steps, "step-cpu-ns/step")
	b.ReportMetric(float64(floorCPU)/steps, "floor-cpu-ns/step")
	b.ReportMetric(float64(stepCPU-floorCPU)/steps, "over-floor-cpu-ns/step")
	b.ReportMetric(float64(stepWall)/steps, "step-wall-ns/step")
	b.ReportMetric(float64(floorWall)/steps, "floor-wall-ns/step")
}
