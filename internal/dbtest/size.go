package dbtest

import (
	"context"
	"database/sql"
	"os"
	"path/filepath"
	"testing"
)

// Size is how much disk a SQLite database takes and how much of it is
// free for reuse.
type Size struct {
	// Bytes is the main file and its WAL, after a checkpoint.
	Bytes int64
	// Pages is the main file's page count; FreePages those on its free
	// list, left by deletions and reused by later inserts.
	Pages, FreePages, PageSize int64
	// Vacuumed is the size of a compacted copy (VACUUM INTO): the file
	// without its free pages and with its pages full.
	Vacuumed int64
}

// Measure checkpoints the WAL of the database at path into the main file
// (TRUNCATE: the WAL is emptied), then measures it. Other connections to
// it may stay open but must be idle.
func Measure(t testing.TB, path string) Size {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(10000)")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	ctx := context.Background()
	var busy, logged, moved int
	if err := db.QueryRowContext(ctx, "PRAGMA wal_checkpoint(TRUNCATE)").Scan(&busy, &logged, &moved); err != nil || busy != 0 {
		t.Fatalf("checkpoint %s: busy %d, %v", path, busy, err)
	}
	var s Size
	for q, dst := range map[string]*int64{"PRAGMA page_count": &s.Pages, "PRAGMA freelist_count": &s.FreePages, "PRAGMA page_size": &s.PageSize} {
		if err := db.QueryRowContext(ctx, q).Scan(dst); err != nil {
			t.Fatalf("%s of %s: %v", q, path, err)
		}
	}
	s.Bytes = fileSize(t, path) + fileSize(t, path+"-wal")
	copyPath := filepath.Join(t.TempDir(), "vacuumed.db")
	if _, err := db.ExecContext(ctx, "VACUUM INTO ?", copyPath); err != nil {
		t.Fatalf("VACUUM INTO a copy of %s: %v", path, err)
	}
	s.Vacuumed = fileSize(t, copyPath)
	os.Remove(copyPath)
	return s
}

// fileSize is the size of the file at path; 0 if there is none.
func fileSize(t testing.TB, path string) int64 {
	t.Helper()
	fi, err := os.Stat(path)
	if os.IsNotExist(err) {
		return 0
	}
	if err != nil {
		t.Fatal(err)
	}
	return fi.Size()
}
