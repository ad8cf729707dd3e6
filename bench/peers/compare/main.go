// Command compare runs agentrunner's durable step and LangGraph.js's side
// by side on one disk, interleaved, and prints their times per step, the
// ratio of the two and each against one fsync measured in the same pair.
// make bench-peer builds what it needs and runs it; see
// bench/peers/langgraph/README.md.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	var cfg config
	flag.IntVar(&cfg.pairs, "pairs", 5, "pairs of runs, alternating which program goes first")
	flag.StringVar(&cfg.dir, "dir", "", "directory to measure in, on the disk to measure (not tmpfs)")
	flag.StringVar(&cfg.engine, "engine", "", "the engine's test binary (go test -c ./engine/)")
	flag.StringVar(&cfg.langgraph, "langgraph", "bench/peers/langgraph", "directory of lg_bench.mjs, with its node_modules installed")
	flag.StringVar(&cfg.node, "node", "node", "the Node.js program")
	flag.IntVar(&cfg.steps, "steps", 600, "agentrunner steps per run, and fsyncs")
	flag.IntVar(&cfg.invocations, "n", 100, "LangGraph invocations per run, of 6 steps each")
	flag.IntVar(&cfg.warmup, "warmup", 20, "LangGraph invocations per run before the measured ones")
	flag.StringVar(&cfg.step, "step", defaultStep, "the sub-benchmark of BenchmarkStep to compare: publish (views written in the background) or publish-on-read (views written when read)")
	flag.Parse()
	// An interrupt ends the program running and makes run return, so
	// that it removes the series' files, as on any other error.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, cfg, os.Stdout)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench-peer:", err)
		os.Exit(1)
	}
}
