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
	"github.com/agentrunner/agentrunner/sqlite"
)

// BenchmarkDurabilityFloor does only the file-system and database work one
// step cannot avoid, without the engine: create the attempt folder, write
// the prompt and the agent's output, publish the artifact (fsync, rename,
// fsync the directory) and commit one event to SQLite with
// synchronous=FULL. BenchmarkStep minus this is the engine's own cost.
func BenchmarkDurabilityFloor(b *testing.B) {
	dir := benchDir(b)
	store, err := sqlite.Open(context.Background(), filepath.Join(dir, "state.db"))
	if err != nil {
		b.Fatal(err)
	}
	defer store.Close()
	body := make([]byte, 400)
	for i := range body {
		body[i] = 'x'
	}
	cycle := filepath.Join(dir, "cycles", "c")
	os.MkdirAll(cycle, 0o755)
	user0, sys0 := cpuTime()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		att := filepath.Join(dir, "attempts", fmt.Sprintf("s%d", i/10), fmt.Sprintf("step-%d", i%10))
		if err := os.MkdirAll(att, 0o755); err != nil {
			b.Fatal(err)
		}
		os.WriteFile(filepath.Join(att, "prompt.md"), body, 0o644)
		os.WriteFile(filepath.Join(att, "out.md"), body, 0o644)
		os.ReadFile(filepath.Join(att, "out.md"))
		if err := atomicfile.Move(filepath.Join(att, "out.md"), filepath.Join(cycle, fmt.Sprintf("out%d.md", i%10))); err != nil {
			b.Fatal(err)
		}
		ev := &agentrunner.Event{Timestamp: time.Now(), Type: "x", Level: agentrunner.LevelInfo}
		if err := store.Apply(context.Background(), &agentrunner.Change{Events: []*agentrunner.Event{ev}}); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	user1, sys1 := cpuTime()
	b.ReportMetric(float64(user1-user0)/float64(b.N), "user-ns/step")
	b.ReportMetric(float64(sys1-sys0)/float64(b.N), "sys-ns/step")
	b.ReportMetric(float64(user1-user0+sys1-sys0)/float64(b.N), "cpu-ns/step")
}
