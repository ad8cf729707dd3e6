package main

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/agentrunner/agentrunner"
	"github.com/agentrunner/agentrunner/internal/dbtest"
	"github.com/agentrunner/agentrunner/internal/syncbuf"
	"github.com/agentrunner/agentrunner/workspace"
	"github.com/google/go-cmp/cmp"
)

// cliBackupFile is the file db backup says it wrote.
var cliBackupFile = regexp.MustCompile(`(?m)^backup written: (\S+) \(\d+ bytes\)$`)

// TestADamagedStoreIsRefusedAndABackupRestoresIt: a cycle, a backup, a
// second cycle, then garbage in the pages of the events: run --once refuses
// to start and runs nothing; db restore of the backup makes run --once work
// again on the backup's data, the second cycle being lost with the
// damaged file, which is kept aside.
func TestADamagedStoreIsRefusedAndABackupRestoresIt(t *testing.T) {
	es := cliMockExec(t)
	dir := cliExample(t)
	cfg := cliConfigPath(dir)
	db := filepath.Join(dir, "artifacts", "state.db")

	if code, _, stderr := cliRun(t, "run", "--once", "-c", cfg); code != exitOK {
		t.Fatalf("first cycle: exit %d\n%s", code, stderr)
	}
	first := cliStatus(t, cfg).LastCycle.ID
	code, stdout, stderr := cliRun(t, "db", "backup", "-c", cfg)
	m := cliBackupFile.FindStringSubmatch(stdout)
	if code != exitOK || m == nil {
		t.Fatalf("db backup: exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	backup := m[1]
	if filepath.Dir(backup) != filepath.Join(dir, "artifacts", "backups") {
		t.Errorf("the default backup %s is not in artifacts/backups", backup)
	}
	if code, _, stderr := cliRun(t, "run", "--once", "-c", cfg); code != exitOK {
		t.Fatalf("second cycle: exit %d\n%s", code, stderr)
	}
	second := cliStatus(t, cfg).LastCycle.ID

	dbtest.Corrupt(t, db, "events")
	damaged, err := os.ReadFile(db)
	if err != nil {
		t.Fatal(err)
	}
	cycles, submitted := len(cliCycleDirs(t, dir)), len(es.Strategies())
	code, stdout, stderr = cliRun(t, "run", "--once", "-c", cfg)
	if code != exitFailure {
		t.Errorf("run --once on a damaged store: exit %d, want %d", code, exitFailure)
	}
	for _, want := range []string{
		"the state database " + db + " is damaged: ",
		"page ", // the first lines of quick_check
		"nothing was run",
		"agentrunner db restore FILE -c " + cfg,
		"agentrunner db check -c " + cfg,
	} {
		if !strings.Contains(stderr, want) {
			t.Errorf("the refusal should say %q:\n%s", want, stderr)
		}
	}
	if stdout != "" || len(cliCycleDirs(t, dir)) != cycles || len(es.Strategies()) != submitted {
		t.Errorf("the refused run ran something: stdout %q, %d cycle dirs (had %d), %d strategies (had %d)",
			stdout, len(cliCycleDirs(t, dir)), cycles, len(es.Strategies()), submitted)
	}
	if now, _ := os.ReadFile(db); string(now) != string(damaged) {
		t.Error("the refused run wrote to the damaged database")
	}
	if code, _, stderr := cliRun(t, "status", "-c", cfg); code != exitFailure || !strings.Contains(stderr, "is damaged") {
		t.Errorf("status on a damaged store: exit %d\n%s", code, stderr)
	}

	code, stdout, stderr = cliRun(t, "db", "restore", backup, "-c", cfg)
	if code != exitOK {
		t.Fatalf("db restore: exit %d\n%s", code, stderr)
	}
	asides, _ := filepath.Glob(db + ".damaged-*[0-9]")
	if len(asides) != 1 || !strings.Contains(stdout, "kept as "+asides[0]) {
		t.Fatalf("the damaged file should be kept aside and named: %v\n%s", asides, stdout)
	}
	if kept, _ := os.ReadFile(asides[0]); string(kept) != string(damaged) {
		t.Error("the file kept aside is not the damaged database")
	}
	if st := cliStatus(t, cfg); st.LastCycle == nil || st.LastCycle.ID != first {
		t.Fatalf("after the restore the last cycle is %+v, want the backup's %s", st.LastCycle, first)
	}
	if code, _, stderr := cliRun(t, "run", "--once", "-c", cfg); code != exitOK {
		t.Fatalf("run --once after the restore: exit %d\n%s", code, stderr)
	}
	st := cliStatus(t, cfg)
	if st.LastCycle == nil || st.LastCycle.Status != agentrunner.CycleCompleted || st.LastCycle.ID == first || st.LastCycle.ID == second {
		t.Errorf("after the restore run --once should complete a new cycle, got %+v", st.LastCycle)
	}
	if code, stdout, _ := cliRun(t, "db", "check", "-c", cfg); code != exitOK || !strings.Contains(stdout, "\nsound\n") {
		t.Errorf("db check after the restore: exit %d\n%s", code, stdout)
	}
}

func TestDBCheckExitCodes(t *testing.T) {
	cliMockExec(t)
	dir := cliExample(t)
	cfg := cliConfigPath(dir)
	db := filepath.Join(dir, "artifacts", "state.db")

	if code, _, stderr := cliRun(t, "db", "check", "-c", cfg); code != exitFailure || !strings.Contains(stderr, "no such file") {
		t.Errorf("db check without a database: exit %d\n%s", code, stderr)
	}
	if code, _, stderr := cliRun(t, "run", "--once", "-c", cfg); code != exitOK {
		t.Fatalf("run --once: exit %d\n%s", code, stderr)
	}
	code, stdout, stderr := cliRun(t, "db", "check", "-c", cfg)
	if code != exitOK || !strings.Contains(stdout, "integrity:       ok\nforeign keys:    ok\nsound\n") {
		t.Errorf("db check of a sound database: exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	dbtest.Corrupt(t, db, "events")
	code, stdout, stderr = cliRun(t, "db", "check", "-c", cfg)
	if code != exitFailure || strings.Contains(stdout, "sound") || !strings.Contains(stdout, "page ") {
		t.Errorf("db check of a damaged database: exit %d\nstdout:\n%s", code, stdout)
	}
	if want := "agentrunner: the state database " + db + " failed its check: restore a backup with: agentrunner db restore FILE -c " + cfg + "\n"; stderr != want {
		t.Errorf("stderr of db check (-want +got):\n%s", cmp.Diff(want, stderr))
	}
	if code, _, _ := cliRun(t, "db", "check", "extra", "-c", cfg); code != exitUsage {
		t.Errorf("db check with an argument: exit %d, want %d", code, exitUsage)
	}
}

func TestDBRestoreRefusesWhileARunnerHoldsTheWorkspace(t *testing.T) {
	cliMockExec(t)
	dir := cliExample(t)
	cfg := cliConfigPath(dir)
	if code, _, stderr := cliRun(t, "run", "--once", "-c", cfg); code != exitOK {
		t.Fatalf("run --once: exit %d\n%s", code, stderr)
	}
	backup := filepath.Join(t.TempDir(), "b.db")
	if code, _, stderr := cliRun(t, "db", "backup", backup, "-c", cfg); code != exitOK {
		t.Fatalf("db backup: exit %d\n%s", code, stderr)
	}
	if code, _, stderr := cliRun(t, "db", "backup", backup, "-c", cfg); code != exitFailure || !strings.Contains(stderr, "already exists") {
		t.Errorf("db backup over an existing file: exit %d\n%s", code, stderr)
	}
	lock, err := workspace.Layout{Root: filepath.Join(dir, "artifacts")}.Acquire()
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Release()
	code, _, stderr := cliRun(t, "db", "restore", backup, "-c", cfg)
	if code != exitFailure || !strings.Contains(stderr, "another agentrunner (pid") {
		t.Errorf("db restore while a runner holds the workspace: exit %d\n%s", code, stderr)
	}
	if asides, _ := filepath.Glob(filepath.Join(dir, "artifacts", "state.db.damaged-*")); len(asides) != 0 {
		t.Errorf("a refused restore touched the database: %v", asides)
	}
}

// TestServeTakesScheduledBackups: serve with state.backup.every takes its
// first backup at start (there is none yet) and records the event.
func TestServeTakesScheduledBackups(t *testing.T) {
	cliMockExec(t)
	addr := cliFreeAddr(t)
	t.Setenv("AGENTRUNNER_SERVER_LISTEN", addr)
	t.Setenv("AGENTRUNNER_SCHEDULE_EVERY", "24h")
	t.Setenv("AGENTRUNNER_STATE_BACKUP_EVERY", "24h")
	dir := cliExample(t)

	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	var stdout, stderr syncbuf.Buffer
	done := make(chan int, 1)
	go func() { done <- run(ctx, []string{"serve", "-c", cliConfigPath(dir)}, &stdout, &stderr) }()

	backups := filepath.Join(dir, "artifacts", "backups")
	for deadline := time.Now().Add(15 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("serve took no backup in time; stderr:\n%s", stderr.String())
		}
		names, _ := filepath.Glob(filepath.Join(backups, "state-*.db"))
		if len(names) == 1 && strings.Contains(stderr.String(), `"event_type":"backup.completed"`) {
			break
		}
	}
	// The backup is counted where monitoring looks.
	status, body, err := cliGet(ctx, "http://"+addr+"/metrics")
	if err != nil || status != 200 || !regexp.MustCompile(`(?m)^agentrunner_backups_total\{outcome="completed"[^}]*\} 1$`).Match(body) ||
		!regexp.MustCompile(`(?m)^agentrunner_last_backup_timestamp_seconds(\{[^}]*\})? [1-9]`).Match(body) {
		t.Errorf("GET /metrics: %d %v; want the backup counted and its time:\n%s", status, err, body)
	}
	cancel()
	if code := <-done; code != exitOK {
		t.Errorf("serve exited %d; stderr:\n%s", code, stderr.String())
	}
}
