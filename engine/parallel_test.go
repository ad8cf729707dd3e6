package engine

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentrunner/agentrunner"
	"github.com/agentrunner/agentrunner/examples/crypton"
	"github.com/agentrunner/agentrunner/execsvc"
	"github.com/agentrunner/agentrunner/mailbox"
	"github.com/google/go-cmp/cmp"
)

// overlapTimeout bounds how long research waits for analyze to start: run
// one after the other, they never overlap, and the test fails instead of
// hanging.
const overlapTimeout = 10 * time.Second

// parallelFixture is the fixture on the example in its parallel shape
// (init --parallel): research and analyze after plan, joined by synthesize.
func parallelFixture(t *testing.T) *fixture {
	t.Helper()
	f := newFixture(t, execsvc.MockOptions{}, nil)
	if _, err := crypton.Write(f.dir, true, "", crypton.Parallel); err != nil {
		t.Fatal(err)
	}
	ws, err := f.reload()
	if err != nil {
		t.Fatal(err)
	}
	f.ws = ws
	return f
}

// overlap records the runs of one cycle: research's run waits until
// analyze's has started, so both are under way at once, and synthesize's
// finds both artifacts published.
type overlap struct {
	mu      sync.Mutex
	started []string
	analyze chan struct{}
	once    sync.Once
	faults  []string
}

func (o *overlap) fault(msg string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.faults = append(o.faults, msg)
}

// onRun is the fixture's hook at the start of each mock run.
func (o *overlap) onRun(inv *agentrunner.Invocation) {
	o.mu.Lock()
	o.started = append(o.started, inv.Step)
	o.mu.Unlock()
	switch inv.Step {
	case "analyze":
		o.once.Do(func() { close(o.analyze) })
	case "research":
		select {
		case <-o.analyze:
		case <-time.After(overlapTimeout):
			o.fault("research ran " + overlapTimeout.String() + " without analyze starting: they are not in parallel")
		}
	case "synthesize":
		for _, file := range []string{"research.md", "analysis.md"} {
			if _, err := os.Stat(filepath.Join(inv.CycleDir, file)); err != nil {
				o.fault("synthesize started before " + file + " was published")
			}
		}
	}
}

// TestParallelCycle: one cycle of the parallel example on mock agents
// completes, with research and analyze running at the same time, and
// synthesize after both; the cycle's artifacts are all there. Research's
// handoff to the analysis lands after analyze has started, for the next
// cycle, whose analysis reads this cycle's research.
func TestParallelCycle(t *testing.T) {
	f := parallelFixture(t)
	o := &overlap{analyze: make(chan struct{})}
	f.onRun = o.onRun
	boxes, err := mailbox.New(f.ws.Layout.Mailboxes(), 5)
	if err != nil {
		t.Fatal(err)
	}
	c := f.runOnce(f.engine())
	if c.Status != agentrunner.CycleCompleted {
		t.Fatalf("cycle %s: %s", c.Status, c.Error)
	}
	if len(o.faults) > 0 {
		t.Fatalf("runs: %v (started %v)", o.faults, o.started)
	}
	if i, j := slices.Index(o.started, "synthesize"), slices.Index(o.started, "plan"); j != 0 || i != 3 {
		t.Errorf("runs started %v: want plan first, then research and analyze, then synthesize", o.started)
	}
	want := []string{"analysis.md", "evaluation.md", "plan.md", "research.md", "strategy.json"}
	if diff := cmp.Diff(want, files(t, c.Dir)); diff != "" {
		t.Fatalf("cycle dir (-want +got):\n%s", diff)
	}
	for _, a := range f.ws.Agents {
		data, err := os.ReadFile(filepath.Join(c.Dir, a.Output.File))
		if err != nil {
			t.Fatal(err)
		}
		if ps := a.Contract.Validate(data); len(ps) > 0 {
			t.Errorf("%s is invalid: %v", a.Output.File, ps)
		}
	}
	if got := slices.Sorted(slices.Values(f.attempts(c.ID))); !slices.Equal(got, []string{
		"analyze#1:succeeded", "evaluate#1:succeeded", "execute#1:succeeded", "plan#1:succeeded", "research#1:succeeded", "synthesize#1:succeeded",
	}) {
		t.Errorf("attempts %v, want one success per step", got)
	}
	msgs, err := boxes.Read("analysis", 0)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(msgs, func(m mailbox.Message) bool { return m.From == "research" && m.CycleID == c.ID }) {
		t.Errorf("analysis mailbox after the cycle %+v: no handoff from research for the next cycle", msgs)
	}

	f.onRun = nil
	f.toNextCycle()
	next := f.runOnce(f.engine())
	if next.Status != agentrunner.CycleCompleted {
		t.Fatalf("second cycle %s: %s", next.Status, next.Error)
	}
	prompt := func(step string) string { return f.stored(next.ID, step, 1, agentrunner.FilePrompt) }
	analysis, synthesis := prompt("analyze"), prompt("synthesize")
	if !strings.Contains(analysis, filepath.Join(c.Dir, "research.md")) || strings.Contains(analysis, filepath.Join(next.Dir, "research.md")) {
		t.Errorf("the second analysis should read the first cycle's research, not its own cycle's:\n%s", analysis)
	}
	if !strings.Contains(analysis, filepath.Join(next.Dir, "plan.md")) {
		t.Error("the second analysis does not read its cycle's plan")
	}
	if !strings.Contains(synthesis, filepath.Join(next.Dir, "research.md")) {
		t.Error("the second synthesis does not read its cycle's research")
	}
}
