package sqlite

import (
	"context"
	"database/sql"
	"strings"

	"github.com/agentrunner/agentrunner"
)

var _ agentrunner.MemoryStore = (*Store)(nil)

const (
	memoryColumns     = `id, agent, run_id, step, attempt, text, created_at`
	sqlAppendMemory   = `INSERT INTO memory_entries (agent, run_id, step, attempt, text, created_at) VALUES (?, ?, ?, ?, ?, ?) RETURNING ` + memoryColumns
	sqlMemoryEntries  = `SELECT ` + memoryColumns + ` FROM memory_entries WHERE agent = ? AND id > ? ORDER BY id LIMIT ?`
	memorySearchLimit = 20
)

// AppendMemory stores an entry and returns it with its id.
func (s *Store) AppendMemory(ctx context.Context, e *agentrunner.MemoryEntry) (*agentrunner.MemoryEntry, error) {
	var out *agentrunner.MemoryEntry
	err := s.inTx(ctx, func(ctx context.Context, w *writer) (bool, error) {
		row, err := w.row(ctx, sqlAppendMemory, e.Agent, e.RunID, e.Step, e.Attempt, e.Text, encodeTime(e.CreatedAt))
		if err == nil {
			out, err = scanMemory(row)
		}
		if err != nil {
			return false, translate(err, "memory entry of "+e.Agent, "")
		}
		return true, nil
	})
	return out, err
}

// MemoryEntries lists an agent's entries after the id after, oldest first.
func (s *Store) MemoryEntries(ctx context.Context, agent string, after int64, limit int) ([]*agentrunner.MemoryEntry, error) {
	if limit <= 0 {
		limit = -1 // SQLite: no limit
	}
	return queryAll(ctx, s.read, scanMemory, sqlMemoryEntries, agent, after, limit)
}

// SearchMemory finds entries by full-text query, best first.
func (s *Store) SearchMemory(ctx context.Context, query string, agents []string, limit int) ([]*agentrunner.MemoryHit, error) {
	q := `SELECT ` + prefixed("m.", memoryColumns) + `, bm25(memory_fts), snippet(memory_fts, 0, '«', '»', '…', 12)
		FROM memory_fts JOIN memory_entries AS m ON m.id = memory_fts.rowid
		WHERE memory_fts MATCH ?`
	args := []any{query}
	if len(agents) > 0 {
		q += ` AND m.agent IN (?` + strings.Repeat(", ?", len(agents)-1) + `)`
		for _, a := range agents {
			args = append(args, a)
		}
	}
	q += ` ORDER BY bm25(memory_fts), m.id DESC LIMIT ?`
	args = append(args, capsuleLimit(limit, memorySearchLimit, 100))
	hits, err := queryAll(ctx, s.read, scanMemoryHit, q, args...)
	if err != nil {
		return nil, searchError(err, query)
	}
	return hits, nil
}

// prefixed qualifies each of a list of columns with p.
func prefixed(p, columns string) string {
	cols := strings.Split(columns, ", ")
	for i, c := range cols {
		cols[i] = p + c
	}
	return strings.Join(cols, ", ")
}

func scanMemory(row scanner) (*agentrunner.MemoryEntry, error) {
	return scanMemoryWith(row)
}

func scanMemoryHit(row scanner) (*agentrunner.MemoryHit, error) {
	var h agentrunner.MemoryHit
	var snippet sql.NullString
	e, err := scanMemoryWith(row, &h.Rank, &snippet)
	if err != nil {
		return nil, err
	}
	h.Entry, h.Snippet = e, snippet.String
	return &h, nil
}

func scanMemoryWith(row scanner, extra ...any) (*agentrunner.MemoryEntry, error) {
	var e agentrunner.MemoryEntry
	var created sql.NullString
	if err := row.Scan(append([]any{&e.ID, &e.Agent, &e.RunID, &e.Step, &e.Attempt, &e.Text, &created}, extra...)...); err != nil {
		return nil, err
	}
	var err error
	e.CreatedAt, err = decodeTime(created)
	return &e, err
}
