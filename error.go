package agentrunner

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
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
	// EUNPROCESSABLE: the request is well formed but what it asks cannot
	// be done as given (a run's inputs fail its pipeline's schema, a
	// decision routes to no step); the same request fails again.
	EUNPROCESSABLE = "unprocessable"
	// EMETHOD: the path exists but not with the request's method; the
	// answer's Allow header lists the methods it has.
	EMETHOD = "method_not_allowed"
	// ETOOMANY: the caller is refused for a while, after too many refused
	// credentials.
	ETOOMANY = "too_many_requests"
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
	// ClassInterrupted: the runner itself stopped during the attempt
	// without a shutdown (a crash, a kill): the next start finds the
	// attempt still running. It costs no retry but counts against
	// scheduler.max_interruptions, so a step that kills the runner each
	// time cannot loop for ever.
	ClassInterrupted ErrorClass = "interrupted"
	// ClassShutdown: the runner was shut down (SIGTERM, SIGINT) during the
	// attempt, which did not finish within shutdown.grace and was
	// interrupted. A deploy or a systemd stop is nobody's fault: it costs
	// no retry, is not counted against max_interruptions, and the step
	// starts again at once at the next start, with no backoff.
	ClassShutdown ErrorClass = "shutdown"
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
	// ClassResource: the runner itself ran out of file descriptors, disk
	// space, memory or processes in its own part of the step (its files,
	// starting the agent, its store), as [ExhaustedResource] tells. That is
	// the machine's state, not the step's fault: the attempt is tried again
	// after a short wait, as often as it takes, without using a retry.
	ClassResource ErrorClass = "resource"
)

// ErrShutdown is the cause of a context canceled because the runner is
// shutting down (SIGTERM, SIGINT): the scheduler then lets the running
// attempts finish within shutdown.grace instead of leaving them for the
// next start to find interrupted, as any other end of its context does.
var ErrShutdown = &Error{Code: EUNAVAILABLE, Message: "the runner is shutting down"}

// Shutdown reports whether ctx ended because the runner is shutting down.
func Shutdown(ctx context.Context) bool {
	return ctx.Err() != nil && errors.Is(context.Cause(ctx), ErrShutdown)
}

// Retryable reports whether an attempt that failed this way is retried.
func (c ErrorClass) Retryable() bool {
	switch c {
	case ClassTimeout, ClassCrash, ClassInterrupted, ClassShutdown, ClassUnavailable, ClassResource:
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

// ClassOf returns ClassResource when err's chain says the runner ran out
// of a resource (whatever class a *StepError gave it: that class says what
// the failed operation was for, not why it failed), else the class of the
// first *StepError in err's chain, and ClassInternal for any other error.
func ClassOf(err error) ErrorClass {
	if ExhaustedResource(err) != "" {
		return ClassResource
	}
	var e *StepError
	if errors.As(err, &e) {
		return e.Class
	}
	return ClassInternal
}

// Resource is a resource of the machine that the runner can run out of.
type Resource string

// The resources of [ExhaustedResource], named for people: events and logs
// say "disk space", metrics label it disk_space.
const (
	ResourceFileDescriptors Resource = "file descriptors" // EMFILE, ENFILE
	ResourceDiskSpace       Resource = "disk space"       // ENOSPC, EDQUOT
	ResourceMemory          Resource = "memory"           // ENOMEM
	// ResourceProcesses: fork failed with EAGAIN (the process limit or
	// memory for a new process).
	ResourceProcesses Resource = "processes"
)

// resourceError is a system error that says a resource is exhausted; the
// list is per platform (resource_*.go).
type resourceError struct {
	err      error
	resource Resource
}

// ExhaustedResource returns the resource that err's chain says the runner
// ran out of, and "" when it says no such thing. It looks through wrapped
// errors (*fs.PathError, *os.SyscallError, fmt.Errorf's %w) for the system
// error numbers, so only what a system call of this process returned
// counts: an agent that exits because it ran out of file descriptors is
// the agent's failure, seen as an exit status and never as an errno here.
// EAGAIN counts only from fork/exec, where it means no process could be
// made; elsewhere it means "not now" and is no exhaustion.
func ExhaustedResource(err error) Resource {
	if err == nil {
		return ""
	}
	for _, r := range resourceErrors {
		if errors.Is(err, r.err) {
			return r.resource
		}
	}
	var pe *fs.PathError
	if errors.As(err, &pe) && pe.Op == "fork/exec" {
		for _, r := range forkErrors {
			if errors.Is(pe.Err, r.err) {
				return r.resource
			}
		}
	}
	return ""
}
