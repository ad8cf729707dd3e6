package main

import (
	"fmt"
	"io"
	"path/filepath"
	"sync"
	"time"

	"github.com/agentrunner/agentrunner"
	"github.com/agentrunner/agentrunner/engine"
	capsulestep "github.com/agentrunner/agentrunner/step/capsule"
	"github.com/agentrunner/agentrunner/step/execution"
)

// progress prints one line per step outcome as it happens and, on a
// terminal (live), a line under them of the attempts running now.
type progress struct {
	mu sync.Mutex
	w  io.Writer
	// line is the live line; nil: plain lines only.
	line *liveLine
}

func (p *progress) onEvent(ev *agentrunner.Event) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.line != nil {
		p.line.observe(ev)
		p.line.clear(p.w)
		defer p.line.draw(p.w)
	}
	p.step(ev)
}

// step prints the line of an event, if it has one.
func (p *progress) step(ev *agentrunner.Event) {
	d := ev.Details
	dur := func() string {
		ms, _ := d["duration_ms"].(int64)
		return fmt.Sprintf("%7.2fs", time.Duration(ms*int64(time.Millisecond)).Seconds())
	}
	switch ev.Type {
	case agentrunner.EventCycleStarted:
		fmt.Fprintf(p.w, "cycle %s started\n", ev.CycleID)
	case agentrunner.EventAttemptSucceeded:
		fmt.Fprintf(p.w, "  %-12s attempt %d %s  succeeded\n", ev.Step, d["attempt"], dur())
	case agentrunner.EventAttemptFailed, agentrunner.EventAttemptInterrupted:
		fmt.Fprintf(p.w, "  %-12s attempt %d %s  failed (%s): %s\n", ev.Step, d["attempt"], dur(), d["error_class"], d["error"])
	case agentrunner.EventSignal:
		fmt.Fprintf(p.w, "  %-12s → %-12s confidence %v, risk %v\n", ev.Agent, d["next"], d["confidence"], d["risk"])
	case capsulestep.EventStored:
		same := ""
		if d["changed"] == false {
			same = ", unchanged"
		}
		fmt.Fprintf(p.w, "  %-12s capsule %s/%s version %v (phase %v%s)\n", ev.Step, d["workspace"], d["name"], d["version"], d["phase"], same)
	case agentrunner.EventRetryScheduled:
		fmt.Fprintf(p.w, "  %-12s attempt %d scheduled after %s\n", ev.Step, d["attempt"], d["wait"])
	case execution.EventExecutionStatus:
		if d["final"] == true {
			fmt.Fprintf(p.w, "  %-12s strategy %s: %s\n", ev.Step, d["strategy_id"], d["status"])
		}
	case agentrunner.EventCycleCompleted:
		fmt.Fprintf(p.w, "cycle %s completed\n", ev.CycleID)
	case agentrunner.EventCycleFailed:
		fmt.Fprintf(p.w, "cycle %s failed at %s\n", ev.CycleID, ev.Step)
	case engine.EventHalted:
		fmt.Fprintf(p.w, "cycle %s halted at %s: waiting for an operator (agentrunner resume)\n", ev.CycleID, ev.Step)
	case engine.EventSkipped:
		fmt.Fprintf(p.w, "  %-12s skipped: %s of cycle %s stands in\n", ev.Step, filepath.Base(fmt.Sprint(d["fallback"])), d["fallback_run"])
	case engine.EventResumed:
		fmt.Fprintf(p.w, "cycle %s resumed at %s by %s\n", ev.CycleID, ev.Step, d["operator"])
	case engine.EventForced:
		fmt.Fprintf(p.w, "cycle %s ran out of time: forced from %s to %s\n", ev.CycleID, d["from"], d["to"])
	}
}
