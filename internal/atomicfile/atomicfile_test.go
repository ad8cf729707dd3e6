package atomicfile

import (
	"os"
	"path/filepath"
	"testing"
)

func TestWriteFileReplacesContentAndLeavesNoTemporaryFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "a.md")
	if err := WriteFile(path, []byte("one"), 0o644); err != nil {
		t.Fatal(err)
	}
	before := Syncs()
	if err := WriteFile(path, []byte("two"), 0o600); err != nil {
		t.Fatal(err)
	}
	if got := Syncs() - before; got != 2 {
		t.Errorf("fsyncs per write = %d, want 2 (file and directory)", got)
	}
	data, err := os.ReadFile(path)
	if err != nil || string(data) != "two" {
		t.Fatalf("content = %q, %v; want two", data, err)
	}
	fi, _ := os.Stat(path)
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("mode = %v, want 0600", fi.Mode().Perm())
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Errorf("directory holds %d entries, want only a.md", len(entries))
	}
}

func TestPublishKeepsTemporaryFileOutOfDestination(t *testing.T) {
	scratch, dst := t.TempDir(), t.TempDir()
	if err := Publish([]byte("x"), scratch, filepath.Join(dst, "plan.md"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{scratch, dst} {
		entries, _ := os.ReadDir(d)
		for _, e := range entries {
			if e.Name() != "plan.md" {
				t.Errorf("%s holds leftover %s", d, e.Name())
			}
		}
	}
}

func TestPublishFailsCleanlyWhenDestinationDirIsMissing(t *testing.T) {
	scratch := t.TempDir()
	err := Publish([]byte("x"), scratch, filepath.Join(scratch, "missing", "plan.md"), 0o644)
	if err == nil {
		t.Fatal("want error")
	}
	entries, _ := os.ReadDir(scratch)
	if len(entries) != 0 {
		t.Errorf("temporary file left behind: %v", entries[0].Name())
	}
}

func TestMkdirAllCreatesNestedAndRejectsFile(t *testing.T) {
	root := t.TempDir()
	dir := filepath.Join(root, "a", "b", "c")
	if err := MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
		t.Fatalf("not created: %v", err)
	}
	if err := MkdirAll(dir, 0o755); err != nil {
		t.Fatalf("second call: %v", err)
	}
	file := filepath.Join(root, "f")
	os.WriteFile(file, nil, 0o644)
	if err := MkdirAll(file, 0o755); err == nil {
		t.Fatal("want error for a file in the way")
	}
}
