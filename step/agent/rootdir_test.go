package agent

import (
	"context"
	"strings"
	"testing"

	"github.com/agentrunner/agentrunner"
)

type runsByID map[string]*agentrunner.Run

func (m runsByID) Run(_ context.Context, id string) (*agentrunner.Run, error) {
	if r, ok := m[id]; ok {
		return r, nil
	}
	return nil, agentrunner.Errorf(agentrunner.ENOTFOUND, "run %s", id)
}

// TestASubAgentsMemoryIsItsLeads: a run without a parent writes under
// its own directory; a child, and a child's child, under the root's.
func TestASubAgentsMemoryIsItsLeads(t *testing.T) {
	runs := runsByID{
		"lead":  {ID: "lead", Dir: "/runs/research/lead"},
		"child": {ID: "child", Dir: "/runs/task/child", Parent: "lead"},
		"grand": {ID: "grand", Dir: "/runs/task/grand", Parent: "child"},
		"orph":  {ID: "orph", Dir: "/runs/task/orph", Parent: "gone"},
		"loop1": {ID: "loop1", Dir: "/x", Parent: "loop2"},
		"loop2": {ID: "loop2", Dir: "/y", Parent: "loop1"},
	}
	for id, want := range map[string]string{"lead": "/runs/research/lead", "child": "/runs/research/lead", "grand": "/runs/research/lead"} {
		if got, err := RootRunDir(context.Background(), runs, runs[id]); err != nil || got != want {
			t.Errorf("%s: %q, %v; want %q", id, got, err, want)
		}
	}
	for id, want := range map[string]string{"orph": "run gone, the parent of orph", "loop1": "more than 64 ancestors"} {
		if _, err := RootRunDir(context.Background(), runs, runs[id]); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v; want an error with %q", id, err, want)
		}
	}
}
