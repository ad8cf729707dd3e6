//go:build unix

package memory_test

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/agentrunner/agentrunner"
	"github.com/agentrunner/agentrunner/memory"
)

// TestAKillBetweenTheCommitAndTheFileLosesNothing runs an append in a
// child process that is killed with SIGKILL after the store committed the
// entry and before the memory file is written; the next Sync writes it,
// once.
func TestAKillBetweenTheCommitAndTheFileLosesNothing(t *testing.T) {
	if dir := os.Getenv("AGENTRUNNER_MEMORY_KILL_DIR"); dir != "" {
		l, _ := newLog(t, dir, func(op string) error {
			if op == memory.OpWriteFile {
				syscall.Kill(os.Getpid(), syscall.SIGKILL)
				select {}
			}
			return nil
		})
		l.Append(context.Background(), agentrunner.MemoryEntry{Agent: "plan", Text: "remember the funding flip"})
		t.Fatal("the append ran past its file write")
	}
	dir := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^TestAKillBetweenTheCommitAndTheFileLosesNothing$")
	cmd.Env = append(os.Environ(), "AGENTRUNNER_MEMORY_KILL_DIR="+dir)
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
		t.Fatalf("the child was not killed: %v\n%s", err, out)
	}
	l, st := newLog(t, dir, nil)
	ctx := context.Background()
	entries, err := st.MemoryEntries(ctx, "plan", 0, 0)
	if err != nil || len(entries) != 1 {
		t.Fatalf("the store holds %d entries (%v), want the committed one", len(entries), err)
	}
	path := filepath.Join(dir, "plan", "memory.md")
	if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the memory file exists after the kill: %v", err)
	}
	if _, err := l.Append(ctx, agentrunner.MemoryEntry{Agent: "plan", Text: "and the next one"}); err != nil {
		t.Fatal(err)
	}
	got := read(t, path)
	if strings.Count(got, "remember the funding flip") != 1 || strings.Count(got, "and the next one") != 1 {
		t.Errorf("the memory file after the next append:\n%s\nwant both entries once", got)
	}
}
