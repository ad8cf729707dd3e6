package main

import (
	"context"
	"encoding/json"
	"errors"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentrunner/agentrunner"
	"github.com/agentrunner/agentrunner/internal/syncbuf"
	"github.com/agentrunner/agentrunner/sqlite"
)

// servedCLI is serve run in this process on an example workspace.
type servedCLI struct {
	t      *testing.T
	dir    string
	base   string
	stderr *syncbuf.Buffer
	done   chan int
}

// startServeCLI starts serve on the workspace dir with a schedule of 24h
// (one cycle at start), and returns once the API answers; serve is
// stopped at the end of the test.
func startServeCLI(t *testing.T, dir string) *servedCLI {
	t.Helper()
	addr := cliFreeAddr(t)
	t.Setenv("AGENTRUNNER_SERVER_LISTEN", addr)
	t.Setenv("AGENTRUNNER_SCHEDULE_EVERY", "24h")
	ctx, cancel := context.WithCancel(t.Context())
	s := &servedCLI{t: t, dir: dir, base: "http://" + addr, stderr: &syncbuf.Buffer{}, done: make(chan int, 1)}
	go func() { s.done <- run(ctx, []string{"serve", "-c", cliConfigPath(dir)}, &syncbuf.Buffer{}, s.stderr) }()
	t.Cleanup(func() {
		cancel()
		select {
		case <-s.done:
		case <-time.After(10 * time.Second):
			t.Error("serve did not return within 10s of its context ending")
		}
	})
	s.await("the API to answer", func() bool {
		status, _, err := cliGet(ctx, s.base+"/health/live")
		return err == nil && status == http.StatusOK
	})
	return s
}

// await polls ok every 20ms for up to 15s, failing the test with what
// if it never holds or serve exits.
func (s *servedCLI) await(what string, ok func() bool) {
	s.t.Helper()
	for deadline := time.Now().Add(15 * time.Second); !ok(); time.Sleep(20 * time.Millisecond) {
		select {
		case code := <-s.done:
			s.t.Fatalf("serve exited %d while waiting for %s; stderr:\n%s", code, what, s.stderr.String())
		default:
		}
		if time.Now().After(deadline) {
			s.t.Fatalf("no %s within 15s; stderr:\n%s", what, s.stderr.String())
		}
	}
}

// getJSON decodes the answer of GET path into v, failing on any status
// but 200.
func (s *servedCLI) getJSON(path string, v any) {
	s.t.Helper()
	status, body, err := cliGet(s.t.Context(), s.base+path)
	if err != nil || status != http.StatusOK {
		s.t.Fatalf("GET %s: %d %v %s", path, status, err, body)
	}
	if err := json.Unmarshal(body, v); err != nil {
		s.t.Fatalf("GET %s: %v\n%s", path, err, body)
	}
}

// TestServeMailboxSizeFollowsAReload: after a reload that changes
// mailbox.max_messages, the API shows the new size, as the engine keeps
// it, not the one serve started with.
func TestServeMailboxSizeFollowsAReload(t *testing.T) {
	cliMockExec(t)
	dir := cliExample(t)
	s := startServeCLI(t, dir)
	var box struct {
		MaxMessages int `json:"max_messages"`
	}
	s.getJSON("/api/mailboxes/plan", &box)
	if box.MaxMessages != 5 {
		t.Fatalf("max_messages %d before the reload, want 5", box.MaxMessages)
	}
	path := cliConfigPath(dir)
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	edited := strings.Replace(string(data), "mailbox:\n  max_messages: 5\n", "mailbox:\n  max_messages: 9\n", 1)
	if edited == string(data) {
		t.Fatal("the example has no mailbox.max_messages: 5 to edit")
	}
	if err := os.WriteFile(path, []byte(edited), 0o644); err != nil {
		t.Fatal(err)
	}
	resp, err := http.Post(s.base+"/api/admin/reload", "application/json", nil)
	if err != nil || resp.StatusCode != http.StatusAccepted {
		t.Fatalf("POST /api/admin/reload: %v %v", resp, err)
	}
	resp.Body.Close()
	s.await("the reload applied", func() bool {
		_, body, _ := cliGet(t.Context(), s.base+"/api/audit?limit=1")
		return strings.Contains(string(body), `"result": "reloaded `)
	})
	s.getJSON("/api/mailboxes/plan", &box)
	if box.MaxMessages != 9 {
		t.Errorf("max_messages %d after the reload, want 9", box.MaxMessages)
	}
}

// TestArchiveCommandThenServeReadsTheArchivedCycle: two cycles ended two
// hours ago; with archive.keep 1, `archive --dry-run` names the older
// one and changes nothing, `archive` archives it and removes its
// directory; serve then answers its artifacts and `agentrunner cycle`
// lists them, and `archive` refuses while serve holds the workspace.
func TestArchiveCommandThenServeReadsTheArchivedCycle(t *testing.T) {
	cliMockExec(t)
	dir := cliExample(t)
	cfg := cliConfigPath(dir)
	for range 2 {
		if code, out, stderr := cliRun(t, "run", "--once", "-c", cfg); code != exitOK {
			t.Fatalf("run --once: exit %d\n%s\n%s", code, out, stderr)
		}
	}
	first, plan := endCyclesEarlier(t, filepath.Join(dir, "artifacts", "state.db"), 2*time.Hour)
	cycleDir := filepath.Join(dir, "artifacts", "cycles", first)
	t.Setenv("AGENTRUNNER_ARCHIVE_KEEP", "1")

	code, out, stderr := cliRun(t, "archive", "--dry-run", "-c", cfg)
	if want := "would archive " + first + "\n1 run(s) would archive, 0 archive(s) would delete\n"; code != exitOK || out != want {
		t.Fatalf("archive --dry-run: exit %d\n%s\n%s\nwant:\n%s", code, out, stderr, want)
	}
	if _, err := os.Stat(cycleDir); err != nil {
		t.Fatalf("a dry run removed the cycle's directory: %v", err)
	}
	code, out, stderr = cliRun(t, "archive", "-c", cfg)
	if want := "archived " + first + "\n1 run(s) archived, 0 archive(s) deleted\n"; code != exitOK || out != want {
		t.Fatalf("archive: exit %d\n%s\n%s\nwant:\n%s", code, out, stderr, want)
	}
	if _, err := os.Stat(cycleDir); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the archived cycle's directory is still there: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "artifacts", "cycles", "history", "crypton", first+".tar.gz")); err != nil {
		t.Errorf("no archive: %v", err)
	}

	s := startServeCLI(t, dir)
	status, body, err := cliGet(t.Context(), s.base+"/api/cycles/"+first+"/artifacts/plan.md")
	if err != nil || status != http.StatusOK || string(body) != plan {
		t.Errorf("GET the archived cycle's plan.md: %d %v\n%s", status, err, body)
	}
	code, out, stderr = cliRun(t, "cycle", first, "--server", s.base)
	if code != exitOK || !strings.Contains(out, "plan.md") || !strings.Contains(out, "evaluation.md") {
		t.Errorf("agentrunner cycle %s: exit %d\n%s\n%s", first, code, out, stderr)
	}
	code, _, stderr = cliRun(t, "archive", "-c", cfg)
	if code != exitFailure || !strings.Contains(stderr, "serve archives every archive.every on its own") {
		t.Errorf("archive while serve runs: exit %d\n%s", code, stderr)
	}
}

// endCyclesEarlier moves the start and end of every cycle of the store at
// db back by d, so they are past the archive's settling time; it returns
// the oldest cycle and its stored plan.md.
func endCyclesEarlier(t *testing.T, db string, d time.Duration) (oldest, plan string) {
	t.Helper()
	store, err := sqlite.Open(t.Context(), db)
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	runs, err := store.Runs(t.Context(), agentrunner.RunFilter{})
	if err != nil || len(runs) != 2 {
		t.Fatalf("runs: %v %d", err, len(runs))
	}
	for _, r := range runs {
		r.StartedAt, r.EndedAt = r.StartedAt.Add(-d), r.EndedAt.Add(-d)
	}
	if err := store.Apply(t.Context(), &agentrunner.Change{Runs: runs}); err != nil {
		t.Fatal(err)
	}
	oldest = runs[len(runs)-1].ID
	files, err := store.Files(t.Context(), agentrunner.FileFilter{RunID: oldest, Kind: agentrunner.FileArtifact, Name: "plan.md", Latest: true})
	if err != nil || len(files) != 1 {
		t.Fatalf("the stored plan.md of %s: %v", oldest, err)
	}
	return oldest, string(files[0].Data)
}
