package sqlite

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentrunner/agentrunner"
	"github.com/agentrunner/agentrunner/internal/clocktest"
	"github.com/agentrunner/agentrunner/internal/dbtest"
	"github.com/google/go-cmp/cmp"
)

// TestBackupWhileAnotherConnectionWrites: each backup taken while the
// store commits is a sound database holding every transaction committed
// before the backup began, and whole transactions only.
func TestBackupWhileAnotherConnectionWrites(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s, err := Open(ctx, filepath.Join(dir, "state.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	add(t, s, 200)

	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 200; ; i += 2 {
			select {
			case <-stop:
				return
			default:
			}
			if err := s.Apply(ctx, pair(i)); err != nil {
				t.Error(err)
				return
			}
		}
	}()
	for i := range 5 {
		before := countEvents(t, filepath.Join(dir, "state.db"))
		dst := filepath.Join(dir, "backups", BackupName(time.Unix(int64(i), 0)))
		if _, err := Backup(ctx, filepath.Join(dir, "state.db"), dst); err != nil {
			t.Fatalf("backup %d: %v", i, err)
		}
		got := countEvents(t, dst)
		if got < before || got%2 != 0 {
			t.Errorf("backup %d has %d events; want at least the %d committed before it, in whole transactions of two", i, got, before)
		}
		if r, err := Check(ctx, dst); err != nil || !r.Sound() {
			t.Errorf("backup %d is not sound: %v %+v", i, err, r)
		}
	}
	close(stop)
	wg.Wait()
	if entries, _ := os.ReadDir(filepath.Join(dir, "backups")); len(entries) != 5 {
		t.Errorf("the backup directory has %d files, want the 5 backups and no temporary file", len(entries))
	}
}

func TestBackupRefusesToOverwrite(t *testing.T) {
	src := filled(t, 2)
	dst := filepath.Join(t.TempDir(), "b.db")
	os.WriteFile(dst, []byte("older backup"), 0o644)
	if _, err := Backup(context.Background(), src, dst); err == nil || !strings.Contains(err.Error(), "already exists") {
		t.Fatalf("Backup over an existing file: %v", err)
	}
	if got, _ := os.ReadFile(dst); string(got) != "older backup" {
		t.Error("Backup overwrote an existing file")
	}
}

// TestRestoreReplacesADamagedDatabase: the backup comes back, with its
// data; the damaged file is kept aside with its WAL; no stale -shm stays.
func TestRestoreReplacesADamagedDatabase(t *testing.T) {
	ctx := context.Background()
	path := filled(t, 400)
	backup := filepath.Join(t.TempDir(), "backup.db")
	if _, err := Backup(ctx, path, backup); err != nil {
		t.Fatal(err)
	}
	s, err := Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	add(t, s, 100)
	s.Close()
	dbtest.Corrupt(t, path, "events")
	damagedBytes := readFile(t, path)
	os.WriteFile(path+"-wal", []byte("log of the damaged file"), 0o644)
	os.WriteFile(path+"-shm", []byte("stale index"), 0o644)

	now := time.Date(2026, 11, 23, 22, 5, 9, 0, time.UTC)
	aside, err := Restore(ctx, backup, path, now)
	if err != nil {
		t.Fatal(err)
	}
	if want := path + ".damaged-20261123_220509"; aside != want {
		t.Errorf("the damaged file was kept as %s, want %s", aside, want)
	}
	if !bytes.Equal(readFile(t, aside), damagedBytes) || string(readFile(t, aside+"-wal")) != "log of the damaged file" {
		t.Error("the damaged file or its WAL was not kept as it was")
	}
	if _, err := os.Stat(path + "-shm"); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the stale -shm is still there: %v", err)
	}
	s, err = Open(ctx, path)
	if err != nil {
		t.Fatalf("open the restored database: %v", err)
	}
	s.Close()
	if n := countEvents(t, path); n != 400 {
		t.Errorf("the restored database has %d events, want the backup's 400", n)
	}
}

func TestRestoreRefusesABadBackup(t *testing.T) {
	ctx := context.Background()
	damaged := filled(t, 400)
	dbtest.Corrupt(t, damaged, "events")
	empty := filepath.Join(t.TempDir(), "empty.db")
	os.WriteFile(empty, nil, 0o644)
	tests := []struct{ name, backup, want string }{
		{"damaged", damaged, "is damaged"},
		{"missing", filepath.Join(t.TempDir(), "none.db"), "no such file"},
		{"no schema", empty, "it has no agentrunner schema"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filled(t, 2)
			before := readFile(t, path)
			if _, err := Restore(ctx, tt.backup, path, time.Now()); err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Restore: %v, want an error saying %q", err, tt.want)
			}
			if !bytes.Equal(before, readFile(t, path)) {
				t.Error("a refused restore changed the database")
			}
			if entries, _ := os.ReadDir(filepath.Dir(path)); len(entries) != 1 {
				t.Errorf("a refused restore left files: %v", entries)
			}
		})
	}
}

// TestScheduledBackups runs the schedule on a fake clock: a backup at once
// when there is none, then one every Every, the newest Keep kept, and an
// event for each.
func TestScheduledBackups(t *testing.T) {
	src := filled(t, 2)
	dir := filepath.Join(t.TempDir(), "backups")
	os.MkdirAll(dir, 0o755)
	os.WriteFile(filepath.Join(dir, "notes.txt"), []byte("not a backup"), 0o644)
	clock := clocktest.New(time.Date(2026, 11, 23, 0, 0, 0, 0, time.UTC))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var events []string
	b := &Backups{Source: src, Dir: dir, Every: 6 * time.Hour, Keep: 3, Clock: clock,
		OnEvent: func(ev *agentrunner.Event) {
			events = append(events, ev.Type+" "+filepath.Base(ev.Details["file"].(string)))
			if len(events) == 5 {
				cancel()
			}
		}}
	b.Run(ctx)

	want := []string{
		"backup.completed state-20261123_000000.db",
		"backup.completed state-20261123_060000.db",
		"backup.completed state-20261123_120000.db",
		"backup.completed state-20261123_180000.db",
		"backup.completed state-20261124_000000.db",
	}
	if diff := cmp.Diff(want, events); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
	names := []string{"notes.txt", "state-20261123_120000.db", "state-20261123_180000.db", "state-20261124_000000.db"}
	if diff := cmp.Diff(names, dirNames(t, dir)); diff != "" {
		t.Errorf("backup directory (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]time.Duration{6 * time.Hour, 6 * time.Hour, 6 * time.Hour, 6 * time.Hour}, clock.Waits()); diff != "" {
		t.Errorf("waits (-want +got):\n%s", diff)
	}

	// A restart two hours after the last backup waits the four hours left.
	clock.Advance(2 * time.Hour)
	if due := b.Due(); !due.Equal(time.Date(2026, 11, 24, 6, 0, 0, 0, time.UTC)) {
		t.Errorf("after a restart the next backup is due at %v, want 06:00", due)
	}
}

func TestScheduledBackupFailureIsAnEvent(t *testing.T) {
	clock := clocktest.New(time.Date(2026, 11, 23, 0, 0, 0, 0, time.UTC))
	var got *agentrunner.Event
	b := &Backups{Source: filepath.Join(t.TempDir(), "missing.db"), Dir: t.TempDir(), Every: time.Hour, Keep: 1, Clock: clock,
		OnEvent: func(ev *agentrunner.Event) { got = ev }}
	if _, err := b.Take(context.Background()); err == nil {
		t.Fatal("a backup of a missing database succeeded")
	}
	if got == nil || got.Type != agentrunner.EventBackupFailed || got.Level != agentrunner.LevelError || !strings.Contains(got.Details["error"].(string), "no such file") {
		t.Errorf("event of a failed backup: %+v", got)
	}
}

func dirNames(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return names
}
