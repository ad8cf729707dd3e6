package e2e

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"
)

// background is a command of the binary running while the test goes on,
// its output collected line by line.
type background struct {
	cmd   *exec.Cmd
	mu    sync.Mutex
	lines []string
	done  chan struct{}
}

func startBackground(t *testing.T, dir string, args ...string) *background {
	t.Helper()
	b := &background{cmd: exec.Command(binary, args...), done: make(chan struct{})}
	b.cmd.Dir = dir
	out, err := b.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	b.cmd.Stderr = b.cmd.Stdout
	if err := b.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		defer close(b.done)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			b.mu.Lock()
			b.lines = append(b.lines, sc.Text())
			b.mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		if b.cmd.ProcessState == nil {
			b.cmd.Process.Kill()
			b.cmd.Wait()
		}
	})
	return b
}

func (b *background) output() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return strings.Join(b.lines, "\n")
}

// await waits for a line matching re and returns its first submatch; the
// bound only keeps a broken command from hanging the test.
func (b *background) await(t *testing.T, re *regexp.Regexp) string {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		if m := re.FindStringSubmatch(b.output()); m != nil {
			return m[1]
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("no line matched %s:\n%s", re, b.output())
	return ""
}

// stop interrupts the command as Ctrl-C does and returns its exit code.
func (b *background) stop(t *testing.T) int {
	t.Helper()
	if err := b.cmd.Process.Signal(os.Interrupt); err != nil {
		t.Fatal(err)
	}
	<-b.done
	b.cmd.Wait()
	return b.cmd.ProcessState.ExitCode()
}

// TestOwnWorkspaceFlowOffline follows the README's own-workspace steps as
// a new user does: init, validate, the mock Execution Service in the
// background (on a free port, so the runner is pointed at it through the
// environment), run --once. The cycle completes offline, and without a
// poll interval's wait: the first status poll is at once.
func TestOwnWorkspaceFlowOffline(t *testing.T) {
	root := t.TempDir()
	out, err := exec.Command(binary, "init", filepath.Join(root, "my-loop")).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "run `agentrunner execsvc mock` in another terminal first") {
		t.Fatalf("init: %v; it does not say how to run the mock Execution Service:\n%s", err, out)
	}
	dir := filepath.Join(root, "my-loop")
	validate := exec.Command(binary, "validate")
	validate.Dir = dir
	if out, err := validate.CombinedOutput(); err != nil {
		t.Fatalf("validate: %v\n%s", err, out)
	}

	es := startBackground(t, dir, "execsvc", "mock", "--listen", "127.0.0.1:0")
	url := es.await(t, regexp.MustCompile(`mock Execution Service listening on (http://\S+)`))
	run := exec.Command(binary, "run", "--once")
	run.Dir, run.Env = dir, append(os.Environ(), "AGENTRUNNER_EXECUTION_SERVICE_URL="+url)
	start := time.Now()
	out, err = run.CombinedOutput()
	took := time.Since(start)
	if err != nil || !regexp.MustCompile(`cycle \S+ completed in `).Match(out) {
		t.Fatalf("run --once: %v\n%s\nthe mock printed:\n%s", err, out, es.output())
	}
	if poll := 30 * time.Second; took >= poll {
		t.Errorf("run --once took %v: the execute step waited a poll interval (%v) before its first poll", took, poll)
	}
	if !strings.Contains(string(out), "execute      strategy strat-000001: completed") {
		t.Errorf("run --once does not show the strategy completed:\n%s", out)
	}

	if code := es.stop(t); code != 0 {
		t.Errorf("execsvc mock exited %d when interrupted, want 0:\n%s", code, es.output())
	}
	for _, want := range []string{" POST /v1/strategies 202 key=", " GET /v1/strategies/strat-000001 200", "1 strategy(ies) accepted"} {
		if !strings.Contains(es.output(), want) {
			t.Errorf("the mock did not print %q:\n%s", want, es.output())
		}
	}
}
