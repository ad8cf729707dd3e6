package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/agentrunner/agentrunner"
	"github.com/agentrunner/agentrunner/artifact"
	"github.com/agentrunner/agentrunner/internal/dbtest"
)

// growthSteps, growthArtifact and growthPrompt are the shape of a
// simulated cycle: 10 steps, each storing an artifact of the engine
// benchmark's size and a prompt of a typical agent's size.
const (
	growthSteps    = 10
	growthArtifact = 400
	growthPrompt   = 2 << 10
	// growthKeep is the retention of the pruning cases, in cycles (an
	// hour apart); the prune runs every 10 cycles.
	growthKeep = 100
)

// BenchmarkDatabaseGrowth commits, through the store, what a cycle of 10
// agent steps commits with its step outcomes in the store (one op is a
// cycle): the run, and per step one change with the attempt, the step run
// closed and the next one opened, 5 events, the stored artifact (400
// bytes) and the stored prompt (2 KiB). It reports the state database's
// size after b.N cycles (main file and WAL, checkpointed) per cycle and
// per 1,000 cycles, its free list, the size of a compacted copy, and the
// growth per cycle over the second half of the run: what the file keeps
// growing by once the retention window is full.
//
// The cases: without stored files (what steps commit without them), with
// them, with them and a retention of 100 cycles (events, prompts and
// validation reports pruned every 10 cycles), the same on a database
// created with auto_vacuum=INCREMENTAL and given an incremental_vacuum
// after each prune, a backlog (no retention, then one prune of all but
// the last 100 cycles at the end, as when a retention is first set on a
// long history), with and without incremental vacuum, and the stored
// files on pages of 8 KiB rather than SQLite's default of 4 KiB.
//
//	TMPDIR=/dev/shm go test -run '^$' -bench DatabaseGrowth -benchtime 1000x ./sqlite/
func BenchmarkDatabaseGrowth(b *testing.B) {
	const incremental = "auto_vacuum(INCREMENTAL)"
	for _, tt := range []struct {
		name  string
		files bool
		// keep is the retention in cycles; 0: none.
		keep int
		// backlog: prune once, after the last cycle.
		backlog bool
		// create are pragmas set before the first table.
		create []string
	}{
		{name: "without-stored-files"},
		{name: "stored-files", files: true},
		{name: "stored-files/retention-100-cycles", files: true, keep: growthKeep},
		{name: "stored-files/retention-100-cycles/incremental-vacuum", files: true, keep: growthKeep, create: []string{incremental}},
		{name: "stored-files/backlog-pruned-once", files: true, keep: growthKeep, backlog: true},
		{name: "stored-files/backlog-pruned-once/incremental-vacuum", files: true, keep: growthKeep, backlog: true, create: []string{incremental}},
		{name: "stored-files/page-size-8192", files: true, create: []string{"page_size(8192)"}},
	} {
		b.Run(tt.name, func(b *testing.B) {
			ctx := context.Background()
			path := filepath.Join(b.TempDir(), "state.db")
			createWith(b, path, tt.create...)
			vacuum := slices.Contains(tt.create, incremental)
			s, err := Open(ctx, path)
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			var half dbtest.Size
			for i := 0; i < b.N; i++ {
				now := growthStart.Add(time.Duration(i) * time.Hour)
				growthCycle(b, s, i, now, tt.files)
				if tt.keep > 0 && (i%10 == 9 && !tt.backlog || i == b.N-1 && tt.backlog) {
					growthPrune(b, s, now.Add(-time.Duration(tt.keep)*time.Hour), vacuum)
				}
				if i+1 == b.N/2 {
					b.StopTimer()
					half = dbtest.Measure(b, path)
					b.StartTimer()
				}
			}
			b.StopTimer()
			end := dbtest.Measure(b, path)
			n := float64(b.N)
			b.ReportMetric(float64(end.Bytes)/n, "db-B/cycle")
			b.ReportMetric(float64(end.Bytes)/n*1000/(1<<20), "db-MiB/1000cycles")
			b.ReportMetric(float64(end.Vacuumed)/n, "vacuumed-B/cycle")
			b.ReportMetric(float64(end.FreePages)/float64(max(end.Pages, 1))*100, "free-%")
			if h := b.N / 2; h > 0 && !tt.backlog {
				b.ReportMetric(float64(end.Bytes-half.Bytes)/float64(b.N-h), "growth-B/cycle")
			}
		})
	}
}

var growthStart = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// createWith creates an empty database at path with the pragmas, which
// hold only if set before its first table (auto_vacuum, page_size).
func createWith(b *testing.B, path string, pragmas ...string) {
	if len(pragmas) == 0 {
		return
	}
	db, err := sql.Open("sqlite", dsn(path))
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	db.SetMaxOpenConns(1)
	for _, p := range pragmas {
		if _, err := db.Exec("PRAGMA " + p); err != nil {
			b.Fatal(err)
		}
	}
	if _, err := db.Exec("CREATE TABLE first (x); DROP TABLE first; PRAGMA journal_mode(WAL)"); err != nil {
		b.Fatal(err)
	}
	var vacuum, size int
	if err := db.QueryRow("PRAGMA auto_vacuum").Scan(&vacuum); err != nil {
		b.Fatal(err)
	}
	if err := db.QueryRow("PRAGMA page_size").Scan(&size); err != nil {
		b.Fatal(err)
	}
	got := fmt.Sprintf("auto_vacuum(%d) page_size(%d)", vacuum, size)
	for _, p := range pragmas {
		want := strings.NewReplacer("INCREMENTAL", "2").Replace(p)
		if !strings.Contains(got, want) {
			b.Fatalf("the new database has %s, want %s", got, p)
		}
	}
}

// growthCycle commits cycle i, started at now.
func growthCycle(b testing.TB, s *Store, i int, now time.Time, files bool) {
	ctx := context.Background()
	run := &agentrunner.Run{ID: fmt.Sprintf("growth-%06d", i+1), Pipeline: "growth", Status: agentrunner.RunRunning,
		Dir: "/srv/agentrunner/artifacts/runs/growth-" + fmt.Sprint(i+1), StartedAt: now}
	open := &agentrunner.StepRun{RunID: run.ID, Step: "s0", Visit: 1, Status: agentrunner.StepRunOpen, OpenedAt: now}
	start := &agentrunner.Change{Runs: []*agentrunner.Run{run}, StepRuns: []*agentrunner.StepRun{open},
		Events: []*agentrunner.Event{growthEvent(run, "", agentrunner.EventCycleStarted, now, map[string]any{"pipeline": "growth", "dir": run.Dir})}}
	if err := s.Apply(ctx, start); err != nil {
		b.Fatal(err)
	}
	for n := 0; n < growthSteps; n++ {
		ch := growthStep(run, open, n, now.Add(time.Duration(n)*time.Minute), files)
		if err := s.Apply(ctx, ch); err != nil {
			b.Fatal(err)
		}
		if len(ch.StepRuns) > 1 {
			open = ch.StepRuns[1]
		}
	}
}

// growthStep is the change that ends step n of run: its attempt, its
// step run closed and the next opened (the run completed after the last),
// 5 events and, with files, the stored artifact and prompt.
func growthStep(run *agentrunner.Run, sr *agentrunner.StepRun, n int, now time.Time, files bool) *agentrunner.Change {
	st := sr.Step
	out := run.Dir + "/out" + fmt.Sprint(n) + ".md"
	att := &agentrunner.Attempt{CycleID: run.ID, Step: st, Number: 1, Visit: 1, Agent: "a" + fmt.Sprint(n), Status: agentrunner.AttemptSucceeded,
		StartedAt: now, EndedAt: now.Add(50 * time.Second), OutputPath: out, Dir: "/srv/agentrunner/artifacts/attempts/" + run.ID + "/" + st + "-1",
		Usage: agentrunner.Usage{InputTokens: 5200, OutputTokens: 900}}
	done := *sr
	done.Status, done.Output, done.EndedAt = agentrunner.StepRunSucceeded, out, att.EndedAt
	ch := &agentrunner.Change{Attempts: []*agentrunner.Attempt{att}, StepRuns: []*agentrunner.StepRun{&done}, Events: []*agentrunner.Event{
		growthEvent(run, st, agentrunner.EventAttemptStarted, now, map[string]any{"attempt": 1, "visit": 1, "from": sr.From, "pipeline": "growth"}),
		growthEvent(run, st, agentrunner.EventArtifactAccepted, att.EndedAt, map[string]any{"artifact": "out.md", "path": out, "bytes": growthArtifact,
			"sha256": "9f2c4e7a1b3d5f60718293a4b5c6d7e8f90a1b2c3d4e5f60718293a4b5c6d7e8"}),
		growthEvent(run, st, agentrunner.EventAttemptSucceeded, att.EndedAt, map[string]any{"attempt": 1, "visit": 1, "duration_ms": 50000, "pipeline": "growth"}),
		growthEvent(run, st, "mailbox.delivered", att.EndedAt, map[string]any{"to": "a" + fmt.Sprint((n+1)%growthSteps), "kind": "forward"}),
	}}
	next := "end"
	if n+1 < growthSteps {
		next = fmt.Sprintf("s%d", n+1)
		ch.StepRuns = append(ch.StepRuns, &agentrunner.StepRun{RunID: run.ID, Step: next, Visit: 1, Status: agentrunner.StepRunOpen, From: sr.Key(), OpenedAt: att.EndedAt})
	} else {
		ended := *run
		ended.Status, ended.EndedAt = agentrunner.RunCompleted, att.EndedAt
		ch.Runs = []*agentrunner.Run{&ended}
	}
	ch.Events = append(ch.Events, growthEvent(run, "", agentrunner.EventTransition, att.EndedAt, map[string]any{"from": st, "to": next, "pipeline": "growth"}))
	if files {
		ch.Files = []*agentrunner.StoredFile{
			growthFile(run, st, agentrunner.FileArtifact, "out.md", growthArtifact, att.EndedAt),
			growthFile(run, st, agentrunner.FilePrompt, "prompt.md", growthPrompt, att.EndedAt),
		}
	}
	return ch
}

func growthEvent(run *agentrunner.Run, step, typ string, at time.Time, details map[string]any) *agentrunner.Event {
	return &agentrunner.Event{Timestamp: at, Type: typ, Step: step, CycleID: run.ID, Level: agentrunner.LevelInfo, Details: details}
}

// growthFile is a stored file of size bytes of text, different in each
// run and step, as a prompt or an artifact is.
func growthFile(run *agentrunner.Run, step string, kind agentrunner.FileKind, name string, size int, at time.Time) *agentrunner.StoredFile {
	line := fmt.Sprintf("%s %s %s: the agent's text, line after line.\n", run.ID, step, kind)
	data := []byte(strings.Repeat(line, size/len(line)+1)[:size])
	return &agentrunner.StoredFile{RunID: run.ID, Step: step, Visit: 1, Attempt: 1, Kind: kind, Name: name, Data: data,
		SHA256: artifact.Hash(data), CreatedAt: at}
}

// growthPrune prunes what events.retention prunes; with vacuum, it then
// gives the free pages back to the file system.
func growthPrune(b testing.TB, s *Store, before time.Time, vacuum bool) {
	ctx := context.Background()
	if _, err := s.PruneEvents(ctx, before); err != nil {
		b.Fatal(err)
	}
	if _, err := s.PruneFiles(ctx, before, agentrunner.FilePrompt, agentrunner.FileValidation); err != nil {
		b.Fatal(err)
	}
	if vacuum {
		s.w.mu.Lock()
		defer s.w.mu.Unlock()
		if _, err := s.w.conn.ExecContext(ctx, "PRAGMA incremental_vacuum"); err != nil {
			b.Fatal(err)
		}
	}
}
