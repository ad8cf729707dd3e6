package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/agentrunner/agentrunner"
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

// The statements of Apply, prepared once on the write connection: parsing
// SQL is most of the CPU a commit costs.
const (
	sqlState = `SELECT COALESCE(
		(SELECT step FROM cycles WHERE status = 'running'),
		CASE WHEN EXISTS (SELECT 1 FROM cycles) THEN 'WaitingForNextCycle' ELSE 'Idle' END)`
	sqlUpsertCycle = `
		INSERT INTO cycles (id, pipeline, status, step, last_completed_step, dir, started_at, ended_at, error)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (id) DO UPDATE SET
			status = excluded.status, step = excluded.step,
			last_completed_step = excluded.last_completed_step,
			ended_at = excluded.ended_at, error = excluded.error`
	// The multi-row statements take their VALUES rows where %s is.
	sqlUpsertAttempts = `
		INSERT INTO attempts (cycle_id, step, number, agent, status, error_class, error,
			not_before, started_at, ended_at, exit_code, output_path, dir)
		VALUES %s
		ON CONFLICT (cycle_id, step, number) DO UPDATE SET
			status = excluded.status, error_class = excluded.error_class, error = excluded.error,
			not_before = excluded.not_before, started_at = excluded.started_at,
			ended_at = excluded.ended_at, exit_code = excluded.exit_code,
			output_path = excluded.output_path, dir = excluded.dir`
	sqlInsertEvents = `
		INSERT INTO events (timestamp, event_type, agent, step, cycle_id, level, details)
		VALUES %s`
	sqlInsertOutbox = `
		INSERT INTO outbox (key, kind, cycle_id, payload, created_at) VALUES (?, ?, ?, ?, ?)
		ON CONFLICT (key) DO NOTHING`
	sqlDelivered = `UPDATE outbox SET delivered_at = ?, response = ?, attempts = attempts + 1 WHERE key = ?`
)

type statements struct {
	state, upsertCycle, insertOutbox, delivered *sql.Stmt
	// attempts and events are multi-row statements by row count; one
	// statement per change beats one per row.
	mu               sync.Mutex
	attempts, events map[int]*sql.Stmt
}

// maxRows bounds the rows of one multi-row statement, far below SQLite's
// limit on bound parameters.
const maxRows = 64

// prepareRows prepares the statements execRows needs for n rows: one of
// maxRows rows and one of the remainder.
func (s *Store) prepareRows(ctx context.Context, cache *map[int]*sql.Stmt, query string, n int) error {
	s.stmts.mu.Lock()
	defer s.stmts.mu.Unlock()
	cols := strings.Count(query[:strings.Index(query, "VALUES")], ",") + 1
	row := "(" + strings.TrimSuffix(strings.Repeat("?, ", cols), ", ") + ")"
	for _, size := range []int{min(n, maxRows), n % maxRows} {
		if size == 0 || (*cache)[size] != nil {
			continue
		}
		values := strings.TrimSuffix(strings.Repeat(row+", ", size), ", ")
		stmt, err := s.write.PrepareContext(ctx, fmt.Sprintf(query, values))
		if err != nil {
			return fmt.Errorf("prepare: %w", err)
		}
		(*cache)[size] = stmt
	}
	return nil
}

// execRows inserts rows with the prepared multi-row statements, maxRows at
// a time, and returns the rowid of each row. With one writer, the rows of
// one statement get consecutive rowids.
func (s *Store) execRows(ctx context.Context, tx *sql.Tx, cache map[int]*sql.Stmt, rows [][]any) ([]int64, error) {
	ids := make([]int64, 0, len(rows))
	for len(rows) > 0 {
		chunk := rows[:min(len(rows), maxRows)]
		rows = rows[len(chunk):]
		s.stmts.mu.Lock()
		stmt := cache[len(chunk)]
		s.stmts.mu.Unlock()
		var args []any
		for _, r := range chunk {
			args = append(args, r...)
		}
		res, err := tx.StmtContext(ctx, stmt).ExecContext(ctx, args...)
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

func (s *Store) prepare(ctx context.Context) error {
	s.stmts.attempts, s.stmts.events = map[int]*sql.Stmt{}, map[int]*sql.Stmt{}
	for _, p := range []struct {
		dst **sql.Stmt
		sql string
	}{
		{&s.stmts.state, sqlState}, {&s.stmts.upsertCycle, sqlUpsertCycle},
		{&s.stmts.insertOutbox, sqlInsertOutbox}, {&s.stmts.delivered, sqlDelivered},
	} {
		stmt, err := s.write.PrepareContext(ctx, p.sql)
		if err != nil {
			return fmt.Errorf("prepare: %w", err)
		}
		*p.dst = stmt
	}
	return nil
}

// Apply commits a change in one IMMEDIATE transaction.
func (s *Store) Apply(ctx context.Context, ch *agentrunner.Change) (err error) {
	// Prepare before the transaction takes the one write connection.
	if err := s.prepareRows(ctx, &s.stmts.attempts, sqlUpsertAttempts, len(ch.Attempts)); err != nil {
		return err
	}
	if err := s.prepareRows(ctx, &s.stmts.events, sqlInsertEvents, len(ch.Events)); err != nil {
		return err
	}
	tx, err := s.write.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	defer func() {
		if err != nil {
			tx.Rollback()
		}
	}()
	if ch.From != "" {
		var state string
		if err := tx.StmtContext(ctx, s.stmts.state).QueryRowContext(ctx).Scan(&state); err != nil {
			return fmt.Errorf("read current state: %w", err)
		}
		if agentrunner.State(state) != ch.From {
			return agentrunner.Errorf(agentrunner.ECONFLICT, "state is %s, not %s: the change was not applied", state, ch.From)
		}
	}
	if c := ch.Cycle; c != nil {
		_, err = tx.StmtContext(ctx, s.stmts.upsertCycle).ExecContext(ctx,
			c.ID, c.Pipeline, string(c.Status), c.Step, c.LastCompletedStep, c.Dir,
			encodeTime(c.StartedAt), encodeTime(c.EndedAt), c.Error)
		if err != nil {
			return translate(err, "cycle "+c.ID)
		}
	}
	if len(ch.Attempts) > 0 {
		rows := make([][]any, len(ch.Attempts))
		for i, a := range ch.Attempts {
			var exit any
			if a.ExitCode != nil {
				exit = *a.ExitCode
			}
			rows[i] = []any{a.CycleID, a.Step, a.Number, a.Agent, string(a.Status), string(a.ErrorClass), a.Error,
				encodeTime(a.NotBefore), encodeTime(a.StartedAt), encodeTime(a.EndedAt), exit, a.OutputPath, a.Dir}
		}
		if _, err = s.execRows(ctx, tx, s.stmts.attempts, rows); err != nil {
			return translate(err, fmt.Sprintf("attempts of cycle %s", ch.Attempts[0].CycleID))
		}
	}
	if len(ch.Events) > 0 {
		rows := make([][]any, len(ch.Events))
		for i, e := range ch.Events {
			details := []byte("{}")
			if len(e.Details) > 0 {
				if details, err = json.Marshal(e.Details); err != nil {
					return fmt.Errorf("event %s details: %w", e.Type, err)
				}
			}
			level := e.Level
			if level == "" {
				level = agentrunner.LevelInfo
			}
			rows[i] = []any{encodeTime(e.Timestamp), e.Type, e.Agent, e.Step, e.CycleID, string(level), string(details)}
		}
		ids, err := s.execRows(ctx, tx, s.stmts.events, rows)
		if err != nil {
			return translate(err, "events")
		}
		for i, e := range ch.Events {
			e.ID = ids[i]
		}
	}
	for _, m := range ch.Outbox {
		_, err = tx.StmtContext(ctx, s.stmts.insertOutbox).ExecContext(ctx, m.Key, m.Kind, m.CycleID, m.Payload, encodeTime(m.CreatedAt))
		if err != nil {
			return translate(err, "outbox "+m.Key)
		}
	}
	for _, m := range ch.Delivered {
		res, err := tx.StmtContext(ctx, s.stmts.delivered).ExecContext(ctx, encodeTime(m.DeliveredAt), m.Response, m.Key)
		if err != nil {
			return translate(err, "outbox "+m.Key)
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return agentrunner.Errorf(agentrunner.ENOTFOUND, "outbox message %q not found", m.Key)
		}
	}
	if err = tx.Commit(); err != nil {
		return fmt.Errorf("commit: %w", err)
	}
	s.commits.Add(1)
	return nil
}

// translate turns constraint violations into coded errors, in one place.
func translate(err error, what string) error {
	msg := err.Error()
	switch {
	case strings.Contains(msg, "UNIQUE constraint failed: cycles.status"):
		return agentrunner.Errorf(agentrunner.ECONFLICT, "%s: another cycle is already running", what)
	case strings.Contains(msg, "constraint failed"):
		return &agentrunner.Error{Code: agentrunner.EINVALID, Message: what, Err: err}
	}
	return fmt.Errorf("%s: %w", what, err)
}

const cycleColumns = `id, pipeline, status, step, last_completed_step, dir, started_at, ended_at, error`

func scanCycle(row interface{ Scan(...any) error }) (*agentrunner.Cycle, error) {
	var c agentrunner.Cycle
	var started, ended sql.NullString
	if err := row.Scan(&c.ID, &c.Pipeline, &c.Status, &c.Step, &c.LastCompletedStep, &c.Dir, &started, &ended, &c.Error); err != nil {
		return nil, err
	}
	var err error
	if c.StartedAt, err = decodeTime(started); err != nil {
		return nil, err
	}
	if c.EndedAt, err = decodeTime(ended); err != nil {
		return nil, err
	}
	return &c, nil
}

func (s *Store) oneCycle(ctx context.Context, what, where string, args ...any) (*agentrunner.Cycle, error) {
	c, err := scanCycle(s.read.QueryRowContext(ctx, `SELECT `+cycleColumns+` FROM cycles WHERE `+where, args...))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, agentrunner.Errorf(agentrunner.ENOTFOUND, "%s not found", what)
	}
	return c, err
}

// Cycle returns one cycle by id.
func (s *Store) Cycle(ctx context.Context, id string) (*agentrunner.Cycle, error) {
	return s.oneCycle(ctx, fmt.Sprintf("cycle %q", id), `id = ?`, id)
}

// UnfinishedCycle returns the running cycle.
func (s *Store) UnfinishedCycle(ctx context.Context) (*agentrunner.Cycle, error) {
	return s.oneCycle(ctx, "running cycle", `status = 'running'`)
}

// Cycles lists cycles newest first.
func (s *Store) Cycles(ctx context.Context, f agentrunner.CycleFilter) ([]*agentrunner.Cycle, error) {
	q := `SELECT ` + cycleColumns + ` FROM cycles WHERE 1 = 1`
	var args []any
	if f.Status != "" {
		q += ` AND status = ?`
		args = append(args, string(f.Status))
	}
	if f.Before != "" {
		q += ` AND id < ?`
		args = append(args, f.Before)
	}
	q += ` ORDER BY id DESC`
	if f.Limit > 0 {
		q += ` LIMIT ?`
		args = append(args, f.Limit)
	}
	rows, err := s.read.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []*agentrunner.Cycle
	for rows.Next() {
		c, err := scanCycle(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, c)
	}
	return out, rows.Err()
}

// Attempts lists a cycle's attempts in the order they were made.
func (s *Store) Attempts(ctx context.Context, cycleID string) ([]*agentrunner.Attempt, error) {
	rows, err := s.read.QueryContext(ctx, `
		SELECT cycle_id, step, number, agent, status, error_class, error, not_before, started_at, ended_at,
			exit_code, output_path, dir
		FROM attempts WHERE cycle_id = ? ORDER BY rowid`, cycleID)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []*agentrunner.Attempt
	for rows.Next() {
		var a agentrunner.Attempt
		var notBefore, started, ended sql.NullString
		var exit sql.NullInt64
		if err := rows.Scan(&a.CycleID, &a.Step, &a.Number, &a.Agent, &a.Status, &a.ErrorClass, &a.Error,
			&notBefore, &started, &ended, &exit, &a.OutputPath, &a.Dir); err != nil {
			return nil, err
		}
		if exit.Valid {
			code := int(exit.Int64)
			a.ExitCode = &code
		}
		for _, t := range []struct {
			dst *time.Time
			src sql.NullString
		}{{&a.NotBefore, notBefore}, {&a.StartedAt, started}, {&a.EndedAt, ended}} {
			if *t.dst, err = decodeTime(t.src); err != nil {
				return nil, err
			}
		}
		out = append(out, &a)
	}
	return out, rows.Err()
}

// Events lists events oldest first.
func (s *Store) Events(ctx context.Context, f agentrunner.EventFilter) ([]*agentrunner.Event, error) {
	q := `SELECT id, timestamp, event_type, agent, step, cycle_id, level, details FROM events WHERE id > ?`
	args := []any{f.AfterID}
	if f.CycleID != "" {
		q += ` AND cycle_id = ?`
		args = append(args, f.CycleID)
	}
	q += ` ORDER BY id`
	if f.Limit > 0 {
		q += ` LIMIT ?`
		args = append(args, f.Limit)
	}
	rows, err := s.read.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []*agentrunner.Event
	for rows.Next() {
		var e agentrunner.Event
		var ts sql.NullString
		var details string
		if err := rows.Scan(&e.ID, &ts, &e.Type, &e.Agent, &e.Step, &e.CycleID, &e.Level, &details); err != nil {
			return nil, err
		}
		if e.Timestamp, err = decodeTime(ts); err != nil {
			return nil, err
		}
		if details != "{}" {
			if err := json.Unmarshal([]byte(details), &e.Details); err != nil {
				return nil, fmt.Errorf("event %d details: %w", e.ID, err)
			}
		}
		out = append(out, &e)
	}
	return out, rows.Err()
}

// OutboxMessage returns one outbox message by key.
func (s *Store) OutboxMessage(ctx context.Context, key string) (*agentrunner.OutboxMessage, error) {
	var m agentrunner.OutboxMessage
	var created, delivered sql.NullString
	err := s.read.QueryRowContext(ctx, `
		SELECT key, kind, cycle_id, payload, created_at, delivered_at, response, attempts, last_error
		FROM outbox WHERE key = ?`, key).
		Scan(&m.Key, &m.Kind, &m.CycleID, &m.Payload, &created, &delivered, &m.Response, &m.Attempts, &m.LastError)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, agentrunner.Errorf(agentrunner.ENOTFOUND, "outbox message %q not found", key)
	}
	if err != nil {
		return nil, err
	}
	if m.CreatedAt, err = decodeTime(created); err != nil {
		return nil, err
	}
	if m.DeliveredAt, err = decodeTime(delivered); err != nil {
		return nil, err
	}
	return &m, nil
}

// RecordOutboxFailure counts a failed delivery and keeps its reason.
func (s *Store) RecordOutboxFailure(ctx context.Context, key, reason string) error {
	res, err := s.write.ExecContext(ctx, `UPDATE outbox SET attempts = attempts + 1, last_error = ? WHERE key = ?`, reason, key)
	if err != nil {
		return err
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return agentrunner.Errorf(agentrunner.ENOTFOUND, "outbox message %q not found", key)
	}
	s.commits.Add(1)
	return nil
}
