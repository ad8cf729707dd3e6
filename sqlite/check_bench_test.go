package sqlite

import (
	"context"
	"database/sql"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/agentrunner/agentrunner/internal/cputime"
)

// BenchmarkOpenCheck measures what the check before Open costs on a large
// history: quick_check, schema version and application id of a database
// of AGENTRUNNER_BENCH_CYCLES cycles (default 1,000), each with the 6
// attempts and 41 events of a cycle of the example pipeline. Building the
// database is not timed. It reports the size and, once, the full
// integrity_check of db check (wall time).
//
//	AGENTRUNNER_BENCH_CYCLES=100000 go test -run '^$' -bench OpenCheck -benchtime 3x ./sqlite/
func BenchmarkOpenCheck(b *testing.B) {
	cycles := 1000
	if v, err := strconv.Atoi(os.Getenv("AGENTRUNNER_BENCH_CYCLES")); err == nil {
		cycles = v
	}
	ctx := context.Background()
	path := filepath.Join(b.TempDir(), "state.db")
	s, err := Open(ctx, path)
	if err != nil {
		b.Fatal(err)
	}
	s.Close()
	history(b, path, cycles)
	info, _ := os.Stat(path)
	start := time.Now()
	if r, err := Check(ctx, path); err != nil || !r.Sound() {
		b.Fatalf("integrity_check: %v %+v", err, r)
	}
	full := time.Since(start)
	user0, sys0, cpuOK := cputime.Self()
	n := 0
	for b.Loop() {
		if err := precheck(ctx, path, depthPages); err != nil {
			b.Fatal(err)
		}
		n++
	}
	// CPU time, unlike wall time, does not depend on what else the machine runs.
	if user1, sys1, _ := cputime.Self(); cpuOK {
		b.ReportMetric(float64(user1-user0+sys1-sys0)/float64(n)/1e9, "cpu-s/op")
	}
	b.ReportMetric(float64(info.Size())/(1<<20), "MiB")
	b.ReportMetric(full.Seconds(), "integrity-check-s")
}

// history bulk-inserts cycles with their attempts and events.
func history(b *testing.B, path string, cycles int) {
	b.Helper()
	db, err := sql.Open("sqlite", dsn(path, "journal_mode(WAL)", "synchronous(OFF)"))
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	stmts := []string{
		`WITH RECURSIVE c(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM c WHERE n < ?)
		 INSERT INTO runs (id, pipeline, status, dir, started_at, ended_at)
		 SELECT printf('c%08d', n), 'crypton', 'completed', printf('/srv/loop/artifacts/cycles/c%08d', n),
		        strftime('%Y-%m-%dT%H:%M:%fZ', 1700000000 + n * 21600, 'unixepoch'), strftime('%Y-%m-%dT%H:%M:%fZ', 1700000000 + n * 21600 + 900, 'unixepoch') FROM c`,
		`WITH RECURSIVE c(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM c WHERE n < ?), s(k, step) AS (VALUES
		 (1, 'plan'), (2, 'research'), (3, 'analyze'), (4, 'synthesize'), (5, 'execute'), (6, 'evaluate'))
		 INSERT INTO attempts (cycle_id, step, number, agent, status, started_at, ended_at, output_path, dir, input_tokens, output_tokens)
		 SELECT printf('c%08d', n), step, 1, step || '_agent', 'succeeded', '2026-11-22T14:00:00.000000000Z', '2026-11-22T14:02:00.000000000Z',
		        printf('/srv/loop/artifacts/cycles/c%08d/%s.md', n, step), printf('/srv/loop/artifacts/attempts/c%08d/%s-1', n, step), 5200, 900 FROM c, s`,
		`WITH RECURSIVE c(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM c WHERE n < ?), e(k) AS (SELECT 1 UNION ALL SELECT k + 1 FROM e WHERE k < 41)
		 INSERT INTO events (timestamp, event_type, agent, step, cycle_id, level, details)
		 SELECT strftime('%Y-%m-%dT%H:%M:%fZ', 1700000000 + n * 21600 + k * 20, 'unixepoch'),
		        CASE k % 4 WHEN 0 THEN 'tool.call' WHEN 1 THEN 'attempt.started' WHEN 2 THEN 'state.transition' ELSE 'artifact.accepted' END,
		        'research_agent', 'research', printf('c%08d', n), CASE WHEN k = 41 THEN 'warn' ELSE 'info' END,
		        json_object('attempt', 1, 'duration_ms', 1200 + k, 'path', printf('/srv/loop/artifacts/cycles/c%08d/research.md', n),
		                    'sha256', '9f2c4e7a1b3d5f60718293a4b5c6d7e8f90a1b2c3d4e5f60718293a4b5c6d7e8')
		 FROM c, e`,
	}
	for _, q := range stmts {
		if _, err := db.Exec(q, cycles); err != nil {
			b.Fatal(err)
		}
	}
	if _, err := db.Exec("PRAGMA wal_checkpoint(TRUNCATE)"); err != nil {
		b.Fatal(err)
	}
}
