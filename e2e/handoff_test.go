package e2e

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/agentrunner/agentrunner"
	"github.com/agentrunner/agentrunner/config"
	"github.com/agentrunner/agentrunner/execsvc"
	"github.com/agentrunner/agentrunner/runtime/mock"
	"github.com/agentrunner/agentrunner/sqlite"
	"github.com/google/go-cmp/cmp"
)

// strategyWindow is how long the strategy of these tests is valid once the
// synthesis agent writes it: long enough for the runner to hand it over,
// short enough to wait for its end.
const strategyWindow = 4 * time.Second

// holdingService is the mock Execution Service behind a door that holds
// the first strategy POST open until the runner hangs up. With take set,
// the service takes that strategy first (its answer is never sent); without
// it, the request never reaches the service.
type holdingService struct {
	es      *execsvc.Mock
	take    bool
	once    sync.Once
	arrived chan struct{}
	// killed is closed once the runner is dead, so the held request ends.
	killed chan struct{}
}

func (h *holdingService) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	first := false
	if r.Method == http.MethodPost && r.URL.Path == "/v1/strategies" {
		h.once.Do(func() { first = true })
	}
	if !first {
		h.es.ServeHTTP(w, r)
		return
	}
	if h.take {
		h.es.ServeHTTP(httptest.NewRecorder(), r)
	} else {
		io.Copy(io.Discard, r.Body) // read, never served
	}
	close(h.arrived)
	select {
	case <-r.Context().Done():
	case <-h.killed:
	}
}

// handOffRun is a workspace whose synthesis agent writes a strategy valid
// for strategyWindow from when the test lets it go, and whose Execution
// Service is a holdingService.
type handOffRun struct {
	t       *testing.T
	dir     string
	cfgPath string
	env     []string
	svc     *holdingService
}

func newHandOffRun(t *testing.T, take bool) *handOffRun {
	t.Helper()
	dir := t.TempDir()
	if out, err := exec.Command(binary, "init", dir).CombinedOutput(); err != nil {
		t.Fatalf("init: %v\n%s", err, out)
	}
	svc := &holdingService{es: execsvc.NewMock(execsvc.MockOptions{}), take: take, arrived: make(chan struct{}), killed: make(chan struct{})}
	srv := httptest.NewServer(svc)
	t.Cleanup(srv.Close)

	// The synthesis agent marks its start, waits for the test's go, then
	// publishes the strategy the test wrote meanwhile.
	script := filepath.Join(dir, "gated-synthesis.sh")
	os.WriteFile(script, []byte("#!/bin/sh\ntouch \"$AGENTRUNNER_ATTEMPT_DIR/started\"\n"+
		"while [ ! -f '"+filepath.Join(dir, "go")+"' ]; do sleep 0.05; done\n"+
		"cp '"+filepath.Join(dir, "strategy-output.json")+"' \"$AGENTRUNNER_OUTPUT\"\n"), 0o755)
	cfgPath := filepath.Join(dir, config.FileName)
	yaml, _ := os.ReadFile(cfgPath)
	yaml = bytes.Replace(yaml, []byte("  mock: {kind: mock}"), []byte("  mock: {kind: mock}\n  gated: {kind: process, command: [sh, "+script+"]}"), 1)
	os.WriteFile(cfgPath, yaml, 0o644)
	env := append(os.Environ(),
		"AGENTRUNNER_AGENTS_SYNTHESIS_PROVIDER=gated",
		"AGENTRUNNER_AGENTS_SYNTHESIS_TOOLS=",
		"AGENTRUNNER_EXECUTION_SERVICE_URL="+srv.URL,
		"AGENTRUNNER_EXECUTION_SERVICE_POLL_INTERVAL=20ms",
	)
	return &handOffRun{t: t, dir: dir, cfgPath: cfgPath, env: env, svc: svc}
}

func (h *handOffRun) start() (*exec.Cmd, *bytes.Buffer) {
	cmd := exec.Command(binary, "run", "--once", "-c", h.cfgPath)
	cmd.Env = h.env
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		h.t.Fatal(err)
	}
	return cmd, &out
}

// crash runs the runner until its strategy POST is in flight and kills it
// there with SIGKILL; it returns the cycle and the end of the strategy's
// validity window.
func (h *handOffRun) crash() (string, time.Time) {
	t := h.t
	runner, out := h.start()
	exited := make(chan error, 1)
	go func() { exited <- runner.Wait() }()
	started := waitFor(t, filepath.Join(h.dir, "artifacts", "attempts", "*", "synthesize-1", "started"), 60*time.Second)
	cycleID := filepath.Base(filepath.Dir(filepath.Dir(started)))
	tmpl, err := os.ReadFile(filepath.Join(h.dir, "output_templates", "strategy.json"))
	if err != nil {
		t.Fatal(err)
	}
	// The template's window is six hours from its "now": shift it so that
	// the window ends strategyWindow from now, to the second.
	until := time.Now().Add(strategyWindow).Truncate(time.Second)
	os.WriteFile(filepath.Join(h.dir, "strategy-output.json"), mock.Generate(tmpl, ".json", cycleID, "synthesis", until.Add(-6*time.Hour)), 0o644)
	os.WriteFile(filepath.Join(h.dir, "go"), nil, 0o644)
	select {
	case <-h.svc.arrived:
	case err := <-exited:
		t.Fatalf("the runner exited (%v) before it handed the strategy over:\n%s", err, out)
	case <-time.After(time.Until(until)):
		runner.Process.Kill()
		t.Fatalf("the strategy POST did not arrive within its validity window:\n%s", out)
	}
	runner.Process.Signal(syscall.SIGKILL)
	<-exited
	close(h.svc.killed)
	t.Logf("first run, killed with the strategy POST in flight:\n%s", out)
	// The restarted runner reads the system clock: wait until the window
	// is over by it.
	for deadline := until.Add(30 * time.Second); !time.Now().After(until); {
		if time.Now().After(deadline) {
			t.Fatal("the clock did not pass the strategy's window")
		}
		time.Sleep(50 * time.Millisecond)
	}
	return cycleID, until
}

// restart runs the runner again to its end and returns its exit error.
func (h *handOffRun) restart() error {
	again, out := h.start()
	done := make(chan error, 1)
	go func() { done <- again.Wait() }()
	select {
	case err := <-done:
		h.t.Logf("restarted run (%v):\n%s", err, out)
		return err
	case <-time.After(90 * time.Second):
		again.Process.Kill()
		h.t.Fatalf("restarted runner did not finish:\n%s", out)
	}
	return nil
}

// outcome reads the cycle and "step:status:class" of its attempts.
func (h *handOffRun) outcome(cycleID string) (*agentrunner.Cycle, []string) {
	store, err := sqlite.Open(context.Background(), filepath.Join(h.dir, "artifacts", "state.db"))
	if err != nil {
		h.t.Fatal(err)
	}
	defer store.Close()
	c, err := store.Cycle(context.Background(), cycleID)
	if err != nil {
		h.t.Fatal(err)
	}
	atts, _ := store.Attempts(context.Background(), cycleID)
	var got []string
	for _, a := range atts {
		got = append(got, a.Step+":"+string(a.Status)+":"+string(a.ErrorClass))
	}
	return c, got
}

// strategyPosts is "key status" of each strategy POST the service answered.
func (h *handOffRun) strategyPosts() []string {
	var out []string
	for _, r := range h.svc.es.Requests() {
		if r.Method == http.MethodPost && r.Path == "/v1/strategies" {
			out = append(out, r.IdempotencyKey+" "+strconv.Itoa(r.StatusCode))
		}
	}
	return out
}

// TestHandOffInFlightAtACrash: the runner is killed (SIGKILL) while its
// strategy POST is in flight, after the Execution Service took the
// strategy, and restarted after the strategy's validity window. It sends
// the strategy again with the same idempotency key, learns from the
// service's replay that the strategy was taken, and the cycle goes on to
// execution and evaluation and completes.
func TestHandOffInFlightAtACrash(t *testing.T) {
	h := newHandOffRun(t, true)
	cycleID, _ := h.crash()
	if err := h.restart(); err != nil {
		t.Fatalf("restarted runner: %v", err)
	}
	c, atts := h.outcome(cycleID)
	if c.Status != agentrunner.CycleCompleted {
		t.Fatalf("cycle %s: %s %q, want completed", cycleID, c.Status, c.Error)
	}
	want := []string{"plan:succeeded:", "research:succeeded:", "analyze:succeeded:", "synthesize:succeeded:",
		"execute:failed:interrupted", "execute:succeeded:", "evaluate:succeeded:"}
	if diff := cmp.Diff(want, atts); diff != "" {
		t.Errorf("attempts (-want +got):\n%s", diff)
	}
	posts := h.strategyPosts()
	if len(posts) != 2 || !strings.HasSuffix(posts[0], " 202") || posts[1] != strings.TrimSuffix(posts[0], "202")+"200" {
		t.Errorf("strategy POSTs %q, want the one taken (202) and its replay with the same key (200)", posts)
	}
	if n := len(h.svc.es.Strategies()); n != 1 {
		t.Errorf("the Execution Service holds %d strategies, want 1", n)
	}
}

// TestHandOffLostAtACrash: the runner is killed while its strategy POST is
// in flight, before the request reached the Execution Service, and
// restarted after the strategy's validity window. The resend with the same
// key is refused as expired, so the strategy was not handed over: the
// cycle halts as for any expired strategy and the service takes nothing.
func TestHandOffLostAtACrash(t *testing.T) {
	h := newHandOffRun(t, false)
	cycleID, until := h.crash()
	if err := h.restart(); err == nil {
		t.Error("restarted runner exited 0; want it to report the halted cycle")
	}
	c, atts := h.outcome(cycleID)
	wantErr := "strategy expired at " + until.UTC().Format(time.RFC3339) + ", before it could be handed over"
	if c.Status != agentrunner.CycleHalted || !strings.Contains(c.Error, wantErr) || !strings.Contains(c.Error, "422 strategy_expired") {
		t.Fatalf("cycle %s: %s %q, want halted: %s, refused by the service", cycleID, c.Status, c.Error, wantErr)
	}
	for _, a := range atts {
		if strings.HasPrefix(a, "evaluate:") {
			t.Errorf("attempts %q: the cycle went on after the strategy expired", atts)
		}
	}
	posts := h.strategyPosts()
	if len(posts) == 0 || !strings.HasSuffix(posts[0], " 422") {
		t.Errorf("strategy POSTs %q, want the resend refused with 422", posts)
	}
	if n := len(h.svc.es.Strategies()); n != 0 {
		t.Errorf("the Execution Service took %d strategies, want none", n)
	}
}
