package agentrunner

import (
	"errors"
	"fmt"
)

// Error codes of the one error type. They say what kind of problem it is,
// not where it happened; the HTTP layer maps each to one status.
const (
	EINVALID      = "invalid"      // the input is wrong; retrying the same input fails again
	ENOTFOUND     = "not_found"    // the thing asked for does not exist
	ECONFLICT     = "conflict"     // the state changed under the caller
	EUNAVAILABLE  = "unavailable"  // a dependency failed; retrying may help
	EUNAUTHORIZED = "unauthorized" // the caller did not prove who it is
	EFORBIDDEN    = "forbidden"    // the caller may not do this
	EINTERNAL     = "internal"     // a bug or an unexpected failure
	// EUNSUPPORTED: the request's body is not in a format the endpoint reads.
	EUNSUPPORTED = "unsupported_media_type"
	// EMISDIRECTED: the request names a host this server does not answer for.
	EMISDIRECTED = "misdirected"
)

// Error is agentrunner's error type: a code for programs and a message for
// people. Errors without a code are internal.
type Error struct {
	Code    string
	Message string
	// Err is the cause, kept for errors.Is/As and logs.
	Err error
}

// Error returns the message, with the cause when there is one.
func (e *Error) Error() string {
	if e.Err != nil && e.Message != "" {
		return e.Message + ": " + e.Err.Error()
	}
	if e.Err != nil {
		return e.Err.Error()
	}
	return e.Message
}

// Unwrap returns the cause.
func (e *Error) Unwrap() error { return e.Err }

// Errorf returns an *Error with the code and a formatted message.
func Errorf(code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// ErrorCode returns the code of the first *Error in err's chain, EINTERNAL
// for any other error and "" for nil.
func ErrorCode(err error) string {
	if err == nil {
		return ""
	}
	var e *Error
	if errors.As(err, &e) && e.Code != "" {
		return e.Code
	}
	return EINTERNAL
}

// ErrorMessage returns the message safe to show a client: the message of an
// *Error, or a generic text for internal errors so nothing leaks.
func ErrorMessage(err error) string {
	var e *Error
	if errors.As(err, &e) && e.Code != EINTERNAL && e.Code != "" {
		return e.Error()
	}
	return "internal error"
}

// ErrorClass classifies why an attempt failed, which decides whether the
// step is retried (FR-047).
type ErrorClass string

const (
	// ClassTimeout: the attempt ran past its time limit.
	ClassTimeout ErrorClass = "timeout"
	// ClassCrash: the agent process exited non-zero or was killed.
	ClassCrash ErrorClass = "crash"
	// ClassInterrupted: the runner itself stopped during the attempt.
	ClassInterrupted ErrorClass = "interrupted"
	// ClassUnavailable: a provider or service answered 5xx/429 or could
	// not be reached.
	ClassUnavailable ErrorClass = "unavailable"
	// ClassInvalidOutput: the agent wrote no artifact or one that breaks its
	// contract. The same inputs would most likely fail again.
	ClassInvalidOutput ErrorClass = "invalid_output"
	// ClassConfig: a missing file, a bad setting; an operator must act.
	ClassConfig ErrorClass = "config"
	// ClassBudget: the agent used up its token budget.
	ClassBudget ErrorClass = "budget"
	// ClassInternal: a bug in agentrunner.
	ClassInternal ErrorClass = "internal"
	// ClassAborted: an operator aborted the cycle during the attempt.
	ClassAborted ErrorClass = "aborted"
)

// Retryable reports whether an attempt that failed this way is retried.
func (c ErrorClass) Retryable() bool {
	switch c {
	case ClassTimeout, ClassCrash, ClassInterrupted, ClassUnavailable:
		return true
	}
	return false
}

// StepError is the error of a failed attempt: a class and the cause.
type StepError struct {
	Class ErrorClass
	Err   error
}

func (e *StepError) Error() string { return string(e.Class) + ": " + e.Err.Error() }

// Unwrap returns the cause.
func (e *StepError) Unwrap() error { return e.Err }

// Fail returns a *StepError of the class with a formatted cause.
func Fail(class ErrorClass, format string, args ...any) error {
	return &StepError{Class: class, Err: fmt.Errorf(format, args...)}
}

// ClassOf returns the class of the first *StepError in err's chain, and
// ClassInternal for any other error.
func ClassOf(err error) ErrorClass {
	var e *StepError
	if errors.As(err, &e) {
		return e.Class
	}
	return ClassInternal
}
