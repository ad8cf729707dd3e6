package http_test

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/agentrunner/agentrunner"
	arhttp "github.com/agentrunner/agentrunner/http"
	"github.com/agentrunner/agentrunner/internal/clocktest"
	"github.com/google/go-cmp/cmp"
)

// restartable serves one store on one address, and can stop and start
// serving it again, as a restarted serve does.
type restartable struct {
	t      *testing.T
	addr   string
	opts   arhttp.Options
	cancel context.CancelFunc
	done   chan error
}

func (r *restartable) start() {
	r.t.Helper()
	ln, err := net.Listen("tcp", r.addr)
	if err != nil {
		r.t.Fatal(err)
	}
	r.addr = ln.Addr().String()
	ctx, cancel := context.WithCancel(r.t.Context())
	r.cancel, r.done = cancel, make(chan error, 1)
	srv := newServer(r.t, r.opts)
	go func() { r.done <- srv.Serve(ctx, ln) }()
}

func (r *restartable) stop() {
	r.cancel()
	if err := <-r.done; err != nil {
		r.t.Errorf("Serve: %v", err)
	}
}

// TestFollowAcrossARestart: Follow gets every event once, in order: those
// committed before the server stopped, while it was down and after it came
// back on the same address, resuming with Last-Event-ID; each break is
// told to onBreak; the end of ctx ends it with nil.
func TestFollowAcrossARestart(t *testing.T) {
	store := openStore(t)
	r := &restartable{t: t, addr: "127.0.0.1:0", opts: arhttp.Options{Store: store, Config: testConfig(), Clock: clocktest.New(now), Logger: slog.New(slog.DiscardHandler)}}
	r.start()
	c, err := arhttp.NewClient("http://"+r.addr, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	add := func(typ string) {
		t.Helper()
		ev := &agentrunner.Event{Timestamp: now, Type: typ, Level: agentrunner.LevelInfo}
		if err := store.Apply(t.Context(), &agentrunner.Change{Events: []*agentrunner.Event{ev}}); err != nil {
			t.Fatal(err)
		}
	}
	add("before.follow") // event 1: the stream starts after it
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	var mu sync.Mutex
	var got []string
	var breaks int
	seen := make(chan int64, 16)
	done := make(chan error, 1)
	go func() {
		done <- c.Follow(ctx, "1", arhttp.EventFilter{}, func(e arhttp.Event) error {
			mu.Lock()
			got = append(got, fmt.Sprintf("%d %s", e.ID, e.Type))
			mu.Unlock()
			seen <- e.ID
			return nil
		}, func(error, time.Duration) { mu.Lock(); breaks++; mu.Unlock() })
	}()
	wait := func(id int64) {
		t.Helper()
		for {
			select {
			case got := <-seen:
				if got == id {
					return
				}
			case err := <-done:
				t.Fatalf("Follow returned before event %d: %v", id, err)
			case <-ctx.Done():
				t.Fatalf("event %d did not come", id)
			}
		}
	}
	add("first.run")
	wait(2)
	r.stop()
	add("while.down")
	r.start()
	add("second.run")
	wait(4)
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Follow after its context ended: %v, want nil", err)
	}
	r.stop()
	mu.Lock()
	defer mu.Unlock()
	if diff := cmp.Diff([]string{"2 first.run", "3 while.down", "4 second.run"}, got); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
	if breaks < 1 {
		t.Errorf("onBreak told of %d breaks, want at least 1", breaks)
	}
}

// TestFollowStopsOnARefusal: an answer a retry would not change (a bad
// filter) ends Follow with it, without a retry.
func TestFollowStopsOnARefusal(t *testing.T) {
	r := &restartable{t: t, addr: "127.0.0.1:0", opts: arhttp.Options{Store: openStore(t), Config: testConfig(), Clock: clocktest.New(now), Logger: slog.New(slog.DiscardHandler)}}
	r.start()
	defer r.stop()
	c, err := arhttp.NewClient("http://"+r.addr, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	breaks := 0
	err = c.Follow(t.Context(), "", arhttp.EventFilter{Level: "loud"}, func(arhttp.Event) error { return nil }, func(error, time.Duration) { breaks++ })
	if agentrunner.ErrorCode(err) != agentrunner.EINVALID || breaks != 0 {
		t.Errorf("Follow with a bad level: %v after %d breaks, want invalid after none", err, breaks)
	}
}
