package sqlite

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/agentrunner/agentrunner"
)

// queryPlan is the detail column of EXPLAIN QUERY PLAN of q, one line per
// step.
func queryPlan(t *testing.T, s *Store, q string, args ...any) []string {
	t.Helper()
	rows, err := s.read.QueryContext(context.Background(), "EXPLAIN QUERY PLAN "+q, args...)
	if err != nil {
		t.Fatalf("EXPLAIN QUERY PLAN %s: %v", q, err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var id, parent, notused int
		var detail string
		if err := rows.Scan(&id, &parent, &notused, &detail); err != nil {
			t.Fatal(err)
		}
		out = append(out, detail)
	}
	return out
}

// TestReadsUseIndexes: the queries behind the API's reads (the filters of
// GET /api/events, /api/errors, /api/cycles, /api/audit, /api/tools) use
// the index meant for them and scan no table from its start.
func TestReadsUseIndexes(t *testing.T) {
	s := open(t)
	defer s.Close()
	since := time.Date(2026, 11, 22, 14, 0, 0, 0, time.UTC)
	type query struct {
		name string
		sql  string
		args []any
		// use is what the plan must say, e.g. "USING INDEX events_type".
		use []string
	}
	var qs []query
	for _, tt := range []struct {
		name string
		f    agentrunner.EventFilter
		use  []string
	}{
		{"events by type", agentrunner.EventFilter{Type: "tool.call", Limit: 20}, []string{"INDEX events_type (event_type=? AND id>?)"}},
		{"events by type, a later page", agentrunner.EventFilter{Type: "tool.call", AfterID: 5000, Limit: 20}, []string{"INDEX events_type"}},
		{"warnings and errors", agentrunner.EventFilter{MinLevel: agentrunner.LevelWarn, Limit: 20}, []string{"INDEX events_problems"}},
		{"errors", agentrunner.EventFilter{MinLevel: agentrunner.LevelError, Limit: 20}, []string{"INDEX events_errors"}},
		{"GET /api/errors", agentrunner.EventFilter{MinLevel: agentrunner.LevelWarn, Newest: true, BeforeID: 900, Limit: 20}, []string{"INDEX events_problems"}},
		{"events since a time", agentrunner.EventFilter{Since: since, Limit: 20}, []string{"COVERING INDEX events_time (timestamp>?)", "INTEGER PRIMARY KEY (rowid>?)"}},
		{"events of a type since a time", agentrunner.EventFilter{Type: "tool.call", Since: since, Limit: 20}, []string{"COVERING INDEX events_time (timestamp>?)", "INDEX events_type (event_type=? AND id>?)"}},
		{"events of a step's type", agentrunner.EventFilter{Type: agentrunner.EventTransition, Newest: true, Limit: 20}, []string{"INTEGER PRIMARY KEY (rowid>?)"}},
		{"events of a cycle", agentrunner.EventFilter{CycleID: "20261122_140000", Limit: 20}, []string{"INDEX events_cycle (cycle_id=? AND id>?)"}},
		{"events after an id", agentrunner.EventFilter{AfterID: 100, Limit: 20}, []string{"INTEGER PRIMARY KEY (rowid>?)"}},
		{"the newest event", agentrunner.EventFilter{Newest: true, Limit: 1}, []string{"INTEGER PRIMARY KEY (rowid>?)"}},
	} {
		q, args, err := eventsQuery(tt.f)
		if err != nil {
			t.Fatal(err)
		}
		qs = append(qs, query{tt.name, q, args, tt.use})
	}
	for _, tt := range []struct {
		name string
		f    agentrunner.CycleFilter
		use  []string
	}{
		{"cycles", agentrunner.CycleFilter{Limit: 20}, []string{"SCAN cycles"}},
		{"cycles, a later page", agentrunner.CycleFilter{Before: "20261122_140000", Limit: 20}, []string{"PRIMARY KEY (id<?)"}},
		{"cycles by status", agentrunner.CycleFilter{Status: agentrunner.CycleFailed, Before: "20261122_140000", Limit: 20}, []string{"INDEX cycles_status (status=? AND id<?)"}},
	} {
		q, args := cyclesQuery(tt.f)
		qs = append(qs, query{tt.name, q, args, tt.use})
	}
	qs = append(qs,
		query{"audit page", `SELECT ` + commandColumns + ` FROM commands ` + sqlCommandsPage, []any{100, 20}, []string{"INTEGER PRIMARY KEY (rowid<?)"}},
		query{"tool usage of all time", sqlToolTotals, nil, []string{"SCAN tool_usage_totals"}},
		query{"tool usage since", sqlToolHours, []any{"2026-11-22T14"}, []string{"PRIMARY KEY (hour>?)"}},
	)
	for _, q := range qs {
		plan := queryPlan(t, s, q.sql, q.args...)
		all := strings.Join(plan, "\n")
		for _, want := range q.use {
			if !strings.Contains(all, want) {
				t.Errorf("%s: the plan does not use %q:\n%s", q.name, want, all)
			}
		}
		for _, step := range plan {
			// A scan of a table is a full read, except the newest-first
			// walks of a primary key that stop at the limit (cycles) and
			// the tool totals, one row per tool.
			if strings.HasPrefix(step, "SCAN ") && step != "SCAN cycles" && step != "SCAN tool_usage_totals" {
				t.Errorf("%s: a full scan: %q\n%s", q.name, step, all)
			}
			if strings.Contains(step, "TEMP B-TREE") && !strings.Contains(q.name, "tool usage since") {
				t.Errorf("%s: the rows are sorted, not read in index order: %q\n%s", q.name, step, all)
			}
		}
	}
}

// TestTypeIndexConditionIsTheQuerys: SQLite uses the partial index
// events_type only for a query that states its condition word for word.
func TestTypeIndexConditionIsTheQuerys(t *testing.T) {
	data, err := migrations.ReadFile("migrations/0007_type_index_without_step_events.sql")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(data), "WHERE "+sqlNotStepEvent+";") {
		t.Errorf("migration 0007 does not word the index's condition as sqlNotStepEvent does:\n%s", data)
	}
	for _, typ := range stepEventTypes {
		if !strings.Contains(sqlNotStepEvent, "'"+typ+"'") {
			t.Errorf("sqlNotStepEvent leaves out %s", typ)
		}
	}
}
