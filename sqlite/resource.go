package sqlite

import (
	"errors"
	"syscall"

	msqlite "modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"
)

// exhaustedError is a SQLite error that says a resource ran out, with the
// errno of that resource in its chain, so the engine takes it for the
// machine's state and waits (agentrunner.ExhaustedResource).
type exhaustedError struct {
	err   error
	errno syscall.Errno
}

func (e *exhaustedError) Error() string { return e.err.Error() }

// Unwrap returns SQLite's error and the errno.
func (e *exhaustedError) Unwrap() []error { return []error{e.err, e.errno} }

// exhausted returns err with the errno of the resource SQLite ran out of,
// when that is why it failed (its result code, https://sqlite.org/rescode.html:
// SQLITE_FULL, the disk or max_page_count is full; SQLITE_NOMEM and
// SQLITE_IOERR_NOMEM); else err as it is.
func exhausted(err error) error {
	var se *msqlite.Error
	var done *exhaustedError
	if !errors.As(err, &se) || errors.As(err, &done) {
		return err
	}
	switch code := se.Code(); {
	case code&0xff == sqlite3.SQLITE_FULL:
		return &exhaustedError{err: err, errno: syscall.ENOSPC}
	case code&0xff == sqlite3.SQLITE_NOMEM, code == sqlite3.SQLITE_IOERR_NOMEM:
		return &exhaustedError{err: err, errno: syscall.ENOMEM}
	}
	return err
}
