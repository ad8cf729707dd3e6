//go:build unix

package atomicfile

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

func TestWriteFileSetsThePermissionWhateverTheUmask(t *testing.T) {
	old := syscall.Umask(0o077)
	defer syscall.Umask(old)
	path := filepath.Join(t.TempDir(), "mailbox.plan")
	if err := WriteFile(path, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if fi, _ := os.Stat(path); fi.Mode().Perm() != 0o644 {
		t.Errorf("mode = %v under umask 077, want 0644", fi.Mode().Perm())
	}
}

// On Windows a directory cannot be synced, so only unix counts those fsyncs.
func TestWriteFilesSyncsEachDirectoryOnce(t *testing.T) {
	a, b := t.TempDir(), t.TempDir()
	files := []File{
		{Path: filepath.Join(a, "one"), Data: []byte("1"), Perm: 0o644},
		{Path: filepath.Join(a, "two"), Data: []byte("2"), Perm: 0o600},
		{Path: filepath.Join(b, "three"), Data: []byte("3"), Perm: 0o644},
	}
	before := Syncs()
	if err := WriteFiles(files); err != nil {
		t.Fatal(err)
	}
	if got := Syncs() - before; got != 5 {
		t.Errorf("fsyncs = %d, want 5 (three files, two directories)", got)
	}
	for _, f := range files {
		data, err := os.ReadFile(f.Path)
		if err != nil || string(data) != string(f.Data) {
			t.Errorf("%s = %q, %v; want %q", f.Path, data, err, f.Data)
		}
	}
	if entries, _ := os.ReadDir(a); len(entries) != 2 {
		t.Errorf("%s holds %d entries, want two (no temporary file left)", a, len(entries))
	}
}
