// Package archive compresses the directories of old finished runs into
// one archive each under cycles/history/ (FR-038, FR-160), and deletes old
// archives by count or age (FR-161).
//
// A run's directory is a view of the store, which keeps every artifact's
// bytes, so archiving loses nothing the API or an agent reads: they read
// the store. The archive keeps the directory whole, files that are not
// artifacts included, for an operator who wants the files back.
//
// Archiving a run is crash-safe: the archive is written to a temporary
// file, fsynced and renamed into place; then it is read back and each
// file's hash is compared with the store's copy (or, for a file the store
// does not keep, with the file's); only then is the directory removed,
// file by file, each one only if the archive holds the same bytes. A
// crash at any point leaves the directory, or a verified archive, or
// both; the next pass finishes the work.
package archive

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/agentrunner/agentrunner"
	"github.com/agentrunner/agentrunner/artifact"
)

// Event types of the archive.
const (
	// EventArchived: a run's directory was archived and removed (details:
	// pipeline, path, files, bytes).
	EventArchived = "run.archived"
	// EventDeleted: retention deleted an archive (details: pipeline, run,
	// path, reason: count or age).
	EventDeleted = "archive.deleted"
	// EventFailed: a run could not be archived, or an archive deleted; its
	// directory is left as it was (details: path, error).
	EventFailed = "archive.failed"
)

// Ext is the extension of an archive.
const Ext = ".tar.gz"

// tempInfix marks a temporary archive being written: .<run>.tmp-NNN.
const tempInfix = ".tmp-"

// Settle is how long after its end a run is left alone: the views of its
// last artifacts may still be being written, and at start the runner
// checks (and rewrites) the views of the runs that ended in the five
// minutes before its last event, which must not bring an archived
// directory back.
const Settle = 10 * time.Minute

// Policy says what a pass archives and deletes.
type Policy struct {
	// Keep is how many of each pipeline's newest finished runs keep
	// their directories; older ones are archived. 0 archives none.
	Keep int
	// Count bounds the archives kept per pipeline, the newest; 0: no
	// bound.
	Count int
	// Age bounds how long after its run ended an archive is kept; 0: no
	// bound.
	Age time.Duration
}

// Store is what the archiver reads of the store: the runs, and the
// stored artifacts an archive is checked against.
type Store interface {
	Runs(ctx context.Context, f agentrunner.RunFilter) ([]*agentrunner.Run, error)
	Files(ctx context.Context, f agentrunner.FileFilter) ([]*agentrunner.StoredFile, error)
}

// Points at which Archiver.Fault is called while a run is archived.
const (
	// AtWritten: the temporary archive is written and fsynced.
	AtWritten = "written"
	// AtInstalled: the archive is renamed into place, not yet verified.
	AtInstalled = "installed"
	// AtVerified: the archive is verified; the directory is whole.
	AtVerified = "verified"
	// AtRemoving: the first file of the directory is removed.
	AtRemoving = "removing"
)

// Archiver archives the runs of one workspace. Only one may work on a
// workspace at a time: the workspace lock's holder (serve, run, or
// `agentrunner archive`).
type Archiver struct {
	Store Store
	// History is the folder of the archives (cycles/history).
	History string
	Clock   agentrunner.Clock
	// OnEvent, if set, receives each event (recorded by the caller).
	OnEvent func(*agentrunner.Event)
	// Log says why a pass failed; default discards.
	Log *slog.Logger
	// Fault, if set, is called at each point (AtWritten …) of archiving a
	// run; an error stops the pass there, as a crash would: tests check
	// what each point leaves.
	Fault func(point string) error
}

// Path is the archive of a run of pipeline.
func Path(history, pipeline, id string) string {
	return filepath.Join(history, pipeline, id+Ext)
}

// Archived reports whether run was archived: its archive is there and
// its directory is gone. Readers of its artifacts then read the store,
// or the archive; they must not write its directory again.
func Archived(history string, run *agentrunner.Run) bool {
	if _, err := os.Stat(Path(history, run.Pipeline, run.ID)); err != nil {
		return false
	}
	_, err := os.Stat(run.Dir)
	return errors.Is(err, fs.ErrNotExist)
}

// Report is what a pass did, or with a dry run would do.
type Report struct {
	// Archived are the runs archived, oldest first.
	Archived []string
	// Deleted are the archives deleted by retention.
	Deleted []string
	// Failed say which runs or archives failed, and why.
	Failed []string
}

// Pass archives the finished runs p says to, then applies the archives'
// retention. With dry, it only reports what it would do. Each run's or
// archive's failure is an event and a line of Failed; the error is for
// the store failing to list the runs.
func (a *Archiver) Pass(ctx context.Context, p Policy, dry bool) (*Report, error) {
	rep := &Report{}
	if !dry {
		a.removeTemps()
	}
	runs, err := a.candidates(ctx, p)
	if err != nil {
		return nil, err
	}
	for _, run := range runs {
		if err := ctx.Err(); err != nil {
			return rep, err
		}
		a.one(ctx, run, dry, rep)
	}
	a.retain(p, dry, rep)
	return rep, nil
}

// one archives one run, recording the outcome in rep and as an event.
func (a *Archiver) one(ctx context.Context, run *agentrunner.Run, dry bool, rep *Report) {
	dst := Path(a.History, run.Pipeline, run.ID)
	if dry {
		if pending(run) {
			rep.Archived = append(rep.Archived, run.ID)
		}
		return
	}
	res, err := a.archive(ctx, run, dst)
	switch {
	case err != nil:
		rep.Failed = append(rep.Failed, fmt.Sprintf("%s: %v", run.ID, err))
		a.event(&agentrunner.Event{Type: EventFailed, CycleID: run.ID, Level: agentrunner.LevelError,
			Details: map[string]any{"pipeline": run.Pipeline, "path": dst, "error": err.Error()}})
	case res != nil:
		rep.Archived = append(rep.Archived, run.ID)
		a.event(&agentrunner.Event{Type: EventArchived, CycleID: run.ID, Level: agentrunner.LevelInfo,
			Details: map[string]any{"pipeline": run.Pipeline, "path": dst, "files": res.files, "bytes": res.bytes}})
	}
}

func (a *Archiver) event(ev *agentrunner.Event) {
	ev.Timestamp = a.Clock.Now()
	if a.OnEvent != nil {
		a.OnEvent(ev)
	}
}

func (a *Archiver) fault(point string) error {
	if a.Fault == nil {
		return nil
	}
	return a.Fault(point)
}

// candidates are the finished runs to archive: of each pipeline, those
// older than its newest Keep finished runs (by end), ended at least
// Settle ago, oldest first.
func (a *Archiver) candidates(ctx context.Context, p Policy) ([]*agentrunner.Run, error) {
	if p.Keep <= 0 {
		return nil, nil
	}
	runs, err := a.Store.Runs(ctx, agentrunner.RunFilter{})
	if err != nil {
		return nil, fmt.Errorf("list the runs to archive: %w", err)
	}
	byPipeline := map[string][]*agentrunner.Run{}
	for _, r := range runs {
		if r.Status.Finished() && !r.EndedAt.IsZero() {
			byPipeline[r.Pipeline] = append(byPipeline[r.Pipeline], r)
		}
	}
	settled := a.Clock.Now().Add(-Settle)
	var out []*agentrunner.Run
	for _, rs := range byPipeline {
		slices.SortFunc(rs, newestFirst)
		for _, r := range rs[min(p.Keep, len(rs)):] {
			if r.EndedAt.Before(settled) {
				out = append(out, r)
			}
		}
	}
	slices.SortFunc(out, func(x, y *agentrunner.Run) int { return newestFirst(y, x) })
	return out, nil
}

// newestFirst orders runs by end, the latest first, then by id.
func newestFirst(x, y *agentrunner.Run) int {
	if c := y.EndedAt.Compare(x.EndedAt); c != 0 {
		return c
	}
	return strings.Compare(y.ID, x.ID)
}

// pending reports whether run has a directory to archive. A run without
// one (archived already, its archive perhaps deleted since by retention,
// or one whose views were never written) has none: the store keeps its
// artifacts, and an archive is made of a directory only.
func pending(run *agentrunner.Run) bool {
	info, err := os.Stat(run.Dir)
	return err == nil && info.IsDir()
}

// result is what archiving one run wrote.
type result struct {
	files int
	bytes int64
}

// archive archives one run into dst and removes its directory; nil, nil
// when there was nothing to do (archived already, or nothing to keep).
func (a *Archiver) archive(ctx context.Context, run *agentrunner.Run, dst string) (*result, error) {
	if !pending(run) {
		return nil, nil
	}
	es, err := a.collect(ctx, run)
	if err != nil {
		return nil, err
	}
	if err := a.write(run, dst, es); err != nil {
		return nil, err
	}
	got, err := read(dst)
	if err != nil {
		return nil, fmt.Errorf("verify %s: %w", dst, err)
	}
	if missing := uncovered(got, es); len(missing) > 0 {
		return nil, fmt.Errorf("verify %s: it lacks or differs in %s; the directory is left in place", dst, strings.Join(missing, ", "))
	}
	if err := a.fault(AtVerified); err != nil {
		return nil, err
	}
	if err := a.removeDir(run.Dir, got, es); err != nil {
		return nil, err
	}
	res := &result{files: len(got)}
	for _, e := range got {
		res.bytes += int64(len(e.Data))
	}
	return res, nil
}

// write makes the archive at dst hold es: when one is there already (a
// crash after it was installed) and holds them, it is kept; else a new
// one, with es and whatever intact entries the old one has besides (a
// crash while the directory was being removed), replaces it.
func (a *Archiver) write(run *agentrunner.Run, dst string, es entries) error {
	old, err := read(dst)
	if err == nil && len(uncovered(old, es)) == 0 {
		return nil
	}
	merged := entries{}
	for name, e := range old {
		merged[name] = e
	}
	for name, e := range es {
		merged[name] = e
	}
	tmp, err := writeTemp(filepath.Dir(dst), run.ID, merged, run.EndedAt)
	if err != nil {
		return err
	}
	if err := a.fault(AtWritten); err != nil {
		return err
	}
	if err := install(tmp, dst); err != nil {
		return fmt.Errorf("install %s: %w", dst, err)
	}
	return a.fault(AtInstalled)
}

// uncovered names the entries of want that got lacks or holds other
// bytes for.
func uncovered(got, want entries) []string {
	var out []string
	for _, e := range want.sorted() {
		if g := got[e.Name]; g == nil || g.Sum != e.Sum {
			out = append(out, e.Name)
		}
	}
	return out
}

// collect gathers what a run's archive must hold: the store's newest copy
// of each artifact (the truth, whatever its view holds now) and every
// other file of its directory.
func (a *Archiver) collect(ctx context.Context, run *agentrunner.Run) (entries, error) {
	files, err := a.Store.Files(ctx, agentrunner.FileFilter{RunID: run.ID, Kind: agentrunner.FileArtifact, Latest: true})
	if err != nil {
		return nil, fmt.Errorf("read the stored artifacts of %s: %w", run.ID, err)
	}
	es := entries{}
	for _, f := range files {
		name := filepath.ToSlash(f.Name)
		if !localName(name) {
			return nil, fmt.Errorf("stored artifact %q of %s: not a path inside its directory", f.Name, run.ID)
		}
		if sum := artifact.Hash(f.Data); sum != f.SHA256 {
			return nil, fmt.Errorf("stored artifact %s of %s: its bytes hash to %s, the store recorded %s", f.Name, run.ID, sum, f.SHA256)
		}
		es[name] = &entry{Name: name, Data: f.Data, Sum: f.SHA256, Mod: f.CreatedAt, Stored: true}
	}
	return es, a.collectDir(run.Dir, es)
}

// collectDir adds the files of dir that es lacks; a missing dir has none.
// Anything but regular files and folders (a link) stops the run's
// archiving: removing the directory would lose it.
func (a *Archiver) collectDir(dir string, es entries) error {
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		if !d.Type().IsRegular() {
			return fmt.Errorf("%s is not a regular file; the directory is left in place", p)
		}
		name, err := relName(dir, p)
		if err != nil || es[name] != nil {
			return err
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		es[name] = &entry{Name: name, Data: data, Sum: artifact.Hash(data), Mod: info.ModTime()}
		return nil
	})
	if errors.Is(err, fs.ErrNotExist) {
		if _, serr := os.Stat(dir); errors.Is(serr, fs.ErrNotExist) {
			return nil
		}
	}
	return err
}

func relName(dir, p string) (string, error) {
	rel, err := filepath.Rel(dir, p)
	if err != nil {
		return "", err
	}
	return filepath.ToSlash(rel), nil
}

// removeDir removes the files of dir the archive holds with the same
// bytes, and the views of stored artifacts (the archive holds the store's
// copy, which a view that differs would be rewritten to), then the
// folders left empty. Any other file (written since the archive was
// made) is left, and so is its folder: the next pass archives it.
func (a *Archiver) removeDir(dir string, archived, collected entries) error {
	var left []string
	var dirs []string
	removed := 0
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			dirs = append(dirs, p)
			return nil
		}
		name, ok, err := removable(dir, p, archived, collected)
		if err != nil || !ok {
			left = append(left, name)
			return err
		}
		if err := os.Remove(p); err != nil {
			return err
		}
		if removed++; removed == 1 {
			return a.fault(AtRemoving)
		}
		return nil
	})
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("remove the archived directory %s: %w", dir, err)
	}
	for _, d := range slices.Backward(dirs) {
		os.Remove(d) // a folder that still holds a file stays
	}
	if len(left) > 0 {
		return fmt.Errorf("%s changed while it was archived (%s): those files are left for the next pass", dir, strings.Join(left, ", "))
	}
	return nil
}

// removable reports whether the file at p, name in dir, may go: the
// archive holds its bytes, or it is the view of a stored artifact, whose
// stored copy the archive holds.
func removable(dir, p string, archived, collected entries) (string, bool, error) {
	name, err := relName(dir, p)
	if err != nil {
		return "", false, err
	}
	data, err := os.ReadFile(p)
	if err != nil {
		return name, false, err
	}
	e, c := archived[name], collected[name]
	if e == nil {
		return name, false, nil
	}
	view := c != nil && c.Stored && c.Sum == e.Sum
	return name, e.Sum == artifact.Hash(data) || view, nil
}

// removeTemps removes temporary archives a crash left behind.
func (a *Archiver) removeTemps() {
	matches, _ := filepath.Glob(filepath.Join(a.History, "*", "."+"*"+tempInfix+"*"))
	for _, m := range matches {
		os.Remove(m)
	}
}

// Run passes now and every interval on the clock until ctx ends, with the
// policy policy returns at each pass (a reload may change it).
func (a *Archiver) Run(ctx context.Context, every time.Duration, policy func() Policy) {
	for ctx.Err() == nil {
		rep, err := a.Pass(ctx, policy(), false)
		if err != nil && ctx.Err() == nil {
			a.log().Error("archiving old runs", "error", err)
		} else if rep != nil && len(rep.Failed) > 0 {
			a.log().Warn("some runs or archives could not be archived or deleted", "failed", rep.Failed)
		}
		select {
		case <-ctx.Done():
		case <-a.Clock.After(every):
		}
	}
}

func (a *Archiver) log() *slog.Logger {
	if a.Log == nil {
		return slog.New(slog.DiscardHandler)
	}
	return a.Log
}
