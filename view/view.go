// Package view writes and checks the files that are views of the store's
// copies: a step's artifact in its run's directory, the prompt and the
// validation report in its attempt's folder.
//
// The store is the truth of what a step produced: the bytes are committed
// with the step's outcome, in one transaction, at one fsync. The files
// are written after that commit without an fsync, so a crash (or a power
// loss before the page cache reaches the disk) can leave one missing,
// truncated or stale, never the store wrong. Check compares a file with
// its stored copy by hash and rewrites it when they differ; the scheduler
// checks the runs it resumes at start, and the agent step kind checks
// every input before an agent reads it.
package view

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/agentrunner/agentrunner"
	"github.com/agentrunner/agentrunner/artifact"
	"github.com/agentrunner/agentrunner/internal/atomicfile"
)

// Why a view was rewritten, the reason of EventViewRepaired.
const (
	Missing   = "missing"
	Different = "different"
)

// Path is where the view of f is: an artifact under its run's directory,
// a prompt or a validation report under its attempt's folder. A name that
// would leave that directory is refused.
func Path(runDir, attemptDir string, f *agentrunner.StoredFile) (string, error) {
	if !filepath.IsLocal(f.Name) {
		return "", fmt.Errorf("stored file %q of run %s: not a path inside its directory", f.Name, f.RunID)
	}
	if f.Kind == agentrunner.FileArtifact {
		return filepath.Join(runDir, f.Name), nil
	}
	return filepath.Join(attemptDir, f.Name), nil
}

// Write makes the file at path hold f's bytes, without an fsync: by
// moving f.From into place when it is set (the agent's own output, whose
// bytes are f's: no new file is made), else by writing a temporary file
// and renaming it over path, so a reader sees the old bytes or the new,
// never half of them. Missing directories are made.
func Write(path string, f *agentrunner.StoredFile) error {
	err := put(path, f)
	if errors.Is(err, fs.ErrNotExist) {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return err
		}
		err = put(path, f)
	}
	return err
}

// put moves f.From to path, or when that fails writes f's bytes there.
func put(path string, f *agentrunner.StoredFile) error {
	if f.From != "" && os.Rename(f.From, path) == nil {
		return nil
	}
	return atomicfile.Replace(path, f.Data, 0o644)
}

// Check compares the file at path with f by hash and, when it is missing
// or differs, rewrites it from f. It returns why it rewrote it (Missing,
// Different), or "" when the file was right.
func Check(path string, f *agentrunner.StoredFile) (string, error) {
	reason, err := Compare(path, f)
	if err != nil || reason == "" {
		return "", err
	}
	f.From = "" // only the stored bytes are trusted now
	if err := Write(path, f); err != nil {
		return "", fmt.Errorf("rewrite %s from the store: %w", path, err)
	}
	return reason, nil
}

// Repaired is the event that records a view rewritten from the store.
func Repaired(now time.Time, f *agentrunner.StoredFile, path, reason string) *agentrunner.Event {
	return &agentrunner.Event{Timestamp: now, Type: agentrunner.EventViewRepaired, CycleID: f.RunID, Step: f.Step,
		Level: agentrunner.LevelWarn, Details: map[string]any{"path": path, "artifact": f.Name, "reason": reason}}
}

// Compare reports whether the file at path is missing or differs from f,
// "" when it holds f's bytes.
func Compare(path string, f *agentrunner.StoredFile) (string, error) {
	data, err := os.ReadFile(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return Missing, nil
	case err != nil:
		return "", err
	}
	if artifact.Hash(data) != f.SHA256 {
		return Different, nil
	}
	return "", nil
}

// Files is what reading a view needs of the store.
type Files interface {
	Files(ctx context.Context, f agentrunner.FileFilter) ([]*agentrunner.StoredFile, error)
}

// Latest returns the store's newest copy of a run's artifact. When there
// is none, legacy reports whether the run has no stored artifact at all:
// it ran before the store kept them, and its files are all there is.
func Latest(ctx context.Context, store Files, runID, name string) (f *agentrunner.StoredFile, legacy bool, err error) {
	files, err := store.Files(ctx, agentrunner.FileFilter{RunID: runID, Kind: agentrunner.FileArtifact, Name: name, Latest: true})
	if err != nil {
		return nil, false, fmt.Errorf("the stored %s of run %s: %w", name, runID, err)
	}
	if len(files) > 0 {
		return files[0], false, nil
	}
	all, err := store.Files(ctx, agentrunner.FileFilter{RunID: runID, Kind: agentrunner.FileArtifact, NoData: true})
	return nil, len(all) == 0, err
}

// Read returns a run's artifact, about to be read, as committed: the
// store's copy, after writing its view in dir if views still has it
// pending, then checking it and rewriting it when it is missing or
// differs (repaired is the event that says so, nil if the view was
// right). With onRead (the run's pipeline writes its views when they are
// read), a missing view is written without an event: it was not lost. A
// run from before the store kept artifacts is read from its file. nil
// data: the run has no such artifact, even if a file is there (an
// attempt's output whose commit a crash lost).
func Read(ctx context.Context, store Files, views *Writer, onRead bool, runID, dir, name string, now time.Time) (data []byte, repaired *agentrunner.Event, err error) {
	path := filepath.Join(dir, name)
	views.Settle(path)
	f, legacy, err := Latest(ctx, store, runID, name)
	switch {
	case err != nil:
		return nil, nil, err
	case f == nil && !legacy:
		return nil, nil, nil
	case f == nil:
		data, err := os.ReadFile(path)
		if errors.Is(err, fs.ErrNotExist) {
			return nil, nil, nil
		}
		return data, nil, err
	}
	reason, err := Check(path, f)
	if err != nil {
		return nil, nil, err
	}
	if reason != "" && !(onRead && reason == Missing) {
		repaired = Repaired(now, f, path, reason)
	}
	return f.Data, repaired, nil
}
