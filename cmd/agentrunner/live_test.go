package main

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/agentrunner/agentrunner"
	"github.com/agentrunner/agentrunner/internal/clocktest"
	"github.com/agentrunner/agentrunner/runtime/model"
	"github.com/agentrunner/agentrunner/tool"
	"github.com/google/go-cmp/cmp"
)

// TestLiveLine: on a terminal, a line under the step lines shows each
// running attempt's elapsed time, tool calls and tokens so far, redrawn
// in place (carriage return, erase line); a step's outcome line takes its
// place and the line comes back under it while attempts run. Without a
// terminal the output is the plain step lines.
func TestLiveLine(t *testing.T) {
	t0 := time.Date(2026, 11, 24, 9, 0, 0, 0, time.UTC)
	events := func(clock *clocktest.Clock, p *progress) {
		ev := func(typ, step string, d map[string]any) {
			p.onEvent(&agentrunner.Event{Type: typ, CycleID: "c1", Step: step, Details: d})
		}
		ev(agentrunner.EventAttemptStarted, "research", map[string]any{"attempt": 1})
		clock.Advance(5 * time.Second)
		ev(tool.EventToolCall, "research", map[string]any{"tool": "web_search"})
		ev(tool.EventToolCall, "research", map[string]any{"tool": "web_fetch"})
		p.onEvent(turnEvent(model.Turn{CycleID: "c1", Step: "research", Attempt: 1, Usage: agentrunner.Usage{InputTokens: 1000, OutputTokens: 234}}))
		clock.Advance(7 * time.Second)
		p.mu.Lock()
		if p.line != nil {
			p.line.draw(p.w) // a tick of the ticker
		}
		p.mu.Unlock()
		ev(agentrunner.EventAttemptSucceeded, "research", map[string]any{"attempt": 1, "duration_ms": int64(12000)})
	}
	clock := clocktest.New(t0)
	var out bytes.Buffer
	p := &progress{w: &out, line: newLiveLine(clock.Now)}
	events(clock, p)
	const erase = "\r\x1b[K"
	want := "  research attempt 1 0s, 0 tool calls, 0 tokens" +
		erase + "  research attempt 1 5s, 1 tool call, 0 tokens" +
		erase + "  research attempt 1 5s, 2 tool calls, 0 tokens" +
		erase + "  research attempt 1 5s, 2 tool calls, 1234 tokens" +
		erase + "  research attempt 1 12s, 2 tool calls, 1234 tokens" +
		erase + "  research     attempt 1   12.00s  succeeded\n"
	if diff := cmp.Diff(want, out.String()); diff != "" {
		t.Errorf("on a terminal (-want +got):\n%s", diff)
	}

	out.Reset()
	events(clocktest.New(t0), &progress{w: &out})
	if diff := cmp.Diff("  research     attempt 1   12.00s  succeeded\n", out.String()); diff != "" {
		t.Errorf("not on a terminal (-want +got):\n%s", diff)
	}
}

// TestIsTerminal: a buffer or a regular file is not a terminal, so run's
// output piped or redirected has no live line.
func TestIsTerminal(t *testing.T) {
	f, err := os.Create(filepath.Join(t.TempDir(), "out"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if isTerminal(&bytes.Buffer{}) || isTerminal(f) {
		t.Error("a buffer or a regular file taken for a terminal")
	}
	if tty, err := os.OpenFile("/dev/tty", os.O_WRONLY, 0); err == nil {
		defer tty.Close()
		t.Setenv("TERM", "xterm")
		if !isTerminal(tty) {
			t.Error("/dev/tty is not taken for a terminal")
		}
		t.Setenv("TERM", "dumb")
		if isTerminal(tty) {
			t.Error("a dumb terminal is taken for one that redraws")
		}
	}
}
