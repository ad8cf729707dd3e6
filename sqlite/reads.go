package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"sync"
)

// maxReadStmts bounds the read statements kept prepared. The store's
// queries are built from a few filters, so their texts are few; past the
// bound a query is prepared each time it runs, as without the cache.
const maxReadStmts = 256

// reads is the pool of read connections, with each query's statement
// prepared once: parsing the SQL is much of what a short read costs with
// this driver (a run's status, its step runs, the unfinished runs at each
// start). database/sql prepares a statement again on each connection of
// the pool that runs it, at most once each.
type reads struct {
	*sql.DB
	mu    sync.Mutex
	stmts map[string]*sql.Stmt
}

func newReads(db *sql.DB) *reads {
	return &reads{DB: db, stmts: map[string]*sql.Stmt{}}
}

// stmt returns the prepared statement of query, nil when the cache is
// full or the statement cannot be prepared (the query then runs
// unprepared and reports its own error).
func (r *reads) stmt(ctx context.Context, query string) *sql.Stmt {
	r.mu.Lock()
	defer r.mu.Unlock()
	if st, ok := r.stmts[query]; ok {
		return st
	}
	if len(r.stmts) >= maxReadStmts {
		return nil
	}
	st, err := r.DB.PrepareContext(context.WithoutCancel(ctx), query)
	if err != nil {
		return nil
	}
	r.stmts[query] = st
	return st
}

// QueryContext runs query through its prepared statement.
func (r *reads) QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	if st := r.stmt(ctx, query); st != nil {
		return st.QueryContext(ctx, args...)
	}
	return r.DB.QueryContext(ctx, query, args...)
}

// QueryRowContext runs query through its prepared statement.
func (r *reads) QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row {
	if st := r.stmt(ctx, query); st != nil {
		return st.QueryRowContext(ctx, args...)
	}
	return r.DB.QueryRowContext(ctx, query, args...)
}

// Close closes the statements and the pool.
func (r *reads) Close() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	var errs []error
	for q, st := range r.stmts {
		errs = append(errs, st.Close())
		delete(r.stmts, q)
	}
	return errors.Join(append(errs, r.DB.Close())...)
}
