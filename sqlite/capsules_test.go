package sqlite

import (
	"context"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/agentrunner/agentrunner"
)

var capsuleT0 = time.Date(2026, 11, 22, 14, 0, 0, 0, time.UTC)

// TestCapsuleSearchSyntax: a query the full-text index parses is
// searched; one it cannot parse is EINVALID, without SQLite's words, and
// the query its message suggests is one it parses.
func TestCapsuleSearchSyntax(t *testing.T) {
	s := open(t)
	defer s.Close()
	ctx := context.Background()
	if _, err := s.PutCapsule(ctx, &agentrunner.Capsule{Workspace: "w", Name: "handoff", Tags: []string{"foo-bar"},
		Text: "Tune the scheduler in sqlite/store.go", CreatedAt: capsuleT0}, false); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		query string
		hits  int // -1: EINVALID
	}{
		{"scheduler", 1},
		{"sched*", 1},
		{"name:handoff", 1},
		{"^tune", 1},
		{"tune NOT scheduler", 0},
		{"NEAR(tune scheduler, 3)", 1},
		{`"foo-bar"`, 1},
		{`"sqlite/store.go"`, 1},
		{"foo-bar", -1},
		{"sqlite/store.go", -1},
		{"c++", -1},
		{"what?", -1},
		{"nosuch: tune", -1},
		{`"unterminated`, -1},
		{`say "hi`, -1},
		{"NEAR(tune scheduler", -1},
		{"(tune", -1},
		{"tune AND", -1},
		{"*", -1},
		{"-", -1},
	} {
		hits, err := s.SearchCapsules(ctx, tt.query, agentrunner.CapsuleFilter{})
		if tt.hits >= 0 {
			if err != nil || len(hits) != tt.hits {
				t.Errorf("search %q = %d hits, %v; want %d", tt.query, len(hits), err, tt.hits)
			}
			continue
		}
		if agentrunner.ErrorCode(err) != agentrunner.EINVALID {
			t.Errorf("search %q: %v, want EINVALID", tt.query, err)
			continue
		}
		msg := agentrunner.ErrorMessage(err)
		if strings.Contains(msg, "SQL logic error") || strings.Contains(strings.ToLower(msg), "fts5") || !strings.Contains(msg, "double quotes") {
			t.Errorf("search %q: message %q", tt.query, msg)
		}
		suggested := quoteWords(tt.query)
		if !strings.Contains(msg, fmt.Sprintf("%q", suggested)) {
			t.Errorf("search %q: message %q does not suggest %s", tt.query, msg, suggested)
		}
		if _, err := s.SearchCapsules(ctx, suggested, agentrunner.CapsuleFilter{}); err != nil {
			t.Errorf("the suggested query %s: %v", suggested, err)
		}
	}
}

// TestCapsuleIndexStaysInStep: after puts, upserts, updates, bulk
// changes and deletes, the full-text index holds exactly what the
// capsules table does (FTS5's integrity check compares the two).
func TestCapsuleIndexStaysInStep(t *testing.T) {
	s := open(t)
	defer s.Close()
	ctx := context.Background()
	var ids []int64
	for i := range 20 {
		c, err := s.PutCapsule(ctx, &agentrunner.Capsule{Workspace: fmt.Sprintf("w%d", i%2), Name: fmt.Sprintf("c%d", i),
			Tags: []string{"t" + fmt.Sprint(i%3)}, Text: fmt.Sprintf("capsule %d of the scheduler", i), CreatedAt: capsuleT0}, false)
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, c.ID)
	}
	at := capsuleT0.Add(time.Hour)
	if _, err := s.PutCapsule(ctx, &agentrunner.Capsule{Workspace: "w0", Name: "c0", Text: "replaced by the mailbox", CreatedAt: at}, true); err != nil {
		t.Fatal(err)
	}
	if _, err := s.UpdateCapsule(ctx, &agentrunner.Capsule{ID: ids[1], Text: "updated backup", Tags: []string{"new"}, UpdatedAt: at}, 1); err != nil {
		t.Fatal(err)
	}
	tags := []string{"bulk", "tags"}
	phase := "review"
	if _, err := s.UpdateCapsules(ctx, agentrunner.CapsuleFilter{Tag: "t2"}, agentrunner.CapsuleChanges{Tags: &tags, Phase: &phase}, at); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteCapsule(ctx, ids[3], at); err != nil {
		t.Fatal(err)
	}
	if _, err := s.DeleteCapsules(ctx, agentrunner.CapsuleFilter{Workspace: "w1", Tag: "t0"}, at); err != nil {
		t.Fatal(err)
	}
	err := s.inTx(ctx, func(ctx context.Context, w *writer) (bool, error) {
		_, err := w.exec(ctx, `INSERT INTO capsules_fts (capsules_fts, rank) VALUES ('integrity-check', 1)`)
		return false, err
	})
	if err != nil {
		t.Errorf("full-text index out of step with the capsules: %v", err)
	}
	for query, want := range map[string]int{"scheduler": 18, "mailbox": 1, "backup": 1, "bulk": 6, "t2": 0} {
		hits, err := s.SearchCapsules(ctx, query, agentrunner.CapsuleFilter{IncludeDeleted: true})
		if err != nil || len(hits) != want {
			t.Errorf("search %q = %d hits, %v; want %d", query, len(hits), err, want)
		}
	}
}

// TestCapsuleQueriesUseIndexes: the lists by workspace and run and the
// inventory read their indexes, and a search starts from the full-text
// index.
func TestCapsuleQueriesUseIndexes(t *testing.T) {
	s := open(t)
	defer s.Close()
	type build func() (string, []any)
	fixed := func(q string, args ...any) build { return func() (string, []any) { return q, args } }
	list := func(f agentrunner.CapsuleFilter) build { return func() (string, []any) { return capsulesQuery(f) } }
	search := func(f agentrunner.CapsuleFilter) build {
		return func() (string, []any) { return searchQuery("tune", f) }
	}
	for _, tt := range []struct {
		name  string
		query build
		use   string
	}{
		{"by name", fixed(sqlCapsuleByName, "w", "n"), "INDEX capsules_live_name (workspace=? AND name=?)"},
		{"inventory", fixed(sqlCapsuleInventory), "COVERING INDEX capsules_live_kind"},
		{"all", list(agentrunner.CapsuleFilter{}), "SCAN c"},
		{"a page", list(agentrunner.CapsuleFilter{Before: 500}), "INTEGER PRIMARY KEY (rowid<?)"},
		{"workspace", list(agentrunner.CapsuleFilter{Workspace: "w"}), "INDEX capsules_workspace (workspace=?)"},
		{"workspace with the deleted", list(agentrunner.CapsuleFilter{Workspace: "w", IncludeDeleted: true}), "INDEX capsules_workspace (workspace=?)"},
		{"workspace, a page", list(agentrunner.CapsuleFilter{Workspace: "w", Before: 500}), "INDEX capsules_workspace (workspace=? AND id<?)"},
		{"run", list(agentrunner.CapsuleFilter{RunID: "r"}), "INDEX capsules_run (run_id=?)"},
		{"search", search(agentrunner.CapsuleFilter{Workspace: "w"}), "VIRTUAL TABLE INDEX"},
	} {
		q, args := tt.query()
		plan := queryPlan(t, s, q, args...)
		if !slices.ContainsFunc(plan, func(step string) bool { return strings.Contains(step, tt.use) }) {
			t.Errorf("%s: plan %q does not use %s", tt.name, plan, tt.use)
		}
		// The lists come in id order from their index; a search sorts
		// its hits by rank.
		if tt.name != "search" && slices.ContainsFunc(plan, func(step string) bool { return strings.Contains(step, "TEMP B-TREE") }) {
			t.Errorf("%s: plan sorts: %q", tt.name, plan)
		}
	}
}

// BenchmarkCapsuleSearch searches 10,000 capsules whose texts are drawn
// from a vocabulary of 2,000 words, so that a word is in about 300 of
// them, and reports the median and 99th percentile of a search's
// latency.
//
//	go test -run '^$' -bench CapsuleSearch -benchtime 200x ./sqlite/
func BenchmarkCapsuleSearch(b *testing.B) {
	ctx := context.Background()
	s, err := Open(ctx, filepath.Join(b.TempDir(), "state.db"))
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	vocab := benchVocabulary(2000)
	rng := rand.New(rand.NewPCG(1, 2))
	words := func(n int) string {
		ws := make([]string, n)
		for i := range ws {
			ws[i] = vocab[rng.IntN(len(vocab))]
		}
		return strings.Join(ws, " ")
	}
	const capsules, workspaces = 10000, 10
	start := time.Now()
	// PutCapsule's writes in one transaction: a commit each, 10,000
	// syncs, would take about ten times as long.
	err = s.inTx(ctx, func(ctx context.Context, w *writer) (bool, error) {
		for i := range capsules {
			var text strings.Builder
			for j, sec := range agentrunner.CapsuleSections {
				fmt.Fprintf(&text, "## %s\n\n%s.\n\n", sec, words(max(6, 15-j*2)))
			}
			at := capsuleT0.Add(time.Duration(i) * time.Second)
			c := &agentrunner.Capsule{Workspace: fmt.Sprintf("ws%d", i%workspaces), Name: fmt.Sprintf("capsule-%05d", i),
				RunID: fmt.Sprintf("run%d", i/10), Phase: []string{"plan", "build", "review"}[i%3], Role: []string{"lead", "worker"}[i%2],
				Tags: []string{vocab[rng.IntN(len(vocab))]}, Text: text.String(), CreatedAt: at, UpdatedAt: at}
			if _, err := w.putCapsule(ctx, c, false); err != nil {
				return false, err
			}
		}
		return true, nil
	})
	if err != nil {
		b.Fatal(err)
	}
	b.Logf("seeded %d capsules in %v", capsules, time.Since(start).Round(time.Millisecond))
	terms := vocab[:50]
	for _, bb := range []struct {
		name  string
		query func(i int) string
		f     agentrunner.CapsuleFilter
	}{
		{"term", func(i int) string { return terms[i%len(terms)] }, agentrunner.CapsuleFilter{}},
		{"two-terms", func(i int) string { return terms[i%len(terms)] + " OR " + terms[(i+1)%len(terms)] }, agentrunner.CapsuleFilter{}},
		{"term-in-workspace", func(i int) string { return terms[i%len(terms)] }, agentrunner.CapsuleFilter{Workspace: "ws3"}},
	} {
		b.Run(bb.name, func(b *testing.B) {
			// Untimed: the first searches prepare the statement.
			for i := range 8 {
				if _, err := s.SearchCapsules(ctx, bb.query(i), bb.f); err != nil {
					b.Fatal(err)
				}
			}
			lat := make([]time.Duration, b.N)
			hits := 0
			b.ResetTimer()
			for i := range b.N {
				t := time.Now()
				hs, err := s.SearchCapsules(ctx, bb.query(i), bb.f)
				lat[i] = time.Since(t)
				if err != nil {
					b.Fatal(err)
				}
				hits += len(hs)
			}
			b.StopTimer()
			slices.Sort(lat)
			b.ReportMetric(float64(lat[len(lat)/2].Nanoseconds()), "p50-ns")
			b.ReportMetric(float64(lat[min(len(lat)-1, len(lat)*99/100)].Nanoseconds()), "p99-ns")
			b.ReportMetric(float64(hits)/float64(b.N), "hits/op")
		})
	}
}

// benchVocabulary is n made-up words of two or three syllables, all
// different, in the same order every time.
func benchVocabulary(n int) []string {
	var syllables []string
	for _, c := range "bdfgklmnprstvz" {
		for _, v := range "aeiou" {
			syllables = append(syllables, string(c)+string(v))
		}
	}
	words := make([]string, n)
	for i := range words {
		k := len(syllables)
		words[i] = syllables[i%k] + syllables[(i/k)%k] + "r" + syllables[(i*7+3)%k]
	}
	return words
}
