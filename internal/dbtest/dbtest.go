// Package dbtest damages SQLite files for tests, as a disk error would.
package dbtest

import (
	"context"
	"database/sql"
	"os"
	"testing"

	_ "modernc.org/sqlite" // registers the "sqlite" driver
)

// Corrupt writes garbage over the pages that hold the rows of table in the
// SQLite database at path (closed, its WAL checkpointed): the damage a
// disk error in the middle of the file does to data, which quick_check
// reports. The table's first page, its root, is left alone, so that the
// damage is found by reading the table, not by opening the schema.
func Corrupt(t testing.TB, path, table string) {
	t.Helper()
	pages, size := tablePages(t, path, table)
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	garbage := make([]byte, size)
	for i := range garbage {
		garbage[i] = byte(i*7 + 13)
	}
	for _, p := range pages {
		if _, err := f.WriteAt(garbage, (p-1)*size); err != nil {
			t.Fatal(err)
		}
	}
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
}

// tablePages returns the pages of table other than its root, and the page
// size. The table must span more than one page.
func tablePages(t testing.TB, path, table string) ([]int64, int64) {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+path+"?mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	ctx := context.Background()
	var size int64
	if err := db.QueryRowContext(ctx, "PRAGMA page_size").Scan(&size); err != nil {
		t.Fatal(err)
	}
	rows, err := db.QueryContext(ctx, "SELECT pageno FROM dbstat WHERE name = ? AND path != '/' ORDER BY pageno", table)
	if err != nil {
		t.Fatalf("list the pages of %s: %v", table, err)
	}
	defer rows.Close()
	var pages []int64
	for rows.Next() {
		var p int64
		if err := rows.Scan(&p); err != nil {
			t.Fatal(err)
		}
		pages = append(pages, p)
	}
	if len(pages) == 0 {
		t.Fatalf("table %s of %s has no page besides its root: put more rows in it", table, path)
	}
	return pages, size
}
