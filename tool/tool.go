// Package tool is the tool registry and the executor every runtime uses
// (FR-102..114, FR-134..143): tools are declared with a JSON Schema for
// their arguments and run with a timeout, retries for transient failures,
// a circuit breaker, and an audit event per call. Results follow spec 4's
// contract {"isError": bool, "message": string}; a model never sees a Go
// error or a stack.
//
// Each tool's implementation lives in a sub-package and provides a Spec and
// a Handler, but parallel_tool_call (parallel.go): it runs other calls
// through the caller's Scope, which only this package knows.
package tool

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
)

// Spec declares a tool: what a model is offered and how calls are run.
type Spec struct {
	Name string
	// Description is what the model is told the tool does.
	Description string
	// Parameters is the JSON Schema of the arguments object.
	Parameters json.RawMessage
	// Timeout bounds one try of one call.
	Timeout time.Duration
	// Retries is how many more tries a call gets after a transient failure;
	// Backoff is the wait before the first retry, doubled for each next one.
	Retries int
	Backoff time.Duration
	// BreakerFailures consecutive failed calls open the tool's breaker for
	// BreakerOpenFor; 0 disables the breaker.
	BreakerFailures int
	BreakerOpenFor  time.Duration
}

// Handler runs calls of one tool. It returns the message for the model, or
// an error whose text the model is shown, so it must say what went wrong
// in the model's terms ("asset FOO is unknown"), never internals. Errors
// wrapped with Transient are retried.
type Handler interface {
	Call(ctx context.Context, args json.RawMessage) (string, error)
}

// HandlerFunc adapts a function to Handler.
type HandlerFunc func(ctx context.Context, args json.RawMessage) (string, error)

// Call calls f.
func (f HandlerFunc) Call(ctx context.Context, args json.RawMessage) (string, error) {
	return f(ctx, args)
}

// transientError marks a failure that a retry may fix.
type transientError struct {
	err        error
	retryAfter time.Duration
}

func (e *transientError) Error() string { return e.err.Error() }
func (e *transientError) Unwrap() error { return e.err }

// Transient marks err as worth retrying: a timeout, a 5xx, a connection
// error, a rate limit.
func Transient(err error) error {
	if err == nil {
		return nil
	}
	return &transientError{err: err}
}

// RetryAfter marks err as transient with the wait the upstream asked for
// (a 429's Retry-After), which the executor honours instead of its backoff.
func RetryAfter(err error, wait time.Duration) error {
	if err == nil {
		return nil
	}
	return &transientError{err: err, retryAfter: wait}
}

// IsTransient reports whether err was marked with Transient or RetryAfter.
func IsTransient(err error) bool {
	var t *transientError
	return errors.As(err, &t)
}

// RetryAfterOf returns the wait requested through RetryAfter, 0 if none.
func RetryAfterOf(err error) time.Duration {
	var t *transientError
	if errors.As(err, &t) {
		return t.retryAfter
	}
	return 0
}

// DecodeArgs decodes a call's arguments into v strictly: an unknown key, a
// wrong type or data after the object is an error the model can read. The
// executor checks arguments against the tool's schema first, but a handler
// may be called directly. Empty arguments and null are no arguments.
func DecodeArgs(raw json.RawMessage, v any) error {
	if t := bytes.TrimSpace(raw); len(t) == 0 || string(t) == "null" {
		raw = json.RawMessage(`{}`)
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("invalid arguments: %s", strings.TrimPrefix(err.Error(), "json: "))
	}
	if len(bytes.TrimSpace(raw[dec.InputOffset():])) > 0 {
		return errors.New("invalid arguments: unexpected data after the JSON object")
	}
	return nil
}
