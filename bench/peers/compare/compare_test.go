package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// Output recorded from the engine's test binary and from lg_bench.mjs.
const (
	engineOutput = `goos: linux
goarch: amd64
pkg: github.com/agentrunner/agentrunner/engine
cpu: Oxide Virtual Turin-like Processor
BenchmarkStep/publish-2    	     300	   5047450 ns/op	       521.6 allocs/step	         1.100 commits/step	         1.000 commits/transition	   2125553 cpu-ns/step	         2.000 file-fsyncs/step	   1038100 sys-ns/step	   1087453 user-ns/step
BenchmarkFsync-2           	     300	   2035186 ns/op	         1.000 file-fsyncs/op
BenchmarkCreateFile-2      	     300	     31234 ns/op
BenchmarkDurabilityFloor-2 	     300	   1999671 ns/op	   1000000 cpu-ns/step
PASS
`
	peerOutput = `{"mode":"sqlite","http":false,"client":null,"durability":"sync","journal_mode":"wal","synchronous":2,"n":50,"warmup":20,"median_ms":17.99605700000029,"min_ms":13.552962000000207,"p99_ms":77.76315700000032,"max_ms":77.76315700000032,"mean_ms":23.794142700000002,"per_step_median_ms":2.999342833333382,"per_step_mean_ms":3.965690450000000,"inv_per_s":42.027149816160424,"rss_end_mb":123.734375,"ckpt_rows_per_inv":8,"write_rows_per_inv":13}
`
)

// The test binary doubles as the engine's test binary and as node: when
// fakeEnv is set, TestMain plays that program, logging its call to the
// file named by logEnv, instead of running the tests.
const (
	fakeEnv = "COMPARE_FAKE"
	logEnv  = "COMPARE_FAKE_LOG"
)

func TestMain(m *testing.M) {
	if fake := os.Getenv(fakeEnv); fake != "" {
		os.Exit(fakeMain(fake))
	}
	os.Exit(m.Run())
}

// fakeMain plays a program: which one is decided by its arguments (node's
// first is lg_bench.mjs); fake "fail" fails as either. Like the real
// program, it leaves a file where it writes (the engine in its TMPDIR,
// node at --db) and logs how many were there before it, so that the
// calls show whether the files of the runs before were kept.
func fakeMain(fake string) int {
	role, out := "engine", engineOutput
	dir := os.Getenv("TMPDIR")
	leave := func() error { _, err := os.MkdirTemp(dir, "agentrunner-bench-"); return err }
	if len(os.Args) > 1 && os.Args[1] == "lg_bench.mjs" {
		wd, _ := os.Getwd()
		role, out = "node in "+filepath.Base(wd), peerOutput
		db := strings.TrimPrefix(os.Args[len(os.Args)-1], "--db=")
		dir = filepath.Dir(db)
		leave = func() error { return os.WriteFile(db, nil, 0o644) }
	}
	f, err := os.OpenFile(os.Getenv(logEnv), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return 2
	}
	defer f.Close()
	kept, err := os.ReadDir(dir)
	if err != nil || leave() != nil {
		return 2
	}
	fmt.Fprintf(f, "%s TMPDIR=%s AGENTRUNNER_BENCH_KEEP=%s kept=%d %s\n",
		role, os.Getenv("TMPDIR"), os.Getenv("AGENTRUNNER_BENCH_KEEP"), len(kept), strings.Join(os.Args[1:], " "))
	if fake == "fail" {
		fmt.Fprintln(os.Stderr, "cannot find module 'better-sqlite3'")
		return 1
	}
	fmt.Print(out)
	return 0
}

// TestRunAlternatesThePairsAndSummarises: the pairs alternate which side
// goes first; every process writes in one series directory under -dir,
// where the files of the runs before it are still there (kept counts
// them), and which is gone once the last pair has run.
func TestRunAlternatesThePairsAndSummarises(t *testing.T) {
	dir, lg, log := t.TempDir(), filepath.Join(t.TempDir(), "langgraph"), filepath.Join(t.TempDir(), "calls")
	os.Mkdir(lg, 0o755)
	t.Setenv(fakeEnv, "ok")
	t.Setenv(logEnv, log)
	t.Setenv("TMPDIR", "/elsewhere")
	t.Setenv("AGENTRUNNER_BENCH_KEEP", "")
	var out strings.Builder
	cfg := config{pairs: 3, steps: 300, invocations: 50, warmup: 20, dir: dir, engine: os.Args[0], langgraph: lg, node: os.Args[0]}
	if err := run(context.Background(), cfg, &out); err != nil {
		t.Fatal(err)
	}
	want := "agentrunner BenchmarkStep/publish (300 steps) against LangGraph.js, SQLite checkpointer, durability=sync, synchronous=FULL (50 invocations of 6 steps), in " + dir + `
pair  first        agentrunner  LangGraph  LangGraph    floor   fsync  create  ratio  agentrunner  LangGraph
                       ms/step    ms/step     median  ms/step      ms      µs              fsyncs     fsyncs
   1  agentrunner        5.047      3.966      2.999    2.000   2.035    31.2   0.79          2.5        1.9
   2  LangGraph          5.047      3.966      2.999    2.000   2.035    31.2   0.79          2.5        1.9
   3  agentrunner        5.047      3.966      2.999    2.000   2.035    31.2   0.79          2.5        1.9
LangGraph / agentrunner per step over 3 pairs: median 0.79, range 0.79–0.79 (above 1, agentrunner is faster; each side's wall time over its run divided by its steps)
the same against LangGraph's median invocation (without its slow tail, agentrunner's mean keeps its own): median 0.59, range 0.59–0.59
a step in fsyncs (ms per step / ms per fsync of its pair), median (range): agentrunner 2.5 (2.5–2.5), LangGraph 1.9 (1.9–1.9)
LangGraph / agentrunner's floor (its step's file and database work alone), the most the ratio can be: median 1.98, range 1.98–1.98
creating a file, µs: median 31.2, range 31.2–31.2 (on ext4 without a journal a file created soon after many deletions nearby costs far more; the eager views create one file per step, the floor one too)
`
	if diff := cmp.Diff(want, out.String()); diff != "" {
		t.Errorf("output (-want +got):\n%s", diff)
	}
	calls := readCalls(t, log)
	series := seriesOf(t, dir, calls)
	kept := 0
	engine := func(bench string) string {
		kept++
		return fmt.Sprintf("engine TMPDIR=%s AGENTRUNNER_BENCH_KEEP=1 kept=%d -test.run ^$ -test.bench %s -test.benchtime 300x", series, kept-1, bench)
	}
	engineRun := func() []string {
		return []string{engine("^BenchmarkStep$/^publish$"), engine("^BenchmarkFsync$"), engine("^BenchmarkCreateFile$"), engine("^BenchmarkDurabilityFloor$")}
	}
	node := func(pair int) []string {
		kept++
		return []string{fmt.Sprintf("node in langgraph TMPDIR=/elsewhere AGENTRUNNER_BENCH_KEEP= kept=%d lg_bench.mjs --mode=sqlite --durability=sync --sync=FULL --n=50 --warmup=20 --db=%s",
			kept-1, filepath.Join(series, fmt.Sprintf("lg-%d.db", pair)))}
	}
	wantCalls := slices.Concat(engineRun(), node(1), node(2), engineRun(), engineRun(), node(3))
	if diff := cmp.Diff(wantCalls, calls); diff != "" {
		t.Errorf("calls (-want +got):\n%s", diff)
	}
	if left, _ := os.ReadDir(dir); len(left) != 0 {
		t.Errorf("left in -dir after the series: %v, want nothing", left)
	}
}

func TestRunFailsWithTheFailingProgramsOutput(t *testing.T) {
	log := filepath.Join(t.TempDir(), "calls")
	t.Setenv(fakeEnv, "fail")
	t.Setenv(logEnv, log)
	cfg := config{pairs: 1, steps: 1, invocations: 1, dir: t.TempDir(), engine: os.Args[0], langgraph: t.TempDir(), node: os.Args[0]}
	err := run(context.Background(), cfg, &strings.Builder{})
	if err == nil || !strings.HasPrefix(err.Error(), "pair 1: ") || !strings.Contains(err.Error(), "cannot find module 'better-sqlite3'") {
		t.Errorf("err = %v, want pair 1's failure with the program's stderr", err)
	}
	seriesOf(t, cfg.dir, readCalls(t, log))
	if left, _ := os.ReadDir(cfg.dir); len(left) != 0 {
		t.Errorf("left in -dir after a failed pair: %v, want nothing", left)
	}
}

// readCalls returns the calls the fake programs logged, one per line.
func readCalls(t *testing.T, log string) []string {
	t.Helper()
	calls, err := os.ReadFile(log)
	if err != nil {
		t.Fatal(err)
	}
	return strings.Split(strings.TrimSuffix(string(calls), "\n"), "\n")
}

// seriesOf returns the series directory the first call ran in, the
// engine's TMPDIR, and checks that it is a new directory in dir.
func seriesOf(t *testing.T, dir string, calls []string) string {
	t.Helper()
	f := strings.Fields(calls[0])
	series, ok := strings.CutPrefix(f[1], "TMPDIR=")
	if f[0] != "engine" || !ok || filepath.Dir(series) != dir || !strings.HasPrefix(filepath.Base(series), "series-") {
		t.Fatalf("first call %q: want the engine's, with TMPDIR a series-* directory in %s", calls[0], dir)
	}
	return series
}

func TestConfigCheck(t *testing.T) {
	ok := config{pairs: 1, steps: 1, invocations: 1, dir: "d", engine: "e"}
	for _, tc := range []struct {
		name   string
		change func(*config)
		want   string
	}{
		{"valid", func(*config) {}, ""},
		{"no pairs", func(c *config) { c.pairs = 0 }, "-pairs must be at least 1"},
		{"no steps", func(c *config) { c.steps = 0 }, "-steps and -n must be at least 1, -warmup at least 0"},
		{"negative warmup", func(c *config) { c.warmup = -1 }, "-steps and -n must be at least 1, -warmup at least 0"},
		{"no dir", func(c *config) { c.dir = "" }, "-dir is required: a directory on the disk to measure"},
		{"no engine", func(c *config) { c.engine = "" }, "-engine is required: the engine's test binary, from go test -c ./engine/"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := ok
			tc.change(&c)
			got := ""
			if err := c.check(); err != nil {
				got = err.Error()
			}
			if got != tc.want {
				t.Errorf("check() = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestParseEngine(t *testing.T) {
	for _, tc := range []struct {
		name, out string
		want      engineRun
		err       string
	}{
		{name: "recorded", out: engineOutput, want: engineRun{step: 5.04745, fsync: 2.035186, create: 0.031234, floor: 1.999671}},
		{
			name: "GOMAXPROCS=1, no suffix",
			out:  "BenchmarkStep/publish 10 2000000 ns/op\nBenchmarkFsync 10 500000 ns/op\nBenchmarkCreateFile 10 25000 ns/op\nBenchmarkDurabilityFloor 10 1000000 ns/op\n",
			want: engineRun{step: 2, fsync: 0.5, create: 0.025, floor: 1},
		},
		{
			name: "no floor",
			out:  "BenchmarkStep/publish-2 10 2000000 ns/op\nBenchmarkFsync-2 10 500000 ns/op\nBenchmarkCreateFile-2 10 25000 ns/op\n",
			err:  "no BenchmarkDurabilityFloor line",
		},
		{
			name: "no create",
			out:  "BenchmarkStep/publish-2 10 2000000 ns/op\nBenchmarkFsync-2 10 500000 ns/op\nBenchmarkDurabilityFloor-2 10 1000000 ns/op\n",
			err:  "no BenchmarkCreateFile line in the engine's output",
		},
		{
			name: "deposits are another benchmark",
			out:  "BenchmarkStep/publish+2-deposits-2 10 9000000 ns/op\nBenchmarkFsync-2 10 500000 ns/op\n",
			err:  "no BenchmarkStep/publish line",
		},
		{name: "no fsync", out: "BenchmarkStep/publish-2 10 2000000 ns/op\nPASS\n", err: "no BenchmarkFsync line"},
		{name: "bad figure", out: "BenchmarkFsync-2 10 NaN ns/op\n", err: `engine benchmark line "BenchmarkFsync-2 10 NaN ns/op": bad ns/op`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parseEngine(tc.out, "BenchmarkStep/publish", floorBench)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err = %v, want one containing %q", err, tc.err)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Errorf("parseEngine = %+v, %v; want %+v", got, err, tc.want)
			}
		})
	}
}

func TestParsePeer(t *testing.T) {
	for _, tc := range []struct {
		name, out string
		want      peerRun
		err       string
	}{
		{name: "recorded", out: peerOutput, want: peerRun{mean: 3.96569045, median: 2.999342833333382}},
		{name: "after other lines", out: "npm notice\n" + peerOutput + "\n", want: peerRun{mean: 3.96569045, median: 2.999342833333382}},
		{name: "not durable", out: `{"durability":"async","synchronous":2,"per_step_median_ms":0.1,"per_step_mean_ms":0.1}`, err: `durability "async" and synchronous 2, not sync and 2 (FULL)`},
		{name: "synchronous NORMAL", out: `{"durability":"sync","synchronous":1,"per_step_median_ms":0.1,"per_step_mean_ms":0.1}`, err: `durability "sync" and synchronous 1`},
		{name: "no figure", out: `{"durability":"sync","synchronous":2}`, err: "has no per_step_median_ms"},
		{name: "no mean", out: `{"durability":"sync","synchronous":2,"per_step_median_ms":0.1}`, err: "has no per_step_mean_ms"},
		{name: "not JSON", out: "Error: Cannot find module '@langchain/langgraph'\n", err: "is not its JSON result"},
		{name: "nothing", out: "", err: "is not its JSON result"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parsePeer(tc.out)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err = %v, want one containing %q", err, tc.err)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Errorf("parsePeer = %v, %v; want %v", got, err, tc.want)
			}
		})
	}
}

func TestSpreadOf(t *testing.T) {
	ratios := func(rs ...float64) []pair {
		ps := make([]pair, len(rs))
		for i, r := range rs {
			ps[i] = pair{engineRun: engineRun{step: 1}, peer: peerRun{mean: r, median: r / 2}}
		}
		return ps
	}
	for _, tc := range []struct {
		name  string
		pairs []pair
		want  spread
	}{
		{"one", ratios(2), spread{2, 2, 2}},
		{"odd", ratios(3, 1, 2), spread{2, 1, 3}},
		{"even", ratios(4, 1, 3, 2), spread{2.5, 1, 4}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, spreadOf(tc.pairs, pair.ratio), cmp.AllowUnexported(spread{})); diff != "" {
				t.Errorf("spread (-want +got):\n%s", diff)
			}
		})
	}
}

// TestStepChoosesTheSubBenchmark: -step picks which BenchmarkStep is run
// and read, by default publish, and the floor that goes with it: views on
// read write no view.
func TestStepChoosesTheSubBenchmark(t *testing.T) {
	for _, tc := range []struct{ step, pattern, name, floor string }{
		{"", "^BenchmarkStep$/^publish$", "BenchmarkStep/publish", "BenchmarkDurabilityFloor"},
		{"publish-on-read", "^BenchmarkStep$/^publish-on-read$", "BenchmarkStep/publish-on-read", "BenchmarkDurabilityFloorOnRead"},
	} {
		cfg := config{step: tc.step}
		if got := cfg.benchPatterns(); got[0] != tc.pattern || got[3] != "^"+tc.floor+"$" {
			t.Errorf("step %q: patterns %q, want %q and the floor %q", tc.step, got, tc.pattern, tc.floor)
		}
		out := tc.name + "-2 10 2000000 ns/op\nBenchmarkFsync-2 10 500000 ns/op\nBenchmarkCreateFile-2 10 25000 ns/op\n" + tc.floor + "-2 10 1000000 ns/op\n"
		if got, err := parseEngine(out, cfg.stepBench(), cfg.floorBench()); err != nil || got.step != 2 || got.floor != 1 {
			t.Errorf("step %q: parsed %+v, %v; want 2 ms per step, 1 of the floor", tc.step, got, err)
		}
	}
}
