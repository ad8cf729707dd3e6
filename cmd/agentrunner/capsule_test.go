package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/agentrunner/agentrunner/capsule"
	arhttp "github.com/agentrunner/agentrunner/http"
)

// cliCapsuleText is a capsule's text with its six sections.
func cliCapsuleText(objective string) string {
	return "## Objective\n\n" + objective + "\n\n## Status\n\nFunding is positive on three venues.\n\n## Decisions\n\n- Watch BTC.\n\n" +
		"## Next actions\n\n- Check the rate limit.\n\n## Key locations\n\n- research.md\n\n## Open questions\n\n- None.\n"
}

// cliCapsuleRecords writes an export of the records to a file and
// returns its path.
func cliCapsuleRecords(t *testing.T, records ...capsule.Record) string {
	t.Helper()
	var b strings.Builder
	for _, r := range records {
		data, err := json.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		b.Write(data)
		b.WriteByte('\n')
	}
	path := filepath.Join(t.TempDir(), "capsules.jsonl")
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// cliCapsules are three capsules of an export: two live ones of crypton,
// one deleted of another workspace.
func cliCapsules() []capsule.Record {
	at := time.Date(2026, 3, 14, 9, 0, 0, 0, time.UTC)
	deleted := at.Add(time.Hour)
	return []capsule.Record{
		{Workspace: "crypton", Name: "handoff", RunID: "20260314_060000", Phase: "research", Role: "planner", Tags: []string{"btc", "funding"},
			Text: cliCapsuleText("Find where funding flips."), Version: 2, CreatedAt: at, UpdatedAt: at.Add(time.Minute)},
		{Workspace: "crypton", Name: "notes", Phase: "analysis", Text: cliCapsuleText("Note the venues."), Version: 1, CreatedAt: at, UpdatedAt: at},
		{Workspace: "other", Name: "old", Text: cliCapsuleText("An old plan."), Version: 1, CreatedAt: at, UpdatedAt: at, DeletedAt: &deleted},
	}
}

// cliOK runs a command that must succeed and returns its output.
func cliOK(t *testing.T, args ...string) string {
	t.Helper()
	code, stdout, stderr := cliRun(t, args...)
	if code != exitOK {
		t.Fatalf("%s: exit %d, stderr:\n%s", strings.Join(args, " "), code, stderr)
	}
	return stdout
}

// TestCapsuleImportListShowSearchExport: capsules imported from a file are
// listed, shown, found and exported again, and the export imports into
// another workspace as it was.
func TestCapsuleImportListShowSearchExport(t *testing.T) {
	dir := cliExample(t)
	cfg := cliConfigPath(dir)

	// A workspace without a state database has no capsules, and reading
	// them creates none.
	if out := cliOK(t, "capsule", "list", "-c", cfg); out != "no capsules\n" {
		t.Errorf("list of a fresh workspace: %q", out)
	}
	if out := cliOK(t, "capsule", "export", "-c", cfg); out != "" {
		t.Errorf("export of a fresh workspace: %q", out)
	}
	if files := cliFiles(t, dir); len(files) != len(cliExampleFiles) {
		t.Errorf("reading capsules created files: %v", files)
	}

	file := cliCapsuleRecords(t, cliCapsules()...)
	if out := cliOK(t, "capsule", "import", file, "-c", cfg); out != "stored 3, replaced 0, skipped 0\n" {
		t.Errorf("import: %q", out)
	}

	// list: newest first, live ones; with --include-deleted the deleted one
	// too, with its deletion time.
	out := cliOK(t, "capsule", "list", "-c", cfg)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 3 || !regexp.MustCompile(`^ID\s+WORKSPACE\s+NAME\s+VERSION\s+RUN\s+PHASE\s+ROLE\s+TAGS\s+UPDATED$`).MatchString(lines[0]) ||
		!regexp.MustCompile(`^2\s+crypton\s+notes\s+1\s+-\s+analysis\s+-\s+-\s+2026-03-14T09:00:00Z$`).MatchString(lines[1]) ||
		!regexp.MustCompile(`^1\s+crypton\s+handoff\s+\d+\s+20260314_060000\s+research\s+planner\s+btc,funding\s+2026-03-14T09:01:00Z$`).MatchString(lines[2]) {
		t.Errorf("list:\n%s", out)
	}
	out = cliOK(t, "capsule", "list", "--include-deleted", "--workspace", "other", "-c", cfg)
	if !strings.Contains(out, "DELETED") || !strings.Contains(out, "old") || !strings.Contains(out, "2026-03-14T10:00:00Z") {
		t.Errorf("list --include-deleted:\n%s", out)
	}
	out = cliOK(t, "capsule", "list", "--phase", "research", "--tag", "btc", "--role", "planner", "--run-id", "20260314_060000", "--limit", "1", "--json", "-c", cfg)
	var list arhttp.CapsuleList
	if err := json.Unmarshal([]byte(out), &list); err != nil {
		t.Fatalf("list --json: %v\n%s", err, out)
	}
	if len(list.Capsules) != 1 || list.Capsules[0].Name != "handoff" || list.Capsules[0].Text != "" || list.NextBefore != list.Capsules[0].ID {
		t.Errorf("list --json: %+v", list)
	}
	if out := cliOK(t, "capsule", "list", "--limit", "1", "-c", cfg); !strings.Contains(out, "more: the same command with --before 2") {
		t.Errorf("a full page does not say how to go on:\n%s", out)
	}

	// show: the fields, then the text; by id or by name.
	out = cliOK(t, "capsule", "show", "1", "-c", cfg)
	for _, want := range []string{"id:         1\n", "workspace:  crypton\n", "name:       handoff\n", "run:        20260314_060000\n",
		"phase:      research\n", "role:       planner\n", "tags:       btc, funding\n", "created:    2026-03-14T09:00:00Z\n",
		"updated:    2026-03-14T09:01:00Z\n", "\n\n" + cliCapsuleText("Find where funding flips.")} {
		if !strings.Contains(out, want) {
			t.Errorf("show 1 lacks %q:\n%s", want, out)
		}
	}
	if !strings.HasSuffix(out, cliCapsuleText("Find where funding flips.")) {
		t.Errorf("show does not end with the text:\n%s", out)
	}
	if byName := cliOK(t, "capsule", "show", "crypton/handoff", "-c", cfg); byName != out {
		t.Errorf("show crypton/handoff differs from show 1:\n%s", byName)
	}
	if out := cliOK(t, "capsule", "show", "3", "-c", cfg); !strings.Contains(out, "deleted:    2026-03-14T10:00:00Z\n") {
		t.Errorf("show of a deleted capsule:\n%s", out)
	}

	// search: rank, id, workspace/name and snippet, best first.
	out = cliOK(t, "capsule", "search", "funding flips", "-c", cfg)
	lines = strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) < 2 || !regexp.MustCompile(`^RANK\s+ID\s+CAPSULE\s+SNIPPET$`).MatchString(lines[0]) ||
		!regexp.MustCompile(`^-?[0-9.e+-]+\s+1\s+crypton/handoff\s+.*«`).MatchString(lines[1]) {
		t.Errorf("search:\n%s", out)
	}
	if out := cliOK(t, "capsule", "search", "venues", "--workspace", "other", "-c", cfg); out != "no capsules match\n" {
		t.Errorf("a search of live capsules of another workspace: %q", out)
	}

	// export: JSON lines, oldest first, which import into another
	// workspace as they were.
	out = cliOK(t, "capsule", "export", "--workspace", "crypton", "-c", cfg)
	var names []string
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		var r capsule.Record
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatalf("an exported line is not a record: %v\n%s", err, line)
		}
		names = append(names, r.Name)
	}
	if strings.Join(names, ",") != "handoff,notes" {
		t.Errorf("exported %v, want handoff, notes", names)
	}
	exported := filepath.Join(t.TempDir(), "out.jsonl")
	code, stdout, stderr := cliRun(t, "capsule", "export", "--include-deleted", "-o", exported, "-c", cfg)
	if code != exitOK || stdout != "" || !strings.Contains(stderr, "exported 3 capsule(s) to "+exported) {
		t.Fatalf("export -o: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
	other := cliConfigPath(cliExample(t))
	if out := cliOK(t, "capsule", "import", exported, "-c", other); out != "stored 3, replaced 0, skipped 0\n" {
		t.Errorf("import of the export: %q", out)
	}
	if a, b := cliOK(t, "capsule", "show", "crypton/handoff", "-c", other), cliOK(t, "capsule", "show", "crypton/handoff", "-c", cfg); a != b {
		t.Errorf("the imported capsule differs:\n%s\nfrom\n%s", a, b)
	}
	if out := cliOK(t, "capsule", "import", exported, "-c", other); out != "stored 1, replaced 0, skipped 2\n" {
		t.Errorf("import again, skipping: %q", out)
	}
	if out := cliOK(t, "capsule", "import", exported, "--on-conflict", "replace", "-c", other); out != "stored 1, replaced 2, skipped 0\n" {
		t.Errorf("import again, replacing: %q", out)
	}
}

// TestCapsuleCommandErrors: bad flags and arguments exit 2, failures 1,
// each with one line on stderr that says what is wrong.
func TestCapsuleCommandErrors(t *testing.T) {
	dir := cliExample(t)
	cfg := cliConfigPath(dir)
	cliOK(t, "capsule", "import", cliCapsuleRecords(t, cliCapsules()...), "-c", cfg)
	bad := cliCapsuleRecords(t, capsule.Record{Workspace: "crypton", Name: "fresh", Text: cliCapsuleText("x"), Version: 1,
		CreatedAt: time.Now(), UpdatedAt: time.Now()}, capsule.Record{Workspace: "crypton", Name: "bad", Text: "## Objective\n", Version: 1,
		CreatedAt: time.Now(), UpdatedAt: time.Now()})
	tests := []struct {
		args []string
		code int
		says []string
	}{
		{[]string{"capsule", "frobnicate"}, exitUsage, []string{`unknown command "frobnicate" for "agentrunner capsule"`}},
		{[]string{"capsule", "import", bad, "--on-conflict", "merge"}, exitUsage, []string{"--on-conflict must be skip or replace"}},
		{[]string{"capsule", "import", bad}, exitFailure, []string{"line 2:", "lacks the section(s)", "imported before it: 1 stored"}},
		{[]string{"capsule", "import", filepath.Join(dir, "nosuch.jsonl")}, exitFailure, []string{"nosuch.jsonl"}},
		{[]string{"capsule", "import"}, exitUsage, []string{"accepts 1 arg"}},
		{[]string{"capsule", "show", "crypton"}, exitUsage, []string{"want a capsule id or WORKSPACE/NAME"}},
		{[]string{"capsule", "show", "0"}, exitUsage, []string{"capsule id must be positive"}},
		{[]string{"capsule", "show", "99"}, exitFailure, []string{"capsule 99 not found"}},
		{[]string{"capsule", "show", "crypton/nosuch"}, exitFailure, []string{`no live capsule named "nosuch"`}},
		{[]string{"capsule", "list", "--limit", "0"}, exitUsage, []string{"--limit must be from 1 to 1000"}},
		{[]string{"capsule", "list", "--colour", "red"}, exitUsage, []string{"unknown flag: --colour"}},
		{[]string{"capsule", "search", "x", "--limit", "101"}, exitUsage, []string{"--limit must be from 1 to 100"}},
		{[]string{"capsule", "search", " "}, exitUsage, []string{"QUERY is empty"}},
		{[]string{"capsule", "search", `"funding`}, exitFailure, []string{"not valid full-text syntax"}},
	}
	for _, tc := range tests {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			args := tc.args
			if len(args) > 2 {
				args = append(args, "-c", cfg)
			}
			code, _, stderr := cliRun(t, args...)
			if code != tc.code {
				t.Errorf("exit %d, want %d; stderr:\n%s", code, tc.code, stderr)
			}
			if n := strings.Count(strings.TrimSpace(stderr), "\n"); n != 0 {
				t.Errorf("stderr has %d lines, want one:\n%s", n+1, stderr)
			}
			for _, s := range tc.says {
				if !strings.Contains(stderr, s) {
					t.Errorf("stderr does not say %q:\n%s", s, stderr)
				}
			}
			if strings.Contains(stderr, "SQL") {
				t.Errorf("stderr speaks of SQL:\n%s", stderr)
			}
		})
	}
}
