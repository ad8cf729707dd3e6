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

// Beat records that the runner is alive at t.
func (f File) Beat(t time.Time) error {
	return os.WriteFile(f.Path, []byte(t.UTC().Format(time.RFC3339Nano)+"\n"), 0o644)
}

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
