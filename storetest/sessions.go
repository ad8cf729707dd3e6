package storetest

import (
	"context"
	"testing"
	"time"

	"github.com/agentrunner/agentrunner"
)

// sessionTests are the cases of the dashboard's ended sessions.
var sessionTests = []struct {
	name string
	fn   func(t *testing.T, s agentrunner.Store)
}{
	{"EndedSessionsAreKeptUntilTheyExpire", testEndedSessions},
}

func testEndedSessions(t *testing.T, s agentrunner.Store) {
	ctx := context.Background()
	now := time.Date(2026, 11, 28, 9, 0, 0, 0, time.UTC)
	ended := func(id string) bool {
		t.Helper()
		ok, err := s.SessionEnded(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		return ok
	}
	if ended("a") {
		t.Fatal("a session never ended is ended")
	}
	if err := s.EndSession(ctx, "a", now.Add(time.Hour), now); err != nil {
		t.Fatal(err)
	}
	if err := s.EndSession(ctx, "a", now.Add(time.Hour), now); err != nil {
		t.Fatalf("ending a session twice: %v", err)
	}
	if !ended("a") || ended("b") {
		t.Fatalf("after ending a: a ended %v, b ended %v; want true and false", ended("a"), ended("b"))
	}
	// Ending another two hours later drops a, which has expired since.
	if err := s.EndSession(ctx, "b", now.Add(3*time.Hour), now.Add(2*time.Hour)); err != nil {
		t.Fatal(err)
	}
	if ended("a") || !ended("b") {
		t.Errorf("two hours later: a ended %v, b ended %v; want a dropped and b kept", ended("a"), ended("b"))
	}
	if err := s.EndSession(ctx, "", now, now); agentrunner.ErrorCode(err) != agentrunner.EINVALID {
		t.Errorf("a session without an id: %v, want EINVALID", err)
	}
}
