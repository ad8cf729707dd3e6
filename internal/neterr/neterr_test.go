package neterr_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/agentrunner/agentrunner/internal/neterr"
)

func TestClassifyBuiltErrors(t *testing.T) {
	deadline, cancel := context.WithDeadline(context.Background(), time.Unix(0, 0))
	defer cancel()
	canceled, cancel2 := context.WithCancelCause(context.Background())
	cancel2(errors.New("shutting down"))
	urlErr := func(err error) error { return &url.Error{Op: "Get", URL: "http://x.test/", Err: err} }
	op := func(err error) error {
		return &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", err)}
	}
	tests := []struct {
		name string
		err  error
		want neterr.Kind
	}{
		{"nil", nil, neterr.Other},
		{"plain error", errors.New("boom"), neterr.Other},
		{"context deadline", deadline.Err(), neterr.Timeout},
		{"context canceled", canceled.Err(), neterr.Canceled},
		{"wrapped context deadline", fmt.Errorf("post: %w", urlErr(context.DeadlineExceeded)), neterr.Timeout},
		{"wrapped context canceled", fmt.Errorf("post: %w", urlErr(context.Canceled)), neterr.Canceled},
		{"I/O deadline", &net.OpError{Op: "read", Err: os.ErrDeadlineExceeded}, neterr.Timeout},
		{"host not found", urlErr(&net.OpError{Op: "dial", Err: &net.DNSError{Err: "no such host", Name: "x.test", IsNotFound: true}}), neterr.HostNotFound},
		{"DNS server failure", &net.DNSError{Err: "server misbehaving", Name: "x.test", IsTemporary: true}, neterr.DNS},
		{"DNS timeout", &net.DNSError{Err: "i/o timeout", Name: "x.test", IsTimeout: true}, neterr.Timeout},
		{"refused", urlErr(op(syscall.ECONNREFUSED)), neterr.Refused},
		{"reset", fmt.Errorf("read: %w", op(syscall.ECONNRESET)), neterr.Reset},
		{"aborted", op(syscall.ECONNABORTED), neterr.Reset},
		{"broken pipe", op(syscall.EPIPE), neterr.Reset},
		{"EOF", urlErr(io.EOF), neterr.EOF},
		{"unexpected EOF", fmt.Errorf("body: %w", io.ErrUnexpectedEOF), neterr.EOF},
		{"unreachable", urlErr(op(syscall.EHOSTUNREACH)), neterr.Network},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, neterr.Classify(tt.err)); diff != "" {
				t.Errorf("Classify(%v) (-want +got):\n%s", tt.err, diff)
			}
		})
	}
}

// TestClassifyRealFailures meets each kind on real sockets on 127.0.0.1.
func TestClassifyRealFailures(t *testing.T) {
	tests := []struct {
		name string
		err  func(t *testing.T) error
		want neterr.Kind
	}{
		{"client timeout", clientTimeout, neterr.Timeout},
		{"context deadline", contextDeadline, neterr.Timeout},
		{"context canceled", contextCanceled, neterr.Canceled},
		{"read deadline", readDeadline, neterr.Timeout},
		{"refused", refused, neterr.Refused},
		{"reset", reset, neterr.Reset},
		{"closed before the answer", closedEarly, neterr.EOF},
		{"body cut short", bodyCutShort, neterr.EOF},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.err(t)
			if err == nil {
				t.Fatal("no error")
			}
			if diff := cmp.Diff(tt.want, neterr.Classify(err)); diff != "" {
				t.Errorf("Classify(%v) (-want +got):\n%s", err, diff)
			}
		})
	}
}

// hanging serves nothing until the test ends.
func hanging(t *testing.T) *httptest.Server {
	done := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-done:
		case <-r.Context().Done():
		}
	}))
	t.Cleanup(func() { close(done); srv.Close() })
	return srv
}

func get(ctx context.Context, c *http.Client, u string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return err
	}
	resp, err := c.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	_, err = io.ReadAll(resp.Body)
	return err
}

func clientTimeout(t *testing.T) error {
	c := &http.Client{Timeout: time.Millisecond}
	return get(context.Background(), c, hanging(t).URL)
}

func contextDeadline(t *testing.T) error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Millisecond)
	defer cancel()
	return get(ctx, http.DefaultClient, hanging(t).URL)
}

func contextCanceled(t *testing.T) error {
	srv := hanging(t)
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- get(ctx, http.DefaultClient, srv.URL) }()
	cancel()
	return <-errc
}

func readDeadline(t *testing.T) error {
	conn := dialPair(t, func(net.Conn) {})
	if err := conn.SetReadDeadline(time.Now()); err != nil {
		t.Fatal(err)
	}
	_, err := conn.Read(make([]byte, 1))
	return err
}

func refused(t *testing.T) error {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	_, err = net.Dial("tcp", addr)
	return err
}

func reset(t *testing.T) error {
	ln := listen(t, func(c net.Conn) {
		c.(*net.TCPConn).SetLinger(0) // close with RST, not FIN
		c.Close()
	})
	// The RST may come before connect returns, or on the first read.
	conn, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		return err
	}
	defer conn.Close()
	_, err = conn.Read(make([]byte, 1))
	return err
}

func closedEarly(t *testing.T) error {
	u := serveRaw(t, func(c net.Conn) {
		http.ReadRequest(bufioReader(c))
		c.Close()
	})
	return get(context.Background(), &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}, u)
}

func bodyCutShort(t *testing.T) error {
	u := serveRaw(t, func(c net.Conn) {
		http.ReadRequest(bufioReader(c))
		io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nonly ten b")
		c.Close()
	})
	return get(context.Background(), &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}, u)
}

func TestUnwrap(t *testing.T) {
	inner := &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}
	plain := errors.New("boom")
	tests := []struct {
		name string
		err  error
		want error
	}{
		{"url error", &url.Error{Op: "Post", URL: "https://x.test/?token=abc", Err: inner}, inner},
		{"wrapped url error", fmt.Errorf("deliver: %w", &url.Error{Op: "Post", URL: "https://x.test/", Err: inner}), inner},
		{"no url error", plain, plain},
		{"nil", nil, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, neterr.Unwrap(tt.err), cmp.Comparer(func(a, b error) bool { return a == b })); diff != "" {
				t.Errorf("Unwrap (-want +got):\n%s", diff)
			}
		})
	}
}

func TestKindString(t *testing.T) {
	got := []string{neterr.Other.String(), neterr.Timeout.String(), neterr.Network.String(), neterr.Kind(99).String()}
	want := []string{"other", "timeout", "network failure", "unknown"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("String (-want +got):\n%s", diff)
	}
}

func TestReason(t *testing.T) {
	urlErr := func(err error) error { return &url.Error{Op: "Get", URL: "https://x.test/?token=abc", Err: err} }
	tests := []struct {
		name string
		err  error
		want string
	}{
		{"context deadline", urlErr(context.DeadlineExceeded), "timed out"},
		{"I/O timeout", urlErr(&net.OpError{Op: "read", Net: "tcp", Err: os.ErrDeadlineExceeded}), "timed out"},
		{"canceled", fmt.Errorf("search: %w", urlErr(context.Canceled)), "cancelled"},
		{"refused, without the URL", urlErr(&net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}), "dial tcp: connect: connection refused"},
		{"not a url error", io.ErrUnexpectedEOF, "unexpected EOF"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, neterr.Reason(tt.err)); diff != "" {
				t.Errorf("Reason(%v) (-want +got):\n%s", tt.err, diff)
			}
		})
	}
}
