package view

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/agentrunner/agentrunner"
	"github.com/agentrunner/agentrunner/artifact"
	"github.com/google/go-cmp/cmp"
)

func stored(run, name, data string) *agentrunner.StoredFile {
	return &agentrunner.StoredFile{RunID: run, Step: "s", Kind: agentrunner.FileArtifact, Name: name, Data: []byte(data), SHA256: artifact.Hash([]byte(data))}
}

// files is a store of stored files, by run.
type files map[string][]*agentrunner.StoredFile

func (fs files) Files(_ context.Context, f agentrunner.FileFilter) ([]*agentrunner.StoredFile, error) {
	var out []*agentrunner.StoredFile
	for _, sf := range fs[f.RunID] {
		if (f.Name == "" || sf.Name == f.Name) && (f.Kind == "" || sf.Kind == f.Kind) {
			out = append(out, sf)
		}
	}
	if f.Latest && len(out) > 1 {
		out = out[len(out)-1:]
	}
	return out, nil
}

func TestPathStaysInItsDirectory(t *testing.T) {
	prompt := &agentrunner.StoredFile{RunID: "r", Kind: agentrunner.FilePrompt, Name: "prompt.md"}
	tests := []struct {
		f    *agentrunner.StoredFile
		want string
		err  bool
	}{
		{f: stored("r", "plan.md", ""), want: "/runs/r/plan.md"},
		{f: stored("r", "notes/plan.md", ""), want: "/runs/r/notes/plan.md"},
		{f: prompt, want: "/attempts/r/s-1/prompt.md"},
		{f: stored("r", "../other/plan.md", ""), err: true},
		{f: stored("r", "/etc/passwd", ""), err: true},
	}
	for _, tt := range tests {
		got, err := Path("/runs/r", "/attempts/r/s-1", tt.f)
		if (err != nil) != tt.err || got != tt.want {
			t.Errorf("Path(%q) = %q, %v; want %q (error %v)", tt.f.Name, got, err, tt.want, tt.err)
		}
	}
}

func TestWriteMovesOrWrites(t *testing.T) {
	dir := t.TempDir()
	from := filepath.Join(dir, "attempt-output.md")
	os.WriteFile(from, []byte("agent's bytes"), 0o644)
	moved := filepath.Join(dir, "run", "a.md") // its directory is missing: made
	f := stored("r", "a.md", "agent's bytes")
	f.From = from
	if err := Write(moved, f); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(moved); string(got) != "agent's bytes" {
		t.Errorf("moved view holds %q", got)
	}
	if _, err := os.Stat(from); !os.IsNotExist(err) {
		t.Errorf("the agent's file is still there (%v): it was copied, not moved", err)
	}
	// From is gone now: the view is written from the bytes.
	f.Data = []byte("stored bytes")
	if err := Write(moved, f); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(moved); string(got) != "stored bytes" {
		t.Errorf("written view holds %q", got)
	}
	entries, _ := os.ReadDir(filepath.Dir(moved))
	if len(entries) != 1 {
		t.Errorf("the directory holds %d entries, want the view alone (no temporary file left)", len(entries))
	}
}

func TestCheckRewritesWhatDiffers(t *testing.T) {
	tests := []struct {
		name   string
		file   *string
		reason string
	}{
		{"right", ptr("committed\n"), ""},
		{"edited", ptr("edited by hand\n"), Different},
		{"truncated", ptr("comm"), Different},
		{"empty", ptr(""), Different},
		{"missing", nil, Missing},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "a.md")
			if tt.file != nil {
				os.WriteFile(path, []byte(*tt.file), 0o644)
			}
			f := stored("r", "a.md", "committed\n")
			f.From = filepath.Join(t.TempDir(), "never-moved") // a repair trusts only the bytes
			reason, err := Check(path, f)
			if err != nil || reason != tt.reason {
				t.Fatalf("Check = %q, %v; want %q", reason, err, tt.reason)
			}
			if got, _ := os.ReadFile(path); string(got) != "committed\n" {
				t.Errorf("the view holds %q after the check", got)
			}
		})
	}
}

func TestReadServesTheStoresCopy(t *testing.T) {
	now := time.Date(2026, 11, 24, 8, 0, 0, 0, time.UTC)
	store := files{
		"r1":     {stored("r1", "a.md", "first\n"), stored("r1", "a.md", "second\n")},
		"r2":     {stored("r2", "b.md", "other\n")},
		"legacy": nil,
	}
	tests := []struct {
		name, run, file string
		disk            *string
		want            *string
		repaired        string
	}{
		{name: "the newest copy, view right", run: "r1", file: "a.md", disk: ptr("second\n"), want: ptr("second\n")},
		{name: "the newest copy, view stale", run: "r1", file: "a.md", disk: ptr("first\n"), want: ptr("second\n"), repaired: Different},
		{name: "the newest copy, view missing", run: "r1", file: "a.md", want: ptr("second\n"), repaired: Missing},
		{name: "uncommitted file", run: "r2", file: "a.md", disk: ptr("never committed\n")},
		{name: "a run from before the store kept artifacts", run: "legacy", file: "a.md", disk: ptr("old\n"), want: ptr("old\n")},
		{name: "a legacy run without the file", run: "legacy", file: "a.md"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			if tt.disk != nil {
				os.WriteFile(filepath.Join(dir, tt.file), []byte(*tt.disk), 0o644)
			}
			data, ev, err := Read(context.Background(), store, nil, false, tt.run, dir, tt.file, now)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, nilOr(data)); diff != "" {
				t.Errorf("data (-want +got):\n%s", diff)
			}
			reason := ""
			if ev != nil {
				reason = ev.Details["reason"].(string)
				if ev.Type != agentrunner.EventViewRepaired || ev.CycleID != tt.run || !ev.Timestamp.Equal(now) {
					t.Errorf("repair event %+v", ev)
				}
			}
			if reason != tt.repaired {
				t.Errorf("repaired %q, want %q", reason, tt.repaired)
			}
		})
	}
}

func ptr(s string) *string { return &s }

func nilOr(data []byte) *string {
	if data == nil {
		return nil
	}
	return ptr(string(data))
}
