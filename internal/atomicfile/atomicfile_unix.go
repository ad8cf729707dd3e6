//go:build unix

package atomicfile

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
)

// writeTemp writes f's data to a new temporary file beside f.Path, with
// f.Perm, and fsyncs it unless f.noSync.
func writeTemp(f File) (tmp string, err error) {
	prefix := filepath.Join(filepath.Dir(f.Path), "."+filepath.Base(f.Path)+".tmp-")
	var fd int
	for try := 0; ; try++ {
		tmp = prefix + strconv.FormatUint(rand.Uint64(), 36)
		fd, err = open(tmp, syscall.O_WRONLY|syscall.O_CREAT|syscall.O_EXCL, f.Perm)
		if err == nil {
			break
		}
		if !errors.Is(err, os.ErrExist) || try == 100 {
			return "", fmt.Errorf("create temporary file for %s: %w", f.Path, err)
		}
	}
	err = write(fd, f.Data)
	if err == nil {
		err = syscall.Fchmod(fd, uint32(f.Perm.Perm()))
	}
	if err == nil && !f.noSync {
		err = fsync(fd)
	}
	if cerr := syscall.Close(fd); err == nil && cerr != nil {
		err = cerr
	}
	if err != nil {
		syscall.Unlink(tmp)
		return "", fmt.Errorf("write %s: %w", tmp, err)
	}
	return tmp, nil
}

// Write creates or truncates path and writes data, with no fsync: for the
// scratch files of an attempt (its prompt, say), which a crash may lose
// because the attempt is then run again in a new folder.
func Write(path string, data []byte, perm os.FileMode) error {
	fd, err := open(path, syscall.O_WRONLY|syscall.O_CREAT|syscall.O_TRUNC, perm)
	if err != nil {
		return err
	}
	err = write(fd, data)
	if cerr := syscall.Close(fd); err == nil && cerr != nil {
		err = cerr
	}
	if err != nil {
		return &os.PathError{Op: "write", Path: path, Err: err}
	}
	return nil
}

// ReadFileLimit reads a whole file of at most limit bytes (any size when
// limit is negative). A larger file is not read into memory: the error is
// a *TooLargeError.
func ReadFileLimit(path string, limit int64) ([]byte, error) {
	fd, err := open(path, syscall.O_RDONLY, 0)
	if err != nil {
		return nil, err
	}
	defer syscall.Close(fd)
	var st syscall.Stat_t
	if err := syscall.Fstat(fd, &st); err != nil {
		return nil, &os.PathError{Op: "stat", Path: path, Err: err}
	}
	size := max(st.Size, 0)
	if limit >= 0 && size > limit {
		return nil, &TooLargeError{Path: path, Size: size, Limit: limit}
	}
	// One byte more than the size, so the read that finds the end needs no
	// new buffer when the size was right.
	data := make([]byte, 0, int(size)+1)
	for {
		n, err := syscall.Read(fd, data[len(data):cap(data)])
		if err == syscall.EINTR {
			continue
		}
		if err != nil {
			return nil, &os.PathError{Op: "read", Path: path, Err: err}
		}
		if n == 0 {
			return data, nil
		}
		data = data[:len(data)+n]
		if limit >= 0 && int64(len(data)) > limit { // it grew after the stat
			return nil, &TooLargeError{Path: path, Size: int64(len(data)), Limit: limit}
		}
		if len(data) == cap(data) {
			data = append(data, 0)[:len(data)]
		}
	}
}

// Move makes a finished file durable under a new name: fsync src, rename it
// to dst, fsync dst's directory. src must be complete and no longer written
// (an agent's output after the agent ended); it must be on dst's file
// system. Moving instead of copying saves creating and syncing a new file.
func Move(src, dst string) error {
	fd, err := open(src, syscall.O_RDONLY, 0)
	if err != nil {
		return err
	}
	err = fsync(fd)
	syscall.Close(fd)
	if err != nil {
		return fmt.Errorf("fsync %s: %w", src, err)
	}
	if err := rename(src, dst); err != nil {
		return err
	}
	return SyncDir(filepath.Dir(dst))
}

// SyncDir fsyncs a directory, making renames and creations in it durable.
func SyncDir(dir string) error {
	fd, err := open(dir, syscall.O_RDONLY|syscall.O_DIRECTORY, 0)
	if err != nil {
		return fmt.Errorf("open directory: %w", err)
	}
	defer syscall.Close(fd)
	if err := fsync(fd); err != nil {
		return fmt.Errorf("fsync directory %s: %w", dir, err)
	}
	return nil
}

func open(path string, flags int, perm os.FileMode) (int, error) {
	for {
		fd, err := syscall.Open(path, flags|syscall.O_CLOEXEC, uint32(perm.Perm()))
		if err == nil {
			return fd, nil
		}
		if err != syscall.EINTR {
			return -1, &os.PathError{Op: "open", Path: path, Err: err}
		}
	}
}

func write(fd int, data []byte) error {
	for len(data) > 0 {
		n, err := syscall.Write(fd, data)
		if err == syscall.EINTR {
			continue
		}
		if err != nil {
			return err
		}
		data = data[n:]
	}
	return nil
}

func fsync(fd int) error {
	syncs.Add(1)
	for {
		if err := syscall.Fsync(fd); err != syscall.EINTR {
			return err
		}
	}
}

// rename is os.Rename without its look at newpath: renaming a file over
// a directory fails in the kernel anyway.
func rename(oldpath, newpath string) error {
	for {
		err := syscall.Rename(oldpath, newpath)
		if err == nil {
			return nil
		}
		if err != syscall.EINTR {
			return &os.LinkError{Op: "rename", Old: oldpath, New: newpath, Err: err}
		}
	}
}
