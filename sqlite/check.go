package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"

	"github.com/agentrunner/agentrunner"
	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"
)

// ApplicationID marks a SQLite file as an agentrunner state database
// (PRAGMA application_id, "ARnr"), so that a state.path pointing at some
// other program's database is refused instead of migrated.
const ApplicationID = 0x41526e72

// quickCheckLines is how many lines of quick_check's report a refusal
// quotes: the first say where the damage is, the rest is for db check.
const quickCheckLines = 5

// integrityCheckLines bounds the full report of Check.
const integrityCheckLines = 100

// Damage is what a check found wrong with a database, one line each. It
// is the cause of the error Open returns for a damaged database, so that a
// caller can tell damage from other errors (errors.As) and say how to
// recover.
type Damage []string

func (d Damage) Error() string { return strings.Join(d, "; ") }

// Report is what a check of a state database found.
type Report struct {
	Path string
	// Integrity is the report of PRAGMA integrity_check or quick_check:
	// ["ok"] for a sound database.
	Integrity []string
	// ForeignKeys are the rows whose foreign key points at no row (the
	// full check only).
	ForeignKeys []string
	// Version is the schema version (user_version); Known is the newest
	// this agentrunner knows.
	Version, Known int
	// ApplicationID is PRAGMA application_id: ApplicationID, or 0 for a
	// database not opened by this version yet.
	ApplicationID int64
	// Objects counts the tables, indexes and triggers in the schema.
	Objects int
}

// Damage returns what is wrong with the file's content; nil when sound.
func (r *Report) Damage() Damage {
	var d Damage
	if len(r.Integrity) != 1 || r.Integrity[0] != "ok" {
		d = append(d, r.Integrity...)
	}
	return append(d, r.ForeignKeys...)
}

// Foreign returns why the file is not an agentrunner state database, or "".
func (r *Report) Foreign() string {
	switch {
	case r.ApplicationID != 0 && r.ApplicationID != ApplicationID:
		return fmt.Sprintf("it is not an agentrunner state database (application_id %#x)", r.ApplicationID)
	case r.ApplicationID == 0 && r.Version == 0 && r.Objects > 0:
		return "it is not an agentrunner state database (it has tables but no agentrunner schema)"
	}
	return ""
}

// Newer says whether the database was written by a newer agentrunner.
func (r *Report) Newer() bool { return r.Version > r.Known }

// Sound says whether the database can be used by this agentrunner.
func (r *Report) Sound() bool { return len(r.Damage()) == 0 && r.Foreign() == "" && !r.Newer() }

// knownVersion is the schema version of the newest embedded migration.
func knownVersion() int {
	names, _ := fs.Glob(migrations, "migrations/*.sql")
	return len(names)
}

// Check runs the full check of the database at path without writing to
// it: PRAGMA integrity_check, foreign_key_check, the schema version and the
// application id. It is slow on a large database (it reads every page and
// every index entry); Open runs the quicker quick_check. The error is for
// a database that could not be read at all for another reason than
// damage (no such file, permissions).
func Check(ctx context.Context, path string) (*Report, error) {
	return inspect(ctx, path, depthFull)
}

// inspect checks the database at path through a read-only connection, so
// that nothing (no migration, no WAL checkpoint) is written to it.
// depth is how much of a database a check reads.
type depth int

const (
	// depthHeader: the schema version and application id only.
	depthHeader depth = iota
	// depthPages adds quick_check: every page and record, what a disk
	// error breaks.
	depthPages
	// depthFull adds integrity_check, CHECK constraints and foreign keys.
	depthFull
)

func inspect(ctx context.Context, path string, d depth) (*Report, error) {
	if _, err := os.Stat(path); err != nil {
		return nil, fmt.Errorf("state database: %w", err)
	}
	pragmas := []string{"busy_timeout(10000)"}
	if d < depthFull {
		// CHECK constraints (json_valid of every event's details) are most
		// of quick_check's time on a long history; the page structure,
		// which a disk error breaks, is still checked. db check checks them.
		pragmas = append(pragmas, "ignore_check_constraints(1)")
	}
	db, err := sql.Open("sqlite", dsn(path, pragmas...)+"&mode=ro")
	if err != nil {
		return nil, fmt.Errorf("open state database %s: %w", path, err)
	}
	defer db.Close()
	db.SetMaxOpenConns(1)
	r := &Report{Path: path, Known: knownVersion()}
	err = r.read(ctx, db, d)
	if damaged(err) {
		r.Integrity = []string{err.Error()}
		return r, nil
	}
	if err != nil {
		return nil, fmt.Errorf("check state database %s: %w", path, err)
	}
	return r, nil
}

func (r *Report) read(ctx context.Context, db *sql.DB, d depth) error {
	for q, v := range map[string]any{
		"PRAGMA application_id": &r.ApplicationID, "PRAGMA user_version": &r.Version,
		"SELECT count(*) FROM sqlite_schema": &r.Objects,
	} {
		if err := db.QueryRowContext(ctx, q).Scan(v); err != nil {
			return err
		}
	}
	var err error
	if d == depthFull {
		r.Integrity, err = lines(ctx, db, fmt.Sprintf("PRAGMA integrity_check(%d)", integrityCheckLines), integrityCheckLines)
		if err != nil {
			return err
		}
		r.ForeignKeys, err = foreignKeys(ctx, db)
		if damaged(err) {
			// Reading the rows hit the damage integrity_check reported.
			r.ForeignKeys, err = []string{"foreign key check: " + err.Error()}, nil
		}
		return err
	}
	if d == depthPages {
		r.Integrity, err = lines(ctx, db, fmt.Sprintf("PRAGMA quick_check(%d)", quickCheckLines), quickCheckLines)
	}
	return err
}

// lines returns the first max lines of a check's report. SQLite may put
// several lines in one row, and may end the report with an error when the
// damage stops the check: that error is the report's last line.
func lines(ctx context.Context, db *sql.DB, q string, max int) ([]string, error) {
	rows, err := queryAll(ctx, db, func(row scanner) (string, error) {
		var s string
		return s, row.Scan(&s)
	}, q)
	if damaged(err) {
		rows, err = append(rows, err.Error()), nil
	}
	var out []string
	for _, row := range rows {
		out = append(out, strings.Split(row, "\n")...)
	}
	return out[:min(len(out), max)], err
}

func foreignKeys(ctx context.Context, db *sql.DB) ([]string, error) {
	return queryAll(ctx, db, func(row scanner) (string, error) {
		var table, parent string
		var rowid sql.NullInt64
		var fk int
		if err := row.Scan(&table, &rowid, &parent, &fk); err != nil {
			return "", err
		}
		return fmt.Sprintf("row %d of %s refers to a missing row of %s", rowid.Int64, table, parent), nil
	}, "PRAGMA foreign_key_check")
}

// damaged says whether err is SQLite finding the file corrupt or not a
// database at all (a damaged header): damage, not a failure to read.
func damaged(err error) bool {
	var se *sqlite.Error
	if !errors.As(err, &se) {
		return false
	}
	code := se.Code() & 0xff
	return code == sqlite3.SQLITE_CORRUPT || code == sqlite3.SQLITE_NOTADB
}

// precheck refuses a database that fails quick_check, was written by a
// newer agentrunner or is not an agentrunner database, before Open writes
// anything to it. A missing or empty file is a new database.
func precheck(ctx context.Context, path string, d depth) error {
	if info, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) || (err == nil && info.Size() == 0) {
		return nil
	}
	r, err := inspect(ctx, path, d)
	if err != nil {
		return err
	}
	return r.refusal()
}

// refusal is the error that refuses a database that is not Sound.
func (r *Report) refusal() error {
	if d := r.Damage(); len(d) > 0 {
		return &agentrunner.Error{Code: agentrunner.EUNAVAILABLE, Message: fmt.Sprintf("the state database %s is damaged", r.Path), Err: d}
	}
	if why := r.Foreign(); why != "" {
		return agentrunner.Errorf(agentrunner.EINVALID, "the state database %s is refused: %s; check state.path", r.Path, why)
	}
	if r.Newer() {
		return agentrunner.Errorf(agentrunner.EUNAVAILABLE, "the state database %s was written by a newer agentrunner (schema version %d; this agentrunner knows up to %d): upgrade agentrunner", r.Path, r.Version, r.Known)
	}
	return nil
}
