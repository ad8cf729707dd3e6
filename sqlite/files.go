package sqlite

import (
	"context"
	"database/sql"
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

// sqlPruneFiles deletes stored files of some kinds older than a time;
// its first condition is files_prunable's, so that the index serves it,
// and so that it never deletes an artifact whatever kinds it is given.
const sqlPruneFiles = `DELETE FROM files WHERE kind <> 'artifact' AND kind IN (%s) AND created_at < ?`

// PruneFiles deletes the stored prompts and validation reports (the
// kinds given) created before before; stored artifacts are never pruned.
func (s *Store) PruneFiles(ctx context.Context, before time.Time, kinds ...agentrunner.FileKind) (int64, error) {
	if err := prunableKinds(kinds); err != nil {
		return 0, err
	}
	args := make([]any, 0, len(kinds)+1)
	for _, k := range kinds {
		args = append(args, string(k))
	}
	args = append(args, encodeTime(before))
	q := fmt.Sprintf(sqlPruneFiles, strings.TrimSuffix(strings.Repeat("?, ", len(kinds)), ", "))
	s.w.mu.Lock()
	defer s.w.mu.Unlock()
	res, err := s.w.exec(ctx, q, args...)
	if err != nil {
		return 0, translate(err, "prune stored files", "")
	}
	n, err := res.RowsAffected()
	if n > 0 {
		s.commits.Add(1)
	}
	return n, err
}

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
