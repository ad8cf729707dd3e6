package historytest

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/agentrunner/agentrunner"
	"github.com/agentrunner/agentrunner/sqlite"
	"github.com/google/go-cmp/cmp"
)

// TestBuildCopiesFaithfully: a copied cycle is its original a thousand
// hours later, with its own id, and the tool usage summary counts the
// copies' calls as the store counts the originals'.
func TestBuildCopiesFaithfully(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a history of 2000 cycles")
	}
	ctx := context.Background()
	h, err := Build(ctx, t.TempDir(), 2000)
	if err != nil {
		t.Fatal(err)
	}
	s, err := sqlite.Open(ctx, h.Path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for _, i := range []int{0, 49, 999} {
		orig, copied := CycleID(i), CycleID(i+baseCycles)
		c, err := s.Cycle(ctx, copied)
		if err != nil {
			t.Fatalf("cycle %d: %v", i+baseCycles, err)
		}
		o, _ := s.Cycle(ctx, orig)
		o.ID, o.Dir = copied, strings.ReplaceAll(o.Dir, orig, copied)
		o.StartedAt, o.EndedAt = o.StartedAt.Add(baseCycles*time.Hour), o.EndedAt.Add(baseCycles*time.Hour)
		if diff := cmp.Diff(o, c); diff != "" {
			t.Errorf("cycle %d (-shifted original +copy):\n%s", i+baseCycles, diff)
		}
		oe, _ := s.Events(ctx, agentrunner.EventFilter{CycleID: orig})
		ce, _ := s.Events(ctx, agentrunner.EventFilter{CycleID: copied})
		if len(oe) < 40 || len(oe) != len(ce) {
			t.Fatalf("cycle %d: %d events, its copy %d", i, len(oe), len(ce))
		}
		for k := range oe {
			want := *oe[k]
			want.ID, want.CycleID, want.Timestamp = ce[k].ID, copied, want.Timestamp.Add(baseCycles*time.Hour)
			for k, v := range want.Details {
				if v, ok := v.(string); ok {
					want.Details[k] = strings.ReplaceAll(v, orig, copied)
				}
			}
			if diff := cmp.Diff(&want, ce[k]); diff != "" {
				t.Errorf("cycle %d, event %d (-shifted original +copy):\n%s", i, k, diff)
			}
		}
	}
	calls, err := s.Events(ctx, agentrunner.EventFilter{Type: agentrunner.EventToolCall})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]int{}
	for _, e := range calls {
		tool, _, _, _ := agentrunner.ToolCallOf(e)
		want[tool]++
	}
	usage, err := s.ToolUsage(ctx, time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]int{}
	for _, u := range usage {
		got[u.Tool] = u.Calls
	}
	if diff := cmp.Diff(want, got); diff != "" || len(calls) != 2000*8 {
		t.Errorf("%d tool calls; summary (-events +summary):\n%s", len(calls), diff)
	}
	last, _ := s.ToolUsage(ctx, CycleStart(1999))
	if len(last) != 3 || last[0].Calls+last[1].Calls+last[2].Calls != 8 {
		t.Errorf("usage of the last cycle's hour: %+v, want its 8 calls", last)
	}
}
