//go:build unix

package bird

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agentrunner/agentrunner/tool"
)

func TestHangIsKilledWithItsChildren(t *testing.T) {
	dir := t.TempDir()
	pidFile := filepath.Join(dir, "child")
	// A child that holds stdout, as a Node helper might, and bird waiting.
	bin, _ := fakeBird(t, `sleep 30 & echo $! > '`+pidFile+`'; wait`)
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := newHandler(t, bin).Call(ctx, json.RawMessage(`{"query":"x","mode":"search"}`))
	if elapsed := time.Since(start); elapsed > 10*time.Second {
		t.Errorf("the call took %s after a 300ms deadline", elapsed)
	}
	if err == nil || !tool.IsTransient(err) || !strings.Contains(err.Error(), "did not finish within the time limit") {
		t.Fatalf("err = %v, want a transient timeout", err)
	}
	b, err := os.ReadFile(pidFile)
	if err != nil {
		t.Fatalf("the fake did not start its child: %v", err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatal(err)
	}
	// The child was in bird's process group: it must be gone (or a zombie
	// waiting for init to reap it).
	deadline := time.Now().Add(5 * time.Second)
	for !gone(pid) {
		if time.Now().After(deadline) {
			t.Fatalf("child %d of bird is still running", pid)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func gone(pid int) bool {
	if errors.Is(syscall.Kill(pid, 0), syscall.ESRCH) {
		return true
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return true
	}
	// The state is the field after the parenthesised command name.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i >= 0 && i+2 < len(s) && s[i+2] == 'Z'
}
