package sqlite

import (
	"context"
	"slices"
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
// GET /api/events, /api/errors, /api/cycles, /api/audit, /api/tools), the
// lists of runs and step runs and the loop's guard use the index meant for
// them and scan no table from its start.
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
		// allow are steps that would fail the checks below but read a
		// bounded set of rows.
		allow []string
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
		{"events since a time", agentrunner.EventFilter{Since: since, Limit: 20}, []string{"SEARCH event_minutes USING PRIMARY KEY (minute>?)", "INTEGER PRIMARY KEY (rowid>?)"}},
		{"events of a type since a time", agentrunner.EventFilter{Type: "tool.call", Since: since, Limit: 20}, []string{"SEARCH event_minutes USING PRIMARY KEY (minute>?)", "INDEX events_type (event_type=? AND id>?)"}},
		{"events of a step's type", agentrunner.EventFilter{Type: agentrunner.EventTransition, Newest: true, Limit: 20}, []string{"INTEGER PRIMARY KEY (rowid>?)"}},
		{"events of a cycle", agentrunner.EventFilter{CycleID: "20261122_140000", Limit: 20}, []string{"INDEX events_cycle (cycle_id=? AND id>?)"}},
		{"events after an id", agentrunner.EventFilter{AfterID: 100, Limit: 20}, []string{"INTEGER PRIMARY KEY (rowid>?)"}},
		{"the newest event", agentrunner.EventFilter{Newest: true, Limit: 1}, []string{"INTEGER PRIMARY KEY (rowid>?)"}},
	} {
		q, args, err := eventsQuery(tt.f)
		if err != nil {
			t.Fatal(err)
		}
		qs = append(qs, query{tt.name, q, args, tt.use, nil})
	}
	for _, tt := range []struct {
		name string
		f    agentrunner.RunFilter
		use  []string
	}{
		{"cycles", agentrunner.RunFilter{Limit: 20}, []string{"SCAN runs"}},
		{"cycles, a later page", agentrunner.RunFilter{Before: "20261122_140000", Limit: 20}, []string{"PRIMARY KEY (id<?)"}},
		{"cycles by status", agentrunner.RunFilter{Status: agentrunner.CycleFailed, Before: "20261122_140000", Limit: 20}, []string{"INDEX runs_status (status=? AND id<?)"}},
		{"runs of a pipeline", agentrunner.RunFilter{Pipeline: "review", Limit: 20}, []string{"INDEX runs_pipeline (pipeline=?)"}},
		{"runs of a pipeline, a later page", agentrunner.RunFilter{Pipeline: "review", Before: "review-000100", Limit: 20}, []string{"INDEX runs_pipeline (pipeline=? AND id<?)"}},
		{"runs of a pipeline by status", agentrunner.RunFilter{Pipeline: "review", Status: agentrunner.RunQueued, Limit: 20}, []string{"(pipeline=? AND status=?)"}},
		{"runs of a pipeline by a finished status", agentrunner.RunFilter{Pipeline: "review", Status: agentrunner.RunCompleted, Limit: 20}, []string{"INDEX runs_pipeline_status (pipeline=? AND status=?)"}},
		{"unfinished runs", agentrunner.RunFilter{Unfinished: true}, []string{"SCAN runs USING INDEX runs_unfinished"}},
		{"unfinished runs of a pipeline", agentrunner.RunFilter{Pipeline: "review", Unfinished: true, Limit: 50}, []string{"SCAN runs USING INDEX runs_unfinished"}},
		{"running runs of a pipeline", agentrunner.RunFilter{Pipeline: "review", Status: agentrunner.RunRunning, Unfinished: true}, []string{"(pipeline=? AND status=?)"}},
	} {
		q, args := runsQuery(tt.f)
		// The walk of runs_unfinished reads the runs in flight only.
		qs = append(qs, query{tt.name, q, args, tt.use, []string{"SCAN runs USING INDEX runs_unfinished"}})
	}
	for _, tt := range []struct {
		name  string
		f     agentrunner.StepRunFilter
		use   []string
		allow []string
	}{
		// A run's step runs, a handful, are sorted into the order they
		// were opened.
		{"step runs of a run", agentrunner.StepRunFilter{RunID: "review-000001"}, []string{"INDEX sqlite_autoindex_step_runs_1 (run_id=?)"}, []string{"USE TEMP B-TREE FOR ORDER BY"}},
		{"waiting step runs", agentrunner.StepRunFilter{Status: agentrunner.StepRunWaiting, Limit: 100}, []string{"INDEX step_runs_waiting (status=?)"}, nil},
		{"waiting step runs of a run", agentrunner.StepRunFilter{RunID: "review-000001", Status: agentrunner.StepRunWaiting}, []string{"INDEX "}, []string{"USE TEMP B-TREE FOR ORDER BY"}},
	} {
		q, args := stepRunsQuery(tt.f)
		qs = append(qs, query{tt.name, q, args, tt.use, tt.allow})
	}
	for _, tt := range []struct {
		name  string
		f     agentrunner.FileFilter
		allow []string
	}{
		{"the current artifact of a run", agentrunner.FileFilter{RunID: "review-000001", Kind: agentrunner.FileArtifact, Name: "review.md", Latest: true}, nil},
		// The prompts of a run, a few per step, are sorted.
		{"the prompt of an attempt", agentrunner.FileFilter{RunID: "review-000001", Step: "review", Attempt: 2, Kind: agentrunner.FilePrompt},
			[]string{"USE TEMP B-TREE FOR ORDER BY"}},
	} {
		q, args := filesQuery(tt.f)
		qs = append(qs, query{tt.name, q, args, []string{"INDEX files_by_run (run_id=? AND kind=?"}, tt.allow})
	}
	qs = append(qs,
		// GET /api/status's counts read the runs in flight's index alone,
		// in its order (no sort for the grouping), and the waiting gates'
		// entries of step_runs_waiting.
		query{"unfinished run counts", sqlRunCounts, nil, []string{"SCAN runs USING COVERING INDEX runs_unfinished_counts"},
			[]string{"SCAN runs USING COVERING INDEX runs_unfinished_counts"}},
		// The metrics' totals of every run read the covering index of
		// pipeline and status alone, in its order.
		query{"run totals", sqlRunTotals, nil, []string{"SCAN runs USING COVERING INDEX runs_pipeline_status"},
			[]string{"SCAN runs USING COVERING INDEX runs_pipeline_status"}},
		query{"waiting gate count", sqlWaitingGates, nil, []string{"SEARCH step_runs USING COVERING INDEX step_runs_waiting (status=?)"}, nil},
		query{"audit page", `SELECT ` + commandColumns + ` FROM commands ` + sqlCommandsPage, []any{100, 20}, []string{"INTEGER PRIMARY KEY (rowid<?)"}, nil},
		query{"tool usage of all time", sqlToolTotals, nil, []string{"SCAN tool_usage_totals"}, nil},
		query{"tool usage since", sqlToolHours, []any{"2026-11-22T14"}, []string{"PRIMARY KEY (hour>?)"}, nil},
		query{"the unfinished cycle of a pipeline", `SELECT ` + runColumns + ` FROM runs WHERE ` + sqlUnfinishedSerial, []any{"crypton"},
			[]string{"INDEX runs_"}, nil},
		// The guard of a change of a pipeline, or of a run's pipeline: the
		// name is one row (the constant row and its materialized copy).
		query{"the state of a pipeline", sqlState, []any{"crypton", nil},
			[]string{"INDEX runs_pipeline_status (pipeline=? AND status=?)", "PRIMARY KEY (id=?)", "COVERING INDEX runs_pipeline_status (pipeline=?)"},
			[]string{"SCAN CONSTANT ROW", "SCAN p"}},
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
			if slices.Contains(q.allow, step) {
				continue
			}
			// A scan of a table is a full read, except the newest-first
			// walks of a primary key that stop at the limit (runs) and
			// the tool totals, one row per tool.
			if strings.HasPrefix(step, "SCAN ") && step != "SCAN runs" && step != "SCAN tool_usage_totals" {
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

// TestRunTotals: every run is counted by pipeline and status, finished or
// not, ordered by both.
func TestRunTotals(t *testing.T) {
	s := open(t)
	defer s.Close()
	t0 := time.Date(2026, 11, 24, 0, 0, 0, 0, time.UTC)
	run := func(id, pipeline string, status agentrunner.RunStatus) *agentrunner.Run {
		r := &agentrunner.Run{ID: id, Pipeline: pipeline, Status: status, Dir: t.TempDir(), StartedAt: t0}
		if status.Finished() {
			r.EndedAt = t0.Add(time.Minute)
		}
		return r
	}
	if err := s.ApplyAll(context.Background(), &agentrunner.Change{Runs: []*agentrunner.Run{
		run("b-000001", "b", agentrunner.RunCompleted), run("a-000001", "a", agentrunner.RunFailed),
		run("a-000002", "a", agentrunner.RunCompleted), run("a-000003", "a", agentrunner.RunCompleted),
		run("a-000004", "a", agentrunner.RunHalted),
	}}); err != nil {
		t.Fatal(err)
	}
	got, err := s.RunTotals(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	want := []agentrunner.RunCount{{Pipeline: "a", Status: agentrunner.RunCompleted, N: 2}, {Pipeline: "a", Status: agentrunner.RunFailed, N: 1},
		{Pipeline: "a", Status: agentrunner.RunHalted, N: 1}, {Pipeline: "b", Status: agentrunner.RunCompleted, N: 1}}
	if !slices.Equal(want, got) {
		t.Errorf("totals %+v, want %+v", got, want)
	}
}
