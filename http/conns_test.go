package http_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/agentrunner/agentrunner"
	"github.com/agentrunner/agentrunner/config"
	arhttp "github.com/agentrunner/agentrunner/http"
)

// waitLimit bounds every wait for the server in these tests.
const waitLimit = 10 * time.Second

// deadline is when a wait for the server gives up.
func deadline(t *testing.T) time.Time {
	t.Helper()
	return time.Now().Add(waitLimit)
}

// eventually polls cond until it holds or waitLimit passes.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	end := deadline(t)
	for !cond() {
		if time.Now().After(end) {
			t.Fatalf("%s: not within %s", what, waitLimit)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// rawGet sends a GET of path on c, with key when not empty, and reads the
// answer's status; the connection stays open.
func rawGet(t *testing.T, c net.Conn, r *bufio.Reader, path, key string) int {
	t.Helper()
	req := "GET " + path + " HTTP/1.1\r\nHost: " + c.RemoteAddr().String() + "\r\n"
	if key != "" {
		req += "Authorization: Bearer " + key + "\r\n"
	}
	if _, err := io.WriteString(c, req+"\r\n"); err != nil {
		t.Fatal(err)
	}
	c.SetReadDeadline(deadline(t))
	resp, err := http.ReadResponse(r, nil)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode
}

// dial opens a connection to addr, closed when the test ends.
func dial(t *testing.T, addr string) (net.Conn, *bufio.Reader) {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c, bufio.NewReader(c)
}

// closedByServer reports whether the server has closed c, waiting up to
// wait for it.
func closedByServer(t *testing.T, c net.Conn, wait time.Duration) bool {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(wait))
	_, err := c.Read(make([]byte, 1))
	return err != nil && !isTimeout(err)
}

// TestIdleConnectionClosedAfterIdleTimeout: a keep-alive connection that
// sends nothing after its answer is closed after server.idle_timeout.
func TestIdleConnectionClosedAfterIdleTimeout(t *testing.T) {
	f := newAPIFixture(t, func(c *config.Config) { c.Server.IdleTimeout = config.Duration(200 * time.Millisecond) })
	addr := serve(t, f.srv)
	c, r := dial(t, addr)
	if code := rawGet(t, c, r, "/api/status", viewerKey); code != 200 {
		t.Fatalf("GET /api/status: %d", code)
	}
	start := time.Now()
	c.SetReadDeadline(deadline(t))
	_, err := r.ReadByte()
	idle := time.Since(start)
	if err == nil || isTimeout(err) {
		t.Fatalf("the idle connection was not closed within %s: %v", waitLimit, err)
	}
	if idle < 150*time.Millisecond {
		t.Errorf("closed after %s, before the idle timeout of 200ms", idle)
	}
	eventually(t, "the closed connection is no longer counted", func() bool { return f.srv.ConnStats().Open == 0 })
}

// TestUnauthenticatedConnectionsKeepToTheirShare: with a cap of 16, a
// flood of 40 silent connections holds at most a quarter (4) at any time,
// the oldest closed first; a connection that authenticated stays, and a
// new client is answered during the flood.
func TestUnauthenticatedConnectionsKeepToTheirShare(t *testing.T) {
	f := newAPIFixture(t, func(c *config.Config) { c.Server.MaxConnections = 16 })
	addr := serve(t, f.srv)
	authed, authedR := dial(t, addr)
	if code := rawGet(t, authed, authedR, "/api/status", viewerKey); code != 200 {
		t.Fatalf("GET /api/status: %d", code)
	}
	var flood []net.Conn
	for range 40 {
		c, _ := dial(t, addr)
		flood = append(flood, c)
	}
	eventually(t, "the flood is accepted and trimmed", func() bool {
		st := f.srv.ConnStats()
		return st.Evicted >= 36 && st.Unauthenticated <= 4
	})
	if st := f.srv.ConnStats(); st.Limit != 16 || st.Open > 5 {
		t.Errorf("stats %+v, want limit 16 and at most 5 open (1 authenticated, 4 not)", st)
	}
	// The oldest were closed, the newest kept.
	if !closedByServer(t, flood[0], waitLimit) {
		t.Error("the oldest silent connection is still open")
	}
	if closedByServer(t, flood[len(flood)-1], 50*time.Millisecond) {
		t.Error("the newest silent connection was closed")
	}
	// The authenticated connection was not touched, and answers again.
	if code := rawGet(t, authed, authedR, "/api/status", viewerKey); code != 200 {
		t.Errorf("the authenticated connection: %d", code)
	}
	// A new client gets through the flood.
	c, r := dial(t, addr)
	if code := rawGet(t, c, r, "/api/status", viewerKey); code != 200 {
		t.Errorf("a new client during the flood: %d", code)
	}
}

// TestIdleConnectionMakesRoomAtTheCap: when every slot of the cap holds
// an idle authenticated connection, a new client does not wait for an
// idle timeout: the oldest idle connection is closed for it.
func TestIdleConnectionMakesRoomAtTheCap(t *testing.T) {
	f := newAPIFixture(t, func(c *config.Config) { c.Server.MaxConnections = 8 })
	addr := serve(t, f.srv)
	var conns []net.Conn
	for range 8 {
		c, r := dial(t, addr)
		if code := rawGet(t, c, r, "/api/status", viewerKey); code != 200 {
			t.Fatalf("GET /api/status: %d", code)
		}
		conns = append(conns, c)
	}
	c, r := dial(t, addr)
	if code := rawGet(t, c, r, "/api/status", viewerKey); code != 200 {
		t.Fatalf("the ninth client: %d", code)
	}
	if !closedByServer(t, conns[0], waitLimit) {
		t.Error("the oldest idle connection is still open")
	}
	if st := f.srv.ConnStats(); st.Open != 8 || st.AtLimit != 1 || st.Evicted != 1 {
		t.Errorf("stats %+v, want 8 open, the cap reached once, one eviction", st)
	}
}

// TestConnectionLimit: the cap is server.max_connections, at most half the
// descriptor limit, never below 8.
func TestConnectionLimit(t *testing.T) {
	tests := []struct {
		configured int
		fds        uint64
		hasLimit   bool
		want       int
	}{
		{configured: 1024, fds: 1 << 20, hasLimit: true, want: 1024},
		{configured: 1024, fds: 256, hasLimit: true, want: 128},
		{configured: 100, fds: 256, hasLimit: true, want: 100},
		{configured: 0, fds: 1 << 20, hasLimit: true, want: config.DefaultMaxConnections},
		{configured: 1024, fds: 10, hasLimit: true, want: 8},
		{configured: 5000, hasLimit: false, want: 5000},
		{configured: 1024, fds: ^uint64(0), hasLimit: true, want: 1024},
	}
	for _, tt := range tests {
		if got := arhttp.ConnectionLimitFor(tt.configured, tt.fds, tt.hasLimit); got != tt.want {
			t.Errorf("max_connections %d, descriptor limit %d (%v): %d, want %d", tt.configured, tt.fds, tt.hasLimit, got, tt.want)
		}
	}
}

// TestEventStreamOutlivesItsTimeouts: server.write_timeout bounds writing
// one answer, and server.read_timeout reading a request, not the life of
// an event stream, which keeps delivering past both.
func TestEventStreamOutlivesItsTimeouts(t *testing.T) {
	const timeout = 150 * time.Millisecond
	f := newAPIFixture(t, func(c *config.Config) {
		c.Server.ReadTimeout = config.Duration(timeout)
		c.Server.WriteTimeout = config.Duration(timeout)
	})
	addr := serve(t, f.srv)
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", "http://"+addr+"/api/events/stream", nil)
	req.Header.Set("Authorization", "Bearer "+viewerKey)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	r := bufio.NewReader(resp.Body)
	start := time.Now()
	// Events keep coming until the stream has lived five timeouts.
	for i := 0; time.Since(start) < 5*timeout; i++ {
		typ := fmt.Sprintf("step.n%d", i)
		ev := &agentrunner.Event{Timestamp: now, Type: typ, CycleID: f.cycle.ID, Level: agentrunner.LevelInfo}
		if err := f.store.Apply(ctx, &agentrunner.Change{Events: []*agentrunner.Event{ev}}); err != nil {
			t.Fatal(err)
		}
		for {
			line, err := r.ReadString('\n')
			if err != nil {
				t.Fatalf("the stream ended after %s: %v", time.Since(start), err)
			}
			if strings.TrimSpace(line) == "event: "+typ {
				break
			}
		}
	}
}
