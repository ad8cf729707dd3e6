package atomicfile

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
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

func TestWriteFileFailsCleanlyOnARename(t *testing.T) {
	dir := t.TempDir()
	os.Mkdir(filepath.Join(dir, "plan.md"), 0o755) // a directory in the way: the rename fails
	err := WriteFile(filepath.Join(dir, "plan.md"), []byte("x"), 0o644)
	if err == nil {
		t.Fatal("want error")
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Errorf("temporary file left behind: %v", entries)
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

func TestMoveRenamesAndSyncs(t *testing.T) {
	src, dst := filepath.Join(t.TempDir(), "out.md"), filepath.Join(t.TempDir(), "plan.md")
	os.WriteFile(src, []byte("plan"), 0o644)
	before := Syncs()
	if err := Move(src, dst); err != nil {
		t.Fatal(err)
	}
	if got := Syncs() - before; got != 2 {
		t.Errorf("fsyncs = %d, want 2 (file and directory)", got)
	}
	if data, err := os.ReadFile(dst); err != nil || string(data) != "plan" {
		t.Errorf("dst = %q, %v", data, err)
	}
	if _, err := os.Stat(src); !os.IsNotExist(err) {
		t.Errorf("src still exists: %v", err)
	}
	if err := Move(src, dst); err == nil {
		t.Error("moving a missing file succeeded")
	}
}

func TestReadFileReadsWhatOSReads(t *testing.T) {
	dir := t.TempDir()
	for _, size := range []int{0, 1, 4095, 4096, 4097, 200_000} {
		path := filepath.Join(dir, "f")
		data := make([]byte, size)
		for i := range data {
			data[i] = byte('a' + i%26)
		}
		os.WriteFile(path, data, 0o644)
		got, err := ReadFile(path)
		if err != nil {
			t.Fatalf("size %d: %v", size, err)
		}
		if string(got) != string(data) {
			t.Errorf("size %d: read %d bytes that differ", size, len(got))
		}
	}
	// A file whose size says nothing of its content, as in /proc.
	if got, err := ReadFile("/proc/self/status"); err != nil || !strings.Contains(string(got), "Pid:") {
		t.Errorf("read /proc/self/status: %d bytes, %v", len(got), err)
	}
	if _, err := ReadFile(filepath.Join(dir, "missing")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("missing file: %v, want fs.ErrNotExist", err)
	}
}

func TestWriteCreatesAndTruncates(t *testing.T) {
	path := filepath.Join(t.TempDir(), "prompt.md")
	if err := Write(path, []byte("a long first prompt"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := Write(path, []byte("short"), 0o644); err != nil {
		t.Fatal(err)
	}
	if data, _ := os.ReadFile(path); string(data) != "short" {
		t.Errorf("content = %q, want short", data)
	}
	if err := Write(filepath.Join(path, "under-a-file"), nil, 0o644); err == nil {
		t.Error("writing under a file succeeded")
	}
}

func TestMoveOverADirectoryFailsAndKeepsTheSource(t *testing.T) {
	dir := t.TempDir()
	src, dst := filepath.Join(dir, "out.md"), filepath.Join(dir, "plan.md")
	os.WriteFile(src, []byte("plan"), 0o644)
	os.Mkdir(dst, 0o755)
	if err := Move(src, dst); err == nil {
		t.Fatal("moving a file over a directory succeeded")
	}
	if data, err := os.ReadFile(src); err != nil || string(data) != "plan" {
		t.Errorf("source = %q, %v; want it kept", data, err)
	}
}

func TestWriteFilesFailingRenameLeavesNoTemporaryFile(t *testing.T) {
	dir := t.TempDir()
	os.Mkdir(filepath.Join(dir, "blocked"), 0o755) // a directory in the way of the second rename
	err := WriteFiles([]File{
		{Path: filepath.Join(dir, "first"), Data: []byte("1"), Perm: 0o644},
		{Path: filepath.Join(dir, "blocked"), Data: []byte("2"), Perm: 0o644},
		{Path: filepath.Join(dir, "third"), Data: []byte("3"), Perm: 0o644},
	})
	if err == nil {
		t.Fatal("want an error")
	}
	entries, _ := os.ReadDir(dir)
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	// The first file was renamed before the failure; no temporary file stays.
	if strings.Join(names, ",") != "blocked,first" {
		t.Errorf("directory holds %v, want [blocked first]", names)
	}
}

func TestReadFileLimitRefusesALargerFileUnread(t *testing.T) {
	path := filepath.Join(t.TempDir(), "out.md")
	os.WriteFile(path, []byte("0123456789"), 0o644)
	if data, err := ReadFileLimit(path, 10); err != nil || string(data) != "0123456789" {
		t.Errorf("at the limit: %q, %v", data, err)
	}
	_, err := ReadFileLimit(path, 9)
	var tl *TooLargeError
	if !errors.As(err, &tl) || tl.Size != 10 || tl.Limit != 9 {
		t.Errorf("over the limit: %v, want a TooLargeError of 10 bytes over 9", err)
	}
	if data, err := ReadFileLimit(path, -1); err != nil || len(data) != 10 {
		t.Errorf("no limit: %q, %v", data, err)
	}
}

func TestReplaceSwapsTheFileWithoutAnFsync(t *testing.T) {
	path := filepath.Join(t.TempDir(), "mailbox.a")
	for _, data := range []string{"first\n", "second, longer\n", ""} {
		syncs := Syncs()
		if err := Replace(path, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
		if got, _ := os.ReadFile(path); string(got) != data {
			t.Errorf("file holds %q, want %q", got, data)
		}
		if n := Syncs() - syncs; n != 0 {
			t.Errorf("Replace made %d fsyncs, want none", n)
		}
	}
	if entries, _ := os.ReadDir(filepath.Dir(path)); len(entries) != 1 {
		t.Errorf("the directory holds %d entries, want the file alone", len(entries))
	}
}

func TestRemoveTempsRemovesOnlyTheLeftoversOfThatFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "a[1].md")
	for _, name := range []string{".a[1].md.tmp-1x", ".a[1].md.tmp-2y", ".b.md.tmp-3z", "a[1].md", ".a[1].mdX.tmp-4"} {
		if err := os.WriteFile(filepath.Join(dir, name), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := RemoveTemps(path); err != nil {
		t.Fatal(err)
	}
	es, _ := os.ReadDir(dir)
	var left []string
	for _, e := range es {
		left = append(left, e.Name())
	}
	if want := []string{".a[1].mdX.tmp-4", ".b.md.tmp-3z", "a[1].md"}; !slices.Equal(left, want) {
		t.Errorf("left %v, want %v", left, want)
	}
}
