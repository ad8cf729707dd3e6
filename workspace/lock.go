package workspace

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
)

// errLocked is tryLock's answer when another process holds the lock.
var errLocked = errors.New("workspace lock held by another process")

// Lock is the exclusive hold of one runner on a workspace: two runners on
// the same artifacts would both resume the same cycle.
type Lock struct {
	f *os.File
}

// Acquire takes the workspace lock without waiting. If another process holds
// it, the error names that process.
func (l Layout) Acquire() (*Lock, error) {
	if err := os.MkdirAll(l.Root, 0o755); err != nil {
		return nil, fmt.Errorf("create artifacts dir: %w", err)
	}
	f, err := os.OpenFile(l.Lock(), os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("open workspace lock: %w", err)
	}
	if err := tryLock(f); err != nil {
		holder, _ := os.ReadFile(l.Lock())
		f.Close()
		if errors.Is(err, errLocked) {
			pid := strings.TrimSpace(string(holder))
			if _, perr := strconv.Atoi(pid); perr != nil {
				pid = "unknown"
			}
			return nil, fmt.Errorf("another agentrunner (pid %s) is already running on the workspace %s; only one runner may use a workspace at a time", pid, l.Root)
		}
		return nil, fmt.Errorf("lock workspace: %w", err)
	}
	if err := f.Truncate(0); err == nil {
		f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	}
	return &Lock{f: f}, nil
}

// Release gives the workspace up. The lock also ends when the process dies.
func (l *Lock) Release() error {
	if l == nil || l.f == nil {
		return nil
	}
	err := l.f.Close()
	l.f = nil
	return err
}
