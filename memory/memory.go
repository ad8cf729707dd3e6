// Package memory keeps each agent's long-lived notes, <artifacts>/<agent>/memory.md,
// which the agent reads and edits across cycles (FR-041..043, FR-176..178).
package memory

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"

	"github.com/agentrunner/agentrunner"
	"github.com/agentrunner/agentrunner/internal/atomicfile"
)

const (
	filePerm = 0o644
	dirPerm  = 0o755
)

// Ensure creates path from template when it does not exist yet, so an agent
// finds its memory on its first run (FR-176..178). template is the already
// rendered content. The file appears atomically, complete or not at all, and
// the parent directory is created when missing.
//
// Ensure never overwrites an existing memory: it holds what agents learned,
// and losing it cannot be undone. created reports whether Ensure wrote the
// file. A path that exists but is not a regular file is an error.
func Ensure(path string, template []byte) (created bool, err error) {
	if path == "" {
		return false, agentrunner.Errorf(agentrunner.EINVALID, "memory path is empty")
	}
	if exists, err := existing(path); err != nil || exists {
		return false, err
	}
	dir := filepath.Dir(path)
	if err := atomicfile.MkdirAll(dir, dirPerm); err != nil {
		return false, fmt.Errorf("create directory of memory %s: %w", path, err)
	}
	tmp, err := writeTemp(dir, path, template)
	if err != nil {
		return false, err
	}
	defer os.Remove(tmp)

	// A hard link, unlike a rename, fails when the target exists, so a
	// memory created in the meantime by someone else is never replaced.
	err = os.Link(tmp, path)
	switch {
	case err == nil:
	case errors.Is(err, fs.ErrExist):
		if _, err := existing(path); err != nil {
			return false, err
		}
		return false, nil
	case errors.Is(err, errors.ErrUnsupported) || errors.Is(err, syscall.EPERM):
		// The file system has no hard links: check again and rename. Only a
		// creation in the instant between the two could be replaced.
		if exists, err := existing(path); err != nil || exists {
			return false, err
		}
		if err := os.Rename(tmp, path); err != nil {
			return false, fmt.Errorf("create memory %s: %w", path, err)
		}
	default:
		return false, fmt.Errorf("create memory %s: %w", path, err)
	}
	if err := atomicfile.SyncDir(dir); err != nil {
		return false, fmt.Errorf("create memory %s: %w", path, err)
	}
	return true, nil
}

// existing reports whether a memory is at path, and fails when something
// other than a regular file is there, since an agent could not use it.
func existing(path string) (bool, error) {
	fi, err := os.Stat(path)
	if errors.Is(err, fs.ErrNotExist) {
		li, lerr := os.Lstat(path)
		if lerr != nil {
			return false, nil
		}
		if li.Mode()&fs.ModeSymlink != 0 {
			return false, agentrunner.Errorf(agentrunner.EINVALID, "memory %s is a symbolic link to nothing", path)
		}
		// Something was created between the two looks (another writer's
		// memory): judge what is there now.
		fi, err = li, nil
	}
	if err != nil {
		return false, fmt.Errorf("check memory %s: %w", path, err)
	}
	if fi.IsDir() {
		return false, agentrunner.Errorf(agentrunner.EINVALID, "memory %s is a directory, not a file", path)
	}
	if !fi.Mode().IsRegular() {
		return false, agentrunner.Errorf(agentrunner.EINVALID, "memory %s is not a regular file (mode %s)", path, fi.Mode())
	}
	return true, nil
}

// writeTemp writes data to a durable temporary file next to path and
// returns its name.
func writeTemp(dir, path string, data []byte) (name string, err error) {
	f, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return "", fmt.Errorf("create temporary file for memory %s: %w", path, err)
	}
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(f.Name())
		}
	}()
	if _, err = f.Write(data); err != nil {
		return "", fmt.Errorf("write %s: %w", f.Name(), err)
	}
	if err = f.Chmod(filePerm); err != nil {
		return "", fmt.Errorf("chmod %s: %w", f.Name(), err)
	}
	if err = atomicfile.Sync(f); err != nil {
		return "", fmt.Errorf("fsync %s: %w", f.Name(), err)
	}
	if err = f.Close(); err != nil {
		return "", fmt.Errorf("close %s: %w", f.Name(), err)
	}
	return f.Name(), nil
}
