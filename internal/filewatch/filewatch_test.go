package filewatch_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/agentrunner/agentrunner/internal/filewatch"
)

// watch starts a watcher of files with a short debounce and returns the
// channel each told change arrives on.
func watch(t *testing.T, files func() []string) <-chan []string {
	t.Helper()
	told := make(chan []string, 16)
	w, err := filewatch.New(filewatch.Options{Files: files, OnChange: func(c []string) { told <- c }, Debounce: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { w.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	return told
}

func next(t *testing.T, told <-chan []string) []string {
	t.Helper()
	select {
	case c := <-told:
		return c
	case <-time.After(10 * time.Second):
		t.Fatal("no change was told")
		return nil
	}
}

func none(t *testing.T, told <-chan []string, within time.Duration) {
	t.Helper()
	select {
	case c := <-told:
		t.Fatalf("a change was told: %v", c)
	case <-time.After(within):
	}
}

func write(t *testing.T, path, text string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestChangesAreToldOnceTheFilesStandStill: several writes to two watched
// files, a save by rename and a write to a file that is not watched.
func TestChangesAreToldOnceTheFilesStandStill(t *testing.T) {
	dir := t.TempDir()
	cfg, prompt, other := filepath.Join(dir, "agentrunner.yaml"), filepath.Join(dir, "prompts", "plan.md"), filepath.Join(dir, "notes.txt")
	os.Mkdir(filepath.Dir(prompt), 0o755)
	write(t, cfg, "v1")
	write(t, prompt, "v1")
	told := watch(t, func() []string { return []string{cfg, prompt} })

	write(t, other, "not watched")
	none(t, told, 400*time.Millisecond)

	for i := range 5 { // a burst: one change
		write(t, prompt, "v"+string(rune('2'+i)))
		write(t, cfg, "v"+string(rune('2'+i)))
		time.Sleep(10 * time.Millisecond)
	}
	if diff := cmp.Diff([]string{cfg, prompt}, next(t, told)); diff != "" {
		t.Errorf("told (-want +got):\n%s", diff)
	}
	none(t, told, 400*time.Millisecond)

	// An editor's save: a new file renamed over the old one.
	tmp := prompt + ".swp"
	write(t, tmp, "saved")
	if err := os.Rename(tmp, prompt); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{prompt}, next(t, told)); diff != "" {
		t.Errorf("told after a save by rename (-want +got):\n%s", diff)
	}
}

// TestTheFilesAreReadAgainAfterAChange: after a change, a file that Files
// names from then on is watched too, and one it no longer names is not.
func TestTheFilesAreReadAgainAfterAChange(t *testing.T) {
	dir := t.TempDir()
	cfg, old, added := filepath.Join(dir, "agentrunner.yaml"), filepath.Join(dir, "a", "old.md"), filepath.Join(dir, "b", "new.md")
	os.Mkdir(filepath.Dir(old), 0o755)
	os.Mkdir(filepath.Dir(added), 0o755)
	write(t, cfg, "names old")
	var mu sync.Mutex
	files := []string{cfg, old}
	told := watch(t, func() []string { mu.Lock(); defer mu.Unlock(); return files })

	mu.Lock()
	files = []string{cfg, added}
	mu.Unlock()
	write(t, cfg, "names new")
	if diff := cmp.Diff([]string{cfg}, next(t, told)); diff != "" {
		t.Fatalf("told (-want +got):\n%s", diff)
	}
	write(t, old, "no longer named")
	none(t, told, 400*time.Millisecond)
	write(t, added, "named now")
	if diff := cmp.Diff([]string{added}, next(t, told)); diff != "" {
		t.Errorf("told (-want +got):\n%s", diff)
	}
}

func TestANewWatcherNamesADirectoryItCannotWatch(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "gone", "plan.md")
	_, err := filewatch.New(filewatch.Options{Files: func() []string { return []string{missing} }, OnChange: func([]string) {}})
	if err == nil || !strings.Contains(err.Error(), filepath.Dir(missing)) {
		t.Errorf("error %v, want one naming %s", err, filepath.Dir(missing))
	}
}
