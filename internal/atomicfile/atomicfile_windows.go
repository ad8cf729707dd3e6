//go:build windows

package atomicfile

import (
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
)

// writeTemp writes f's data to a new temporary file beside f.Path, with
// f.Perm, and syncs it (FlushFileBuffers) unless f.noSync.
func writeTemp(f File) (tmp string, err error) {
	prefix := filepath.Join(filepath.Dir(f.Path), "."+filepath.Base(f.Path)+".tmp-")
	var file *os.File
	for try := 0; ; try++ {
		tmp = prefix + strconv.FormatUint(rand.Uint64(), 36)
		file, err = os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, f.Perm)
		if err == nil {
			break
		}
		if !errors.Is(err, os.ErrExist) || try == 100 {
			return "", fmt.Errorf("create temporary file for %s: %w", f.Path, err)
		}
	}
	_, err = file.Write(f.Data)
	if err == nil {
		err = file.Chmod(f.Perm.Perm()) // only the read-only bit means anything here
	}
	if err == nil && !f.noSync {
		err = Sync(file)
	}
	if cerr := file.Close(); err == nil && cerr != nil {
		err = cerr
	}
	if err != nil {
		os.Remove(tmp)
		return "", fmt.Errorf("write %s: %w", tmp, err)
	}
	return tmp, nil
}

// Write creates or truncates path and writes data, with no fsync: for the
// scratch files of an attempt (its prompt, say), which a crash may lose
// because the attempt is then run again in a new folder.
func Write(path string, data []byte, perm os.FileMode) error {
	return os.WriteFile(path, data, perm)
}

// ReadFileLimit reads a whole file of at most limit bytes (any size when
// limit is negative). A larger file is not read into memory: the error is
// a *TooLargeError.
func ReadFileLimit(path string, limit int64) ([]byte, error) {
	if limit < 0 {
		return os.ReadFile(path)
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if fi.Size() > limit {
		return nil, &TooLargeError{Path: path, Size: fi.Size(), Limit: limit}
	}
	data, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, &os.PathError{Op: "read", Path: path, Err: err}
	}
	if int64(len(data)) > limit { // it grew after the stat
		return nil, &TooLargeError{Path: path, Size: int64(len(data)), Limit: limit}
	}
	return data, nil
}

// Move makes a finished file durable under a new name: sync src, then
// rename it to dst. src must be complete and no longer written (an agent's
// output after the agent ended); it must be on dst's volume.
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
	return rename(src, dst)
}

// SyncDir does nothing on Windows: a directory cannot be opened for
// FlushFileBuffers there, and NTFS journals the metadata of a rename
// (MoveFileEx) itself, so there is no directory entry left to flush.
func SyncDir(dir string) error { return nil }

// rename is os.Rename, which is MoveFileEx with MOVEFILE_REPLACE_EXISTING:
// it replaces dst atomically when both are files.
func rename(oldpath, newpath string) error { return os.Rename(oldpath, newpath) }
