package main

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// The engine's benchmarks compare runs: a durable step, the one fsync
// every durable commit costs, the creation of one file (what the file
// system's phase costs a view), and the floor of agentrunner's step
// protocol (its file and database work without the engine).
const (
	fsyncBench  = "BenchmarkFsync"
	createBench = "BenchmarkCreateFile"
	floorBench  = "BenchmarkDurabilityFloor"
)

// keepEnv set to 1 tells the engine's test binary to leave its files
// when it exits: the series directory holds them until the last pair.
const keepEnv = "AGENTRUNNER_BENCH_KEEP"

// defaultStep is the sub-benchmark of BenchmarkStep compared by default.
const defaultStep = "publish"

// config is what one comparison runs, from the command line.
type config struct {
	pairs, steps, invocations, warmup int
	dir, engine, langgraph, node      string
	// step is the sub-benchmark of BenchmarkStep to compare; empty:
	// defaultStep.
	step string
}

// stepBench is the name of the step benchmark cfg compares.
func (cfg config) stepBench() string {
	return "BenchmarkStep/" + cmp.Or(cfg.step, defaultStep)
}

// floorBench is the floor of the step cfg compares: with views on read,
// no view is written.
func (cfg config) floorBench() string {
	if cfg.step == "publish-on-read" {
		return floorBench + "OnRead"
	}
	return floorBench
}

// engineRun is what one run of the engine's benchmarks measured, in ms:
// per step, per fsync, per file created and per step of the floor.
type engineRun struct{ step, fsync, create, floor float64 }

// peerRun is LangGraph's ms per step: its wall time over the run divided
// by its steps (mean), as agentrunner's ns/op is, and its median
// invocation's divided by its steps.
type peerRun struct{ mean, median float64 }

// pair is one run of each program: the engine's figures and LangGraph's.
type pair struct {
	engineRun
	peerFirst bool
	peer      peerRun
}

// ratio is LangGraph's time per step over agentrunner's, each its wall
// time over the run divided by its steps: above 1, agentrunner is faster.
func (p pair) ratio() float64 { return p.peer.mean / p.step }

// medianRatio is ratio with LangGraph's median invocation instead, which
// leaves out its slow tail where agentrunner's mean keeps its own.
func (p pair) medianRatio() float64 { return p.peer.median / p.step }

func run(ctx context.Context, cfg config, w io.Writer) (err error) {
	if err := cfg.check(); err != nil {
		return err
	}
	// Absolute, because lg_bench.mjs runs in its own directory.
	dir, err := filepath.Abs(cfg.dir)
	if err != nil {
		return fmt.Errorf("-dir: %w", err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("-dir: %w", err)
	}
	fmt.Fprintf(w, "agentrunner %s (%d steps) against LangGraph.js, SQLite checkpointer, durability=sync, synchronous=FULL (%d invocations of 6 steps), in %s\n",
		cfg.stepBench(), cfg.steps, cfg.invocations, dir)
	series, err := os.MkdirTemp(dir, "series-")
	if err != nil {
		return fmt.Errorf("-dir: %w", err)
	}
	// Every file of the series stays until the last pair has run: on ext4
	// without a journal, deleting thousands of files slows the creation
	// of files near them for minutes, so deleting one run's files would
	// slow the next runs, agentrunner's, which create a file per step.
	defer func() {
		if rerr := os.RemoveAll(series); rerr != nil && err == nil {
			err = fmt.Errorf("removing the series' files: %w", rerr)
		}
	}()
	printHeader(w)
	pairs := make([]pair, 0, cfg.pairs)
	for i := range cfg.pairs {
		n := i + 1
		p, err := runPair(ctx, cfg, series, n)
		if err != nil {
			return fmt.Errorf("pair %d: %w", n, err)
		}
		printPair(w, n, p)
		pairs = append(pairs, p)
	}
	printSummary(w, pairs)
	return nil
}

func (cfg config) check() error {
	switch {
	case cfg.pairs < 1:
		return errors.New("-pairs must be at least 1")
	case cfg.steps < 1 || cfg.invocations < 1 || cfg.warmup < 0:
		return errors.New("-steps and -n must be at least 1, -warmup at least 0")
	case cfg.dir == "":
		return errors.New("-dir is required: a directory on the disk to measure")
	case cfg.engine == "":
		return errors.New("-engine is required: the engine's test binary, from go test -c ./engine/")
	}
	return nil
}

// runPair runs pair n in the series directory: agentrunner then
// LangGraph in odd pairs, the other way round in even ones.
func runPair(ctx context.Context, cfg config, series string, n int) (pair, error) {
	p := pair{peerFirst: n%2 == 0}
	engine := func() (err error) { p.engineRun, err = runEngine(ctx, cfg, series); return err }
	peer := func() (err error) { p.peer, err = runPeer(ctx, cfg, series, n); return err }
	order := []func() error{engine, peer}
	if p.peerFirst {
		order = []func() error{peer, engine}
	}
	for _, f := range order {
		if err := f(); err != nil {
			return p, err
		}
	}
	return p, nil
}

// benchPatterns run the step, fsync, create and floor benchmarks alone,
// one after the other: go test matches each level of a benchmark's name
// separately, so one pattern cannot pick a sub-benchmark of one and the
// others whole.
func (cfg config) benchPatterns() []string {
	step := "^BenchmarkStep$/^" + regexp.QuoteMeta(cmp.Or(cfg.step, defaultStep)) + "$"
	return []string{step, "^" + fsyncBench + "$", "^" + createBench + "$", "^" + cfg.floorBench() + "$"}
}

// runEngine runs the engine's benchmarks, each in its own process, in
// series, where they make their directories (os.TempDir) and leave them.
func runEngine(ctx context.Context, cfg config, series string) (engineRun, error) {
	var out strings.Builder
	for _, pattern := range cfg.benchPatterns() {
		cmd := exec.CommandContext(ctx, cfg.engine, "-test.run", "^$",
			"-test.bench", pattern, "-test.benchtime", fmt.Sprintf("%dx", cfg.steps))
		cmd.Env = append(os.Environ(), "TMPDIR="+series, "TMP="+series, "TEMP="+series, keepEnv+"=1")
		o, err := output(cmd)
		if err != nil {
			return engineRun{}, err
		}
		out.WriteString(o)
	}
	return parseEngine(out.String(), cfg.stepBench(), cfg.floorBench())
}

// runPeer runs lg_bench.mjs durably on a database of its own, new in
// series, for pair n; the database stays with the series' other files.
func runPeer(ctx context.Context, cfg config, series string, n int) (peerRun, error) {
	db := filepath.Join(series, fmt.Sprintf("lg-%d.db", n))
	cmd := exec.CommandContext(ctx, cfg.node, "lg_bench.mjs", "--mode=sqlite", "--durability=sync", "--sync=FULL",
		fmt.Sprintf("--n=%d", cfg.invocations), fmt.Sprintf("--warmup=%d", cfg.warmup), "--db="+db)
	cmd.Dir = cfg.langgraph
	out, err := output(cmd)
	if err != nil {
		return peerRun{}, err
	}
	return parsePeer(out)
}

// output runs cmd and returns its standard output; if it fails, the error
// quotes both of its outputs.
func output(cmd *exec.Cmd) (string, error) {
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("%s: %v\n%s%s", strings.Join(cmd.Args, " "), err, out, stderr.String())
	}
	return string(out), nil
}

// parseEngine returns the ms per op of stepBench, fsyncBench, createBench
// and floorBench from the output of the engine's test binary.
func parseEngine(out, stepBench, floorBench string) (engineRun, error) {
	ms := map[string]float64{}
	for line := range strings.Lines(out) {
		f := strings.Fields(line)
		if len(f) < 4 || !strings.HasPrefix(f[0], "Benchmark") || f[3] != "ns/op" {
			continue
		}
		ns, err := strconv.ParseFloat(f[2], 64)
		if err != nil || !(ns > 0) {
			return engineRun{}, fmt.Errorf("engine benchmark line %q: bad ns/op", strings.TrimSpace(line))
		}
		ms[trimProcs(f[0])] = ns / 1e6
	}
	for _, name := range []string{stepBench, fsyncBench, createBench, floorBench} {
		if ms[name] == 0 {
			return engineRun{}, fmt.Errorf("no %s line in the engine's output:\n%s", name, out)
		}
	}
	return engineRun{step: ms[stepBench], fsync: ms[fsyncBench], create: ms[createBench], floor: ms[floorBench]}, nil
}

// trimProcs drops the -GOMAXPROCS suffix go test adds to a benchmark's
// name (none when GOMAXPROCS is 1).
func trimProcs(name string) string {
	i := strings.LastIndexByte(name, '-')
	if i < 0 {
		return name
	}
	if _, err := strconv.Atoi(name[i+1:]); err != nil {
		return name
	}
	return name[:i]
}

// peerResult is the part of lg_bench.mjs's JSON line compare reads.
type peerResult struct {
	Durability  string   `json:"durability"`
	Synchronous int      `json:"synchronous"`
	PerStep     *float64 `json:"per_step_median_ms"`
	PerStepMean *float64 `json:"per_step_mean_ms"`
}

// parsePeer returns LangGraph's ms per step from lg_bench.mjs's output,
// whose last line is its JSON result, and checks that the run was as
// durable as agentrunner's step: each step committed, fsynced in full.
func parsePeer(out string) (peerRun, error) {
	trimmed := strings.TrimSpace(out)
	last := trimmed[strings.LastIndexByte(trimmed, '\n')+1:]
	var r peerResult
	if err := json.Unmarshal([]byte(last), &r); err != nil {
		return peerRun{}, fmt.Errorf("the last line of lg_bench.mjs's output is not its JSON result (%v):\n%s", err, out)
	}
	switch {
	case r.PerStep == nil || *r.PerStep <= 0:
		return peerRun{}, fmt.Errorf("lg_bench.mjs's result has no per_step_median_ms: %s", last)
	case r.PerStepMean == nil || *r.PerStepMean <= 0:
		return peerRun{}, fmt.Errorf("lg_bench.mjs's result has no per_step_mean_ms: %s", last)
	case r.Durability != "sync" || r.Synchronous != 2:
		return peerRun{}, fmt.Errorf("lg_bench.mjs ran with durability %q and synchronous %d, not sync and 2 (FULL): %s",
			r.Durability, r.Synchronous, last)
	}
	return peerRun{mean: *r.PerStepMean, median: *r.PerStep}, nil
}

const rowFormat = "%4s  %-11s  %11s  %9s  %9s  %7s  %6s  %6s  %5s  %11s  %9s\n"

func printHeader(w io.Writer) {
	fmt.Fprintf(w, rowFormat, "pair", "first", "agentrunner", "LangGraph", "LangGraph", "floor", "fsync", "create", "ratio", "agentrunner", "LangGraph")
	fmt.Fprintf(w, rowFormat, "", "", "ms/step", "ms/step", "median", "ms/step", "ms", "µs", "", "fsyncs", "fsyncs")
}

func printPair(w io.Writer, n int, p pair) {
	first := "agentrunner"
	if p.peerFirst {
		first = "LangGraph"
	}
	fmt.Fprintf(w, rowFormat, strconv.Itoa(n), first, ms(p.step), ms(p.peer.mean), ms(p.peer.median), ms(p.floor), ms(p.fsync), micros(p.create),
		fmt.Sprintf("%.2f", p.ratio()), fmt.Sprintf("%.1f", p.step/p.fsync), fmt.Sprintf("%.1f", p.peer.mean/p.fsync))
}

func ms(v float64) string { return fmt.Sprintf("%.3f", v) }

// micros prints a figure in ms as µs: a file's creation is tens to hundreds.
func micros(v float64) string { return fmt.Sprintf("%.1f", v*1000) }

func printSummary(w io.Writer, pairs []pair) {
	r := spreadOf(pairs, pair.ratio)
	fmt.Fprintf(w, "LangGraph / agentrunner per step over %d pairs: median %.2f, range %.2f–%.2f (above 1, agentrunner is faster; each side's wall time over its run divided by its steps)\n",
		len(pairs), r.median, r.min, r.max)
	mr := spreadOf(pairs, pair.medianRatio)
	fmt.Fprintf(w, "the same against LangGraph's median invocation (without its slow tail, agentrunner's mean keeps its own): median %.2f, range %.2f–%.2f\n",
		mr.median, mr.min, mr.max)
	step := spreadOf(pairs, func(p pair) float64 { return p.step / p.fsync })
	peer := spreadOf(pairs, func(p pair) float64 { return p.peer.mean / p.fsync })
	fmt.Fprintf(w, "a step in fsyncs (ms per step / ms per fsync of its pair), median (range): agentrunner %.1f (%.1f–%.1f), LangGraph %.1f (%.1f–%.1f)\n",
		step.median, step.min, step.max, peer.median, peer.min, peer.max)
	floor := spreadOf(pairs, func(p pair) float64 { return p.peer.mean / p.floor })
	fmt.Fprintf(w, "LangGraph / agentrunner's floor (its step's file and database work alone), the most the ratio can be: median %.2f, range %.2f–%.2f\n",
		floor.median, floor.min, floor.max)
	create := spreadOf(pairs, func(p pair) float64 { return p.create * 1000 })
	fmt.Fprintf(w, "creating a file, µs: median %.1f, range %.1f–%.1f (on ext4 without a journal a file created soon after many deletions nearby costs far more; the eager views create one file per step, the floor one too)\n",
		create.median, create.min, create.max)
}

// spread is the median and range of a figure over the pairs.
type spread struct{ median, min, max float64 }

func spreadOf(pairs []pair, figure func(pair) float64) spread {
	xs := make([]float64, len(pairs))
	for i, p := range pairs {
		xs[i] = figure(p)
	}
	slices.Sort(xs)
	n := len(xs)
	return spread{median: (xs[(n-1)/2] + xs[n/2]) / 2, min: xs[0], max: xs[n-1]}
}
