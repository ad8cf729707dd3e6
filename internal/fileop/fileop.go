// Package fileop runs a component's own file operations through an
// optional fault hook and names each failure by its operation, so the
// resource.exhausted event can say what ran out ("write prompt") and tests
// can cause failures, such as EMFILE, that are hard to cause for real.
package fileop

import (
	"errors"
	"io/fs"
	"os"
)

// Error is a failure of one named operation. It reads as its cause, so
// the callers' messages stay as they were.
type Error struct {
	Op  string
	Err error
}

// Error returns the cause's message.
func (e *Error) Error() string { return e.Err.Error() }

// Unwrap returns the cause.
func (e *Error) Unwrap() error { return e.Err }

// Do runs fn as the operation op, unless faults (nil: none) fails it
// first with an error that stands for the system's. A failure is an
// *Error naming op.
func Do(faults func(op string) error, op string, fn func() error) error {
	var err error
	if faults != nil {
		err = faults(op)
	}
	if err == nil {
		err = fn()
	}
	if err != nil {
		return &Error{Op: op, Err: err}
	}
	return nil
}

// Name returns the operation of the first *Error in err's chain.
func Name(err error) (string, bool) {
	var oe *Error
	if errors.As(err, &oe) {
		return oe.Op, true
	}
	return "", false
}

// Operation names what failed in err, for the resource.exhausted event:
// the named operation when there is one, else the system call and its
// path, else fallback.
func Operation(err error, fallback string) string {
	if op, ok := Name(err); ok {
		return op
	}
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Op + " " + pe.Path
	}
	var se *os.SyscallError
	if errors.As(err, &se) {
		return se.Syscall
	}
	return fallback
}
