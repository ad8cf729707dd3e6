package memory_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentrunner/agentrunner"
	"github.com/agentrunner/agentrunner/internal/clocktest"
	"github.com/agentrunner/agentrunner/memory"
	"github.com/agentrunner/agentrunner/sqlite"
)

// newLog is a Log on a real store, the memory files under dir.
func newLog(t *testing.T, dir string, faults func(string) error) (*memory.Log, *sqlite.Store) {
	t.Helper()
	st, err := sqlite.Open(context.Background(), filepath.Join(dir, "state.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	l, err := memory.NewLog(st, memory.LogOptions{
		Path:   func(agent string) string { return filepath.Join(dir, agent, "memory.md") },
		Clock:  clocktest.New(time.Date(2026, 11, 27, 9, 30, 0, 0, time.UTC)),
		Faults: faults,
	})
	if err != nil {
		t.Fatal(err)
	}
	return l, st
}

func read(t *testing.T, path string) string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

func TestAppendGoesToTheStoreAndTheFileAndSearchFindsIt(t *testing.T) {
	dir := t.TempDir()
	l, _ := newLog(t, dir, nil)
	ctx := context.Background()
	if _, err := l.Append(ctx, agentrunner.MemoryEntry{Agent: "plan", RunID: "20261127_090000", Step: "plan", Text: "BTC funding turned negative twice before a rally."}); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Append(ctx, agentrunner.MemoryEntry{Agent: "research", Text: "The exchange API rate-limits at 10 requests per second."}); err != nil {
		t.Fatal(err)
	}
	want := "# Memory of plan\n\n<!-- memory:1 -->\n### 2026-11-27 09:30 UTC, cycle 20261127_090000 step plan\n\nBTC funding turned negative twice before a rally.\n"
	if got := read(t, filepath.Join(dir, "plan", "memory.md")); got != want {
		t.Errorf("plan/memory.md:\n%s\nwant:\n%s", got, want)
	}
	hits, err := l.Search(ctx, "rally", nil, 0)
	if err != nil || len(hits) != 1 || hits[0].Entry.Agent != "plan" || !strings.Contains(hits[0].Snippet, "«rally»") {
		t.Fatalf("search rally: %+v, %v", hits, err)
	}
	// Across agents by default; limited to the agents named.
	if hits, _ := l.Search(ctx, "requests OR funding", nil, 0); len(hits) != 2 {
		t.Errorf("a search of every agent found %d entries, want 2", len(hits))
	}
	if hits, _ := l.Search(ctx, "requests OR funding", []string{"research"}, 0); len(hits) != 1 || hits[0].Entry.Agent != "research" {
		t.Errorf("a search of research's memory: %+v", hits)
	}
}

func TestBadInputIsRefusedSayingWhy(t *testing.T) {
	l, _ := newLog(t, t.TempDir(), nil)
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		do   func() error
		want string
	}{
		{"empty text", func() error { _, err := l.Append(ctx, agentrunner.MemoryEntry{Agent: "plan", Text: "  "}); return err }, "text is empty"},
		{"too long", func() error {
			_, err := l.Append(ctx, agentrunner.MemoryEntry{Agent: "plan", Text: strings.Repeat("x", memory.MaxEntryChars+1)})
			return err
		}, "more than 8000"},
		{"a query FTS cannot parse", func() error { _, err := l.Search(ctx, `"unbalanced`, nil, 0); return err }, "double quotes"},
		{"empty query", func() error { _, err := l.Search(ctx, " ", nil, 0); return err }, "query is empty"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.do()
			if err == nil || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "SQL") {
				t.Errorf("%v, want an error saying %q and nothing of SQL", err, tc.want)
			}
		})
	}
}

// TestAnEntryTheFileMissedIsAddedOnce: the file write fails after the
// commit (as a crash there would leave it); the next Sync adds the entry,
// once, and a Sync after it changes nothing.
func TestAnEntryTheFileMissedIsAddedOnce(t *testing.T) {
	dir := t.TempDir()
	fail := true
	l, _ := newLog(t, dir, func(op string) error {
		if op == memory.OpWriteFile && fail {
			return errors.New("disk full")
		}
		return nil
	})
	ctx := context.Background()
	l.Append(ctx, agentrunner.MemoryEntry{Agent: "plan", Text: "first"})
	e, err := l.Append(ctx, agentrunner.MemoryEntry{Agent: "plan", Text: "second"})
	if e == nil || err == nil || !strings.Contains(err.Error(), "is stored") {
		t.Fatalf("append with the file write failing: %+v, %v; want the entry, and an error saying it is stored", e, err)
	}
	path := filepath.Join(dir, "plan", "memory.md")
	if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the memory file exists after failed writes: %v", err)
	}
	fail = false
	for range 2 {
		if err := l.Sync(ctx, "plan"); err != nil {
			t.Fatal(err)
		}
	}
	got := read(t, path)
	if strings.Count(got, "<!-- memory:1 -->") != 1 || strings.Count(got, "<!-- memory:2 -->") != 1 || strings.Index(got, "first") > strings.Index(got, "second") {
		t.Errorf("the memory file after Sync:\n%s\nwant entries 1 and 2 once each, in order", got)
	}
}
