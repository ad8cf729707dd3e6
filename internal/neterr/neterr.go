// Package neterr tells what kind of failure a network request that got no
// (complete) answer met, so that callers word it and decide whether to try
// again from the kind, not from the error's text.
package neterr

import (
	"context"
	"errors"
	"io"
	"net"
	"net/url"
	"os"
	"slices"
	"syscall"
)

// Kind is the kind of a network failure.
type Kind int

// The kinds of network failure, in the order Classify looks for them.
const (
	// Other is an error that is none of the kinds below, nil included.
	Other Kind = iota
	// Timeout is a deadline that passed: the context's, the client's or
	// an I/O deadline.
	Timeout
	// Canceled is a request stopped by its context's cancel.
	Canceled
	// HostNotFound is a name that DNS says does not exist.
	HostNotFound
	// DNS is a name lookup that failed otherwise, e.g. a server failure.
	DNS
	// Refused is a connection that the peer refused: nothing listens.
	Refused
	// Reset is a connection that the peer reset or aborted, or a write to
	// one it closed.
	Reset
	// EOF is a connection closed before the whole answer came.
	EOF
	// Network is any other failure of a network operation, e.g. an
	// unreachable host.
	Network
)

var kindNames = [...]string{"other", "timeout", "canceled", "host not found", "DNS failure", "connection refused", "connection reset", "connection closed early", "network failure"}

// String names the kind for logs and tests.
func (k Kind) String() string {
	if k < 0 || int(k) >= len(kindNames) {
		return "unknown"
	}
	return kindNames[k]
}

// Classify returns the kind of err, looking through wrapping. A timeout
// wins over a cancel, because net/http reports its client timeout as a
// cancel that times out.
func Classify(err error) Kind {
	var dnsErr *net.DNSError
	var opErr *net.OpError
	switch {
	case err == nil:
		return Other
	case isTimeout(err):
		return Timeout
	case errors.Is(err, context.Canceled):
		return Canceled
	case errors.As(err, &dnsErr) && dnsErr.IsNotFound:
		return HostNotFound
	case dnsErr != nil:
		return DNS
	case isErrno(err, refusedErrnos):
		return Refused
	case isErrno(err, resetErrnos):
		return Reset
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return EOF
	case errors.As(err, &opErr):
		return Network
	}
	return Other
}

// Unwrap returns err without the *url.Error that net/http puts around a
// transport error: its text repeats the method and the whole URL, which
// may carry a secret and which the caller's message names its own way.
func Unwrap(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}

// Reason says why a request failed, for a message that names the request
// already: "timed out", "cancelled", or the text of the error inside the
// *url.Error (which would repeat the URL).
func Reason(err error) string {
	switch Classify(err) {
	case Timeout:
		return "timed out"
	case Canceled:
		return "cancelled"
	}
	return Unwrap(err).Error()
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.Is(err, context.DeadlineExceeded) || errors.Is(err, os.ErrDeadlineExceeded) ||
		(errors.As(err, &ne) && ne.Timeout())
}

func isErrno(err error, set []syscall.Errno) bool {
	var errno syscall.Errno
	return errors.As(err, &errno) && slices.Contains(set, errno)
}
