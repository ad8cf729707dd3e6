package scheduler_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentrunner/agentrunner"
	"github.com/agentrunner/agentrunner/scheduler"
)

// flakyFollower fails its first calls after the first, as a full disk
// would, and logs each call in order with the attempts it is told of.
type flakyFollower struct {
	mu    *sync.Mutex
	log   *[]string
	fails int
	calls int
}

func (f *flakyFollower) Follow(_ context.Context, run *agentrunner.Run) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls++
	if f.calls > 1 && f.fails > 0 {
		f.fails--
		*f.log = append(*f.log, "follow:fail")
		return errors.New("no space left on device")
	}
	*f.log = append(*f.log, "follow:ok")
	return nil
}

// TestAnAttemptWaitsUntilItsRunIsFollowed: after a commit whose follower
// fails (the run's document could not be written), the run's next
// attempt does not start until a later call succeeds.
func TestAnAttemptWaitsUntilItsRunIsFollowed(t *testing.T) {
	var mu sync.Mutex
	var log []string
	k := &scriptKind{outputs: map[string][]string{
		"orchestrator": {signal("orchestrator", "verifier")},
		"verifier":     {signal("verifier", "STOP")},
	}, seen: func(a *agentrunner.StepAttempt) {
		mu.Lock()
		log = append(log, "run:"+a.Step.ID)
		mu.Unlock()
	}}
	h := newHarness(t, k, signalFlow())
	h.poll = 10 * time.Millisecond
	h.options = func(o *scheduler.Options) {
		o.Followers = map[string]agentrunner.RunFollower{"signal": &flakyFollower{mu: &mu, log: &log, fails: 3}}
	}
	h.run()
	id := h.startRun("signal", nil)
	if r, srs := h.waitDone(id); r.Status != agentrunner.RunCompleted {
		t.Fatalf("run %s (%s): %s", r.Status, r.Error, describe(srs))
	}
	mu.Lock()
	defer mu.Unlock()
	last := ""
	for _, e := range log {
		if strings.HasPrefix(e, "run:") && last != "follow:ok" {
			t.Errorf("%s started while its run's follower was behind; log %v", e, log)
		}
		if strings.HasPrefix(e, "follow:") {
			last = e
		}
	}
	if !strings.Contains(strings.Join(log, " "), "follow:fail follow:fail follow:fail follow:ok run:verifier") {
		t.Errorf("log %v: want three failed follows, then the verifier after a good one", log)
	}
}
