// Package heartbeat keeps the time a runner was last known to be alive in
// a small file beside its store, so that a start after a crash can date
// the end of the attempts the crash cut short (scheduler.Heartbeat).
package heartbeat

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"time"
)

// File is a heartbeat kept in the file at Path: the time of the last beat,
// as RFC 3339 text. A beat is not synced to disk: a crash of the process
// keeps it (the kernel has it), and after a crash of the machine the
// runner falls back on its store's newest events.
type File struct {
	Path string
}

// Beat records that the runner is alive at t. The time has a fixed width
// and overwrites the last one in place: truncating the file would free its
// block and allocate another at every beat.
func (f File) Beat(t time.Time) error {
	line := t.UTC().Format(beatLayout) + "\n"
	file, err := os.OpenFile(f.Path, os.O_WRONLY|os.O_CREATE, 0o644)
	if err != nil {
		return err
	}
	_, err = file.WriteAt([]byte(line), 0)
	if fi, serr := file.Stat(); err == nil && serr == nil && fi.Size() > int64(len(line)) {
		err = file.Truncate(int64(len(line))) // a longer line of another version
	}
	if cerr := file.Close(); err == nil {
		err = cerr
	}
	return err
}

// beatLayout is RFC 3339 with all nine digits of the nanoseconds, so that
// every beat has the same width.
const beatLayout = "2006-01-02T15:04:05.000000000Z07:00"

// Last returns the time of the last beat; zero when there was none, or
// when a crash of the machine left the file empty.
func (f File) Last() (time.Time, error) {
	data, err := os.ReadFile(f.Path)
	if errors.Is(err, fs.ErrNotExist) {
		return time.Time{}, nil
	}
	if err != nil {
		return time.Time{}, err
	}
	text := bytes.TrimSpace(data)
	if len(text) == 0 {
		return time.Time{}, nil
	}
	t, err := time.Parse(time.RFC3339Nano, string(text))
	if err != nil {
		return time.Time{}, fmt.Errorf("heartbeat file %s: %q is not an RFC 3339 time", f.Path, clip(text))
	}
	return t, nil
}

// clip shortens what a broken file holds for an error message.
func clip(b []byte) string {
	if len(b) > 40 {
		return string(b[:40]) + "…"
	}
	return string(b)
}
