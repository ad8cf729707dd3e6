// Package sqlite is the embedded Store: SQLite through a pure-Go driver, in
// WAL mode with a busy timeout, foreign keys on, synchronous=FULL (a commit
// is durable when Apply returns) and embedded migrations.
//
// Writes go through one connection, so they are serialized in-process and
// each Apply is one IMMEDIATE transaction; reads use a separate pool of
// query-only connections, so readers never block the engine (WAL).
package sqlite

import (
	"context"
	"database/sql"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"

	"github.com/agentrunner/agentrunner"
	_ "modernc.org/sqlite" // registers the "sqlite" driver
)

//go:embed migrations/*.sql
var migrations embed.FS

// Store is the SQLite implementation of agentrunner.Store.
type Store struct {
	write   *sql.DB
	w       writer
	read    *reads
	commits atomic.Int64
}

var _ agentrunner.Store = (*Store)(nil)

func dsn(path string, pragmas ...string) string {
	q := url.Values{}
	for _, p := range pragmas {
		q.Add("_pragma", p)
	}
	return "file:" + path + "?" + q.Encode()
}

// Open opens (creating if needed) the database at path and migrates it to
// the current schema.
//
// It first checks an existing database through a read-only connection
// (PRAGMA quick_check, the schema version and the application id) and
// refuses one that fails, before anything is written to it: a migration or
// a cycle on a damaged file would spread the damage. The error of a
// damaged database has a Damage in its chain.
func Open(ctx context.Context, path string) (*Store, error) {
	return openAt(ctx, path, depthPages)
}

// OpenChecked is Open for a process started by a runner that checked the
// database when it started and holds the workspace: the MCP server of a
// process agent's attempt. It refuses a newer or foreign database, but
// does not read every page again, which on a long history would cost
// seconds at every attempt.
func OpenChecked(ctx context.Context, path string) (*Store, error) {
	return openAt(ctx, path, depthHeader)
}

func openAt(ctx context.Context, path string, d depth) (*Store, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, fmt.Errorf("create directory for state database: %w", err)
	}
	if err := precheck(ctx, path, d); err != nil {
		return nil, err
	}
	common := []string{"busy_timeout(10000)", "foreign_keys(1)", "journal_mode(WAL)", "synchronous(FULL)"}
	write, err := sql.Open("sqlite", dsn(path, common...)+"&_txlock=immediate")
	if err != nil {
		return nil, fmt.Errorf("open state database %s: %w", path, err)
	}
	write.SetMaxOpenConns(1)
	write.SetConnMaxIdleTime(0)
	s := &Store{write: write}
	if err := s.migrate(ctx); err != nil {
		write.Close()
		return nil, fmt.Errorf("state database %s: %w", path, err)
	}
	conn, err := write.Conn(ctx)
	if err != nil {
		write.Close()
		return nil, fmt.Errorf("state database %s: %w", path, err)
	}
	// A group commit writes each change under a savepoint, whose
	// sub-journal (the pages the change touched, to roll it back) is kept
	// in memory: on a file, each page is a write call. It holds one
	// change's pages at a time, emptied at each RELEASE. Set after the
	// migrations, whose index builds may sort more than memory should hold.
	if _, err := conn.ExecContext(ctx, "PRAGMA temp_store = MEMORY"); err != nil {
		conn.Close()
		write.Close()
		return nil, fmt.Errorf("state database %s: %w", path, err)
	}
	s.w = writer{conn: conn, stmts: map[string]*sql.Stmt{}}
	read, err := sql.Open("sqlite", dsn(path, append(common, "query_only(1)")...))
	if err != nil {
		write.Close()
		return nil, fmt.Errorf("open state database %s: %w", path, err)
	}
	read.SetMaxOpenConns(4)
	s.read = newReads(read)
	return s, nil
}

// Close closes the connections.
func (s *Store) Close() error {
	s.w.mu.Lock()
	defer s.w.mu.Unlock()
	for _, stmt := range s.w.stmts {
		stmt.Close()
	}
	return errors.Join(s.read.Close(), s.w.conn.Close(), s.write.Close())
}

// Commits returns how many write transactions have committed; benchmarks
// report it per step.
func (s *Store) Commits() int64 { return s.commits.Load() }

func (s *Store) migrate(ctx context.Context) error {
	names, err := fs.Glob(migrations, "migrations/*.sql")
	if err != nil {
		return err
	}
	sort.Strings(names)
	var current, app int64
	if err := s.write.QueryRowContext(ctx, "PRAGMA user_version").Scan(&current); err != nil {
		return fmt.Errorf("read schema version: %w", err)
	}
	if current > int64(len(names)) {
		return fmt.Errorf("schema version %d is newer than this agentrunner knows (%d): upgrade agentrunner", current, len(names))
	}
	if err := s.write.QueryRowContext(ctx, "PRAGMA application_id").Scan(&app); err != nil {
		return fmt.Errorf("read application id: %w", err)
	}
	if app != ApplicationID {
		// Databases created before the id existed get it on their next open.
		if _, err := s.write.ExecContext(ctx, fmt.Sprintf("PRAGMA application_id = %d", ApplicationID)); err != nil {
			return fmt.Errorf("set application id: %w", err)
		}
	}
	for i, name := range names[current:] {
		version := int(current) + i + 1
		prefix, _, _ := strings.Cut(filepath.Base(name), "_")
		if n, err := strconv.Atoi(prefix); err != nil || n != version {
			return fmt.Errorf("migration %s is out of sequence (want number %d)", name, version)
		}
		body, err := migrations.ReadFile(name)
		if err != nil {
			return err
		}
		if err := s.apply(ctx, name, string(body), version); err != nil {
			return err
		}
	}
	return nil
}

// apply runs one migration in a transaction. A migration that rebuilds a
// table starts with "-- foreign_keys: off": it runs with foreign keys off
// (they cannot change inside a transaction) and they are checked before
// the commit, the procedure SQLite documents for altering a table.
func (s *Store) apply(ctx context.Context, name, body string, version int) (err error) {
	rebuild := strings.HasPrefix(body, "-- foreign_keys: off")
	if rebuild {
		// The write pool has one connection, so the pragma holds for the
		// transaction below.
		if _, err := s.write.ExecContext(ctx, "PRAGMA foreign_keys = OFF"); err != nil {
			return err
		}
		defer func() {
			if _, ferr := s.write.ExecContext(ctx, "PRAGMA foreign_keys = ON"); ferr != nil && err == nil {
				err = ferr
			}
		}()
	}
	tx, err := s.write.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			tx.Rollback()
		}
	}()
	if _, err = tx.ExecContext(ctx, body); err != nil {
		return fmt.Errorf("migration %s: %w", name, err)
	}
	if rebuild {
		rows, err := tx.QueryContext(ctx, "PRAGMA foreign_key_check")
		if err != nil {
			return fmt.Errorf("migration %s: %w", name, err)
		}
		broken := rows.Next()
		rows.Close()
		if broken {
			return fmt.Errorf("migration %s would break foreign keys", name)
		}
	}
	if _, err = tx.ExecContext(ctx, fmt.Sprintf("PRAGMA user_version = %d", version)); err != nil {
		return err
	}
	if err = tx.Commit(); err != nil {
		return fmt.Errorf("migration %s: %w", name, err)
	}
	return nil
}
