package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/agentrunner/agentrunner"
)

// The statements of stored files.
const (
	sqlInsertFiles = `
		INSERT INTO files (run_id, step, visit, attempt, kind, name, sha256, size, created_at, data)
		VALUES %s`
	sqlFileColumns = `id, run_id, step, visit, attempt, kind, name, sha256, size, created_at`
)

// insertFiles writes the stored files of a change and gives them their
// ids; the caller holds mu.
func (w *writer) insertFiles(ctx context.Context, files []*agentrunner.StoredFile) error {
	if len(files) == 0 {
		return nil
	}
	rows := make([][]any, len(files))
	for i, f := range files {
		if f.RunID == "" || f.Name == "" || f.SHA256 == "" {
			return agentrunner.Errorf(agentrunner.EINVALID, "stored file %q of run %q: a run, a name and a hash are required", f.Name, f.RunID)
		}
		data := f.Data
		if data == nil {
			data = []byte{} // NOT NULL: an empty file is a file
		}
		rows[i] = []any{f.RunID, f.Step, max(f.Visit, 1), max(f.Attempt, 1), string(f.Kind), f.Name, f.SHA256, len(data), encodeTime(f.CreatedAt), data}
	}
	ids, err := w.execRows(ctx, sqlInsertFiles, rows)
	if err != nil {
		return translate(err, "stored files of run "+files[0].RunID, "")
	}
	for i, f := range files {
		f.ID, f.Size = ids[i], int64(len(f.Data))
	}
	return nil
}

// Files lists the stored files of a run, oldest first; with Latest, only
// the newest of each kind and name.
func (s *Store) Files(ctx context.Context, f agentrunner.FileFilter) ([]*agentrunner.StoredFile, error) {
	if f.RunID == "" {
		return nil, agentrunner.Errorf(agentrunner.EINVALID, "listing stored files needs a run")
	}
	q, args := filesQuery(f)
	return queryAll(ctx, s.read, scanFile, q, args...)
}

// filesQuery is the query of Files: a run's files by files_by_run, of a
// kind and name, or of an attempt among those of the run and kind.
func filesQuery(f agentrunner.FileFilter) (string, []any) {
	cols := sqlFileColumns + ", data"
	if f.NoData {
		cols = sqlFileColumns + ", NULL"
	}
	where, args := []string{"run_id = ?"}, []any{f.RunID}
	if f.Kind != "" {
		where, args = append(where, "kind = ?"), append(args, string(f.Kind))
	}
	if f.Name != "" {
		where, args = append(where, "name = ?"), append(args, f.Name)
	}
	if f.Step != "" {
		where, args = append(where, "step = ?"), append(args, f.Step)
	}
	if f.Attempt > 0 {
		where, args = append(where, "attempt = ?"), append(args, f.Attempt)
	}
	if f.Latest {
		where = append(where, "id = (SELECT MAX(id) FROM files AS newer WHERE newer.run_id = files.run_id AND newer.kind = files.kind AND newer.name = files.name)")
	}
	return fmt.Sprintf("SELECT %s FROM files WHERE %s ORDER BY id", cols, strings.Join(where, " AND ")), args
}

// PruneFiles deletes the stored prompts and validation reports (the
// kinds given) created before before; stored artifacts are never pruned.
// No index holds the files' times (each step's commit would write a page
// of it): each kind has a mark, the id its last prune stopped at, and a
// prune walks the ids from the smallest mark of the kinds it prunes to
// the first file made at or after before, then moves their marks there. A file of a kind made after
// before, but with an id below that (times may be a little out of order),
// holds its kind's mark until it is pruned.
func (s *Store) PruneFiles(ctx context.Context, before time.Time, kinds ...agentrunner.FileKind) (n int64, err error) {
	if err := prunableKinds(kinds); err != nil {
		return 0, err
	}
	if before.IsZero() {
		return 0, nil
	}
	err = s.inTx(ctx, func(ctx context.Context, w *writer) (bool, error) {
		from, err := w.pruneFrom(ctx, kinds)
		if err != nil {
			return false, translate(err, "prune stored files", "")
		}
		var cut int64
		if err := w.queryRow(ctx, sqlPruneCut, []any{from, encodeTime(before)}, &cut); err != nil {
			return false, translate(err, "prune stored files", "")
		}
		for _, k := range kinds {
			res, err := w.exec(ctx, sqlPruneKind, string(k), from, cut, encodeTime(before))
			if err != nil {
				return false, translate(err, "prune stored files", "")
			}
			deleted, _ := res.RowsAffected()
			n += deleted
			if _, err := w.exec(ctx, sqlPruneMark, string(k), from, cut); err != nil {
				return false, translate(err, "prune stored files", "")
			}
		}
		return true, nil
	})
	return n, err
}

// pruneFrom is the smallest mark of kinds, 0 for a kind never pruned;
// the caller holds mu.
func (w *writer) pruneFrom(ctx context.Context, kinds []agentrunner.FileKind) (int64, error) {
	from := int64(-1)
	for _, k := range kinds {
		var mark int64
		err := w.queryRow(ctx, sqlPruneMarkOf, []any{string(k)}, &mark)
		if err != nil && !errors.Is(err, sql.ErrNoRows) {
			return 0, err
		}
		if from < 0 || mark < from {
			from = mark
		}
	}
	return from, nil
}

// The statements of PruneFiles. The walk goes from the smallest mark of
// the kinds pruned to the cut: the first id at or after it of a file made
// at or after before, or the last id (the newest file is never pruned, so
// its id is never given again to a file below a mark). A kind's files
// between them made before before are deleted, and its mark moves to the
// first of its files left between them, or to the cut.
const (
	sqlPruneMarkOf = `SELECT next_id FROM file_prune_marks WHERE kind = ?`
	sqlPruneCut    = `SELECT COALESCE(
			(SELECT id FROM files WHERE id >= ?1 AND created_at >= ?2 ORDER BY id LIMIT 1),
			(SELECT COALESCE(MAX(id), 0) FROM files))`
	sqlPruneKind = `DELETE FROM files WHERE kind = ?1 AND id >= ?2 AND id < ?3 AND created_at < ?4`
	sqlPruneMark = `INSERT INTO file_prune_marks (kind, next_id) VALUES (?1,
			COALESCE((SELECT MIN(id) FROM files WHERE id >= ?2 AND id < ?3 AND kind = ?1), ?3))
		ON CONFLICT (kind) DO UPDATE SET next_id = excluded.next_id`
)

// prunableKinds refuses what PruneFiles must not be asked: no kind, an
// unknown one, or the artifacts, which are the truth of what steps
// produced and are kept with their runs.
func prunableKinds(kinds []agentrunner.FileKind) error {
	if len(kinds) == 0 {
		return agentrunner.Errorf(agentrunner.EINVALID, "pruning stored files needs the kinds to prune (prompt, validation)")
	}
	for _, k := range kinds {
		switch k {
		case agentrunner.FilePrompt, agentrunner.FileValidation:
		case agentrunner.FileArtifact:
			return agentrunner.Errorf(agentrunner.EINVALID, "stored artifacts are never pruned: they are what steps produced")
		default:
			return agentrunner.Errorf(agentrunner.EINVALID, "stored files of kind %q cannot be pruned: the kinds are prompt and validation", k)
		}
	}
	return nil
}

func scanFile(row scanner) (*agentrunner.StoredFile, error) {
	var f agentrunner.StoredFile
	var kind string
	var created sql.NullString
	var data []byte
	if err := row.Scan(&f.ID, &f.RunID, &f.Step, &f.Visit, &f.Attempt, &kind, &f.Name, &f.SHA256, &f.Size, &created, &data); err != nil {
		return nil, err
	}
	f.Kind = agentrunner.FileKind(kind)
	f.Data = data
	var err error
	if f.CreatedAt, err = decodeTime(created); err != nil {
		return nil, fmt.Errorf("stored file %d: %w", f.ID, err)
	}
	return &f, nil
}
