package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentrunner/agentrunner"
	"github.com/agentrunner/agentrunner/examples/crypton"
	"github.com/agentrunner/agentrunner/execsvc"
	"github.com/agentrunner/agentrunner/internal/syncbuf"
	"github.com/agentrunner/agentrunner/sqlite"
)

// e2eVersion is the version the binary is stamped with.
const e2eVersion = "v0.0.0-e2e"

// TestVersionIsStampedAtBuild: the binary built with -ldflags -X
// main.version says that version through `version` and `--version`.
func TestVersionIsStampedAtBuild(t *testing.T) {
	for _, arg := range []string{"version", "--version"} {
		out, err := exec.Command(binary, arg).Output()
		if err != nil || !strings.HasPrefix(string(out), "agentrunner "+e2eVersion+" (revision ") {
			t.Errorf("agentrunner %s: %q, %v; want agentrunner %s (revision …)", arg, out, err, e2eVersion)
		}
	}
}

// restartableServe is `agentrunner serve` on the example workspace, on
// one address, which a test stops and starts again.
type restartableServe struct {
	dir, addr string
	env       []string
	cmd       *exec.Cmd
	log       *syncbuf.Buffer
}

func newRestartableServe(t *testing.T) *restartableServe {
	t.Helper()
	dir := t.TempDir()
	if _, err := crypton.Write(dir, true, ""); err != nil {
		t.Fatal(err)
	}
	cfgPath := filepath.Join(dir, "agentrunner.yaml")
	yaml, err := os.ReadFile(cfgPath)
	if err != nil {
		t.Fatal(err)
	}
	// An attempt a stop interrupts is retried at once after the restart.
	yaml = bytes.Replace(yaml, []byte("retries: {max: 3, backoff: [5m, 15m, 45m]}"), []byte("retries: {max: 3, backoff: [50ms]}"), 1)
	if err := os.WriteFile(cfgPath, yaml, 0o644); err != nil {
		t.Fatal(err)
	}
	es := execsvc.NewMock(execsvc.MockOptions{})
	esURL, err := es.Start("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { es.Close() })
	addr := freeAddr(t)
	s := &restartableServe{dir: dir, addr: addr, log: &syncbuf.Buffer{}, env: append(os.Environ(),
		"AGENTRUNNER_SERVER_LISTEN="+addr,
		"AGENTRUNNER_EXECUTION_SERVICE_URL="+esURL,
		"AGENTRUNNER_EXECUTION_SERVICE_POLL_INTERVAL=50ms",
		"AGENTRUNNER_SCHEDULE_EVERY=1s",
		"AGENTRUNNER_SCHEDULE_MIN_CYCLE=1s",
	)}
	t.Cleanup(func() {
		s.stop(t)
		if t.Failed() {
			t.Logf("serve's log:\n%s", s.log)
		}
	})
	return s
}

func (s *restartableServe) start(t *testing.T) {
	t.Helper()
	s.cmd = exec.Command(binary, "serve", "-c", filepath.Join(s.dir, "agentrunner.yaml"))
	s.cmd.Env, s.cmd.Stderr = s.env, s.log
	if err := s.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		resp, err := http.Get("http://" + s.addr + "/health/live")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("serve does not answer /health/live within 20s")
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// stop interrupts serve and waits for it to exit.
func (s *restartableServe) stop(t *testing.T) {
	if s.cmd == nil {
		return
	}
	s.cmd.Process.Signal(os.Interrupt)
	done := make(chan struct{})
	go func() { s.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		s.cmd.Process.Kill()
		<-done
		t.Errorf("serve did not exit within 30s of an interrupt")
	}
	s.cmd = nil
}

// newestEvent is the id of the newest event in the workspace's store,
// read while no serve runs.
func (s *restartableServe) newestEvent(t *testing.T) int64 {
	t.Helper()
	store, err := sqlite.Open(context.Background(), filepath.Join(s.dir, "artifacts", "state.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	evs, err := store.Events(context.Background(), agentrunner.EventFilter{Newest: true, Limit: 1})
	if err != nil || len(evs) != 1 {
		t.Fatalf("newest event: %v, %v", evs, err)
	}
	return evs[0].ID
}

// follower is `agentrunner events --follow --json` and the ids it printed.
type follower struct {
	cmd    *exec.Cmd
	stderr *syncbuf.Buffer
	mu     sync.Mutex
	ids    []int64
	bad    []string
	grew   chan struct{}
}

func startFollower(t *testing.T, server string) *follower {
	t.Helper()
	f := &follower{stderr: &syncbuf.Buffer{}, grew: make(chan struct{}, 1)}
	f.cmd = exec.Command(binary, "events", "--follow", "--json", "--server", server)
	f.cmd.Stderr = f.stderr
	out, err := f.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := f.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			var ev struct {
				ID int64 `json:"id"`
			}
			f.mu.Lock()
			if err := json.Unmarshal(sc.Bytes(), &ev); err != nil || ev.ID == 0 {
				f.bad = append(f.bad, sc.Text())
			} else {
				f.ids = append(f.ids, ev.ID)
			}
			f.mu.Unlock()
			select {
			case f.grew <- struct{}{}:
			default:
			}
		}
	}()
	t.Cleanup(func() { f.cmd.Process.Kill(); f.cmd.Wait() })
	return f
}

// waitFor waits until the follower printed an event id above id.
func (f *follower) waitFor(t *testing.T, what string, above int64) {
	t.Helper()
	deadline := time.After(60 * time.Second)
	for {
		f.mu.Lock()
		n := len(f.ids)
		last := int64(0)
		if n > 0 {
			last = f.ids[n-1]
		}
		f.mu.Unlock()
		if last > above {
			return
		}
		select {
		case <-f.grew:
		case <-deadline:
			t.Fatalf("%s: the follower printed no event above %d within 60s; stderr:\n%s", what, above, f.stderr)
		}
	}
}

// TestEventsFollowAcrossAServeRestart: `events --follow` on a running
// serve goes on through a restart of serve on the same address: it prints
// the events of the first run, those committed while it was reconnecting
// and those of the second run, each once and in order (the ids follow one
// another without a gap), saying on stderr that it reconnects, and exits
// 0 when interrupted.
func TestEventsFollowAcrossAServeRestart(t *testing.T) {
	s := newRestartableServe(t)
	s.start(t)
	f := startFollower(t, "http://"+s.addr)
	f.waitFor(t, "first run", 0)
	s.stop(t)
	firstRun := s.newestEvent(t)
	s.start(t)
	f.waitFor(t, "second run", firstRun+3)

	f.cmd.Process.Signal(os.Interrupt)
	if err := f.cmd.Wait(); err != nil {
		t.Errorf("the follower after an interrupt: %v, want exit 0; stderr:\n%s", err, f.stderr)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.bad) > 0 {
		t.Errorf("lines that are not events: %q", f.bad)
	}
	for i := 1; i < len(f.ids); i++ {
		if f.ids[i] != f.ids[i-1]+1 {
			t.Errorf("event %d followed by %d: an event was missed or printed twice", f.ids[i-1], f.ids[i])
		}
	}
	if f.ids[0] > firstRun {
		t.Errorf("no event of the first run printed: the first is %d, the first run ended at %d", f.ids[0], firstRun)
	}
	if !strings.Contains(f.stderr.String(), "reconnecting from the last event printed") {
		t.Errorf("stderr does not say the follower reconnects:\n%s", f.stderr)
	}
	t.Logf("printed events %d to %d; the first run ended at %d", f.ids[0], f.ids[len(f.ids)-1], firstRun)
}
