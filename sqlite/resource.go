package sqlite

import (
	"errors"
	"syscall"

	msqlite "modernc.org/sqlite"
)

// SQLite's result codes for running out of a resource
// (https://sqlite.org/rescode.html); primary codes are the low byte.
const (
	sqliteNoMem      = 7    // SQLITE_NOMEM
	sqliteFull       = 13   // SQLITE_FULL: the disk (or max_page_count) is full
	sqliteIOErrNoMem = 3082 // SQLITE_IOERR_NOMEM
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
// when that is why it failed; else err as it is.
func exhausted(err error) error {
	var se *msqlite.Error
	if !errors.As(err, &se) {
		return err
	}
	switch code := se.Code(); {
	case code&0xff == sqliteFull:
		return &exhaustedError{err: err, errno: syscall.ENOSPC}
	case code&0xff == sqliteNoMem, code == sqliteIOErrNoMem:
		return &exhaustedError{err: err, errno: syscall.ENOMEM}
	}
	return err
}
