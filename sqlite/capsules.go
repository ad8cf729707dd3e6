package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/agentrunner/agentrunner"
	msqlite "modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"
)

// The limits of the capsule lists and searches: the default, and the most
// one call returns.
const (
	capsulesLimit, capsulesMaxLimit = 100, 1000
	searchLimit, searchMaxLimit     = 20, 100
)

// The statements of capsules.
const (
	capsuleColumns = `id, workspace, name, run_id, phase, role, tags, text, version, created_at, updated_at, deleted_at`
	sqlPutCapsule  = `
		INSERT INTO capsules (workspace, name, run_id, phase, role, tags, text, version, created_at, updated_at)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`
	sqlInsertCapsule = sqlPutCapsule + ` RETURNING ` + capsuleColumns
	// sqlUpsertCapsule names the partial unique index capsules_live_name
	// by its columns and its condition: a live capsule of the name is
	// replaced, a deleted one is no conflict.
	sqlUpsertCapsule = sqlPutCapsule + `
		ON CONFLICT (workspace, name) WHERE deleted_at IS NULL DO UPDATE SET
			run_id = excluded.run_id, phase = excluded.phase, role = excluded.role, tags = excluded.tags,
			text = excluded.text, version = version + 1, updated_at = excluded.updated_at
		RETURNING ` + capsuleColumns
	sqlLiveCapsuleID = `SELECT id FROM capsules WHERE workspace = ? AND name = ? AND deleted_at IS NULL`
	sqlUpdateCapsule = `
		UPDATE capsules SET run_id = ?, phase = ?, role = ?, tags = ?, text = ?, version = version + 1, updated_at = ?
		WHERE id = ? AND version = ? AND deleted_at IS NULL
		RETURNING ` + capsuleColumns
	sqlCapsuleVersion = `SELECT workspace, name, version, deleted_at IS NOT NULL FROM capsules WHERE id = ?`
	sqlDeleteCapsule  = `UPDATE capsules SET deleted_at = ? WHERE id = ? AND deleted_at IS NULL`
	sqlCapsuleByName  = `SELECT ` + capsuleColumns + ` FROM capsules WHERE workspace = ? AND name = ? AND deleted_at IS NULL`
	sqlCapsuleByID    = `SELECT ` + capsuleColumns + ` FROM capsules WHERE id = ?`
	// sqlCapsuleInventory reads capsules_live_kind alone.
	sqlCapsuleInventory = `
		SELECT workspace, phase, role, COUNT(*) FROM capsules WHERE deleted_at IS NULL
		GROUP BY workspace, phase, role ORDER BY workspace, phase, role`
)

// capsuleColumnsC are capsuleColumns of the table named c, for the
// queries that join the full-text index, whose columns have the same
// names.
var capsuleColumnsC = "c." + strings.ReplaceAll(capsuleColumns, ", ", ", c.")

// capsuleArgs are the values of sqlPutCapsule for c, or why c cannot be
// stored.
func capsuleArgs(c *agentrunner.Capsule) ([]any, error) {
	what := fmt.Sprintf("capsule %q of workspace %q", c.Name, c.Workspace)
	if c.Name == "" {
		return nil, agentrunner.Errorf(agentrunner.EINVALID, "%s: a name is required", what)
	}
	created, updated := c.CreatedAt, c.UpdatedAt
	if created.IsZero() {
		created = updated
	}
	if updated.IsZero() {
		updated = created
	}
	if created.IsZero() {
		return nil, agentrunner.Errorf(agentrunner.EINVALID, "%s: a creation or update time is required", what)
	}
	tags, err := encodeTags(what, c.Tags)
	if err != nil {
		return nil, err
	}
	return []any{c.Workspace, c.Name, c.RunID, c.Phase, c.Role, tags, c.Text, max(c.Version, 1), encodeTime(created), encodeTime(updated)}, nil
}

// encodeTags is tags as the tags column holds them: a JSON array, empty
// for none.
func encodeTags(what string, tags []string) (string, error) {
	if len(tags) == 0 {
		return "[]", nil
	}
	for i, t := range tags {
		if t == "" {
			return "", agentrunner.Errorf(agentrunner.EINVALID, "%s: tag %d is empty", what, i+1)
		}
	}
	b, err := json.Marshal(tags)
	return string(b), err
}

// PutCapsule stores a new capsule, or with upsert replaces the live one of
// its workspace and name as its next version.
func (s *Store) PutCapsule(ctx context.Context, c *agentrunner.Capsule, upsert bool) (*agentrunner.Capsule, error) {
	if _, err := capsuleArgs(c); err != nil {
		return nil, err // before the write lock
	}
	var out *agentrunner.Capsule
	err := s.inTx(ctx, func(ctx context.Context, w *writer) (bool, error) {
		var err error
		out, err = w.putCapsule(ctx, c, upsert)
		return err == nil, err
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// putCapsule writes a capsule in the caller's transaction; the caller
// holds mu.
func (w *writer) putCapsule(ctx context.Context, c *agentrunner.Capsule, upsert bool) (*agentrunner.Capsule, error) {
	args, err := capsuleArgs(c)
	if err != nil {
		return nil, err
	}
	query := sqlInsertCapsule
	if upsert {
		query = sqlUpsertCapsule
	}
	row, err := w.row(ctx, query, args...)
	if err == nil {
		var out *agentrunner.Capsule
		if out, err = scanCapsule(row); err == nil {
			return out, nil
		}
	}
	what := fmt.Sprintf("capsule %q of workspace %q", c.Name, c.Workspace)
	err = translate(err, what, "")
	if agentrunner.ErrorCode(err) != agentrunner.ECONFLICT {
		return nil, err
	}
	var id int64
	if w.queryRow(ctx, sqlLiveCapsuleID, []any{c.Workspace, c.Name}, &id) != nil {
		return nil, err
	}
	return nil, agentrunner.Errorf(agentrunner.ECONFLICT,
		"%s: the workspace has a live capsule of that name already (id %d); delete it first, or put the capsule as an upsert to replace it", what, id)
}

// CapsuleByName returns the live capsule of a workspace with the name.
func (s *Store) CapsuleByName(ctx context.Context, workspace, name string) (*agentrunner.Capsule, error) {
	c, err := scanCapsule(s.read.QueryRowContext(ctx, sqlCapsuleByName, workspace, name))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, agentrunner.Errorf(agentrunner.ENOTFOUND, "workspace %q has no live capsule named %q", workspace, name)
	}
	return c, err
}

// CapsuleByID returns a capsule, live or deleted.
func (s *Store) CapsuleByID(ctx context.Context, id int64) (*agentrunner.Capsule, error) {
	c, err := scanCapsule(s.read.QueryRowContext(ctx, sqlCapsuleByID, id))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, agentrunner.Errorf(agentrunner.ENOTFOUND, "capsule %d not found", id)
	}
	return c, err
}

// UpdateCapsule replaces the text, run, phase, role and tags of the live
// capsule c.ID if its version is still version. The one UPDATE both checks
// and writes; only when it writes nothing is the capsule read to say why.
func (s *Store) UpdateCapsule(ctx context.Context, c *agentrunner.Capsule, version int) (*agentrunner.Capsule, error) {
	what := fmt.Sprintf("capsule %d", c.ID)
	if c.UpdatedAt.IsZero() {
		return nil, agentrunner.Errorf(agentrunner.EINVALID, "%s: an update time is required", what)
	}
	tags, err := encodeTags(what, c.Tags)
	if err != nil {
		return nil, err
	}
	var out *agentrunner.Capsule
	err = s.inTx(ctx, func(ctx context.Context, w *writer) (bool, error) {
		row, err := w.row(ctx, sqlUpdateCapsule, c.RunID, c.Phase, c.Role, tags, c.Text, encodeTime(c.UpdatedAt), c.ID, version)
		if err == nil {
			out, err = scanCapsule(row)
		}
		if err == nil {
			return true, nil
		}
		if !errors.Is(err, sql.ErrNoRows) {
			return false, translate(err, what, "")
		}
		var workspace, name string
		var current int
		var deleted bool
		err = w.queryRow(ctx, sqlCapsuleVersion, []any{c.ID}, &workspace, &name, &current, &deleted)
		switch {
		case errors.Is(err, sql.ErrNoRows):
			return false, agentrunner.Errorf(agentrunner.ENOTFOUND, "%s not found", what)
		case err != nil:
			return false, translate(err, what, "")
		case deleted:
			return false, agentrunner.Errorf(agentrunner.ENOTFOUND, "%s (%q of workspace %q) was deleted", what, name, workspace)
		}
		return false, agentrunner.Errorf(agentrunner.ECONFLICT,
			"%s (%q of workspace %q) is at version %d, not %d: it changed since it was read; fetch it again and make the change on version %d",
			what, name, workspace, current, version, current)
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// DeleteCapsule deletes a live capsule (softly), as of at.
func (s *Store) DeleteCapsule(ctx context.Context, id int64, at time.Time) error {
	what := fmt.Sprintf("capsule %d", id)
	if at.IsZero() {
		return agentrunner.Errorf(agentrunner.EINVALID, "deleting %s: a deletion time is required", what)
	}
	return s.inTx(ctx, func(ctx context.Context, w *writer) (bool, error) {
		res, err := w.exec(ctx, sqlDeleteCapsule, encodeTime(at), id)
		if err != nil {
			return false, translate(err, what, "")
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return false, agentrunner.Errorf(agentrunner.ENOTFOUND, "%s not found, or deleted already", what)
		}
		return true, nil
	})
}

// capsuleWhere is the condition a filter sets on the capsules table named
// table, and its arguments. Live capsules only, unless f includes deleted
// ones and live is false; Before only when paged. The condition on
// deleted_at is spelled as capsules_live_name and capsules_live_kind
// state it, so that they serve it.
func capsuleWhere(table string, f agentrunner.CapsuleFilter, live, paged bool) (string, []any) {
	var where []string
	var args []any
	if live || !f.IncludeDeleted {
		where = append(where, table+".deleted_at IS NULL")
	}
	for _, c := range []struct{ column, value string }{
		{"workspace", f.Workspace}, {"run_id", f.RunID}, {"phase", f.Phase}, {"role", f.Role},
	} {
		if c.value != "" {
			where, args = append(where, table+"."+c.column+" = ?"), append(args, c.value)
		}
	}
	if f.Tag != "" {
		where = append(where, "EXISTS (SELECT 1 FROM json_each("+table+".tags) AS tag WHERE tag.value = ?)")
		args = append(args, f.Tag)
	}
	if paged && f.Before > 0 {
		where, args = append(where, table+".id < ?"), append(args, f.Before)
	}
	if len(where) == 0 {
		return "1 = 1", nil
	}
	return strings.Join(where, " AND "), args
}

// capsuleLimit is a filter's limit n: def for none, and at most most.
func capsuleLimit(n, def, most int) int {
	if n <= 0 {
		return def
	}
	return min(n, most)
}

// Capsules lists capsules, newest first.
func (s *Store) Capsules(ctx context.Context, f agentrunner.CapsuleFilter) ([]*agentrunner.Capsule, error) {
	q, args := capsulesQuery(f)
	return queryAll(ctx, s.read, scanCapsule, q, args...)
}

// capsulesQuery is the query of Capsules.
func capsulesQuery(f agentrunner.CapsuleFilter) (string, []any) {
	where, args := capsuleWhere("c", f, false, true)
	q := `SELECT ` + capsuleColumnsC + ` FROM capsules AS c WHERE ` + where + ` ORDER BY c.id DESC LIMIT ?`
	return q, append(args, capsuleLimit(f.Limit, capsulesLimit, capsulesMaxLimit))
}

// SearchCapsules finds the capsules f selects whose name, tags or text
// match a full-text query, best first (bm25, lower is better; the newer
// first among equals). Before, as in Capsules, bounds the ids; it does
// not page through ranks.
//
// The hits are ranked and cut to the limit first, and the snippets made
// for those alone: a snippet costs far more than a rank, and a common
// term matches many more capsules than a search returns.
func (s *Store) SearchCapsules(ctx context.Context, query string, f agentrunner.CapsuleFilter) ([]*agentrunner.CapsuleHit, error) {
	if strings.TrimSpace(query) == "" {
		return nil, agentrunner.Errorf(agentrunner.EINVALID, "the search query is empty: give one or more words to search for")
	}
	q, args := searchQuery(query, f)
	hits, err := queryAll(ctx, s.read, scanCapsuleHit, q, args...)
	if err != nil {
		return nil, searchError(err, query)
	}
	return hits, nil
}

// searchQuery is the query of SearchCapsules.
func searchQuery(query string, f agentrunner.CapsuleFilter) (string, []any) {
	where, args := capsuleWhere("c", f, false, true)
	q := `WITH hits AS MATERIALIZED (
			SELECT c.id AS id, bm25(capsules_fts) AS score
			FROM capsules_fts JOIN capsules AS c ON c.id = capsules_fts.rowid
			WHERE capsules_fts MATCH ?1 AND ` + where + `
			ORDER BY score, c.id DESC LIMIT ?)
		SELECT ` + capsuleColumnsC + `, hits.score, snippet(capsules_fts, 2, '«', '»', '…', 12)
		FROM hits JOIN capsules_fts ON capsules_fts.rowid = hits.id JOIN capsules AS c ON c.id = hits.id
		WHERE capsules_fts MATCH ?1
		ORDER BY hits.score, hits.id DESC`
	return q, append(append([]any{query}, args...), capsuleLimit(f.Limit, searchLimit, searchMaxLimit))
}

// searchError says what is wrong with a search whose query the
// full-text index cannot parse. The statement is fixed but for the
// query, so a plain SQLITE_ERROR is the query's: a syntax error, or a
// word before a colon that names no column. SQLite's own message is
// left out: it speaks of SQL and fts5, which the caller knows nothing of.
func searchError(err error, query string) error {
	var se *msqlite.Error
	if !errors.As(err, &se) || se.Code() != sqlite3.SQLITE_ERROR {
		return err
	}
	return agentrunner.Errorf(agentrunner.EINVALID,
		"search query %q is not valid full-text syntax: put words in double quotes to search for them as they are, e.g. %q",
		query, quoteWords(query))
}

// quoteWords is query with each of its words in double quotes: a query
// that searches for each word as it is, whatever its characters.
func quoteWords(query string) string {
	words := strings.Fields(query)
	for i, w := range words {
		words[i] = `"` + strings.ReplaceAll(w, `"`, `""`) + `"`
	}
	return strings.Join(words, " ")
}

// CapsuleInventory counts the live capsules by workspace, phase and role.
func (s *Store) CapsuleInventory(ctx context.Context) ([]agentrunner.CapsuleCount, error) {
	return queryAll(ctx, s.read, func(row scanner) (agentrunner.CapsuleCount, error) {
		var c agentrunner.CapsuleCount
		err := row.Scan(&c.Workspace, &c.Phase, &c.Role, &c.N)
		return c, err
	}, sqlCapsuleInventory)
}

// UpdateCapsules applies changes to every live capsule f selects, in one
// statement, each as its next version. Only the columns that change are
// set: the full-text index is touched only when the tags change.
func (s *Store) UpdateCapsules(ctx context.Context, f agentrunner.CapsuleFilter, changes agentrunner.CapsuleChanges, at time.Time) (int, error) {
	if at.IsZero() {
		return 0, agentrunner.Errorf(agentrunner.EINVALID, "updating capsules: an update time is required")
	}
	var set []string
	var args []any
	if changes.Phase != nil {
		set, args = append(set, "phase = ?"), append(args, *changes.Phase)
	}
	if changes.Role != nil {
		set, args = append(set, "role = ?"), append(args, *changes.Role)
	}
	if changes.Tags != nil {
		tags, err := encodeTags("updating capsules", *changes.Tags)
		if err != nil {
			return 0, err
		}
		set, args = append(set, "tags = ?"), append(args, tags)
	}
	if len(set) == 0 {
		return 0, agentrunner.Errorf(agentrunner.EINVALID, "updating capsules: no change given (a phase, a role or tags)")
	}
	set, args = append(set, "version = version + 1", "updated_at = ?"), append(args, encodeTime(at))
	where, whereArgs := capsuleWhere("capsules", f, true, false)
	return s.bulkCapsules(ctx, "updating capsules",
		`UPDATE capsules SET `+strings.Join(set, ", ")+` WHERE `+where, append(args, whereArgs...))
}

// DeleteCapsules deletes every live capsule f selects, in one statement.
func (s *Store) DeleteCapsules(ctx context.Context, f agentrunner.CapsuleFilter, at time.Time) (int, error) {
	if at.IsZero() {
		return 0, agentrunner.Errorf(agentrunner.EINVALID, "deleting capsules: a deletion time is required")
	}
	where, args := capsuleWhere("capsules", f, true, false)
	return s.bulkCapsules(ctx, "deleting capsules",
		`UPDATE capsules SET deleted_at = ? WHERE `+where, append([]any{encodeTime(at)}, args...))
}

// bulkCapsules runs one statement of a bulk change in its transaction and
// returns how many capsules it changed; a change of none commits nothing.
func (s *Store) bulkCapsules(ctx context.Context, what, query string, args []any) (int, error) {
	var n int64
	err := s.inTx(ctx, func(ctx context.Context, w *writer) (bool, error) {
		res, err := w.exec(ctx, query, args...)
		if err != nil {
			return false, translate(err, what, "")
		}
		n, err = res.RowsAffected()
		return n > 0, err
	})
	return int(n), err
}

// row runs a query of one row on the write connection, its statement
// prepared once; the caller holds mu. It stands for a statement with
// RETURNING, whose row the caller scans.
func (w *writer) row(ctx context.Context, query string, args ...any) (*sql.Row, error) {
	stmt, ok := w.stmts[query]
	if !ok {
		var err error
		if stmt, err = w.conn.PrepareContext(ctx, query); err != nil {
			return nil, fmt.Errorf("prepare: %w", err)
		}
		w.stmts[query] = stmt
	}
	return stmt.QueryRowContext(ctx, args...), nil
}

func scanCapsule(row scanner) (*agentrunner.Capsule, error) {
	return scanCapsuleWith(row)
}

func scanCapsuleHit(row scanner) (*agentrunner.CapsuleHit, error) {
	var h agentrunner.CapsuleHit
	var snippet sql.NullString
	c, err := scanCapsuleWith(row, &h.Rank, &snippet)
	if err != nil {
		return nil, err
	}
	h.Capsule, h.Snippet = c, snippet.String
	return &h, nil
}

// scanCapsuleWith scans the capsuleColumns of a row, then its columns
// after them into extra.
func scanCapsuleWith(row scanner, extra ...any) (*agentrunner.Capsule, error) {
	var c agentrunner.Capsule
	var tags string
	var created, updated, deleted sql.NullString
	dst := append([]any{&c.ID, &c.Workspace, &c.Name, &c.RunID, &c.Phase, &c.Role, &tags, &c.Text, &c.Version,
		&created, &updated, &deleted}, extra...)
	if err := row.Scan(dst...); err != nil {
		return nil, err
	}
	var err error
	for _, t := range []struct {
		dst *time.Time
		src sql.NullString
	}{{&c.CreatedAt, created}, {&c.UpdatedAt, updated}, {&c.DeletedAt, deleted}} {
		if *t.dst, err = decodeTime(t.src); err != nil {
			return nil, err
		}
	}
	if tags != "[]" {
		if err := json.Unmarshal([]byte(tags), &c.Tags); err != nil {
			return nil, fmt.Errorf("capsule %d: tags: %w", c.ID, err)
		}
	}
	return &c, nil
}
