package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/agentrunner/agentrunner"
	"github.com/agentrunner/agentrunner/internal/atomicfile"
)

// BackupTimeFormat is the time in the name of a backup file, and in the
// name a restore gives the file it replaced.
const BackupTimeFormat = "20060102_150405"

// backupName matches the names BackupName makes: only these are removed
// when old backups are pruned.
var backupName = regexp.MustCompile(`^state-\d{8}_\d{6}\.db$`)

// BackupName is the file name of a backup taken at t: state-YYYYMMDD_HHMMSS.db
// (UTC), which sorts in time order.
func BackupName(t time.Time) string {
	return "state-" + t.UTC().Format(BackupTimeFormat) + ".db"
}

// Backup writes a consistent copy of the database at src to dst, which
// must not exist, while other connections may go on writing to src: VACUUM
// INTO a temporary file next to dst (a snapshot of one read transaction),
// fsync it, check it with quick_check, rename it to dst and fsync the
// directory. A crash leaves dst complete or absent. It returns dst's size.
func Backup(ctx context.Context, src, dst string) (int64, error) {
	if _, err := os.Lstat(dst); err == nil {
		return 0, fmt.Errorf("backup file %s already exists", dst)
	}
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return 0, fmt.Errorf("create backup directory: %w", err)
	}
	tmp, err := tempFile(filepath.Dir(dst))
	if err != nil {
		return 0, err
	}
	defer os.Remove(tmp) // gone already once renamed
	if err := vacuumInto(ctx, src, tmp); err != nil {
		return 0, err
	}
	return install(ctx, tmp, dst)
}

// tempFile creates an empty temporary file in dir: VACUUM INTO writes into
// an empty file, and creating it first leaves no name to race for.
func tempFile(dir string) (string, error) {
	f, err := os.CreateTemp(dir, ".state-*.db.tmp")
	if err != nil {
		return "", fmt.Errorf("create temporary backup file: %w", err)
	}
	return f.Name(), f.Close()
}

// vacuumInto copies the database at src into the empty file dst through a
// read-only connection.
func vacuumInto(ctx context.Context, src, dst string) error {
	if _, err := os.Stat(src); err != nil {
		return fmt.Errorf("state database: %w", err)
	}
	db, err := sql.Open("sqlite", dsn(src, "busy_timeout(10000)")+"&mode=ro")
	if err != nil {
		return fmt.Errorf("open state database %s: %w", src, err)
	}
	defer db.Close()
	if _, err := db.ExecContext(ctx, "VACUUM INTO ?", dst); err != nil {
		return fmt.Errorf("copy state database %s: %w", src, err)
	}
	return nil
}

// install fsyncs the copy at tmp (SQLite does not for VACUUM INTO), checks
// it and renames it to dst.
func install(ctx context.Context, tmp, dst string) (int64, error) {
	size, err := syncFile(tmp)
	if err != nil {
		return 0, err
	}
	r, err := inspect(ctx, tmp, depthPages)
	if err != nil {
		return 0, err
	}
	if d := r.Damage(); len(d) > 0 {
		return 0, fmt.Errorf("the copy failed its check: %w", d)
	}
	if err := os.Rename(tmp, dst); err != nil {
		return 0, fmt.Errorf("install backup: %w", err)
	}
	return size, atomicfile.SyncDir(filepath.Dir(dst))
}

// syncFile fsyncs a file and returns its size.
func syncFile(path string) (int64, error) {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return 0, err
	}
	if err := f.Sync(); err != nil {
		return 0, fmt.Errorf("sync %s: %w", path, err)
	}
	return info.Size(), nil
}

// Restore replaces the database at path with the backup, which must pass
// the full Check. The file it replaces is kept as
// <path>.damaged-YYYYMMDD_HHMMSS (with its -wal, if any, beside it as
// <that>-wal), and the stale -shm is removed, so that SQLite applies no old
// log to the restored file. The backup is copied next to path, fsynced and
// renamed over it, so a crash leaves the old file or the restored one. The
// caller must hold the workspace: no runner may have path open. It returns
// the name the replaced file was kept under ("" when there was none).
func Restore(ctx context.Context, backup, path string, now time.Time) (string, error) {
	if err := checkBackup(ctx, backup); err != nil {
		return "", err
	}
	tmp, err := tempFile(filepath.Dir(path))
	if err != nil {
		return "", err
	}
	defer os.Remove(tmp)
	if err := copyFile(backup, tmp); err != nil {
		return "", err
	}
	if _, err := syncFile(tmp); err != nil {
		return "", err
	}
	aside, err := setAside(path, now)
	if err != nil {
		return "", err
	}
	if err := os.Rename(tmp, path); err != nil {
		return aside, fmt.Errorf("install the backup as %s: %w", path, err)
	}
	return aside, atomicfile.SyncDir(filepath.Dir(path))
}

// checkBackup refuses a backup that is not a sound agentrunner database.
func checkBackup(ctx context.Context, backup string) error {
	r, err := Check(ctx, backup)
	if err != nil {
		return fmt.Errorf("backup: %w", err)
	}
	if d := r.Damage(); len(d) > 0 {
		return fmt.Errorf("the backup %s is damaged: %w", backup, d)
	}
	if why := r.Foreign(); why != "" || r.Version == 0 {
		return fmt.Errorf("the backup %s is refused: %s", backup, cmpOr(why, "it has no agentrunner schema"))
	}
	if r.Newer() {
		return fmt.Errorf("the backup %s was written by a newer agentrunner (schema version %d; this agentrunner knows up to %d)", backup, r.Version, r.Known)
	}
	return nil
}

func cmpOr(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// setAside keeps the database at path, if any, under a new name, with its
// WAL beside it, and removes its -shm. The database itself is linked, not
// moved, so that path never disappears: a runner started after a crash
// here finds the old file, not an empty new one.
func setAside(path string, now time.Time) (string, error) {
	if _, err := os.Lstat(path); errors.Is(err, fs.ErrNotExist) {
		return "", removeStale(path)
	}
	aside := path + ".damaged-" + now.UTC().Format(BackupTimeFormat)
	if err := os.Link(path, aside); err != nil {
		if err := copyFile(path, aside); err != nil {
			return "", fmt.Errorf("keep %s as %s: %w", path, aside, err)
		}
	}
	if err := os.Rename(path+"-wal", aside+"-wal"); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return "", fmt.Errorf("keep %s-wal: %w", path, err)
	}
	return aside, removeStale(path)
}

// removeStale removes the log files a restored database must not inherit.
func removeStale(path string) error {
	for _, suffix := range []string{"-wal", "-shm", "-journal"} {
		if err := os.Remove(path + suffix); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("remove stale %s%s: %w", path, suffix, err)
		}
	}
	return nil
}

// copyFile copies src into dst (created or truncated) and fsyncs it.
func copyFile(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return fmt.Errorf("copy %s: %w", src, err)
	}
	return errors.Join(out.Sync(), out.Close())
}

// Backups takes a backup of a database on a schedule and keeps the newest.
// The schedule is reckoned from the newest backup in Dir, so a restarted
// server neither skips a backup nor takes one at every start.
type Backups struct {
	// Source is the database.
	Source string
	// Dir receives the backups, named by BackupName.
	Dir string
	// Every is the time between two backups.
	Every time.Duration
	// Keep is how many backups are kept; older ones are removed.
	Keep int
	// Clock is the time source; tests inject a fake.
	Clock agentrunner.Clock
	// OnEvent, if set, receives an agentrunner.EventBackupCompleted or EventBackupFailed
	// after each attempt.
	OnEvent func(*agentrunner.Event)
	// Log says what was removed; default discards.
	Log *slog.Logger
}

// retryFailedBackup is the wait after a failed backup, when Every is longer.
const retryFailedBackup = time.Hour

// Run takes the backups until ctx ends.
func (b *Backups) Run(ctx context.Context) {
	for b.wait(ctx, b.Due().Sub(b.Clock.Now())) {
		if _, err := b.Take(ctx); err != nil {
			// Due still points at the missed time: wait before trying again.
			if !b.wait(ctx, min(b.Every, retryFailedBackup)) {
				return
			}
		}
	}
}

// wait waits for d and reports whether ctx is still live.
func (b *Backups) wait(ctx context.Context, d time.Duration) bool {
	if ctx.Err() != nil {
		return false
	}
	if d > 0 {
		select {
		case <-ctx.Done():
		case <-b.Clock.After(d):
		}
	}
	return ctx.Err() == nil
}

// Due is when the next backup is due: Every after the newest in Dir, or
// now when there is none.
func (b *Backups) Due() time.Time {
	names := b.list()
	if len(names) == 0 {
		return b.Clock.Now()
	}
	t, err := time.Parse(BackupTimeFormat, strings.TrimSuffix(strings.TrimPrefix(names[len(names)-1], "state-"), ".db"))
	if err != nil {
		return b.Clock.Now()
	}
	return t.Add(b.Every)
}

// list returns the names of the backups in Dir, oldest first.
func (b *Backups) list() []string {
	entries, _ := os.ReadDir(b.Dir)
	var names []string
	for _, e := range entries {
		if e.Type().IsRegular() && backupName.MatchString(e.Name()) {
			names = append(names, e.Name())
		}
	}
	slices.Sort(names)
	return names
}

// Take takes one backup now, removes the backups beyond Keep and reports
// the outcome as an event. It returns the backup's path.
func (b *Backups) Take(ctx context.Context) (string, error) {
	start := b.Clock.Now()
	dst := filepath.Join(b.Dir, BackupName(start))
	size, err := Backup(ctx, b.Source, dst)
	if err == nil {
		err = b.prune()
	}
	ev := &agentrunner.Event{Timestamp: b.Clock.Now(), Type: agentrunner.EventBackupCompleted, Level: agentrunner.LevelInfo,
		Details: map[string]any{"file": dst, "bytes": size, "duration_ms": b.Clock.Now().Sub(start).Milliseconds()}}
	if err != nil {
		ev.Type, ev.Level, ev.Details = agentrunner.EventBackupFailed, agentrunner.LevelError, map[string]any{"file": dst, "error": err.Error()}
	}
	if b.OnEvent != nil {
		b.OnEvent(ev)
	}
	return dst, err
}

// prune removes the oldest backups beyond Keep.
func (b *Backups) prune() error {
	names := b.list()
	var errs []error
	for _, name := range names[:max(0, len(names)-b.Keep)] {
		if err := os.Remove(filepath.Join(b.Dir, name)); err != nil {
			errs = append(errs, fmt.Errorf("remove old backup: %w", err))
			continue
		}
		if b.Log != nil {
			b.Log.Info("removed an old backup", "file", filepath.Join(b.Dir, name), "keep", b.Keep)
		}
	}
	return errors.Join(errs...)
}
