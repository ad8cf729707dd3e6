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

// WriteFile atomically replaces path with data. The temporary file is created
// in the same directory, so the rename cannot cross file systems.
func WriteFile(path string, data []byte, perm os.FileMode) error {
	return Publish(data, filepath.Dir(path), path, perm)
}

// Publish writes data to a temporary file in tmpDir, fsyncs it, renames it to
// dst and fsyncs dst's directory. tmpDir must be on the same file system as
// dst; using a folder other than dst's keeps half-written files out of dst's
// directory even for an instant.
func Publish(data []byte, tmpDir, dst string, perm os.FileMode) (err error) {
	f, err := os.CreateTemp(tmpDir, "."+filepath.Base(dst)+".tmp-*")
	if err != nil {
		return fmt.Errorf("create temporary file for %s: %w", dst, err)
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
	if err = os.Rename(tmp, dst); err != nil {
		return fmt.Errorf("rename %s to %s: %w", tmp, dst, err)
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
