package fstool

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentrunner/agentrunner"
	"github.com/agentrunner/agentrunner/config"
	"github.com/agentrunner/agentrunner/tool"
	"github.com/google/go-cmp/cmp"
)

// writeTool returns filesystem_write's handler with the settings.
func writeTool(t *testing.T, s *WriteSettings) tool.Handler {
	t.Helper()
	spec, h, err := NewWrite(nil, s)
	if err != nil {
		t.Fatal(err)
	}
	if spec.Name != WriteName {
		t.Fatalf("spec name %q", spec.Name)
	}
	return h
}

// writeIn calls h as a call of the run whose directory is runDir.
func writeIn(h tool.Handler, runDir, path, content string) (string, error) {
	b, _ := json.Marshal(map[string]string{"path": path, "content": content})
	return h.Call(WithRunDir(context.Background(), runDir), b)
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// entries lists a directory's names, hidden ones (temporary files)
// included.
func entries(t *testing.T, dir string) []string {
	t.Helper()
	des, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, de := range des {
		names = append(names, de.Name())
	}
	return names
}

func TestWrite(t *testing.T) {
	run := t.TempDir()
	h := writeTool(t, nil)
	for _, tc := range []struct{ path, content, file, want string }{
		{"notes.md", "# Notes\n", "notes.md", "wrote memory/notes.md (8 bytes)"},
		{"memory/btc.txt", "up\n", "btc.txt", "wrote memory/btc.txt (3 bytes)"},
		{"research/eth/levels.json", `{"support": 1800}`, "research/eth/levels.json", "wrote memory/research/eth/levels.json (17 bytes)"},
		{"./research//../summary.md", "é", "summary.md", "wrote memory/summary.md (2 bytes)"},
		{"empty.txt", "", "empty.txt", "wrote memory/empty.txt (0 bytes)"},
	} {
		got, err := writeIn(h, run, tc.path, tc.content)
		if err != nil || got != tc.want {
			t.Errorf("write %q = %q, %v; want %q", tc.path, got, err, tc.want)
			continue
		}
		file := filepath.Join(run, MemoryDir, filepath.FromSlash(tc.file))
		if c := readFile(t, file); c != tc.content {
			t.Errorf("%s holds %q, want %q", tc.file, c, tc.content)
		}
		if info, _ := os.Stat(file); info.Mode().Perm() != 0o644 {
			t.Errorf("%s has mode %v, want 0644", tc.file, info.Mode().Perm())
		}
	}
	if diff := cmp.Diff([]string{"btc.txt", "empty.txt", "notes.md", "research", "summary.md"}, entries(t, filepath.Join(run, MemoryDir))); diff != "" {
		t.Errorf("memory/ holds (-want +got):\n%s", diff)
	}
}

func TestWriteReplacesAtomically(t *testing.T) {
	run := t.TempDir()
	h := writeTool(t, nil)
	if _, err := writeIn(h, run, "report.md", "# First draft\n"+strings.Repeat("old ", 1000)); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(run, MemoryDir, "report.md")
	before, err := os.Stat(file)
	if err != nil {
		t.Fatal(err)
	}
	got, err := writeIn(h, run, "report.md", "# Final\n")
	if err != nil || got != "wrote memory/report.md (8 bytes)" {
		t.Fatalf("replace = %q, %v", got, err)
	}
	if c := readFile(t, file); c != "# Final\n" {
		t.Errorf("the file holds %q after the replace", c)
	}
	after, err := os.Stat(file)
	if err != nil {
		t.Fatal(err)
	}
	// A new file was renamed over the old one: it was never rewritten in
	// place, where a reader (or a crash) could see a mix.
	if os.SameFile(before, after) {
		t.Error("the file was rewritten in place, not replaced by a rename")
	}
	if diff := cmp.Diff([]string{"report.md"}, entries(t, filepath.Join(run, MemoryDir))); diff != "" {
		t.Errorf("a temporary file was left behind (-want +got):\n%s", diff)
	}
}

func TestWriteRefuses(t *testing.T) {
	dir := t.TempDir()
	run, outside := filepath.Join(dir, "run"), filepath.Join(dir, "outside")
	write(t, filepath.Join(outside, "passwd.md"), "root\n")
	write(t, filepath.Join(run, "plan.md"), "# Plan\n")
	symlink(t, outside, filepath.Join(run, MemoryDir, "out"))
	symlink(t, filepath.Join(outside, "passwd.md"), filepath.Join(run, MemoryDir, "link.md"))
	symlink(t, filepath.Join(outside, "new.md"), filepath.Join(run, MemoryDir, "dangling.md"))
	symlink(t, filepath.Join(run, MemoryDir, "notes.md"), filepath.Join(run, MemoryDir, "inside.md"))
	write(t, filepath.Join(run, MemoryDir, "notes.md"), "mine\n")
	if err := os.MkdirAll(filepath.Join(run, MemoryDir, "adir.md"), 0o755); err != nil {
		t.Fatal(err)
	}
	// A run whose memory/ is itself a link out.
	linked := filepath.Join(dir, "linked")
	symlink(t, outside, filepath.Join(linked, MemoryDir))

	h := writeTool(t, &WriteSettings{MaxBytes: 100})
	tests := []struct {
		name, run, path, content, want string
	}{
		{"parent", run, "../x.md", "x", `path "../x.md" leaves memory/`},
		{"parent of the run", run, "../../x.md", "x", `path "../../x.md" leaves memory/`},
		{"through memory/", run, "memory/../plan.md", "x", `path "memory/../plan.md" leaves memory/`},
		{"deep parent", run, "a/b/../../../x.md", "x", `path "a/b/../../../x.md" leaves memory/`},
		{"absolute", run, filepath.Join(outside, "x.md"), "x", "is absolute; give a path relative to memory/"},
		{"slash", run, "/x.md", "x", `path "/x.md" is absolute`},
		{"empty", run, "", "x", "path is empty"},
		{"the folder", run, "memory/", "x", `path "memory/" names the memory/ folder itself`},
		{"dot", run, ".", "x", `path "." names the memory/ folder itself`},
		{"hidden", run, ".notes.md", "x", `the name ".notes.md" starts with a dot`},
		{"hidden folder", run, "a/.git/x.md", "x", `the name ".git" starts with a dot`},
		{"backslash", run, `a\x.md`, "x", "contains a backslash"},
		{"control character", run, "a\nb.md", "x", "contains a control character"},
		{"NUL in path", run, "a\x00.md", "x", "path contains a NUL byte"},
		{"long name", run, strings.Repeat("n", 200) + ".md", "x", "is longer than 128 bytes"},
		{"no extension", run, "notes", "x", `a memory file ends in .md, .json, .txt, got ""`},
		{"bad extension", run, "run.sh", "x", `a memory file ends in .md, .json, .txt, got ".sh"`},
		{"upper case extension", run, "notes.MD", "x", `got ".MD"`},
		{"too large", run, "big.md", strings.Repeat("x", 101), "content is 101 bytes, over the limit of 100 bytes for one file"},
		{"NUL in content", run, "bin.txt", "a\x00b", "content contains a NUL byte"},
		{"invalid JSON", run, "data.json", `{"a":`, "memory/data.json: content is not valid JSON"},
		{"folder linked out", run, "out/x.md", "x", "memory/out/x.md is refused: it resolves through a symbolic link to another location"},
		{"file linked out", run, "link.md", "x", "memory/link.md is refused: it resolves through a symbolic link to another location"},
		{"dangling link", run, "dangling.md", "x", "memory/dangling.md is refused: it is a symbolic link"},
		{"link inside", run, "inside.md", "x", "memory/inside.md is refused: it resolves through a symbolic link"},
		{"memory linked out", linked, "x.md", "x", "memory/x.md is refused: it resolves through a symbolic link to another location"},
		{"a directory", run, "adir.md", "x", "memory/adir.md is refused: it is a directory, not a file"},
		{"below a file", run, "notes.md/x.md", "x", "memory/notes.md/x.md cannot be written: not a directory"},
		{"no run", "", "x.md", "x", "this call belongs to no run directory"},
		{"relative run", "run", "x.md", "x", "this call belongs to no run directory"},
		{"missing run", filepath.Join(dir, "gone"), "x.md", "x", "the run directory does not exist"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := writeIn(h, tc.run, tc.path, tc.content)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("write %q = %q, %v; want an error with %q", tc.path, got, err, tc.want)
			}
			if err != nil && !strings.Contains(tc.path, dir) && strings.Contains(err.Error(), dir) {
				t.Errorf("the error shows the runner's paths: %v", err)
			}
		})
	}
	// Nothing was written outside, nor through a link.
	if diff := cmp.Diff([]string{"passwd.md"}, entries(t, outside)); diff != "" {
		t.Errorf("outside holds (-want +got):\n%s", diff)
	}
	if c := readFile(t, filepath.Join(outside, "passwd.md")); c != "root\n" {
		t.Errorf("the linked file was changed: %q", c)
	}
	if c := readFile(t, filepath.Join(run, MemoryDir, "notes.md")); c != "mine\n" {
		t.Errorf("the file a link inside points at was changed: %q", c)
	}
	if _, err := os.Stat(filepath.Join(dir, "gone")); err == nil {
		t.Error("a missing run directory was created")
	}
}

func TestWriteSettings(t *testing.T) {
	var problems []string
	(&WriteSettings{MaxBytes: -1}).Check(func(key, format string, args ...any) {
		problems = append(problems, key+": "+fmt.Sprintf(format, args...))
	})
	if diff := cmp.Diff([]string{"max_bytes: must not be negative, got -1"}, problems); diff != "" {
		t.Errorf("problems (-want +got):\n%s", diff)
	}
	run := t.TempDir()
	if _, err := writeIn(writeTool(t, nil), run, "big.md", strings.Repeat("x", DefaultMaxBytes)); err != nil {
		t.Errorf("a file of the default limit: %v", err)
	}
	if _, err := writeIn(writeTool(t, &WriteSettings{}), run, "big.md", strings.Repeat("x", DefaultMaxBytes+1)); err == nil {
		t.Error("a file over the default limit was written")
	}
	spec, _, err := NewWrite(&config.Tool{Name: "notes_write", Kind: WriteName, Description: "Keep notes."}, nil)
	if err != nil || spec.Name != "notes_write" || spec.Description != "Keep notes." || spec.Timeout != timeout {
		t.Errorf("configured spec = %+v, %v", spec, err)
	}
	if _, _, err := NewWrite(&config.Tool{Name: "w", Kind: "web_fetch"}, nil); err == nil {
		t.Error("a tool of another kind was built")
	}
}

// TestWrittenFileIsReadable: what filesystem_write writes, filesystem_read
// reads, both through the executor as a model calls them.
func TestWrittenFileIsReadable(t *testing.T) {
	run := t.TempDir()
	reg := tool.NewRegistry()
	spec, h, err := NewWrite(nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := reg.Register(spec, h); err != nil {
		t.Fatal(err)
	}
	report := filepath.Join(run, MemoryDir, "research", "btc.md")
	scope := tool.NewExecutor(reg, tool.Options{}).Scope([]string{WriteName}, New([]string{report})...)
	if err := scope.Err(); err != nil {
		t.Fatal(err)
	}
	ctx := WithRunDir(context.Background(), run)
	content := "# BTC\n\nSupport at 60k; see [levels](levels.json).\n"
	args, _ := json.Marshal(map[string]string{"path": "memory/research/btc.md", "content": content})
	res := scope.Execute(ctx, agentrunner.ToolCall{Name: WriteName, Arguments: args})
	if want := (agentrunner.ToolResult{Message: fmt.Sprintf("wrote memory/research/btc.md (%d bytes)", len(content))}); res != want {
		t.Fatalf("write = %+v, want %+v", res, want)
	}
	res = scope.Execute(ctx, agentrunner.ToolCall{Name: ReadName, Arguments: json.RawMessage(`{"path":"btc.md"}`)})
	if res.IsError || res.Message != content {
		t.Errorf("read = %+v, want the written content", res)
	}
	// Without a run directory (a call from outside a model agent's
	// attempt) the tool says why it cannot write.
	res = scope.Execute(context.Background(), agentrunner.ToolCall{Name: WriteName, Arguments: args})
	if !res.IsError || !strings.Contains(res.Message, "belongs to no run directory") {
		t.Errorf("write without a run = %+v", res)
	}
}
