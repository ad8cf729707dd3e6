// Package atomicfile writes files so that a crash at any moment leaves
// either the old content or the new, never a mix: write a temporary file,
// fsync it, rename it over the target, fsync the directory.
package atomicfile

import (
	"fmt"
	"os"
	"path/filepath"
	"sync/atomic"
)

var syncs atomic.Int64

// Syncs returns how many fsyncs this package has made since the process
// started; benchmarks report it per operation.
func Syncs() int64 { return syncs.Load() }

// WriteFile atomically replaces path with data: it writes a temporary file
// in the same directory (so the rename cannot cross file systems), fsyncs
// it, renames it over path and fsyncs the directory.
func WriteFile(path string, data []byte, perm os.FileMode) (err error) {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return fmt.Errorf("create temporary file for %s: %w", path, err)
	}
	tmp := f.Name()
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(tmp)
		}
	}()
	if _, err = f.Write(data); err != nil {
		return fmt.Errorf("write %s: %w", tmp, err)
	}
	if err = f.Chmod(perm); err != nil {
		return fmt.Errorf("chmod %s: %w", tmp, err)
	}
	if err = Sync(f); err != nil {
		return fmt.Errorf("fsync %s: %w", tmp, err)
	}
	if err = f.Close(); err != nil {
		return fmt.Errorf("close %s: %w", tmp, err)
	}
	if err = os.Rename(tmp, path); err != nil {
		return fmt.Errorf("rename %s to %s: %w", tmp, path, err)
	}
	return SyncDir(filepath.Dir(path))
}

// Move makes a finished file durable under a new name: fsync src, rename it
// to dst, fsync dst's directory. src must be complete and no longer written
// (an agent's output after the agent ended); it must be on dst's file
// system. Moving instead of copying saves creating and syncing a new file.
func Move(src, dst string) error {
	f, err := os.Open(src)
	if err != nil {
		return err
	}
	err = Sync(f)
	f.Close()
	if err != nil {
		return fmt.Errorf("fsync %s: %w", src, err)
	}
	if err := os.Rename(src, dst); err != nil {
		return fmt.Errorf("rename %s to %s: %w", src, dst, err)
	}
	return SyncDir(filepath.Dir(dst))
}

// Sync fsyncs f and counts it.
func Sync(f *os.File) error {
	syncs.Add(1)
	return f.Sync()
}

// SyncDir fsyncs a directory, making renames and creations in it durable.
func SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("open directory %s: %w", dir, err)
	}
	defer d.Close()
	if err := Sync(d); err != nil {
		return fmt.Errorf("fsync directory %s: %w", dir, err)
	}
	return nil
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
