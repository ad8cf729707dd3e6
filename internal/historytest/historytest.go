// Package historytest builds the state database of a loop that has run for
// a long time, quickly, for benchmarks of reads over a long history: the
// cycles, attempts, events (tool calls included) and commands the learning
// loop writes, committed through the store as the engine would commit them,
// but many cycles per transaction.
package historytest

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"github.com/agentrunner/agentrunner"
	"github.com/agentrunner/agentrunner/sqlite"
	"github.com/agentrunner/agentrunner/step/execution"
)

// Start is when the first cycle of a history starts; cycles start an hour
// apart.
var Start = time.Date(2015, 1, 1, 0, 0, 0, 0, time.UTC)

// Steps are the steps of the learning loop's pipeline and their agents.
var Steps = []struct{ Step, Agent string }{
	{"plan", "plan"}, {"research", "research"}, {"analyze", "analysis"},
	{"synthesize", "synthesis"}, {"execute", ""}, {"evaluate", "evaluation"},
}

// Tools are the tools the research and analysis agents call.
var Tools = []string{"web_search", "web_fetch", "indicators"}

// cyclesPerCommit bounds the changes held in memory for one transaction.
const cyclesPerCommit = 500

// baseCycles are written through the store; a longer history repeats
// them, shifted in time, by copying their rows (copyBase).
const baseCycles = 1000

// History is a built history.
type History struct {
	Path   string
	Cycles int
	// Every failedEvery-th cycle failed (an error event, a retry).
	FailedEvery int
}

// FailedEvery is how often a cycle of a built history failed.
const FailedEvery = 50

// CycleID is the id of cycle i (0-based) of a history.
func CycleID(i int) string { return CycleStart(i).Format("20060102_150405") }

// CycleStart is when cycle i started.
func CycleStart(i int) time.Time { return Start.Add(time.Duration(i) * time.Hour) }

// Build writes a history of n cycles into a new database at dir/state.db:
// per cycle 40 events (the start and end, four per step with a mailbox
// delivery among them, five transitions, eight tool calls, one of them
// failing, and the execution's notice), six attempts and one command (the
// Execution Service's status callback), consumed.
//
// The first 1000 cycles are committed through the store's ApplyAll, as
// the engine commits them (the tool usage summary included); beyond
// them, for speed, they are repeated a thousand hours later each time by
// copying their rows in SQL, a multiple of 1000 cycles.
func Build(ctx context.Context, dir string, n int) (*History, error) {
	if n <= 0 || (n > baseCycles && n%baseCycles != 0) {
		return nil, fmt.Errorf("historytest: %d cycles: want 1 to %d, or a multiple of %d", n, baseCycles, baseCycles)
	}
	h := &History{Path: filepath.Join(dir, "state.db"), Cycles: n, FailedEvery: FailedEvery}
	s, err := sqlite.Open(ctx, h.Path)
	if err != nil {
		return nil, err
	}
	base := min(n, baseCycles)
	for from := 0; from < base; from += cyclesPerCommit {
		var chs []*agentrunner.Change
		for i := from; i < min(base, from+cyclesPerCommit); i++ {
			chs = append(chs, cycleChanges(i)...)
		}
		if err := s.ApplyAll(ctx, chs...); err != nil {
			s.Close()
			return nil, fmt.Errorf("history of %d cycles, cycle %d: %w", n, from, err)
		}
	}
	if err := s.Close(); err != nil {
		return nil, err
	}
	if err := copyBase(ctx, h.Path, n/base); err != nil {
		return nil, fmt.Errorf("history of %d cycles: copies: %w", n, err)
	}
	if err := addCommands(ctx, h.Path, n); err != nil {
		return nil, fmt.Errorf("history of %d cycles: commands: %w", n, err)
	}
	return h, nil
}

// shift moves a stored time (the fixed layout of the store, whole seconds)
// by ?2 hours; the new id of a cycle is its shifted start.
const (
	shift = `strftime('%Y-%m-%dT%H:%M:%S', substr({col}, 1, 19), '+' || ?2 || ' hours') || substr({col}, 20)`
	newID = `strftime('%Y%m%d_%H%M%S', substr(c.started_at, 1, 19), '+' || ?2 || ' hours')`
)

// shifted is shift of column col.
func shifted(col string) string { return strings.ReplaceAll(shift, "{col}", col) }

// copySQL repeats the base cycles (ids below ?1) ?2 hours later: cycles,
// then attempts and events in the order they were written, then the tool
// usage summary of their hours.
var copySQL = []string{
	`INSERT INTO runs (id, pipeline, status, step, last_completed_step, dir, started_at, ended_at, error, serial)
		SELECT ` + newID + `, pipeline, status, step, last_completed_step, replace(dir, c.id, ` + newID + `),
			` + shifted("started_at") + `, ` + shifted("ended_at") + `, error, serial
		FROM runs c WHERE c.id < ?1 ORDER BY c.id`,
	`INSERT INTO attempts (cycle_id, step, number, agent, status, error_class, error, not_before, started_at, ended_at,
			exit_code, output_path, dir, input_tokens, output_tokens, cached_tokens, turns, tool_calls, retry_base, visit)
		SELECT ` + newID + `, a.step, a.number, a.agent, a.status, a.error_class, a.error, ` + shifted("a.not_before") + `,
			` + shifted("a.started_at") + `, ` + shifted("a.ended_at") + `, a.exit_code,
			replace(a.output_path, c.id, ` + newID + `), replace(a.dir, c.id, ` + newID + `),
			a.input_tokens, a.output_tokens, a.cached_tokens, a.turns, a.tool_calls, a.retry_base, a.visit
		FROM runs c JOIN attempts a ON a.cycle_id = c.id WHERE c.id < ?1 ORDER BY c.id, a.rowid`,
	`INSERT INTO events (timestamp, event_type, agent, step, cycle_id, level, details)
		SELECT ` + shifted("e.timestamp") + `, e.event_type, e.agent, e.step, ` + newID + `, e.level,
			replace(e.details, c.id, ` + newID + `)
		FROM runs c JOIN events e ON e.cycle_id = c.id WHERE c.id < ?1 ORDER BY c.id, e.id`,
	`INSERT INTO tool_usage_hours (hour, tool, calls, errors, duration_ms, last_call)
		SELECT strftime('%Y-%m-%dT%H', substr(hour, 1, 10) || ' ' || substr(hour, 12, 2) || ':00:00', '+' || ?2 || ' hours'),
			tool, calls, errors, duration_ms, ` + shifted("last_call") + `
		FROM tool_usage_hours WHERE hour < strftime('%Y-%m-%dT%H', substr(?1, 1, 4) || '-' || substr(?1, 5, 2) || '-' || substr(?1, 7, 2)
			|| ' ' || substr(?1, 10, 2) || ':00:00')`,
}

// copyBase repeats the base cycles copies-1 times, a block of baseCycles
// hours after the one before, in one transaction, and then sums the tool
// usage totals of the hours again (the store keeps totals equal to the
// sum of the hours).
func copyBase(ctx context.Context, path string, copies int) error {
	if copies <= 1 {
		return nil
	}
	// The copies are of rows the store checked, and a crash only loses
	// a benchmark's history: no journal, no checks.
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=journal_mode(DELETE)&_pragma=journal_mode(OFF)&_pragma=synchronous(OFF)"+
		"&_pragma=ignore_check_constraints(1)")
	if err != nil {
		return err
	}
	defer db.Close()
	db.SetMaxOpenConns(1)
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	end := CycleID(baseCycles)
	for r := 1; r < copies; r++ {
		for _, q := range copySQL {
			if _, err := tx.ExecContext(ctx, q, end, r*baseCycles); err != nil {
				return fmt.Errorf("copy %d: %w", r, err)
			}
		}
	}
	for _, q := range []string{`DELETE FROM tool_usage_totals`, `INSERT INTO tool_usage_totals (tool, calls, errors, duration_ms, last_call)
		SELECT tool, SUM(calls), SUM(errors), SUM(duration_ms), MAX(last_call) FROM tool_usage_hours GROUP BY tool`} {
		if _, err := tx.ExecContext(ctx, q); err != nil {
			return err
		}
	}
	return tx.Commit()
}

// addCommands writes each cycle's status callback as a consumed command,
// in one transaction. The store adds a command per commit (the API adds
// them one at a time), so these rows are inserted directly.
func addCommands(ctx context.Context, path string, n int) (err error) {
	db, err := sql.Open("sqlite", "file:"+path)
	if err != nil {
		return err
	}
	defer db.Close()
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	stmt, err := tx.PrepareContext(ctx, `INSERT INTO commands (kind, args, operator, created_at, consumed_at, result) VALUES (?, ?, ?, ?, ?, ?)`)
	if err != nil {
		return err
	}
	const layout = "2006-01-02T15:04:05.000000000Z"
	for i := range n {
		at := CycleStart(i).Add(40 * time.Minute)
		args := fmt.Sprintf(`{"status":"completed","strategy_id":%q}`, CycleID(i))
		if _, err := stmt.ExecContext(ctx, execution.CommandExecutionStatus, args, "execution-service",
			at.Format(layout), at.Add(time.Second).Format(layout), "execution completed"); err != nil {
			return err
		}
	}
	return tx.Commit()
}

// cycleChanges are the changes of cycle i: its start, one per step, its
// end.
func cycleChanges(i int) []*agentrunner.Change {
	t := CycleStart(i)
	id := CycleID(i)
	c := &agentrunner.Cycle{ID: id, Pipeline: "crypton", Status: agentrunner.CycleRunning, Step: Steps[0].Step,
		Dir: "/srv/crypton/artifacts/cycles/" + id, StartedAt: t, Serial: true}
	ev := func(at time.Time, typ, step, agent string, level agentrunner.Level, details map[string]any) *agentrunner.Event {
		return &agentrunner.Event{Timestamp: at, Type: typ, Step: step, Agent: agent, CycleID: id, Level: level, Details: details}
	}
	from := agentrunner.StateWaiting
	if i == 0 {
		from = agentrunner.StateIdle
	}
	start := *c
	chs := []*agentrunner.Change{{From: from, Cycle: &start,
		Events: []*agentrunner.Event{ev(t, agentrunner.EventCycleStarted, "", "", agentrunner.LevelInfo, map[string]any{"pipeline": "crypton"})}}}
	failed := i%FailedEvery == FailedEvery-1
	for k, st := range Steps {
		at := t.Add(time.Duration(k*5) * time.Minute)
		att := &agentrunner.Attempt{CycleID: id, Step: st.Step, Number: 1, Agent: st.Agent, Status: agentrunner.AttemptSucceeded,
			StartedAt: at, EndedAt: at.Add(4 * time.Minute), Dir: "/srv/crypton/artifacts/attempts/" + id + "/" + st.Step + "-1",
			OutputPath: c.Dir + "/" + st.Step + ".md", Usage: agentrunner.Usage{InputTokens: 12000, OutputTokens: 2500, Turns: 3}}
		evs := []*agentrunner.Event{
			ev(at, agentrunner.EventAttemptStarted, st.Step, st.Agent, agentrunner.LevelInfo, map[string]any{"attempt": 1, "dir": att.Dir}),
			ev(at.Add(4*time.Minute), agentrunner.EventArtifactAccepted, st.Step, st.Agent, agentrunner.LevelInfo,
				map[string]any{"artifact": st.Step + ".md", "path": att.OutputPath, "bytes": 4211, "sha256": "9f2c4e7a1b3d5f60718293a4b5c6d7e8f90a1b2c3d4e5f60718293a4b5c6d7e8"}),
			ev(at.Add(4*time.Minute), agentrunner.EventAttemptSucceeded, st.Step, st.Agent, agentrunner.LevelInfo, map[string]any{"attempt": 1, "duration_ms": 240000}),
			ev(at.Add(4*time.Minute), agentrunner.EventMailboxDelivered, st.Step, st.Agent, agentrunner.LevelInfo, map[string]any{"to": "next", "kind": "forward"}),
		}
		if st.Step == "research" || st.Step == "analyze" {
			evs = append(evs, toolCalls(id, st.Step, st.Agent, at, i)...)
		}
		if st.Step == "execute" {
			evs = append(evs, ev(at.Add(time.Minute), execution.EventExecutionNotified, st.Step, "", agentrunner.LevelInfo, map[string]any{"strategy_id": id}))
		}
		next := *c
		next.LastCompletedStep = st.Step
		if k+1 < len(Steps) {
			next.Step = Steps[k+1].Step
			evs = append(evs, ev(at.Add(4*time.Minute), agentrunner.EventTransition, "", "", agentrunner.LevelInfo, map[string]any{"from": st.Step, "to": next.Step}))
		} else if failed {
			next.Status, next.Step, next.EndedAt, next.Error = agentrunner.CycleFailed, "", at.Add(4*time.Minute), "evaluate: output invalid"
			evs = append(evs, ev(at.Add(4*time.Minute), agentrunner.EventCycleFailed, "", "", agentrunner.LevelError, map[string]any{"error": next.Error}))
		} else {
			next.Status, next.Step, next.EndedAt = agentrunner.CycleCompleted, "", at.Add(4*time.Minute)
			evs = append(evs, ev(at.Add(4*time.Minute), agentrunner.EventCycleCompleted, "", "", agentrunner.LevelInfo, nil))
		}
		chs = append(chs, &agentrunner.Change{From: agentrunner.State(st.Step), Cycle: &next, Attempts: []*agentrunner.Attempt{att}, Events: evs})
		c = &next
	}
	return chs
}

// toolCalls are the four tool calls of a step, the last one of research's
// failing.
func toolCalls(id, step, agent string, at time.Time, i int) []*agentrunner.Event {
	var evs []*agentrunner.Event
	for j := range 4 {
		failed := step == "research" && j == 3
		level := agentrunner.LevelInfo
		details := map[string]any{"tool": Tools[(i+j)%len(Tools)], "call_id": fmt.Sprintf("call_%d_%d", i, j),
			"arguments": `{"query":"BTC funding rates"}`, "duration_ms": 150 + 10*j, "result_bytes": 2048, "is_error": failed, "tries": 1}
		if failed {
			level = agentrunner.LevelWarn
			details["error"] = "HTTP 503 from the search provider"
		}
		evs = append(evs, &agentrunner.Event{Timestamp: at.Add(time.Duration(j+1) * 30 * time.Second), Type: agentrunner.EventToolCall,
			Step: step, Agent: agent, CycleID: id, Level: level, Details: details})
	}
	return evs
}
