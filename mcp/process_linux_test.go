package mcp

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// alive reports whether pid is a running process; a zombie has ended.
func alive(pid int) bool {
	if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
		return false
	}
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	// The state follows the parenthesised command name.
	s := string(stat)
	i := strings.LastIndexByte(s, ')')
	return i < 0 || i+2 >= len(s) || s[i+2] != 'Z'
}

// readPid waits for a helper to write its pid.
func readPid(t *testing.T, path string) int {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		b, err := os.ReadFile(path)
		if err == nil && len(b) > 0 {
			pid, err := strconv.Atoi(string(b))
			if err != nil {
				t.Fatalf("pid file %s: %v", path, err)
			}
			return pid
		}
		if time.Now().After(deadline) {
			t.Fatalf("no pid in %s", path)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// waitDead waits for pid to end; Close has sent SIGKILL by then, so the
// wait is only for the kernel and the reaper.
func waitDead(t *testing.T, what string, pid int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for alive(pid) {
		if time.Now().After(deadline) {
			syscall.Kill(pid, syscall.SIGKILL)
			t.Fatalf("%s (pid %d) still runs after Close", what, pid)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestCloseKillsServerAndItsChildren: Close ends the server and whatever
// it started (a launcher's real server), even a server that ignores the
// end of its stdin and SIGTERM.
func TestCloseKillsServerAndItsChildren(t *testing.T) {
	for _, stubborn := range []bool{false, true} {
		t.Run("stubborn="+strconv.FormatBool(stubborn), func(t *testing.T) {
			dir := t.TempDir()
			env := map[string]string{
				pidFileEnv:    filepath.Join(dir, "server.pid"),
				grandchildEnv: filepath.Join(dir, "child.pid"),
			}
			if stubborn {
				env[stubbornEnv] = "1"
			}
			cfg := stdioConfig(env)
			cfg.KillGrace = 100 * time.Millisecond
			ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
			defer cancel()
			c, err := Connect(ctx, cfg)
			if err != nil {
				t.Fatalf("Connect: %v", err)
			}
			server := readPid(t, env[pidFileEnv])
			child := readPid(t, env[grandchildEnv])
			if !alive(server) || !alive(child) {
				t.Fatal("helpers are not running before Close")
			}
			if err := c.Close(); err != nil {
				t.Errorf("Close: %v", err)
			}
			waitDead(t, "server", server)
			waitDead(t, "server's child", child)
			if err := c.Close(); err != nil {
				t.Errorf("second Close: %v", err)
			}
		})
	}
}
