package memory

import (
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/agentrunner/agentrunner"
)

const template = "# Memory of plan\n\nNotes the plan agent keeps across cycles.\n"

func readString(t *testing.T, path string) string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

// onlyFile fails when Ensure left anything but the memory in dir, such as a
// temporary file.
func onlyFile(t *testing.T, dir string) {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 1 || entries[0].Name() != "memory.md" {
		var names []string
		for _, e := range entries {
			names = append(names, e.Name())
		}
		t.Errorf("directory holds %v, want only memory.md", names)
	}
}

func TestEnsureCreatesOnceAndKeepsEdits(t *testing.T) {
	path := filepath.Join(t.TempDir(), "plan", "memory.md")

	created, err := Ensure(path, []byte(template))
	if err != nil {
		t.Fatalf("first Ensure: %v", err)
	}
	if !created {
		t.Errorf("first Ensure created = false, want true")
	}
	if got := readString(t, path); got != template {
		t.Errorf("memory = %q, want the template %q", got, template)
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if perm := fi.Mode().Perm(); perm != 0o644 {
		t.Errorf("memory mode = %v, want 0644", perm)
	}

	edited := template + "\n- cycle 1: plans longer than a page were rejected\n"
	if err := os.WriteFile(path, []byte(edited), 0o644); err != nil {
		t.Fatal(err)
	}
	created, err = Ensure(path, []byte("a different template"))
	if err != nil {
		t.Fatalf("second Ensure: %v", err)
	}
	if created {
		t.Errorf("second Ensure created = true, want false")
	}
	if got := readString(t, path); got != edited {
		t.Errorf("second Ensure changed the memory to %q", got)
	}
	onlyFile(t, filepath.Dir(path))
}

func TestEnsureCreatesParentDirectories(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "artifacts", "deep", "research")
	path := filepath.Join(dir, "memory.md")
	created, err := Ensure(path, []byte(template))
	if err != nil {
		t.Fatalf("Ensure: %v", err)
	}
	if !created {
		t.Errorf("created = false, want true")
	}
	if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
		t.Fatalf("parent directory not created: %v", err)
	}
	onlyFile(t, dir)
}

func TestEnsureEmptyTemplate(t *testing.T) {
	path := filepath.Join(t.TempDir(), "memory.md")
	created, err := Ensure(path, nil)
	if err != nil || !created {
		t.Fatalf("Ensure = %v, %v; want true, nil", created, err)
	}
	if got := readString(t, path); got != "" {
		t.Errorf("memory = %q, want empty", got)
	}
}

func TestEnsureRefusesNonFiles(t *testing.T) {
	tests := []struct {
		name  string
		setup func(t *testing.T, path string)
		want  string
	}{
		{"directory", func(t *testing.T, path string) {
			if err := os.Mkdir(path, 0o755); err != nil {
				t.Fatal(err)
			}
		}, "is a directory"},
		{"dangling symlink", func(t *testing.T, path string) {
			if err := os.Symlink(filepath.Join(filepath.Dir(path), "nowhere"), path); err != nil {
				t.Skipf("symlinks unavailable: %v", err)
			}
		}, "symbolic link to nothing"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "memory.md")
			tt.setup(t, path)
			created, err := Ensure(path, []byte(template))
			if err == nil {
				t.Fatalf("Ensure succeeded (created %v), want an error", created)
			}
			if created {
				t.Errorf("created = true on error")
			}
			if agentrunner.ErrorCode(err) != agentrunner.EINVALID || !strings.Contains(err.Error(), tt.want) || !strings.Contains(err.Error(), path) {
				t.Errorf("error = %v, want an invalid error naming %s and saying %q", err, path, tt.want)
			}
			if _, err := os.Stat(filepath.Join(filepath.Dir(path), "nowhere")); err == nil {
				t.Errorf("Ensure wrote through the symbolic link")
			}
		})
	}
}

func TestEnsureParentIsAFile(t *testing.T) {
	parent := filepath.Join(t.TempDir(), "plan")
	if err := os.WriteFile(parent, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Ensure(filepath.Join(parent, "memory.md"), []byte(template)); err == nil {
		t.Errorf("Ensure under a regular file succeeded")
	}
}

func TestEnsureEmptyPath(t *testing.T) {
	if _, err := Ensure("", []byte(template)); agentrunner.ErrorCode(err) != agentrunner.EINVALID {
		t.Errorf("Ensure(\"\") error = %v, want an invalid error", err)
	}
}

func TestEnsureFollowsSymlinkToFile(t *testing.T) {
	dir := t.TempDir()
	target := filepath.Join(dir, "shared.md")
	if err := os.WriteFile(target, []byte("shared notes"), 0o644); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "memory.md")
	if err := os.Symlink(target, path); err != nil {
		t.Skipf("symlinks unavailable: %v", err)
	}
	created, err := Ensure(path, []byte(template))
	if err != nil || created {
		t.Fatalf("Ensure = %v, %v; want false, nil", created, err)
	}
	if got := readString(t, target); got != "shared notes" {
		t.Errorf("linked memory changed to %q", got)
	}
}

// TestEnsureConcurrentCreatesOnce races many Ensure calls with different
// templates: exactly one creates the memory and the others leave it alone.
func TestEnsureConcurrentCreatesOnce(t *testing.T) {
	path := filepath.Join(t.TempDir(), "plan", "memory.md")
	const n = 16
	var created atomic.Int32
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			ok, err := Ensure(path, []byte(strings.Repeat("x", i+1)))
			if err != nil {
				t.Errorf("Ensure: %v", err)
			}
			if ok {
				created.Add(1)
			}
		})
	}
	wg.Wait()
	if got := created.Load(); got != 1 {
		t.Errorf("%d calls created the memory, want exactly 1", got)
	}
	if got := readString(t, path); strings.Trim(got, "x") != "" || got == "" {
		t.Errorf("memory = %q, want one of the templates", got)
	}
	onlyFile(t, filepath.Dir(path))
}
