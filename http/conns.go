package http

import (
	"cmp"
	"context"
	"net"
	"net/http"
	"sync"
	"sync/atomic"

	"github.com/agentrunner/agentrunner/config"
)

// unauthenticatedShare is the part of the connection cap that connections
// which have not yet made an authenticated request may hold together.
const unauthenticatedShare = 4 // a quarter

// minConnections is the smallest cap: below it the API is unusable.
const minConnections = 8

// ConnectionLimit is the cap on the API's open connections: configured
// (server.max_connections; 0: config.DefaultMaxConnections), but at most
// half the process's file descriptor limit where it has one, so that a
// flood leaves the other half to the engine (the store, agents' files
// and processes, outgoing requests).
func ConnectionLimit(configured int) int {
	fds, ok := descriptorLimit()
	return connectionLimit(configured, fds, ok)
}

// connectionLimit is ConnectionLimit for a descriptor limit fds (ok:
// there is one).
func connectionLimit(configured int, fds uint64, ok bool) int {
	limit := cmp.Or(configured, config.DefaultMaxConnections)
	if ok && fds/2 < uint64(limit) {
		limit = int(fds / 2)
	}
	return max(limit, minConnections)
}

// ConnStats are the server's connection counters, for metrics.
type ConnStats struct {
	// Limit is the cap on open connections in force.
	Limit int
	// Open counts the open connections; Unauthenticated those of them
	// that have not yet completed an authenticated request.
	Open, Unauthenticated int
	// Evicted counts the connections closed to make room: an idle
	// unauthenticated one beyond its share, or an idle one at the cap.
	Evicted int64
	// AtLimit counts the times a new connection had to wait for the cap.
	AtLimit int64
	// Refused counts the requests answered 401, 403, 415 or 421, whose
	// connections were closed, by error code.
	Refused map[string]int64
}

// conns tracks the server's connections: it caps how many are open and
// how many of them are unauthenticated, and it closes idle ones to make
// room. A connection counts from its accept to its close.
//
// Why this design: every open connection holds a file descriptor, which
// the engine needs too; without a cap a flood of idle connections makes
// the engine fail with "too many open files". A plain cap (a listener that
// stops accepting) would keep the flood's connections and lock every
// legitimate client out. So the flood is kept to a share: a connection is
// unauthenticated until one of its requests passes authentication, and
// when unauthenticated ones exceed a quarter of the cap the oldest of them
// that is not inside a handler is closed. Oldest first, because a new
// client is about to send its request, while an old silent one had its
// chance. Requests refused for their credentials, Host, Origin or
// Content-Type also close their connection, so a refused client cannot
// keep it open. Connections beyond the cap wait in the kernel's backlog,
// which costs the process no descriptor.
type conns struct {
	limit int
	mu    sync.Mutex
	open  map[*trackedConn]struct{}
	// seq orders connections by their accept.
	seq       uint64
	evicted   atomic.Int64
	atLimit   atomic.Int64
	refusedMu sync.Mutex
	refusedBy map[string]int64
}

func newConns() *conns {
	return &conns{open: map[*trackedConn]struct{}{}, refusedBy: map[string]int64{}}
}

// trackedConn is a connection with what the tracker knows of it. Its
// fields other than Conn are guarded by conns.mu.
type trackedConn struct {
	net.Conn
	owner *conns
	seq   uint64
	// authenticated: a request on it passed authentication.
	authenticated bool
	// idle: no request is being read or answered (new or between requests).
	idle bool
	// handlers counts the handlers running for it (1 at most in HTTP/1.1).
	handlers  int
	closeOnce sync.Once
	closeErr  error
	// release frees its slot of the cap.
	release func()
}

// Close closes the connection and frees its slot, once.
func (c *trackedConn) Close() error {
	c.closeOnce.Do(func() {
		c.closeErr = c.Conn.Close()
		c.owner.forget(c)
		c.release()
	})
	return c.closeErr
}

// limitListener accepts at most conns.limit connections at once.
type limitListener struct {
	net.Listener
	conns *conns
	slots chan struct{}
	done  chan struct{}
	once  sync.Once
}

// listen wraps ln so that it accepts connections within limit.
func (t *conns) listen(ln net.Listener, limit int) *limitListener {
	t.mu.Lock()
	t.limit = limit
	t.mu.Unlock()
	return &limitListener{Listener: ln, conns: t, slots: make(chan struct{}, limit), done: make(chan struct{})}
}

// Accept accepts a connection, then waits for a free slot for it. At the
// cap it first closes the oldest idle connection, so that a new client
// does not wait for an idle timeout; without an idle one it waits for a
// close. Only then does the server accept again: while this connection
// waits, holding its descriptor, the next ones wait in the kernel's
// backlog, which costs the process none.
func (l *limitListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	select {
	case l.slots <- struct{}{}:
	default:
		l.conns.atLimit.Add(1)
		l.conns.evict(func(c *trackedConn) bool { return c.idle && c.handlers == 0 })
		select {
		case l.slots <- struct{}{}:
		case <-l.done:
			c.Close()
			return nil, net.ErrClosed
		}
	}
	tc := l.conns.track(c, func() { <-l.slots })
	l.conns.trimUnauthenticated(tc)
	return tc, nil
}

// Close stops accepting, and unblocks an Accept waiting for a slot.
func (l *limitListener) Close() error {
	l.once.Do(func() { close(l.done) })
	return l.Listener.Close()
}

// track records a newly accepted connection.
func (t *conns) track(c net.Conn, release func()) *trackedConn {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.seq++
	tc := &trackedConn{Conn: c, owner: t, seq: t.seq, idle: true, release: release}
	t.open[tc] = struct{}{}
	return tc
}

func (t *conns) forget(c *trackedConn) {
	t.mu.Lock()
	delete(t.open, c)
	t.mu.Unlock()
}

// trimUnauthenticated closes the oldest unauthenticated connection that is
// not inside a handler, other than the new one, while more than the share
// are unauthenticated.
func (t *conns) trimUnauthenticated(newest *trackedConn) {
	share := max(1, t.limit/unauthenticatedShare)
	for t.unauthenticated() > share {
		if !t.evict(func(c *trackedConn) bool { return !c.authenticated && c.handlers == 0 && c != newest }) {
			return
		}
	}
}

func (t *conns) unauthenticated() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	n := 0
	for c := range t.open {
		if !c.authenticated {
			n++
		}
	}
	return n
}

// evict closes the oldest connection that may, preferring unauthenticated
// ones, and reports whether it found one.
func (t *conns) evict(may func(*trackedConn) bool) bool {
	t.mu.Lock()
	var victim *trackedConn
	for c := range t.open {
		if !may(c) {
			continue
		}
		if victim == nil || older(c, victim) {
			victim = c
		}
	}
	t.mu.Unlock()
	if victim == nil {
		return false
	}
	t.evicted.Add(1)
	victim.Close()
	return true
}

// older reports whether a goes before b in eviction order: unauthenticated
// first, then by accept.
func older(a, b *trackedConn) bool {
	if a.authenticated != b.authenticated {
		return !a.authenticated
	}
	return a.seq < b.seq
}

// connState follows the server's view of each connection
// (http.Server.ConnState).
func (t *conns) connState(c net.Conn, st http.ConnState) {
	tc, ok := c.(*trackedConn)
	if !ok {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	switch st {
	case http.StateActive:
		tc.idle = false
	case http.StateIdle:
		tc.idle = true
	}
}

// connKey is the context key of a request's *trackedConn.
type connKey struct{}

// connContext puts the connection into its requests' context
// (http.Server.ConnContext).
func connContext(ctx context.Context, c net.Conn) context.Context {
	if tc, ok := c.(*trackedConn); ok {
		return context.WithValue(ctx, connKey{}, tc)
	}
	return ctx
}

// connOf returns the connection r came in on, if tracked.
func connOf(r *http.Request) *trackedConn {
	tc, _ := r.Context().Value(connKey{}).(*trackedConn)
	return tc
}

// inHandler marks the connection busy while h runs, so that it is not
// evicted in the middle of an answer.
func (t *conns) inHandler(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if tc := connOf(r); tc != nil {
			t.mu.Lock()
			tc.handlers++
			t.mu.Unlock()
			defer func() {
				t.mu.Lock()
				tc.handlers--
				t.mu.Unlock()
			}()
		}
		h.ServeHTTP(w, r)
	})
}

// authenticated marks r's connection as one whose caller proved who it is.
func (t *conns) authenticated(r *http.Request) {
	if tc := connOf(r); tc != nil {
		t.mu.Lock()
		tc.authenticated = true
		t.mu.Unlock()
	}
}

// refused counts a request refused with a code that closes its connection.
func (t *conns) refused(code string) {
	t.refusedMu.Lock()
	t.refusedBy[code]++
	t.refusedMu.Unlock()
}

// stats returns the counters.
func (t *conns) stats() ConnStats {
	t.mu.Lock()
	st := ConnStats{Limit: t.limit, Open: len(t.open)}
	for c := range t.open {
		if !c.authenticated {
			st.Unauthenticated++
		}
	}
	t.mu.Unlock()
	st.Evicted, st.AtLimit = t.evicted.Load(), t.atLimit.Load()
	t.refusedMu.Lock()
	st.Refused = make(map[string]int64, len(t.refusedBy))
	for k, v := range t.refusedBy {
		st.Refused[k] = v
	}
	t.refusedMu.Unlock()
	return st
}
