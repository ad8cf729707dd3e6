//go:build unix

package engine

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/agentrunner/agentrunner"
	"github.com/google/go-cmp/cmp"
)

// viewCrashDir names the workspace of TestKilledBeforeTheViewIsWritten's
// child process.
const viewCrashDir = "AGENTRUNNER_TEST_VIEW_CRASH_DIR"

// TestKilledBeforeTheViewIsWritten: the runner is killed (SIGKILL) right
// after the first step's outcome is committed and before its artifact's
// view is written into the cycle directory. The store has the artifact
// and the directory does not. On restart the view is rewritten from the
// store, with a view.repaired event, before the second step's agent reads
// it as its input, and the cycle completes with each step run once.
func TestKilledBeforeTheViewIsWritten(t *testing.T) {
	if dir := os.Getenv(viewCrashDir); dir != "" {
		killedAtTheFirstView(t, dir)
		return
	}
	dir := t.TempDir()
	viewWorkspace(t, dir)
	runKilledChild(t, "TestKilledBeforeTheViewIsWritten", viewCrashDir, dir)

	agent := newNoteAgent()
	e, store := viewEngine(t, dir, agent, nil)
	cycles, err := store.Cycles(context.Background(), agentrunner.CycleFilter{})
	if err != nil || len(cycles) != 1 {
		t.Fatalf("cycles after the kill: %v, %+v", err, cycles)
	}
	id, path := cycles[0].ID, filepath.Join(cycles[0].Dir, "first.md")
	stored := storedArtifact(t, store, id, "first.md")
	if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("first.md is in the cycle directory (%v): the kill came after the view was written", err)
	}

	c, err := e.RunOnce(context.Background())
	if err != nil || c.ID != id || c.Status != agentrunner.CycleCompleted {
		t.Fatalf("the resumed cycle: %v %+v", err, c)
	}
	if got, _ := os.ReadFile(path); string(got) != stored {
		t.Errorf("first.md after the restart: %q, want the stored %q", got, stored)
	}
	if got := agent.inputs["two first.md"]; got != stored {
		t.Errorf("step two read first.md as %q, want the stored %q", got, stored)
	}
	if diff := cmp.Diff(map[string]int{"two": 1}, agent.runs); diff != "" {
		t.Errorf("agents run after the restart (-want +got):\n%s", diff)
	}
	if got := repairs(t, store); len(got) != 1 || got[0] != "first.md missing" {
		t.Errorf("repairs %v, want [first.md missing]", got)
	}
}

// runKilledChild runs test again in a child process, with env naming the
// workspace dir, where it calls killedAtTheFirstView, and checks that the
// child was killed.
func runKilledChild(t *testing.T, test, env, dir string) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run", "^"+test+"$", "-test.count=1")
	cmd.Env = append(os.Environ(), env+"="+dir)
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
		t.Fatalf("the child was not killed: %v\n%s", err, out)
	}
}

// killedAtTheFirstView runs a cycle of the workspace in dir and kills its
// own process after the first commit that has a view to write.
func killedAtTheFirstView(t *testing.T, dir string) {
	agent := newNoteAgent()
	e, _ := viewEngine(t, dir, agent, func(o *Options) {
		o.BeforeViews = func() { syscall.Kill(os.Getpid(), syscall.SIGKILL) }
	})
	e.RunOnce(context.Background())
	t.Fatal("the cycle ran to its end: the runner was not killed before its first view")
}
