// Package e2e tests the real agentrunner binary as an operator runs it.
package e2e

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agentrunner/agentrunner"
	"github.com/agentrunner/agentrunner/config"
	"github.com/agentrunner/agentrunner/execsvc"
	"github.com/agentrunner/agentrunner/runtime/mock"
	"github.com/agentrunner/agentrunner/sqlite"
	"github.com/agentrunner/agentrunner/workspace"
	"github.com/google/go-cmp/cmp"
)

var binary string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "agentrunner-e2e-")
	if err != nil {
		panic(err)
	}
	binary = filepath.Join(dir, "agentrunner")
	// Stamped as a release is (make build), so a test checks the stamp.
	build := exec.Command("go", "build", "-ldflags", "-X main.version="+e2eVersion, "-o", binary, "../cmd/agentrunner")
	build.Stderr = os.Stderr
	if err := build.Run(); err != nil {
		os.RemoveAll(dir)
		panic("build agentrunner: " + err.Error())
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// waitFor polls until a file matching pattern exists.
func waitFor(t *testing.T, pattern string, within time.Duration) string {
	t.Helper()
	deadline := time.Now().Add(within)
	for time.Now().Before(deadline) {
		if m, _ := filepath.Glob(pattern); len(m) > 0 {
			return m[0]
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("nothing matched %s within %v", pattern, within)
	return ""
}

// TestCrashRecovery kills the runner with SIGKILL while the research agent
// (a slow child process) runs, starts it again, and checks that the cycle
// completes without redoing or losing anything (FR-091).
func TestCrashRecovery(t *testing.T) {
	dir := t.TempDir()
	if out, err := exec.Command(binary, "init", dir).CombinedOutput(); err != nil {
		t.Fatalf("init: %v\n%s", err, out)
	}
	es := execsvc.NewMock(execsvc.MockOptions{CompletedAfter: 1})
	url, err := es.Start("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer es.Close()

	// The research agent is a process that marks its start, works for two
	// seconds, then writes a valid research.md.
	tmpl, err := os.ReadFile(filepath.Join(dir, "output_templates", "research.md"))
	if err != nil {
		t.Fatal(err)
	}
	fixture := filepath.Join(dir, "research-output.md")
	os.WriteFile(fixture, mock.Generate(tmpl, ".md", "20260101_000000", "research", time.Now()), 0o644)
	script := filepath.Join(dir, "slow-research.sh")
	os.WriteFile(script, []byte("#!/bin/sh\ntouch \"$AGENTRUNNER_ATTEMPT_DIR/started\"\nsleep 2\ncp '"+fixture+"' \"$AGENTRUNNER_OUTPUT\"\n"), 0o755)
	cfgPath := filepath.Join(dir, config.FileName)
	yaml, _ := os.ReadFile(cfgPath)
	yaml = bytes.Replace(yaml, []byte("  mock: {kind: mock}"), []byte("  mock: {kind: mock}\n  slow: {kind: process, command: [sh, "+script+"]}"), 1)
	os.WriteFile(cfgPath, yaml, 0o644)

	env := append(os.Environ(),
		"AGENTRUNNER_AGENTS_RESEARCH_PROVIDER=slow",
		"AGENTRUNNER_AGENTS_RESEARCH_TOOLS=", // a process agent with tools would need their API keys
		"AGENTRUNNER_EXECUTION_SERVICE_URL="+url,
		"AGENTRUNNER_EXECUTION_SERVICE_POLL_INTERVAL=20ms",
	)
	start := func() (*exec.Cmd, *bytes.Buffer) {
		cmd := exec.Command(binary, "run", "--once", "-c", cfgPath)
		cmd.Env = env
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		return cmd, &out
	}

	first, firstOut := start()
	started := waitFor(t, filepath.Join(dir, "artifacts", "attempts", "*", "research-1", "started"), 60*time.Second)
	cycleID := filepath.Base(filepath.Dir(filepath.Dir(started)))
	planBefore, err := os.ReadFile(filepath.Join(dir, "artifacts", "cycles", cycleID, "plan.md"))
	if err != nil {
		t.Fatalf("plan.md not published before research started: %v", err)
	}

	// A second runner on the same workspace is refused while the first runs.
	second := exec.Command(binary, "run", "--once", "-c", cfgPath)
	second.Env = env
	out, err := second.CombinedOutput()
	var exitErr *exec.ExitError
	if !errors.As(err, &exitErr) || !strings.Contains(string(out), "another agentrunner (pid ") {
		t.Errorf("second runner: %v\n%s\nwant it refused, naming the holder", err, out)
	}

	first.Process.Signal(syscall.SIGKILL)
	first.Wait()
	t.Logf("first run, killed mid-research:\n%s", firstOut)

	again, againOut := start()
	done := make(chan error, 1)
	go func() { done <- again.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("restarted runner: %v\n%s", err, againOut)
		}
	case <-time.After(90 * time.Second):
		again.Process.Kill()
		t.Fatalf("restarted runner did not finish:\n%s", againOut)
	}
	t.Logf("restarted run:\n%s", againOut)

	store, err := sqlite.Open(context.Background(), filepath.Join(dir, "artifacts", "state.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	c, err := store.Cycle(context.Background(), cycleID)
	if err != nil || c.Status != agentrunner.CycleCompleted {
		t.Fatalf("cycle %s: %+v, %v; want completed", cycleID, c, err)
	}
	atts, _ := store.Attempts(context.Background(), cycleID)
	var got []string
	for _, a := range atts {
		got = append(got, a.Step+":"+string(a.Status)+":"+string(a.ErrorClass))
	}
	want := []string{"plan:succeeded:", "research:failed:interrupted", "research:succeeded:",
		"analyze:succeeded:", "synthesize:succeeded:", "execute:succeeded:", "evaluate:succeeded:"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("attempts (-want +got):\n%s", diff)
	}
	if planAfter, _ := os.ReadFile(filepath.Join(c.Dir, "plan.md")); !bytes.Equal(planBefore, planAfter) {
		t.Error("plan.md changed: the plan ran again")
	}
	posts := 0
	for _, r := range es.Requests() {
		if r.Method == "POST" {
			posts++
		}
	}
	if n := len(es.Strategies()); n != 1 || posts != 1 {
		t.Errorf("the Execution Service received %d strategies in %d POSTs, want exactly 1", n, posts)
	}

	// The cycle dir holds the five artifacts, each complete and valid.
	entries, _ := os.ReadDir(c.Dir)
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	if diff := cmp.Diff([]string{"analysis.md", "evaluation.md", "plan.md", "research.md", "strategy.json"}, names); diff != "" {
		t.Errorf("cycle dir (-want +got):\n%s", diff)
	}
	cfg, err := config.Load(cfgPath)
	if err != nil {
		t.Fatal(err)
	}
	ws, err := workspace.Load(cfg)
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range ws.Agents {
		data, _ := os.ReadFile(filepath.Join(c.Dir, a.Output.File))
		if ps := a.Contract.Validate(data); len(ps) > 0 {
			t.Errorf("%s is not valid: %v", a.Output.File, ps)
		}
	}
}
