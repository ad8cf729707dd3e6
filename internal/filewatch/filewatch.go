// Package filewatch tells when some of a set of files changed, debounced:
// an editor's save (often a write to a temporary file and a rename over
// the old one) or a deploy that copies a dozen files is one change, told
// once, after the files stood still for a moment (reload.watch).
package filewatch

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"path/filepath"
	"slices"
	"time"

	"github.com/fsnotify/fsnotify"
)

// DefaultDebounce is how long the files must stand still before a change
// is told: long enough for a save or a copy of several files to end.
const DefaultDebounce = 500 * time.Millisecond

// Options say what to watch and whom to tell.
type Options struct {
	// Files returns the files to watch, absolute; it is called at the
	// start and again after each change is told (a reload may name other
	// files).
	Files func() []string
	// OnChange is called with the files that changed, sorted, once they
	// stood still for Debounce.
	OnChange func(changed []string)
	// Debounce defaults to DefaultDebounce.
	Debounce time.Duration
	Logger   *slog.Logger
}

// Watcher watches files for changes; Run tells them.
type Watcher struct {
	opts  Options
	fs    *fsnotify.Watcher
	files map[string]bool
	dirs  map[string]bool
}

// New starts watching the files opts.Files names. It watches their
// directories, not the files themselves: a file replaced by a rename is
// a new file, which a watch on the old one would not see.
func New(opts Options) (*Watcher, error) {
	if opts.Files == nil || opts.OnChange == nil {
		return nil, fmt.Errorf("filewatch: Files and OnChange are required")
	}
	if opts.Debounce <= 0 {
		opts.Debounce = DefaultDebounce
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	fs, err := fsnotify.NewWatcher()
	if err != nil {
		return nil, fmt.Errorf("watching the configuration's files: %w", err)
	}
	w := &Watcher{opts: opts, fs: fs, dirs: map[string]bool{}}
	if err := w.update(); err != nil {
		fs.Close()
		return nil, err
	}
	return w, nil
}

// Dirs are the directories watched, sorted.
func (w *Watcher) Dirs() []string { return slices.Sorted(maps.Keys(w.dirs)) }

// update watches the directories of the files Files names now, and no
// others.
func (w *Watcher) update() error {
	w.files = map[string]bool{}
	dirs := map[string]bool{}
	for _, f := range w.opts.Files() {
		f = filepath.Clean(f)
		w.files[f] = true
		dirs[filepath.Dir(f)] = true
	}
	for d := range w.dirs {
		if !dirs[d] {
			_ = w.fs.Remove(d) // gone already, or never added: nothing to undo
			delete(w.dirs, d)
		}
	}
	for _, d := range slices.Sorted(maps.Keys(dirs)) {
		if w.dirs[d] {
			continue
		}
		if err := w.fs.Add(d); err != nil {
			return fmt.Errorf("watching the directory %s for changes of the configuration's files: %w", d, err)
		}
		w.dirs[d] = true
	}
	return nil
}

// Run tells changes until ctx ends, then stops watching.
func (w *Watcher) Run(ctx context.Context) {
	defer w.fs.Close()
	changed := map[string]bool{}
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case ev, ok := <-w.fs.Events:
			if !ok {
				return
			}
			if w.files[filepath.Clean(ev.Name)] && !ev.Has(fsnotify.Chmod) {
				changed[filepath.Clean(ev.Name)] = true
				timer.Reset(w.opts.Debounce)
			}
		case err, ok := <-w.fs.Errors:
			if !ok {
				return
			}
			w.opts.Logger.Warn("watching the configuration's files", "error", err)
		case <-timer.C:
			w.opts.OnChange(slices.Sorted(maps.Keys(changed)))
			clear(changed)
			if err := w.update(); err != nil {
				w.opts.Logger.Warn("watching the configuration's files after a change", "error", err)
			}
		}
	}
}
