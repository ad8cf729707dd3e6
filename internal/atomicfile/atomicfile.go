// Package atomicfile writes files so that a crash at any moment leaves
// either the old content or the new, never a mix: write a temporary file,
// fsync it, rename it over the target, fsync the directory.
//
// The engine calls it on every step, so it makes system calls directly: an
// *os.File registers every file it opens with the runtime's poller (five
// more system calls per open, of no use for regular files), and os.Rename
// looks at its target first. On Windows it goes through *os.File and
// os.Rename instead (see atomicfile_windows.go).
package atomicfile

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"syscall"
)

var syncs atomic.Int64

// Syncs returns how many fsyncs this package has made since the process
// started; benchmarks report it per operation.
func Syncs() int64 { return syncs.Load() }

// WriteFile atomically replaces path with data: it writes a temporary file
// in the same directory (so the rename cannot cross file systems), fsyncs
// it, renames it over path and fsyncs the directory. The file gets exactly
// perm, whatever the umask: readers in other accounts may depend on it.
func WriteFile(path string, data []byte, perm os.FileMode) error {
	return WriteFiles([]File{{Path: path, Data: data, Perm: perm}})
}

// File is one file for WriteFiles.
type File struct {
	Path string
	Data []byte
	Perm os.FileMode
	// noSync: Replace's temporary file, not fsynced.
	noSync bool
}

// Replace atomically replaces path with data, without an fsync: a reader
// sees the old file or the new one, never a torn one, but a crash may
// lose either. It is for views of the store, which are rewritten from it.
func Replace(path string, data []byte, perm os.FileMode) error {
	tmp, err := writeTemp(File{Path: path, Data: data, Perm: perm, noSync: true})
	if err != nil {
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		return err
	}
	return nil
}

// WriteFiles replaces several files as WriteFile does, each atomically,
// with one fsync per directory for all of them: every temporary file is
// written and fsynced, then all are renamed, then their directories are
// fsynced. If a rename fails, the files renamed before it keep their new
// content.
func WriteFiles(files []File) (err error) {
	temps := make([]string, 0, len(files))
	defer func() {
		if err != nil {
			for _, tmp := range temps {
				syscall.Unlink(tmp) // gone already if it was renamed
			}
		}
	}()
	for _, f := range files {
		tmp, err := writeTemp(f)
		if err != nil {
			return err
		}
		temps = append(temps, tmp)
	}
	var dirs []string
	for i, f := range files {
		if err := rename(temps[i], f.Path); err != nil {
			return err
		}
		if dir := filepath.Dir(f.Path); !slices.Contains(dirs, dir) {
			dirs = append(dirs, dir)
		}
	}
	for _, dir := range dirs {
		if err := SyncDir(dir); err != nil {
			return err
		}
	}
	return nil
}

// ReadFile reads a whole file, as os.ReadFile does.
func ReadFile(path string) ([]byte, error) { return ReadFileLimit(path, -1) }

// TooLargeError is ReadFileLimit's answer for a file over its limit.
type TooLargeError struct {
	Path  string
	Size  int64 // at least this many bytes
	Limit int64
}

func (e *TooLargeError) Error() string {
	return fmt.Sprintf("%s holds %d bytes or more, over the limit of %d", e.Path, e.Size, e.Limit)
}

// Sync fsyncs f and counts it.
func Sync(f *os.File) error {
	syncs.Add(1)
	return f.Sync()
}

// MkdirAll creates dir and its missing parents, and fsyncs the parent of
// each directory it created, so the new directories survive a crash.
func MkdirAll(dir string, perm os.FileMode) error {
	dir = filepath.Clean(dir)
	if fi, err := os.Stat(dir); err == nil {
		if !fi.IsDir() {
			return fmt.Errorf("%s exists and is not a directory", dir)
		}
		return nil
	}
	parent := filepath.Dir(dir)
	if parent != dir {
		if err := MkdirAll(parent, perm); err != nil {
			return err
		}
	}
	if err := os.Mkdir(dir, perm); err != nil && !os.IsExist(err) {
		return err
	}
	return SyncDir(parent)
}

// RemoveTemps removes the temporary files that writes of path left
// behind when the process died between creating one and renaming it: a
// crash must not leave litter beside the file it was replacing.
func RemoveTemps(path string) error {
	return removeMatching(filepath.Join(filepath.Dir(path), "."+globEscape(filepath.Base(path))+".tmp-*"))
}

// RemoveDirTemps removes what cut-short writes of any file of dir left
// there: one listing of the folder for all its files.
func RemoveDirTemps(dir string) error {
	return removeMatching(filepath.Join(globEscape(dir), ".*.tmp-*"))
}

func removeMatching(pattern string) error {
	temps, err := filepath.Glob(pattern)
	if err != nil {
		return err
	}
	for _, t := range temps {
		if err := os.Remove(t); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
	}
	return nil
}

// globEscape quotes the characters filepath.Match treats specially.
func globEscape(s string) string {
	var b strings.Builder
	for _, r := range s {
		if strings.ContainsRune(`*?[\`, r) {
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	return b.String()
}
