package main

import (
	"strings"
	"testing"
	"time"

	"github.com/agentrunner/agentrunner"
)

// TestResumeLiftsAPause: in a paused workspace whose loop is not halted,
// resume is not refused: its order lifts the pause, which the next run
// applies before it completes a cycle; a second resume has nothing to do.
func TestResumeLiftsAPause(t *testing.T) {
	cliMockExec(t)
	dir := cliExample(t)
	path := cliConfigPath(dir)
	cfg, err := loadConfig(path)
	if err != nil {
		t.Fatal(err)
	}
	store, err := openStore(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	paused := &agentrunner.Control{Paused: true, PausedBy: "bob", PausedAt: time.Now().UTC()}
	if err := store.Apply(t.Context(), &agentrunner.Change{Control: paused}); err != nil {
		t.Fatal(err)
	}
	store.Close()

	code, stdout, stderr := cliRun(t, "resume", "-c", path, "--operator", "alice", "--reason", "maintenance done")
	if want := "resume requested (command 1): lifts the pause by bob\n"; code != exitOK || stdout != want {
		t.Fatalf("resume of a paused workspace: exit %d, stdout %q, want %q\n%s", code, stdout, want, stderr)
	}
	code, stdout, stderr = cliRun(t, "run", "--once", "-c", path)
	if code != exitOK || !strings.Contains(stdout, " completed") {
		t.Fatalf("run after the resume: exit %d\n%s%s", code, stdout, stderr)
	}
	store, err = openStore(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	ctl, err := store.Control(t.Context())
	if err != nil || ctl.Paused {
		t.Errorf("control after the run: %+v, %v; want not paused", ctl, err)
	}
	cmds, err := store.Commands(t.Context(), agentrunner.CommandFilter{})
	if err != nil || len(cmds) != 1 || cmds[0].Operator != "alice" || cmds[0].Args["reason"] != "maintenance done" || !strings.Contains(cmds[0].Result, "lifted the pause") {
		t.Errorf("commands: %+v (%v); want alice's resume, applied: lifted the pause", cmds, err)
	}
	if code, _, stderr := cliRun(t, "resume", "-c", path); code != exitFailure || !strings.Contains(stderr, "nothing to resume: the workspace is not paused and the loop is not halted") {
		t.Errorf("resume with nothing to resume: exit %d\n%s", code, stderr)
	}
}
