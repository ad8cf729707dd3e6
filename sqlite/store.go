package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/agentrunner/agentrunner"
	msqlite "modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"
)

// timeLayout is fixed-width, so stored times sort as strings.
const timeLayout = "2006-01-02T15:04:05.000000000Z"

func encodeTime(t time.Time) any {
	if t.IsZero() {
		return nil
	}
	return t.UTC().Format(timeLayout)
}

func decodeTime(s sql.NullString) (time.Time, error) {
	if !s.Valid || s.String == "" {
		return time.Time{}, nil
	}
	t, err := time.Parse(timeLayout, s.String)
	if err != nil {
		return time.Time{}, fmt.Errorf("stored time %q: %w", s.String, err)
	}
	return t, nil
}

// The statements of Apply.
const (
	// sqlAttemptStatus is the status of the attempt an attempt guard names.
	sqlAttemptStatus = `SELECT status FROM attempts WHERE cycle_id = ? AND step = ? AND number = ?`
	// sqlState is the state of the pipeline ?1, else of the run ?2's: its
	// unfinished run's step (or Halted), else Waiting once it has a run.
	sqlState = `WITH p (name) AS (SELECT COALESCE(?1, (SELECT pipeline FROM runs WHERE id = ?2)))
		SELECT COALESCE(
		(SELECT CASE status WHEN 'halted' THEN 'Halted' ELSE step END FROM runs
			WHERE pipeline = (SELECT name FROM p) AND status IN ('running', 'halted')),
		CASE WHEN EXISTS (SELECT 1 FROM runs WHERE pipeline = (SELECT name FROM p)) THEN 'WaitingForNextCycle' ELSE 'Idle' END)`
	// sqlUpsertRun leaves a run of another pipeline alone: no row changes,
	// and the caller refuses the change.
	sqlUpsertRun = `
		INSERT INTO runs (id, pipeline, status, step, last_completed_step, dir, started_at, ended_at, error,
			inputs, parent, serial)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (id) DO UPDATE SET
			status = excluded.status, step = excluded.step,
			last_completed_step = excluded.last_completed_step, started_at = excluded.started_at,
			ended_at = excluded.ended_at, error = excluded.error
		WHERE runs.pipeline = excluded.pipeline`
	sqlStepCycle = `UPDATE runs SET step = ?, last_completed_step = ?, ended_at = ?, error = ?
		WHERE id = ? AND status = 'running' AND step = ?`
	// sqlMoveRun records where a run is when nothing else of it changed:
	// it sets no indexed column, so it touches no index (the runs' are on
	// their status), unlike the upsert.
	sqlMoveRun = `UPDATE runs SET step = ?, last_completed_step = ?
		WHERE id = ? AND pipeline = ? AND status = ? AND ended_at IS ? AND error = ?`
	// sqlUpsertStepRuns takes its VALUES rows where %s is.
	sqlUpsertStepRuns = `
		INSERT INTO step_runs (run_id, step, visit, status, from_key, arrived, label, output,
			opened_at, ended_at, error, decision)
		VALUES %s
		ON CONFLICT (run_id, step, visit) DO UPDATE SET
			status = excluded.status, from_key = excluded.from_key, arrived = excluded.arrived,
			label = excluded.label, output = excluded.output, opened_at = excluded.opened_at,
			ended_at = excluded.ended_at, error = excluded.error, decision = excluded.decision`
	// The multi-row statements take their VALUES rows where %s is.
	sqlUpsertAttempts = `
		INSERT INTO attempts (cycle_id, step, number, agent, status, error_class, error,
			not_before, started_at, ended_at, exit_code, output_path, dir,
			input_tokens, output_tokens, cached_tokens, turns, tool_calls, retry_base, visit)
		VALUES %s
		ON CONFLICT (cycle_id, step, number) DO UPDATE SET
			status = excluded.status, error_class = excluded.error_class, error = excluded.error,
			not_before = excluded.not_before, started_at = excluded.started_at,
			ended_at = excluded.ended_at, exit_code = excluded.exit_code,
			output_path = excluded.output_path, dir = excluded.dir,
			input_tokens = excluded.input_tokens, output_tokens = excluded.output_tokens,
			cached_tokens = excluded.cached_tokens, turns = excluded.turns, tool_calls = excluded.tool_calls,
			retry_base = excluded.retry_base, visit = excluded.visit`
	// sqlCloseGuarded writes an attempt that an attempt guard names, only
	// while it is running in the store: the guard's check and the write
	// in one statement. It sets what the upsert's DO UPDATE sets.
	sqlCloseGuarded = `
		UPDATE attempts SET status = ?, error_class = ?, error = ?, not_before = ?, started_at = ?,
			ended_at = ?, exit_code = ?, output_path = ?, dir = ?, input_tokens = ?, output_tokens = ?,
			cached_tokens = ?, turns = ?, tool_calls = ?, retry_base = ?, visit = ?
		WHERE cycle_id = ? AND step = ? AND number = ? AND status = 'running'`
	sqlInsertEvents = `
		INSERT INTO events (timestamp, event_type, agent, step, cycle_id, level, details)
		VALUES %s`
	// The first event of a minute marks it; later ones find the mark and
	// write nothing.
	sqlMarkMinute = `INSERT INTO event_minutes (minute, first_id) VALUES (?, ?) ON CONFLICT (minute) DO NOTHING`
	// The tool usage summary: one row per tool and hour, one per tool.
	sqlToolHour = `
		INSERT INTO tool_usage_hours (hour, tool, calls, errors, duration_ms, last_call) VALUES (?, ?, ?, ?, ?, ?)
		ON CONFLICT (hour, tool) DO UPDATE SET calls = calls + excluded.calls, errors = errors + excluded.errors,
			duration_ms = duration_ms + excluded.duration_ms, last_call = MAX(last_call, excluded.last_call)`
	sqlToolTotal = `
		INSERT INTO tool_usage_totals (tool, calls, errors, duration_ms, last_call) VALUES (?, ?, ?, ?, ?)
		ON CONFLICT (tool) DO UPDATE SET calls = calls + excluded.calls, errors = errors + excluded.errors,
			duration_ms = duration_ms + excluded.duration_ms, last_call = MAX(last_call, excluded.last_call)`
	sqlInsertOutbox = `
		INSERT INTO outbox (key, kind, cycle_id, payload, created_at) VALUES (?, ?, ?, ?, ?)
		ON CONFLICT (key) DO NOTHING`
	sqlDelivered = `UPDATE outbox SET delivered_at = ?, response = ?, attempts = attempts + 1, next_attempt_at = NULL WHERE key = ?`
	sqlConsumed  = `UPDATE commands SET consumed_at = ?, result = ? WHERE id = ? AND consumed_at IS NULL`
	sqlControl   = `INSERT INTO control (id, paused, paused_by, paused_at) VALUES (1, ?, ?, ?)
		ON CONFLICT (id) DO UPDATE SET paused = excluded.paused, paused_by = excluded.paused_by, paused_at = excluded.paused_at`
)

// writer is the one connection every write goes through, held for the
// store's life. Transactions are driven with prepared BEGIN IMMEDIATE and
// COMMIT statements, and every statement is prepared once: parsing SQL is
// most of the CPU a commit costs with this driver.
type writer struct {
	mu    sync.Mutex
	conn  *sql.Conn
	stmts map[string]*sql.Stmt
	// multi holds the text of each multi-row statement execRows made, by
	// its query and its numbers of rows and columns.
	multi map[multiKey]string
}

// multiKey names a multi-row statement: its query, rows and columns.
type multiKey struct {
	query      string
	rows, cols int
}

// exec runs a statement on the write connection; the caller holds mu.
func (w *writer) exec(ctx context.Context, query string, args ...any) (sql.Result, error) {
	stmt, ok := w.stmts[query]
	if !ok {
		var err error
		if stmt, err = w.conn.PrepareContext(ctx, query); err != nil {
			return nil, fmt.Errorf("prepare: %w", err)
		}
		w.stmts[query] = stmt
	}
	return stmt.ExecContext(ctx, args...)
}

// queryRow runs a one-row query on the write connection; the caller holds mu.
func (w *writer) queryRow(ctx context.Context, query string, args []any, dst ...any) error {
	stmt, ok := w.stmts[query]
	if !ok {
		var err error
		if stmt, err = w.conn.PrepareContext(ctx, query); err != nil {
			return fmt.Errorf("prepare: %w", err)
		}
		w.stmts[query] = stmt
	}
	return stmt.QueryRowContext(ctx, args...).Scan(dst...)
}

// maxRows bounds the rows of one multi-row statement, far below SQLite's
// limit on bound parameters.
const maxRows = 64

// execRows inserts rows with a multi-row statement (query has %s where its
// VALUES go), maxRows at a time: one statement per change beats one per
// row. It returns the rowid of each row; with one writer, the rows of one
// statement get consecutive rowids.
func (w *writer) execRows(ctx context.Context, query string, rows [][]any) ([]int64, error) {
	ids := make([]int64, 0, len(rows))
	for len(rows) > 0 {
		chunk := rows[:min(len(rows), maxRows)]
		rows = rows[len(chunk):]
		args := make([]any, 0, len(chunk)*len(chunk[0]))
		for _, r := range chunk {
			args = append(args, r...)
		}
		res, err := w.exec(ctx, w.multiRow(query, len(chunk), len(chunk[0])), args...)
		if err != nil {
			return nil, err
		}
		last, err := res.LastInsertId()
		if err != nil {
			return nil, err
		}
		for i := range chunk {
			ids = append(ids, last-int64(len(chunk)-1-i))
		}
	}
	return ids, nil
}

// multiRow is query with the VALUES of rows rows of cols columns where
// its %s is, made once; the caller holds mu.
func (w *writer) multiRow(query string, rows, cols int) string {
	k := multiKey{query, rows, cols}
	if q, ok := w.multi[k]; ok {
		return q
	}
	row := "(" + strings.TrimSuffix(strings.Repeat("?, ", cols), ", ") + ")"
	q := fmt.Sprintf(query, strings.TrimSuffix(strings.Repeat(row+", ", rows), ", "))
	if w.multi == nil {
		w.multi = map[multiKey]string{}
	}
	w.multi[k] = q
	return q
}

// Apply commits a change in one IMMEDIATE transaction.
func (s *Store) Apply(ctx context.Context, ch *agentrunner.Change) error {
	return s.ApplyAll(ctx, ch)
}

// ApplyAll commits changes, in order, in one IMMEDIATE transaction: all of
// them or none; a change's guard sees the changes before it. It writes
// a long history at once, as Apply would write it change by change, tool
// usage summary included; the loop engine commits one change at a time
// with Apply.
func (s *Store) ApplyAll(ctx context.Context, chs ...*agentrunner.Change) error {
	return s.inTx(ctx, func(ctx context.Context, w *writer) (bool, error) {
		for _, ch := range chs {
			if err := w.change(ctx, ch); err != nil {
				return false, err
			}
		}
		return true, nil
	})
}

// ApplyGroup commits changes, in order, in one IMMEDIATE transaction,
// each under a savepoint of its own: a change refused with ECONFLICT is
// rolled back to its savepoint and its error is errs[i]; the others are
// committed together, one WAL commit for all of them (the graph
// scheduler's group commit). Any other error rolls back the whole group.
// A group whose every change was refused commits nothing. A group of one
// change (a lone run's step) needs no savepoint: its transaction is the
// change's.
func (s *Store) ApplyGroup(ctx context.Context, chs ...*agentrunner.Change) (errs []error, err error) {
	errs = make([]error, len(chs))
	err = s.inTx(ctx, func(ctx context.Context, w *writer) (bool, error) {
		applied := false
		for i, ch := range chs {
			refused, err := w.savepoint(ctx, ch, len(chs) == 1)
			if err != nil {
				return false, err
			}
			errs[i], applied = refused, applied || refused == nil
		}
		return applied, nil
	})
	if err != nil {
		return nil, err
	}
	return errs, nil
}

// savepoint writes one change of a group under a savepoint. A conflict
// rolls the change back to it and is returned as refused, the change's
// own; any other error is the group's. A change alone in its group is
// written without one: the caller then rolls the transaction back. The
// caller holds mu.
func (w *writer) savepoint(ctx context.Context, ch *agentrunner.Change, alone bool) (refused, err error) {
	if alone {
		return sortError(w.change(ctx, ch), ch)
	}
	if _, err := w.exec(ctx, "SAVEPOINT change"); err != nil {
		return nil, translate(err, "savepoint", "")
	}
	if refused, err = sortError(w.change(ctx, ch), ch); err != nil {
		return nil, err
	}
	if refused != nil {
		if _, err := w.exec(ctx, "ROLLBACK TO change"); err != nil {
			return nil, translate(err, "roll back a refused change", "")
		}
	}
	if _, err := w.exec(ctx, "RELEASE change"); err != nil {
		return nil, translate(err, "release savepoint", "")
	}
	return refused, nil
}

// sortError sorts the error of a change of a group: a conflict is the
// change's own (refused), and the ids it was given are cleared; any other
// error is the group's.
func sortError(err error, ch *agentrunner.Change) (refused, groupErr error) {
	if agentrunner.ErrorCode(err) != agentrunner.ECONFLICT {
		return nil, err
	}
	unassign(ch)
	return err, nil
}

// unassign clears the ids a change rolled back to its savepoint was
// given: the rows they named are gone, and the next change reuses them.
func unassign(ch *agentrunner.Change) {
	for _, e := range ch.Events {
		e.ID = 0
	}
	for _, f := range ch.Files {
		f.ID = 0
	}
}

// inTx runs write in one IMMEDIATE transaction on the write connection,
// and commits it when write succeeds and has something to commit; else it
// rolls it back.
func (s *Store) inTx(ctx context.Context, write func(ctx context.Context, w *writer) (commit bool, err error)) (err error) {
	if err := ctx.Err(); err != nil {
		return err
	}
	// Once begun, a change runs to its commit: it is short, and the driver
	// watches a cancellable context with a goroutine per statement.
	ctx = context.WithoutCancel(ctx)
	w := &s.w
	w.mu.Lock()
	defer w.mu.Unlock()
	if _, err := w.exec(ctx, "BEGIN IMMEDIATE"); err != nil {
		return translate(err, "begin", "")
	}
	commit := false
	defer func() {
		if err != nil || !commit {
			// The transaction may already be gone (an interrupted statement
			// rolls it back); then ROLLBACK fails harmlessly.
			w.exec(context.Background(), "ROLLBACK")
			err = exhausted(err)
		}
	}()
	if commit, err = write(ctx, w); err != nil || !commit {
		return err
	}
	if _, err = w.exec(ctx, "COMMIT"); err != nil {
		return translate(err, "commit", "")
	}
	s.commits.Add(1)
	return nil
}

// change writes one change in the caller's transaction; the caller holds
// mu.
func (w *writer) change(ctx context.Context, ch *agentrunner.Change) (err error) {
	cycleDone := false
	if c := ch.Cycle; c != nil && c.Status == agentrunner.CycleRunning && ch.From.IsStep() {
		// A running cycle moving between steps: one UPDATE both makes the
		// change and checks the state (the cycle must be the running one,
		// at step From), and leaves the index on status alone.
		res, err := w.exec(ctx, sqlStepCycle, c.Step, c.LastCompletedStep, encodeTime(c.EndedAt), c.Error, c.ID, string(ch.From))
		if err != nil {
			return translate(err, "cycle "+c.ID, "")
		}
		n, _ := res.RowsAffected()
		cycleDone = n == 1 // else the check below says why
	}
	if ch.From != "" && !cycleDone {
		if err := w.guard(ctx, ch); err != nil {
			return err
		}
	}
	attempts, err := w.attemptGuards(ctx, ch.Guards, ch.Attempts)
	if err != nil {
		return err
	}
	if c := ch.Cycle; c != nil && !cycleDone {
		if err := w.upsertRun(ctx, c); err != nil {
			return err
		}
	}
	for _, r := range ch.Runs {
		if err := w.upsertRun(ctx, r); err != nil {
			return err
		}
	}
	if err := w.upsertStepRuns(ctx, ch.StepRuns); err != nil {
		return err
	}
	if len(attempts) > 0 {
		rows := make([][]any, len(attempts))
		for i, a := range attempts {
			rows[i] = append([]any{a.CycleID, a.Step, a.Number, a.Agent}, attemptValues(a)...)
		}
		if _, err = w.execRows(ctx, sqlUpsertAttempts, rows); err != nil {
			return translate(err, fmt.Sprintf("attempts of run %s", attempts[0].CycleID), "")
		}
	}
	if len(ch.Events) > 0 {
		rows := make([][]any, len(ch.Events))
		for i, e := range ch.Events {
			details := []byte("{}")
			if len(e.Details) > 0 {
				if details, err = encodeDetails(e.Details); err != nil {
					return fmt.Errorf("event %s details: %w", e.Type, err)
				}
			}
			level := e.Level
			if level == "" {
				level = agentrunner.LevelInfo
			}
			rows[i] = []any{encodeTime(e.Timestamp), e.Type, e.Agent, e.Step, e.CycleID, string(level), string(details)}
		}
		ids, err := w.execRows(ctx, sqlInsertEvents, rows)
		if err != nil {
			return translate(err, "events", "")
		}
		for i, e := range ch.Events {
			e.ID = ids[i]
		}
		if err := w.markMinutes(ctx, ch.Events, rows); err != nil {
			return fmt.Errorf("event minutes: %w", err)
		}
		if err := w.summarizeToolCalls(ctx, ch.Events); err != nil {
			return fmt.Errorf("tool usage summary: %w", err)
		}
	}
	if err := w.insertFiles(ctx, ch.Files); err != nil {
		return err
	}
	if err := w.depositMail(ctx, ch.Mail); err != nil {
		return err
	}
	for _, m := range ch.Outbox {
		if _, err = w.exec(ctx, sqlInsertOutbox, m.Key, m.Kind, m.CycleID, m.Payload, encodeTime(m.CreatedAt)); err != nil {
			return translate(err, "outbox "+m.Key, "")
		}
	}
	for _, m := range ch.Delivered {
		res, err := w.exec(ctx, sqlDelivered, encodeTime(m.DeliveredAt), m.Response, m.Key)
		if err != nil {
			return translate(err, "outbox "+m.Key, "")
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return agentrunner.Errorf(agentrunner.ENOTFOUND, "outbox message %q not found", m.Key)
		}
	}
	for _, c := range ch.Consumed {
		res, err := w.exec(ctx, sqlConsumed, encodeTime(c.ConsumedAt), c.Result, c.ID)
		if err != nil {
			return translate(err, fmt.Sprintf("command %d", c.ID), "")
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return agentrunner.Errorf(agentrunner.ECONFLICT, "command %d was already consumed or does not exist", c.ID)
		}
	}
	if c := ch.Control; c != nil {
		if _, err = w.exec(ctx, sqlControl, c.Paused, c.PausedBy, encodeTime(c.PausedAt)); err != nil {
			return translate(err, "control", "")
		}
	}
	return nil
}

// guard refuses the change unless the state of its pipeline is From:
// the pipeline of its cycle, else of the run of its first attempt.
func (w *writer) guard(ctx context.Context, ch *agentrunner.Change) error {
	var pipeline, run any
	switch {
	case ch.Cycle != nil:
		pipeline = ch.Cycle.Pipeline
	case len(ch.Attempts) > 0:
		run = ch.Attempts[0].CycleID
	default:
		return agentrunner.Errorf(agentrunner.EINVALID, "a change guarded by state %s names no cycle or attempt whose pipeline is in that state", ch.From)
	}
	var state string
	if err := w.queryRow(ctx, sqlState, []any{pipeline, run}, &state); err != nil {
		return translate(err, "read current state", "")
	}
	if agentrunner.State(state) != ch.From {
		return agentrunner.Errorf(agentrunner.ECONFLICT, "state is %s, not %s: the change was not applied", state, ch.From)
	}
	return nil
}

// attemptGuards refuses the change unless every attempt its guards name
// is running in the store; the caller holds mu. It returns the attempts
// left for the change to write. A guarded attempt the change writes (the
// attempt whose outcome it commits) is written here, by one UPDATE that
// is also the guard's check, and left out; any other guard is checked by
// reading the attempt's status.
func (w *writer) attemptGuards(ctx context.Context, gs []agentrunner.AttemptGuard, attempts []*agentrunner.Attempt) ([]*agentrunner.Attempt, error) {
	for k, g := range gs {
		if slices.Contains(gs[:k], g) {
			continue // checked, and maybe written, above
		}
		last := -1 // the change's last row of the guarded attempt: the one that stands
		for i, a := range attempts {
			if a.CycleID == g.RunID && a.Step == g.Step && a.Number == g.Number {
				last = i
			}
		}
		if last < 0 {
			if err := w.attemptRunning(ctx, g); err != nil {
				return nil, err
			}
			continue
		}
		res, err := w.exec(ctx, sqlCloseGuarded, append(attemptValues(attempts[last]), g.RunID, g.Step, g.Number)...)
		if err != nil {
			return nil, translate(err, fmt.Sprintf("attempts of run %s", g.RunID), "")
		}
		if n, _ := res.RowsAffected(); n != 1 {
			if err := w.attemptRunning(ctx, g); err != nil {
				return nil, err
			}
			return nil, agentrunner.Errorf(agentrunner.ECONFLICT, "run %s, step %s: attempt %d is not running in the store: the change was not applied", g.RunID, g.Step, g.Number)
		}
		rest := make([]*agentrunner.Attempt, 0, len(attempts)-1)
		for _, a := range attempts {
			if a.CycleID != g.RunID || a.Step != g.Step || a.Number != g.Number {
				rest = append(rest, a)
			}
		}
		attempts = rest
	}
	return attempts, nil
}

// attemptRunning refuses the change unless the attempt g names is running
// in the store; the caller holds mu.
func (w *writer) attemptRunning(ctx context.Context, g agentrunner.AttemptGuard) error {
	var status string
	err := w.queryRow(ctx, sqlAttemptStatus, []any{g.RunID, g.Step, g.Number}, &status)
	if errors.Is(err, sql.ErrNoRows) {
		return agentrunner.Errorf(agentrunner.ECONFLICT, "run %s, step %s: attempt %d is not in the store: the change was not applied", g.RunID, g.Step, g.Number)
	}
	if err != nil {
		return translate(err, "read the status of an attempt", "")
	}
	if agentrunner.AttemptStatus(status) != agentrunner.AttemptRunning {
		return agentrunner.Errorf(agentrunner.ECONFLICT, "run %s, step %s: attempt %d is %s in the store, not running: the change was not applied", g.RunID, g.Step, g.Number, status)
	}
	return nil
}

// attemptValues are an attempt's columns from status to visit, in the
// order of sqlUpsertAttempts and sqlCloseGuarded.
func attemptValues(a *agentrunner.Attempt) []any {
	var exit any
	if a.ExitCode != nil {
		exit = *a.ExitCode
	}
	u := a.Usage
	return []any{string(a.Status), string(a.ErrorClass), a.Error,
		encodeTime(a.NotBefore), encodeTime(a.StartedAt), encodeTime(a.EndedAt), exit, a.OutputPath, a.Dir,
		u.InputTokens, u.OutputTokens, u.CachedTokens, u.Turns, u.ToolCalls, a.RetryBase, max(a.Visit, 1)}
}

// upsertRun inserts or updates a run; the caller holds mu.
func (w *writer) upsertRun(ctx context.Context, r *agentrunner.Run) error {
	// A serial run moving between steps: one narrow UPDATE does it.
	res, err := w.exec(ctx, sqlMoveRun, r.Step, r.LastCompletedStep, r.ID, r.Pipeline, string(r.Status), encodeTime(r.EndedAt), r.Error)
	if err != nil {
		return translate(err, "run "+r.ID, "")
	}
	if n, _ := res.RowsAffected(); n == 1 {
		return nil
	}
	inputs, err := encodeJSON(r.Inputs, len(r.Inputs) == 0, "{}")
	if err != nil {
		return &agentrunner.Error{Code: agentrunner.EINVALID, Message: fmt.Sprintf("inputs of run %s", r.ID), Err: err}
	}
	res, err = w.exec(ctx, sqlUpsertRun,
		r.ID, r.Pipeline, string(r.Status), r.Step, r.LastCompletedStep, r.Dir,
		encodeTime(r.StartedAt), encodeTime(r.EndedAt), r.Error, inputs, r.Parent, r.Serial)
	if err != nil {
		return translate(err, "run "+r.ID, fmt.Sprintf("another run of pipeline %s is unfinished (running or halted)", r.Pipeline))
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return agentrunner.Errorf(agentrunner.ECONFLICT, "run id %s is taken by a run of another pipeline than %s", r.ID, r.Pipeline)
	}
	return nil
}

// storedDecision is how a gate's decision is stored, as JSON.
type storedDecision struct {
	Action    agentrunner.DecisionAction `json:"action"`
	To        string                     `json:"to,omitempty"`
	Comment   string                     `json:"comment,omitempty"`
	Operator  string                     `json:"operator"`
	DecidedAt time.Time                  `json:"decided_at"`
}

// upsertStepRuns inserts or updates step runs in one statement; the caller
// holds mu.
func (w *writer) upsertStepRuns(ctx context.Context, srs []*agentrunner.StepRun) error {
	if len(srs) == 0 {
		return nil
	}
	rows := make([][]any, len(srs))
	for i, sr := range srs {
		row, err := stepRunRow(sr)
		if err != nil {
			return err
		}
		rows[i] = row
	}
	if _, err := w.execRows(ctx, sqlUpsertStepRuns, rows); err != nil {
		return translate(err, fmt.Sprintf("step runs of run %s", srs[0].RunID), "")
	}
	return nil
}

// stepRunRow is the row of a step run in step_runs.
func stepRunRow(sr *agentrunner.StepRun) ([]any, error) {
	invalid := func(err error) error {
		return &agentrunner.Error{Code: agentrunner.EINVALID, Message: fmt.Sprintf("step run %s of run %s", sr.Key(), sr.RunID), Err: err}
	}
	arrived, err := encodeJSON(sr.Arrived, len(sr.Arrived) == 0, "[]")
	if err != nil {
		return nil, invalid(err)
	}
	var decision any
	if d := sr.Decision; d != nil {
		if decision, err = encodeJSON(storedDecision(*d), false, ""); err != nil {
			return nil, invalid(err)
		}
	}
	return []any{sr.RunID, sr.Step, sr.Visit, string(sr.Status), sr.From, arrived,
		sr.Label, sr.Output, encodeTime(sr.OpenedAt), encodeTime(sr.EndedAt), sr.Error, decision}, nil
}

// encodeJSON is v as JSON text, or empty (what an empty value is stored
// as) when isEmpty.
func encodeJSON(v any, isEmpty bool, empty string) (string, error) {
	if isEmpty {
		return empty, nil
	}
	b, err := json.Marshal(v)
	return string(b), err
}

// toolSum is what the summary adds for a tool in an hour, or in total.
type toolSum struct {
	calls, errors int
	ms            int64
	last          time.Time
}

func (t *toolSum) add(failed bool, d time.Duration, at time.Time) {
	t.calls++
	if failed {
		t.errors++
	}
	t.ms += d.Milliseconds()
	if at.After(t.last) {
		t.last = at
	}
}

// hourOf is the summary's hour of t: the first 13 characters of the
// stored time, 2026-11-22T14.
func hourOf(t time.Time) string { return t.UTC().Format("2006-01-02T15") }

// markMinutes records the first id of each minute the events fall in
// (rows holds their encoded timestamps first), for the filter by time.
// A step's events share a minute: one statement, which writes a page
// only for a new minute.
func (w *writer) markMinutes(ctx context.Context, evs []*agentrunner.Event, rows [][]any) error {
	last := ""
	for i, e := range evs {
		ts, _ := rows[i][0].(string)
		if len(ts) < minuteLen || ts[:minuteLen] == last {
			continue
		}
		last = ts[:minuteLen]
		if _, err := w.exec(ctx, sqlMarkMinute, last, e.ID); err != nil {
			return err
		}
	}
	return nil
}

// minuteLen is the length of a minute's prefix of an encoded time.
const minuteLen = len("2006-01-02T15:04")

// summarizeToolCalls adds the tool calls among evs to the tool usage
// summary, in the caller's transaction; the caller holds mu.
func (w *writer) summarizeToolCalls(ctx context.Context, evs []*agentrunner.Event) error {
	type key struct{ hour, tool string }
	var hours map[key]*toolSum
	var totals map[string]*toolSum
	for _, e := range evs {
		tool, failed, d, ok := agentrunner.ToolCallOf(e)
		if !ok {
			continue
		}
		if hours == nil {
			hours, totals = map[key]*toolSum{}, map[string]*toolSum{}
		}
		k := key{hourOf(e.Timestamp), tool}
		if hours[k] == nil {
			hours[k] = &toolSum{}
		}
		if totals[tool] == nil {
			totals[tool] = &toolSum{}
		}
		hours[k].add(failed, d, e.Timestamp)
		totals[tool].add(failed, d, e.Timestamp)
	}
	for k, t := range hours {
		if _, err := w.exec(ctx, sqlToolHour, k.hour, k.tool, t.calls, t.errors, t.ms, encodeTime(t.last)); err != nil {
			return err
		}
	}
	for tool, t := range totals {
		if _, err := w.exec(ctx, sqlToolTotal, tool, t.calls, t.errors, t.ms, encodeTime(t.last)); err != nil {
			return err
		}
	}
	return nil
}

// translate gives a store error its code, in one place, by SQLite's
// result code (never by its message): a unique key taken is a conflict,
// said in the caller's words (conflict), another constraint broken is
// invalid input, a database busy beyond the busy timeout is unavailable,
// and a full disk or no memory is the resource that ran out (exhausted).
func translate(err error, what, conflict string) error {
	var se *msqlite.Error
	if !errors.As(err, &se) {
		return fmt.Errorf("%s: %w", what, err)
	}
	switch code := se.Code(); {
	case code == sqlite3.SQLITE_CONSTRAINT_UNIQUE || code == sqlite3.SQLITE_CONSTRAINT_PRIMARYKEY:
		if conflict == "" {
			conflict = "it exists already"
		}
		return agentrunner.Errorf(agentrunner.ECONFLICT, "%s: %s", what, conflict)
	case code&0xff == sqlite3.SQLITE_CONSTRAINT:
		return &agentrunner.Error{Code: agentrunner.EINVALID, Message: what, Err: err}
	case code&0xff == sqlite3.SQLITE_BUSY || code&0xff == sqlite3.SQLITE_LOCKED:
		return &agentrunner.Error{Code: agentrunner.EUNAVAILABLE, Message: what + ": the state database is busy", Err: err}
	}
	return exhausted(fmt.Errorf("%s: %w", what, err))
}

// scanner is a row to scan: *sql.Row or *sql.Rows.
type scanner interface{ Scan(...any) error }

// queryAll runs a read query and scans each of its rows.
// querier runs a query: the read pool, a connection or a transaction.
type querier interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
}

func queryAll[T any](ctx context.Context, db querier, scan func(scanner) (T, error), query string, args ...any) ([]T, error) {
	rows, err := db.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []T
	for rows.Next() {
		v, err := scan(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, rows.Err()
}

const runColumns = `id, pipeline, status, step, last_completed_step, dir, started_at, ended_at, error, inputs, parent, serial`

func scanRun(row scanner) (*agentrunner.Run, error) {
	var r agentrunner.Run
	var started, ended sql.NullString
	var inputs string
	if err := row.Scan(&r.ID, &r.Pipeline, &r.Status, &r.Step, &r.LastCompletedStep, &r.Dir, &started, &ended, &r.Error,
		&inputs, &r.Parent, &r.Serial); err != nil {
		return nil, err
	}
	var err error
	if r.StartedAt, err = decodeTime(started); err != nil {
		return nil, err
	}
	if r.EndedAt, err = decodeTime(ended); err != nil {
		return nil, err
	}
	if inputs != "{}" {
		if err := json.Unmarshal([]byte(inputs), &r.Inputs); err != nil {
			return nil, fmt.Errorf("inputs of run %s: %w", r.ID, err)
		}
	}
	return &r, nil
}

func (s *Store) oneRun(ctx context.Context, what, where string, args ...any) (*agentrunner.Run, error) {
	r, err := scanRun(s.read.QueryRowContext(ctx, `SELECT `+runColumns+` FROM runs WHERE `+where, args...))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, agentrunner.Errorf(agentrunner.ENOTFOUND, "%s not found", what)
	}
	return r, err
}

// Cycle returns one cycle by id.
func (s *Store) Cycle(ctx context.Context, id string) (*agentrunner.Cycle, error) {
	return s.oneRun(ctx, fmt.Sprintf("cycle %q", id), `id = ?`, id)
}

// Run returns one run by id.
func (s *Store) Run(ctx context.Context, id string) (*agentrunner.Run, error) {
	return s.oneRun(ctx, fmt.Sprintf("run %q", id), `id = ?`, id)
}

// sqlUnfinishedSerial finds the one unfinished serial run of a pipeline
// with the condition of the index runs_one_unfinished_serial.
const sqlUnfinishedSerial = `pipeline = ? AND serial = 1 AND status IN ('running', 'halted')`

// UnfinishedCycle returns the running or halted serial run of pipeline.
func (s *Store) UnfinishedCycle(ctx context.Context, pipeline string) (*agentrunner.Cycle, error) {
	return s.oneRun(ctx, fmt.Sprintf("unfinished cycle of pipeline %q", pipeline), sqlUnfinishedSerial, pipeline)
}

// Cycles lists cycles newest first.
func (s *Store) Cycles(ctx context.Context, f agentrunner.CycleFilter) ([]*agentrunner.Cycle, error) {
	q, args := runsQuery(agentrunner.RunFilter{Pipeline: f.Pipeline, Status: f.Status, Before: f.Before, Limit: f.Limit})
	return queryAll(ctx, s.read, scanRun, q, args...)
}

// Runs lists runs newest first.
func (s *Store) Runs(ctx context.Context, f agentrunner.RunFilter) ([]*agentrunner.Run, error) {
	q, args := runsQuery(f)
	return queryAll(ctx, s.read, scanRun, q, args...)
}

// sqlUnfinishedRun is the condition of the partial index runs_unfinished,
// as the migration words it: SQLite uses the index only for a query that
// states the same condition.
const sqlUnfinishedRun = `status = 'queued' OR status = 'running' OR status = 'halted'`

// runsQuery is the query of Runs and Cycles: a range of the primary key,
// of runs_pipeline, runs_status or runs_pipeline_status. Unfinished runs
// of any status walk runs_unfinished, named, so they come in id order
// from the runs in flight alone (SQLite would rather read each status
// of runs_status, or every run of the pipeline, and sort).
//
// The status and the limit are bound as +?: SQLite looks at the value
// bound to a plain ? when a partial index might serve it (the status) or
// when it sizes the plan (the limit), and then prepares the statement
// again at each run, which costs several times the query. The unary plus
// hides the value from the planner and leaves the indexes to use as
// they were (runs_status, runs_pipeline_status).
func runsQuery(f agentrunner.RunFilter) (string, []any) {
	q := `SELECT ` + runColumns + ` FROM runs WHERE 1 = 1`
	if f.Unfinished && f.Status == "" {
		q = `SELECT ` + runColumns + ` FROM runs INDEXED BY runs_unfinished WHERE 1 = 1`
	}
	var args []any
	if f.Pipeline != "" {
		q += ` AND pipeline = ?`
		args = append(args, f.Pipeline)
	}
	if f.Status != "" {
		q += ` AND status = +?`
		args = append(args, string(f.Status))
	}
	if f.Parent != "" {
		// runs_parent's condition, stated so that SQLite uses it.
		q += ` AND parent = ? AND parent <> ''`
		args = append(args, f.Parent)
	}
	if f.Unfinished {
		q += ` AND (` + sqlUnfinishedRun + `)`
	}
	if f.Before != "" {
		q += ` AND id < ?`
		args = append(args, f.Before)
	}
	if !f.EndedAfter.IsZero() {
		q += ` AND ended_at >= ?`
		args = append(args, encodeTime(f.EndedAfter))
	}
	q += ` ORDER BY id DESC`
	if f.Limit > 0 {
		q += ` LIMIT +?`
		args = append(args, f.Limit)
	}
	return q, args
}

// sqlRunCounts counts the unfinished runs on the partial index
// runs_unfinished_counts, named (SQLite would rather search runs_status
// for each status and sort), whose condition it states word for word.
const sqlRunCounts = `SELECT pipeline, status, COUNT(*) FROM runs INDEXED BY runs_unfinished_counts WHERE (` + sqlUnfinishedRun + `)
	GROUP BY pipeline, status ORDER BY pipeline, status`

// sqlWaiting is the condition of the partial index step_runs_waiting, as
// the migration words it: SQLite uses the index only for a query that
// states it.
const sqlWaiting = `status = 'waiting'`

// sqlWaitingGates counts the waiting step runs on step_runs_waiting.
const sqlWaitingGates = `SELECT COUNT(*) FROM step_runs WHERE ` + sqlWaiting

// RunCounts counts the unfinished runs by pipeline and status and the
// waiting gates, in one read transaction so the two agree.
func (s *Store) RunCounts(ctx context.Context) (agentrunner.RunCounts, error) {
	var out agentrunner.RunCounts
	tx, err := s.read.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return out, err
	}
	defer tx.Rollback()
	rows, err := tx.QueryContext(ctx, sqlRunCounts)
	if err != nil {
		return out, err
	}
	defer rows.Close()
	for rows.Next() {
		var c agentrunner.RunCount
		if err := rows.Scan(&c.Pipeline, &c.Status, &c.N); err != nil {
			return out, err
		}
		out.Unfinished = append(out.Unfinished, c)
	}
	if err := rows.Err(); err != nil {
		return out, err
	}
	err = tx.QueryRowContext(ctx, sqlWaitingGates).Scan(&out.WaitingGates)
	return out, err
}

const stepRunColumns = `run_id, step, visit, status, from_key, arrived, label, output, opened_at, ended_at, error, decision`

// StepRuns lists step runs in the order they were opened.
func (s *Store) StepRuns(ctx context.Context, f agentrunner.StepRunFilter) ([]*agentrunner.StepRun, error) {
	q, args := stepRunsQuery(f)
	return queryAll(ctx, s.read, scanStepRun, q, args...)
}

// stepRunsQuery is the query of StepRuns: a run's step runs by the
// primary key, the waiting ones by step_runs_waiting, in rowid order (the
// order they were opened in: an update keeps the rowid). Another status
// across runs walks the table: nothing reads that but an operator's query.
func stepRunsQuery(f agentrunner.StepRunFilter) (string, []any) {
	q := `SELECT ` + stepRunColumns + ` FROM step_runs WHERE 1 = 1`
	var args []any
	if f.RunID != "" {
		q += ` AND run_id = ?`
		args = append(args, f.RunID)
	}
	if f.Status != "" {
		q += ` AND status = ?`
		args = append(args, string(f.Status))
	}
	if f.Status == agentrunner.StepRunWaiting {
		q += ` AND ` + sqlWaiting
	}
	q += ` ORDER BY rowid`
	if f.Limit > 0 {
		q += ` LIMIT ?`
		args = append(args, f.Limit)
	}
	return q, args
}

func scanStepRun(row scanner) (*agentrunner.StepRun, error) {
	var sr agentrunner.StepRun
	var opened, ended, decision sql.NullString
	var arrived string
	if err := row.Scan(&sr.RunID, &sr.Step, &sr.Visit, &sr.Status, &sr.From, &arrived, &sr.Label, &sr.Output,
		&opened, &ended, &sr.Error, &decision); err != nil {
		return nil, err
	}
	var err error
	if sr.OpenedAt, err = decodeTime(opened); err != nil {
		return nil, err
	}
	if sr.EndedAt, err = decodeTime(ended); err != nil {
		return nil, err
	}
	if arrived != "[]" {
		if err := json.Unmarshal([]byte(arrived), &sr.Arrived); err != nil {
			return nil, fmt.Errorf("step run %s of run %s: arrived: %w", sr.Key(), sr.RunID, err)
		}
	}
	if decision.Valid {
		var d storedDecision
		if err := json.Unmarshal([]byte(decision.String), &d); err != nil {
			return nil, fmt.Errorf("step run %s of run %s: decision: %w", sr.Key(), sr.RunID, err)
		}
		dd := agentrunner.Decision(d)
		sr.Decision = &dd
	}
	return &sr, nil
}

// Attempts lists a cycle's attempts in the order they were made.
func (s *Store) Attempts(ctx context.Context, cycleID string) ([]*agentrunner.Attempt, error) {
	return queryAll(ctx, s.read, scanAttempt, `
		SELECT cycle_id, step, number, agent, status, error_class, error, not_before, started_at, ended_at,
			exit_code, output_path, dir, input_tokens, output_tokens, cached_tokens, turns, tool_calls, retry_base, visit
		FROM attempts WHERE cycle_id = ? ORDER BY rowid`, cycleID)
}

func scanAttempt(row scanner) (*agentrunner.Attempt, error) {
	var a agentrunner.Attempt
	var notBefore, started, ended sql.NullString
	var exit sql.NullInt64
	if err := row.Scan(&a.CycleID, &a.Step, &a.Number, &a.Agent, &a.Status, &a.ErrorClass, &a.Error,
		&notBefore, &started, &ended, &exit, &a.OutputPath, &a.Dir,
		&a.Usage.InputTokens, &a.Usage.OutputTokens, &a.Usage.CachedTokens, &a.Usage.Turns, &a.Usage.ToolCalls, &a.RetryBase, &a.Visit); err != nil {
		return nil, err
	}
	if exit.Valid {
		code := int(exit.Int64)
		a.ExitCode = &code
	}
	var err error
	for _, t := range []struct {
		dst *time.Time
		src sql.NullString
	}{{&a.NotBefore, notBefore}, {&a.StartedAt, started}, {&a.EndedAt, ended}} {
		if *t.dst, err = decodeTime(t.src); err != nil {
			return nil, err
		}
	}
	return &a, nil
}

// Events lists events oldest first.
func (s *Store) Events(ctx context.Context, f agentrunner.EventFilter) ([]*agentrunner.Event, error) {
	q, args, err := eventsQuery(f)
	if err != nil {
		return nil, err
	}
	return queryAll(ctx, s.read, scanEvent, q, args...)
}

// stepEventTypes are the events of every step, which events_type leaves
// out (migration 0007): a filter by one of them walks the ids and finds a
// match within a step's events.
var stepEventTypes = []string{agentrunner.EventAttemptStarted, agentrunner.EventAttemptSucceeded,
	agentrunner.EventArtifactAccepted, agentrunner.EventTransition}

// sqlNotStepEvent is the condition of the partial index events_type, as
// the migration words it: SQLite uses the index only for a query that
// states the same condition.
const sqlNotStepEvent = `event_type NOT IN ('attempt.started', 'attempt.succeeded', 'artifact.accepted', 'state.transition')`

// eventsQuery is the query of Events. Each filter has its index: type
// events_type, level warn events_problems, level error events_errors,
// a cycle events_cycle, a time event_minutes; the rest walk the ids.
func eventsQuery(f agentrunner.EventFilter) (string, []any, error) {
	q := `SELECT id, timestamp, event_type, agent, step, cycle_id, level, details FROM events WHERE id > ?`
	args := []any{f.AfterID}
	if !f.Since.IsZero() {
		// Ids follow commits and timestamps the events' own times, which
		// may be a little out of order: the walk by id starts at the
		// smallest first id of the minutes from the time's on
		// (event_minutes), which no event at or after the time is below
		// (one bound, so whichever index walks the ids starts there too).
		// It costs in proportion to the events after the time's minute;
		// continuing by id (AfterID) costs nothing more.
		since, _ := encodeTime(f.Since).(string)
		q = `SELECT id, timestamp, event_type, agent, step, cycle_id, level, details FROM events
			WHERE id > MAX(?, (SELECT MIN(first_id) FROM event_minutes WHERE minute >= ?) - 1) AND timestamp >= ?`
		args = append(args, since[:minuteLen], since)
	}
	if f.BeforeID > 0 {
		q += ` AND id < ?`
		args = append(args, f.BeforeID)
	}
	if f.CycleID != "" {
		q += ` AND cycle_id = ?`
		args = append(args, f.CycleID)
	}
	if f.Type != "" {
		q += ` AND event_type = ?`
		args = append(args, f.Type)
		if !slices.Contains(stepEventTypes, f.Type) {
			q += ` AND ` + sqlNotStepEvent // the partial index's own condition
		}
	}
	switch f.MinLevel {
	case "", agentrunner.LevelDebug:
	case agentrunner.LevelInfo:
		q += ` AND level IN ('info', 'warn', 'error')`
	case agentrunner.LevelWarn:
		q += ` AND level IN ('warn', 'error')` // the events_problems index
	case agentrunner.LevelError:
		q += ` AND level = 'error'` // the events_errors index
	default:
		return "", nil, agentrunner.Errorf(agentrunner.EINVALID, "unknown level %q (debug, info, warn, error)", f.MinLevel)
	}
	if f.Newest {
		q += ` ORDER BY id DESC`
	} else {
		q += ` ORDER BY id`
	}
	if f.Limit > 0 {
		q += ` LIMIT ?`
		args = append(args, f.Limit)
	}
	return q, args, nil
}

func scanEvent(row scanner) (*agentrunner.Event, error) {
	var e agentrunner.Event
	var ts sql.NullString
	var details string
	if err := row.Scan(&e.ID, &ts, &e.Type, &e.Agent, &e.Step, &e.CycleID, &e.Level, &details); err != nil {
		return nil, err
	}
	var err error
	if e.Timestamp, err = decodeTime(ts); err != nil {
		return nil, err
	}
	if details != "{}" {
		if err := json.Unmarshal([]byte(details), &e.Details); err != nil {
			return nil, fmt.Errorf("event %d details: %w", e.ID, err)
		}
	}
	return &e, nil
}

// PruneEvents deletes events older than before, never the newest one. Ids
// grow with time, so the old events are the ids below the first recent
// one; the minutes before before's go with them.
func (s *Store) PruneEvents(ctx context.Context, before time.Time) (n int64, err error) {
	if before.IsZero() {
		return 0, nil
	}
	err = s.inTx(ctx, func(ctx context.Context, w *writer) (bool, error) {
		res, err := w.exec(ctx, sqlPruneEvents, encodeTime(before))
		if err != nil {
			return false, translate(err, "prune events", "")
		}
		if n, err = res.RowsAffected(); err != nil || n == 0 {
			return false, err
		}
		stamp, _ := encodeTime(before).(string)
		if _, err := w.exec(ctx, `DELETE FROM event_minutes WHERE minute < ?`, stamp[:minuteLen]); err != nil {
			return false, translate(err, "prune event minutes", "")
		}
		return true, nil
	})
	return n, err
}

// sqlPruneEvents deletes the events below the first at or after a time.
const sqlPruneEvents = `DELETE FROM events WHERE id < COALESCE(
	(SELECT id FROM events WHERE timestamp >= ? ORDER BY id LIMIT 1),
	(SELECT MAX(id) FROM events))`

// ToolUsage sums the tool calls since then, by tool, from the summary:
// the totals for all time, else the hours from since's hour on.
func (s *Store) ToolUsage(ctx context.Context, since time.Time) ([]*agentrunner.ToolUsage, error) {
	if since.IsZero() {
		return queryAll(ctx, s.read, scanToolUsage, sqlToolTotals)
	}
	return queryAll(ctx, s.read, scanToolUsage, sqlToolHours, hourOf(since))
}

// The queries of ToolUsage.
const (
	sqlToolTotals = `SELECT tool, calls, errors, duration_ms, last_call FROM tool_usage_totals ORDER BY tool`
	sqlToolHours  = `SELECT tool, SUM(calls), SUM(errors), SUM(duration_ms), MAX(last_call)
		FROM tool_usage_hours WHERE hour >= ? GROUP BY tool ORDER BY tool`
)

func scanToolUsage(row scanner) (*agentrunner.ToolUsage, error) {
	var u agentrunner.ToolUsage
	var ms int64
	var last sql.NullString
	if err := row.Scan(&u.Tool, &u.Calls, &u.Errors, &ms, &last); err != nil {
		return nil, err
	}
	u.Duration = time.Duration(ms) * time.Millisecond
	var err error
	if u.LastCall, err = decodeTime(last); err != nil {
		return nil, err
	}
	return &u, nil
}

const outboxColumns = `key, kind, cycle_id, payload, created_at, delivered_at, response, attempts, last_error, next_attempt_at`

func scanOutbox(row scanner) (*agentrunner.OutboxMessage, error) {
	var m agentrunner.OutboxMessage
	var created, delivered, next sql.NullString
	if err := row.Scan(&m.Key, &m.Kind, &m.CycleID, &m.Payload, &created, &delivered, &m.Response, &m.Attempts, &m.LastError, &next); err != nil {
		return nil, err
	}
	var err error
	for _, t := range []struct {
		dst *time.Time
		src sql.NullString
	}{{&m.CreatedAt, created}, {&m.DeliveredAt, delivered}, {&m.NextAttemptAt, next}} {
		if *t.dst, err = decodeTime(t.src); err != nil {
			return nil, err
		}
	}
	return &m, nil
}

// OutboxMessage returns one outbox message by key.
func (s *Store) OutboxMessage(ctx context.Context, key string) (*agentrunner.OutboxMessage, error) {
	m, err := scanOutbox(s.read.QueryRowContext(ctx, `SELECT `+outboxColumns+` FROM outbox WHERE key = ?`, key))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, agentrunner.Errorf(agentrunner.ENOTFOUND, "outbox message %q not found", key)
	}
	return m, err
}

// Outbox lists outbox messages: undelivered ones due by f.Due, oldest
// first, or delivered ones, newest first.
func (s *Store) Outbox(ctx context.Context, f agentrunner.OutboxFilter) ([]*agentrunner.OutboxMessage, error) {
	q := `SELECT ` + outboxColumns + ` FROM outbox WHERE `
	var args []any
	if f.Delivered {
		q += `delivered_at IS NOT NULL`
	} else {
		q += `delivered_at IS NULL AND (next_attempt_at IS NULL OR next_attempt_at <= ?)`
		args = append(args, encodeTime(f.Due))
	}
	if f.Kind != "" {
		q += ` AND kind = ?`
		args = append(args, f.Kind)
	}
	if f.Delivered {
		q += ` ORDER BY delivered_at DESC`
	} else {
		q += ` ORDER BY created_at, key`
	}
	if f.Limit > 0 {
		q += ` LIMIT ?`
		args = append(args, f.Limit)
	}
	return queryAll(ctx, s.read, scanOutbox, q, args...)
}

// AddCommand stores a command and assigns its ID. A command with a Target
// whose kind and target are taken is refused with ECONFLICT.
func (s *Store) AddCommand(ctx context.Context, c *agentrunner.Command) error {
	args := []byte("{}")
	if len(c.Args) > 0 {
		var err error
		if args, err = json.Marshal(c.Args); err != nil {
			return &agentrunner.Error{Code: agentrunner.EINVALID, Message: "command arguments", Err: err}
		}
	}
	s.w.mu.Lock()
	defer s.w.mu.Unlock()
	res, err := s.w.exec(ctx, `INSERT INTO commands (kind, args, operator, created_at, target) VALUES (?, ?, ?, ?, ?)`,
		c.Kind, string(args), c.Operator, encodeTime(c.CreatedAt), c.Target)
	if err != nil {
		return translate(err, "command "+c.Kind, fmt.Sprintf("%s was decided already", c.Target))
	}
	if c.ID, err = res.LastInsertId(); err != nil {
		return err
	}
	s.commits.Add(1)
	return nil
}

const commandColumns = `id, kind, args, operator, created_at, consumed_at, result, target`

func scanCommand(row scanner) (*agentrunner.Command, error) {
	var c agentrunner.Command
	var args string
	var created, consumed sql.NullString
	if err := row.Scan(&c.ID, &c.Kind, &args, &c.Operator, &created, &consumed, &c.Result, &c.Target); err != nil {
		return nil, err
	}
	var err error
	if c.CreatedAt, err = decodeTime(created); err != nil {
		return nil, err
	}
	if c.ConsumedAt, err = decodeTime(consumed); err != nil {
		return nil, err
	}
	if args != "{}" {
		if err := json.Unmarshal([]byte(args), &c.Args); err != nil {
			return nil, fmt.Errorf("command %d arguments: %w", c.ID, err)
		}
	}
	return &c, nil
}

func (s *Store) commands(ctx context.Context, query string, args ...any) ([]*agentrunner.Command, error) {
	return queryAll(ctx, s.read, scanCommand, `SELECT `+commandColumns+` FROM commands `+query, args...)
}

// PendingCommands lists unconsumed commands, oldest first.
func (s *Store) PendingCommands(ctx context.Context) ([]*agentrunner.Command, error) {
	return s.commands(ctx, `WHERE consumed_at IS NULL ORDER BY id`)
}

// sqlCommandsPage is a page of the audit log: a plain bound on the id, so
// the page is a range of the primary key.
const sqlCommandsPage = `WHERE id < ? ORDER BY id DESC LIMIT ?`

// Commands lists commands, newest first.
func (s *Store) Commands(ctx context.Context, f agentrunner.CommandFilter) ([]*agentrunner.Command, error) {
	limit := int64(f.Limit)
	if limit <= 0 {
		limit = -1 // no limit
	}
	before := f.BeforeID
	if before <= 0 {
		before = math.MaxInt64
	}
	return s.commands(ctx, sqlCommandsPage, before, limit)
}

// Control returns the loop's control state.
func (s *Store) Control(ctx context.Context) (*agentrunner.Control, error) {
	var c agentrunner.Control
	var at sql.NullString
	err := s.read.QueryRowContext(ctx, `SELECT paused, paused_by, paused_at FROM control WHERE id = 1`).Scan(&c.Paused, &c.PausedBy, &at)
	if errors.Is(err, sql.ErrNoRows) {
		return &c, nil
	}
	if err != nil {
		return nil, err
	}
	if c.PausedAt, err = decodeTime(at); err != nil {
		return nil, err
	}
	return &c, nil
}

// RecordOutboxFailure counts a failed delivery, keeps its reason and sets
// when to try again.
func (s *Store) RecordOutboxFailure(ctx context.Context, key, reason string, next time.Time) error {
	s.w.mu.Lock()
	defer s.w.mu.Unlock()
	res, err := s.w.exec(ctx, `UPDATE outbox SET attempts = attempts + 1, last_error = ?, next_attempt_at = ? WHERE key = ?`,
		reason, encodeTime(next), key)
	if err != nil {
		return translate(err, "outbox "+key, "")
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return agentrunner.Errorf(agentrunner.ENOTFOUND, "outbox message %q not found", key)
	}
	s.commits.Add(1)
	return nil
}
