package engine

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/agentrunner/agentrunner"
	"github.com/agentrunner/agentrunner/internal/atomicfile"
	"github.com/agentrunner/agentrunner/internal/cputime"
	"github.com/agentrunner/agentrunner/sqlite"
)

// BenchmarkDurabilityFloor does only the file-system and database work one
// step cannot avoid, without the engine: create the attempt folder, write
// the prompt and the agent's output, publish the artifact (fsync, rename,
// fsync the directory) and commit one event to SQLite with
// synchronous=FULL; and, every benchSteps steps, what a cycle's start
// cannot avoid: its directory, made durable, and one more commit (a cycle
// of n steps has n+1 transitions). BenchmarkStep minus this is the
// engine's own cost.
func BenchmarkDurabilityFloor(b *testing.B) {
	f := newFloor(b)
	user0, sys0, cpuOK := cputime.Self()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		f.step(b)
	}
	b.StopTimer()
	if user1, sys1, _ := cputime.Self(); cpuOK {
		b.ReportMetric(float64(user1-user0)/float64(b.N), "user-ns/step")
		b.ReportMetric(float64(sys1-sys0)/float64(b.N), "sys-ns/step")
		b.ReportMetric(float64(user1-user0+sys1-sys0)/float64(b.N), "cpu-ns/step")
	}
}

// floor does a step's unavoidable work, one step per call.
type floor struct {
	dir, cycle string
	store      *sqlite.Store
	body       []byte
	n          int
}

func newFloor(b *testing.B) *floor {
	dir := benchDir(b)
	store, err := sqlite.Open(context.Background(), filepath.Join(dir, "state.db"))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { store.Close() })
	body := make([]byte, 400)
	for i := range body {
		body[i] = 'x'
	}
	return &floor{dir: dir, store: store, body: body}
}

func (f *floor) step(b *testing.B) {
	i := f.n
	f.n++
	ev := &agentrunner.Event{Timestamp: time.Now(), Type: "x", Level: agentrunner.LevelInfo}
	if i%benchSteps == 0 {
		// A cycle's start: its directory, durable, and its transition.
		f.cycle = filepath.Join(f.dir, "cycles", fmt.Sprintf("c%d", i/benchSteps))
		if err := atomicfile.MkdirAll(f.cycle, 0o755); err != nil {
			b.Fatal(err)
		}
		if err := f.store.Apply(context.Background(), &agentrunner.Change{Events: []*agentrunner.Event{ev}}); err != nil {
			b.Fatal(err)
		}
	}
	att := filepath.Join(f.dir, "attempts", fmt.Sprintf("c%d", i/benchSteps), fmt.Sprintf("s%d-1", i%benchSteps))
	if err := os.MkdirAll(att, 0o755); err != nil {
		b.Fatal(err)
	}
	os.WriteFile(filepath.Join(att, "prompt.md"), f.body, 0o644)
	os.WriteFile(filepath.Join(att, "out.md"), f.body, 0o644)
	os.ReadFile(filepath.Join(att, "out.md"))
	if err := atomicfile.Move(filepath.Join(att, "out.md"), filepath.Join(f.cycle, fmt.Sprintf("out%d.md", i%benchSteps))); err != nil {
		b.Fatal(err)
	}
	if err := f.store.Apply(context.Background(), &agentrunner.Change{Events: []*agentrunner.Event{ev}}); err != nil {
		b.Fatal(err)
	}
}
