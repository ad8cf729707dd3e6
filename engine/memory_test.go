package engine

import (
	"context"
	"os"
	"strings"
	"testing"

	"github.com/agentrunner/agentrunner"
	"github.com/agentrunner/agentrunner/execsvc"
)

// TestAnAgentReadsTheMemoryEntriesItsFileMissed: an entry committed to
// the store whose file write a crash cut off (here: an entry put in the
// store directly) is in the memory file before the agent reads it, after
// the template the file starts with.
func TestAnAgentReadsTheMemoryEntriesItsFileMissed(t *testing.T) {
	f := newFixture(t, execsvc.MockOptions{CompletedAfter: 1}, nil)
	ctx := context.Background()
	if _, err := f.store.AppendMemory(ctx, &agentrunner.MemoryEntry{Agent: "plan", Text: "Funding flipped negative before the last rally.", CreatedAt: t0}); err != nil {
		t.Fatal(err)
	}
	c := f.runOnce(f.engine())
	if c.Status != agentrunner.CycleCompleted {
		t.Fatalf("cycle %s: %s", c.Status, c.Error)
	}
	mem, err := os.ReadFile(f.ws.Layout.Memory("plan"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(string(mem), string(f.ws.Memory("plan"))) || strings.Count(string(mem), "<!-- memory:1 -->\n") != 1 || !strings.Contains(string(mem), "Funding flipped negative") {
		t.Errorf("plan/memory.md:\n%s\nwant the template, then entry 1 once", mem)
	}
	prompt := f.stored(c.ID, "plan", 1, agentrunner.FilePrompt)
	if !strings.Contains(prompt, f.ws.Layout.Memory("plan")) {
		t.Errorf("the plan prompt does not give the memory file")
	}
}
