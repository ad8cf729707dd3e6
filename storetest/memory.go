package storetest

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/agentrunner/agentrunner"
	"github.com/google/go-cmp/cmp"
)

// memoryTests are the cases of the agents' memory entries.
var memoryTests = []struct {
	name string
	fn   func(t *testing.T, s agentrunner.Store)
}{
	{"MemoryEntriesInOrderAfterAnID", testMemoryEntries},
	{"MemorySearchRanksAndFilters", testMemorySearch},
	{"MemorySearchRefusesABadQuery", testMemorySearchBadQuery},
}

func appendMemory(t *testing.T, s agentrunner.Store, agent, text string) *agentrunner.MemoryEntry {
	t.Helper()
	e, err := s.AppendMemory(context.Background(), &agentrunner.MemoryEntry{Agent: agent, RunID: "run-1", Step: "plan", Attempt: 1, Text: text,
		CreatedAt: time.Date(2026, 11, 27, 9, 0, 0, 0, time.UTC)})
	if err != nil {
		t.Fatal(err)
	}
	return e
}

func testMemoryEntries(t *testing.T, s agentrunner.Store) {
	a := appendMemory(t, s, "plan", "first")
	appendMemory(t, s, "research", "other agent")
	b := appendMemory(t, s, "plan", "second")
	c := appendMemory(t, s, "plan", "third")
	if a.ID <= 0 || !(a.ID < b.ID && b.ID < c.ID) || a.Agent != "plan" || a.Step != "plan" || a.Attempt != 1 || !a.CreatedAt.Equal(time.Date(2026, 11, 27, 9, 0, 0, 0, time.UTC)) {
		t.Fatalf("appended %+v, %+v, %+v", a, b, c)
	}
	texts := func(after int64, limit int) []string {
		es, err := s.MemoryEntries(context.Background(), "plan", after, limit)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, e := range es {
			out = append(out, e.Text)
		}
		return out
	}
	for _, tc := range []struct {
		after int64
		limit int
		want  []string
	}{{0, 0, []string{"first", "second", "third"}}, {a.ID, 0, []string{"second", "third"}}, {0, 2, []string{"first", "second"}}, {c.ID, 0, nil}} {
		if d := cmp.Diff(tc.want, texts(tc.after, tc.limit)); d != "" {
			t.Errorf("entries after %d, limit %d (-want +got):\n%s", tc.after, tc.limit, d)
		}
	}
}

func testMemorySearch(t *testing.T, s agentrunner.Store) {
	appendMemory(t, s, "plan", "The funding rate flipped negative, then a long squeeze followed in two days.")
	dense := appendMemory(t, s, "research", "Funding, funding, funding.")
	appendMemory(t, s, "research", "Nothing about money here.")
	ctx := context.Background()
	hits, err := s.SearchMemory(ctx, "funding", nil, 0)
	if err != nil || len(hits) != 2 || hits[0].Entry.ID != dense.ID || !strings.Contains(hits[0].Snippet, "«Funding»") {
		t.Fatalf("search funding: %+v, %v; want the densest entry first, with a snippet", hits, err)
	}
	if hits, _ := s.SearchMemory(ctx, "funding", []string{"plan"}, 0); len(hits) != 1 || hits[0].Entry.Agent != "plan" {
		t.Errorf("search of plan's memory: %+v", hits)
	}
	if hits, _ := s.SearchMemory(ctx, "squeezes", nil, 0); len(hits) != 1 {
		t.Errorf("search by stem found %d entries, want 1", len(hits))
	}
	if hits, _ := s.SearchMemory(ctx, "funding", nil, 1); len(hits) != 1 {
		t.Errorf("limit 1 gave %d hits", len(hits))
	}
}

func testMemorySearchBadQuery(t *testing.T, s agentrunner.Store) {
	appendMemory(t, s, "plan", "text")
	_, err := s.SearchMemory(context.Background(), `"unbalanced`, nil, 0)
	if agentrunner.ErrorCode(err) != agentrunner.EINVALID || strings.Contains(err.Error(), "SQL") || strings.Contains(err.Error(), "fts5") {
		t.Errorf("a bad query: %v, want EINVALID saying how to quote, nothing of SQL", err)
	}
}
