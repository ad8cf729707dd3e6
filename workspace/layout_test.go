package workspace_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/agentrunner/agentrunner/workspace"
)

func TestLayoutPaths(t *testing.T) {
	l := workspace.Layout{Root: "/srv/crypton/artifacts"}
	tests := []struct {
		name string
		got  string
		want string
	}{
		{"cycles", l.Cycles(), "/srv/crypton/artifacts/cycles"},
		{"cycle", l.Cycle("20260101_060000"), "/srv/crypton/artifacts/cycles/20260101_060000"},
		{"history", l.History(), "/srv/crypton/artifacts/cycles/history"},
		{"first attempt", l.Attempt("20260101_060000", "plan", 1), "/srv/crypton/artifacts/attempts/20260101_060000/plan-1"},
		{"third attempt", l.Attempt("20260101_060000", "synthesize", 3), "/srv/crypton/artifacts/attempts/20260101_060000/synthesize-3"},
		{"mailboxes", l.Mailboxes(), "/srv/crypton/artifacts/mailboxes"},
		{"memory", l.Memory("research"), "/srv/crypton/artifacts/research/memory.md"},
		{"lock", l.Lock(), "/srv/crypton/artifacts/agentrunner.lock"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.got != filepath.FromSlash(tt.want) {
				t.Errorf("got %s, want %s", tt.got, tt.want)
			}
		})
	}
}

// TestReservedNamesAreLayoutFolders keeps ReservedNames in step with the
// layout: an agent named like a folder would put its memory in that folder.
func TestReservedNamesAreLayoutFolders(t *testing.T) {
	l := workspace.Layout{Root: "/a"}
	folders := map[string]bool{}
	for _, p := range []string{l.Cycles(), l.Mailboxes(), filepath.Dir(filepath.Dir(l.Attempt("c", "s", 1)))} {
		folders[filepath.Base(p)] = true
	}
	for _, name := range workspace.ReservedNames {
		if !folders[name] {
			t.Errorf("reserved name %q is not a folder of the layout", name)
		}
		delete(folders, name)
	}
	for name := range folders {
		t.Errorf("layout folder %q is not reserved", name)
	}
}

func TestLockIsExclusive(t *testing.T) {
	l := workspace.Layout{Root: filepath.Join(t.TempDir(), "artifacts")}

	first, err := l.Acquire()
	if err != nil {
		t.Fatalf("first Acquire: %v", err)
	}
	holder, err := os.ReadFile(l.Lock())
	if err != nil {
		t.Fatalf("lock file: %v", err)
	}
	if got, want := strings.TrimSpace(string(holder)), strconv.Itoa(os.Getpid()); got != want {
		t.Errorf("lock file holds %q, want this process's pid %s", got, want)
	}

	// flock belongs to the open file description, so a second Acquire in
	// the same process conflicts just as another process would.
	second, err := l.Acquire()
	if err == nil {
		second.Release()
		t.Fatal("second Acquire succeeded while the lock was held")
	}
	if want := fmt.Sprintf("pid %d", os.Getpid()); !strings.Contains(err.Error(), want) {
		t.Errorf("error %q does not name the holder (%s)", err, want)
	}
	if !strings.Contains(err.Error(), l.Root) {
		t.Errorf("error %q does not name the workspace %s", err, l.Root)
	}

	if err := first.Release(); err != nil {
		t.Fatalf("Release: %v", err)
	}
	if err := first.Release(); err != nil {
		t.Errorf("second Release: %v, want nil", err)
	}
	third, err := l.Acquire()
	if err != nil {
		t.Fatalf("Acquire after Release: %v", err)
	}
	if err := third.Release(); err != nil {
		t.Errorf("Release: %v", err)
	}
}

// TestLockWithUnreadableHolder covers a lock file whose content is not a
// pid (written by hand, or cut short by a crash): the error still says that
// the workspace is taken.
func TestLockWithUnreadableHolder(t *testing.T) {
	l := workspace.Layout{Root: t.TempDir()}
	first, err := l.Acquire()
	if err != nil {
		t.Fatalf("Acquire: %v", err)
	}
	defer first.Release()
	if err := os.WriteFile(l.Lock(), []byte("garbage"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err = l.Acquire()
	if err == nil || !strings.Contains(err.Error(), "pid unknown") {
		t.Errorf("Acquire = %v, want an error naming an unknown holder", err)
	}
}

func TestReleaseNilLock(t *testing.T) {
	var l *workspace.Lock
	if err := l.Release(); err != nil {
		t.Errorf("Release of a nil lock: %v", err)
	}
}
