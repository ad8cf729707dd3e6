package sqlite

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentrunner/agentrunner"
	"github.com/agentrunner/agentrunner/internal/dbtest"
	"github.com/google/go-cmp/cmp"
)

// filled returns the path of a closed database with n events, each commit
// adding two of them, enough to span many pages.
func filled(t *testing.T, n int) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "state.db")
	s, err := Open(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	add(t, s, n)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	return path
}

// add commits n events, two per transaction.
func add(t testing.TB, s *Store, n int) {
	t.Helper()
	for i := 0; i < n; i += 2 {
		if err := s.Apply(context.Background(), pair(i)); err != nil {
			t.Error(err)
			return
		}
	}
}

// pair is one change of two events.
func pair(i int) *agentrunner.Change {
	ev := func(j int) *agentrunner.Event {
		return &agentrunner.Event{Timestamp: time.Unix(int64(j), 0), Type: "test.pair", Level: agentrunner.LevelInfo,
			Details: map[string]any{"n": j, "text": strings.Repeat("event payload ", 8)}}
	}
	return &agentrunner.Change{Events: []*agentrunner.Event{ev(i), ev(i + 1)}}
}

func countEvents(t *testing.T, path string) int {
	t.Helper()
	db, err := sql.Open("sqlite", dsn(path)+"&mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var n, maxID int
	if err := db.QueryRow("SELECT count(*), coalesce(max(id), 0) FROM events").Scan(&n, &maxID); err != nil {
		t.Fatalf("count events of %s: %v", path, err)
	}
	if n != maxID {
		t.Errorf("%s has %d events but the last id is %d: a transaction is missing in the middle", path, n, maxID)
	}
	return n
}

func readFile(t *testing.T, path string) []byte {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func TestOpenRefusesADamagedDatabaseAndWritesNothing(t *testing.T) {
	path := filled(t, 400)
	dbtest.Corrupt(t, path, "events")
	before := readFile(t, path)

	_, err := Open(context.Background(), path)
	var d Damage
	if !errors.As(err, &d) {
		t.Fatalf("Open of a damaged database: %v, want a Damage", err)
	}
	if len(d) == 0 || len(d) > quickCheckLines {
		t.Errorf("the refusal quotes %d lines of quick_check, want 1..%d: %q", len(d), quickCheckLines, d)
	}
	for _, want := range []string{"the state database " + path + " is damaged", "page"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the refusal should say %q: %v", want, err)
		}
	}
	if !bytes.Equal(before, readFile(t, path)) {
		t.Error("Open wrote to the damaged database")
	}
	if _, err := os.Stat(path + "-wal"); err == nil && len(readFile(t, path+"-wal")) > 0 {
		t.Error("Open wrote to the damaged database's WAL")
	}
}

// TestOpenCheckedLeavesThePagesToTheRunner: the MCP server of an attempt
// opens the database the runner checked at its start, without reading
// every page again; the damage Open refuses is not looked for.
func TestOpenCheckedLeavesThePagesToTheRunner(t *testing.T) {
	path := filled(t, 400)
	dbtest.Corrupt(t, path, "events")
	s, err := OpenChecked(context.Background(), path)
	if err != nil {
		t.Fatalf("OpenChecked read the pages: %v", err)
	}
	s.Close()
}

func TestOpenRefusesWhatItCannotUse(t *testing.T) {
	ctx := context.Background()
	tests := []struct {
		name, setup, want string
	}{
		{"newer schema", "PRAGMA user_version = 99", "was written by a newer agentrunner (schema version 99"},
		{"other application", fmt.Sprintf("PRAGMA application_id = %d", 0x12345678), "is not an agentrunner state database (application_id 0x12345678)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filled(t, 2)
			db, err := sql.Open("sqlite", dsn(path))
			if err != nil {
				t.Fatal(err)
			}
			if _, err := db.Exec(tt.setup); err != nil {
				t.Fatal(err)
			}
			db.Close()
			before := readFile(t, path)
			if _, err := Open(ctx, path); err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Open: %v, want an error saying %q", err, tt.want)
			}
			if _, err := OpenChecked(ctx, path); err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("OpenChecked: %v, want an error saying %q", err, tt.want)
			}
			if !bytes.Equal(before, readFile(t, path)) {
				t.Error("Open wrote to the refused database")
			}
		})
	}
	t.Run("another program's database", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "other.db")
		db, _ := sql.Open("sqlite", dsn(path))
		if _, err := db.Exec("CREATE TABLE notes (body TEXT)"); err != nil {
			t.Fatal(err)
		}
		db.Close()
		if _, err := Open(ctx, path); err == nil || !strings.Contains(err.Error(), "it is not an agentrunner state database") {
			t.Fatalf("Open: %v, want a refusal", err)
		}
	})
	t.Run("not a database at all", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "state.db")
		os.WriteFile(path, bytes.Repeat([]byte("not sqlite "), 1000), 0o644)
		var d Damage
		if _, err := Open(ctx, path); !errors.As(err, &d) {
			t.Fatalf("Open: %v, want a Damage", err)
		}
	})
}

func TestOpenMarksTheDatabaseAsAgentrunners(t *testing.T) {
	r, err := Check(context.Background(), filled(t, 2))
	if err != nil {
		t.Fatal(err)
	}
	if r.ApplicationID != ApplicationID || !r.Sound() {
		t.Errorf("a new database: application_id %#x, sound %v; want %#x, sound", r.ApplicationID, r.Sound(), ApplicationID)
	}
}

func TestCheck(t *testing.T) {
	ctx := context.Background()
	sound := filled(t, 400)
	damaged := filled(t, 400)
	dbtest.Corrupt(t, damaged, "events")
	orphan := filled(t, 2)
	db, _ := sql.Open("sqlite", dsn(orphan, "foreign_keys(0)"))
	if _, err := db.Exec(`INSERT INTO attempts (cycle_id, step, number, status) VALUES ('no-such-cycle', 'plan', 1, 'running')`); err != nil {
		t.Fatal(err)
	}
	db.Close()

	tests := []struct {
		name, path string
		sound      bool
		damage     string // a line of the damage, "" for none
	}{
		{"sound", sound, true, ""},
		{"damaged pages", damaged, false, "page"},
		{"dangling foreign key", orphan, false, "row 1 of attempts refers to a missing row of runs"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, err := Check(ctx, tt.path)
			if err != nil {
				t.Fatal(err)
			}
			if r.Sound() != tt.sound {
				t.Errorf("Sound() = %v, want %v (damage %q)", r.Sound(), tt.sound, r.Damage())
			}
			if got := strings.Join(r.Damage(), "\n"); !strings.Contains(got, tt.damage) || (tt.damage == "") != (got == "") {
				t.Errorf("damage %q, want a line with %q", got, tt.damage)
			}
		})
	}
	if _, err := Check(ctx, filepath.Join(t.TempDir(), "none.db")); err == nil {
		t.Error("Check of a missing file succeeded")
	}
}

func TestReportRefusal(t *testing.T) {
	tests := []struct {
		name string
		r    Report
		want string
	}{
		{"sound", Report{Integrity: []string{"ok"}, Version: 5, Known: 5, ApplicationID: ApplicationID}, ""},
		{"older schema", Report{Integrity: []string{"ok"}, Version: 3, Known: 5}, ""},
		{"new file", Report{Integrity: []string{"ok"}}, ""},
		{"damaged", Report{Path: "s.db", Integrity: []string{"Tree 4 page 9: bad", "Tree 4 page 10: bad"}, Version: 5, Known: 5},
			"the state database s.db is damaged: Tree 4 page 9: bad; Tree 4 page 10: bad"},
		{"newer", Report{Path: "s.db", Integrity: []string{"ok"}, Version: 6, Known: 5},
			"the state database s.db was written by a newer agentrunner (schema version 6; this agentrunner knows up to 5): upgrade agentrunner"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := ""
			if err := tt.r.refusal(); err != nil {
				got = err.Error()
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("refusal (-want +got):\n%s", diff)
			}
		})
	}
}
