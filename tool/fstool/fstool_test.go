package fstool

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentrunner/agentrunner"
	"github.com/agentrunner/agentrunner/tool"
	"github.com/google/go-cmp/cmp"
)

// write creates a file with its directories.
func write(t *testing.T, path, content string) string {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func symlink(t *testing.T, target, link string) string {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(link), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(target, link); err != nil {
		t.Skipf("symbolic links unavailable: %v", err)
	}
	return link
}

// tools returns the handlers by name.
func tools(t *testing.T, files []string) (read, tree tool.Handler) {
	t.Helper()
	for _, l := range New(files) {
		switch l.Spec.Name {
		case ReadName:
			read = l.Handler
		case TreeName:
			tree = l.Handler
		}
	}
	if read == nil || tree == nil {
		t.Fatal("New did not return both tools")
	}
	return read, tree
}

func call(h tool.Handler, args any) (string, error) {
	b, _ := json.Marshal(args)
	return h.Call(context.Background(), b)
}

// workspace is a directory of allowed files with traps around them.
type workspace struct {
	dir, ws, outside                                                                           string
	plan, mailbox, memory, missing, link, linkDirFile, dangling, subdir, binary, latin1, empty string
}

func newWorkspace(t *testing.T) *workspace {
	dir := t.TempDir()
	w := &workspace{dir: dir, ws: filepath.Join(dir, "ws"), outside: filepath.Join(dir, "outside")}
	write(t, filepath.Join(w.outside, "passwd"), "root:x:0:0\n")
	w.plan = write(t, filepath.Join(w.ws, "cycles", "c1", "plan.md"), "# Plan\n")
	w.mailbox = write(t, filepath.Join(w.ws, "mailboxes", "research.md"), "## From plan\nhello\n")
	w.memory = write(t, filepath.Join(w.ws, "memory", "research.md"), "notes\n")
	write(t, filepath.Join(w.ws, "cycles", "c1", "secret.md"), "not yours\n")
	w.missing = filepath.Join(w.ws, "mailboxes", "evaluate.md")
	w.link = symlink(t, filepath.Join(w.outside, "passwd"), filepath.Join(w.ws, "link.md"))
	w.linkDirFile = filepath.Join(symlink(t, w.outside, filepath.Join(w.ws, "linkdir")), "passwd")
	w.dangling = symlink(t, filepath.Join(w.outside, "nothing"), filepath.Join(w.ws, "dangling.md"))
	w.subdir = filepath.Join(w.ws, "adir")
	if err := os.MkdirAll(w.subdir, 0o755); err != nil {
		t.Fatal(err)
	}
	w.binary = write(t, filepath.Join(w.ws, "chart.png"), "\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR")
	w.latin1 = write(t, filepath.Join(w.ws, "latin1.txt"), "caf\xe9\n")
	w.empty = write(t, filepath.Join(w.ws, "empty.md"), "")
	return w
}

func (w *workspace) files() []string {
	return []string{w.plan, w.mailbox, w.memory, w.missing, w.link, w.linkDirFile, w.dangling, w.subdir, w.binary, w.latin1, w.empty, ""}
}

func TestReadRefusesEscapes(t *testing.T) {
	w := newWorkspace(t)
	read, _ := tools(t, w.files())
	tests := []struct {
		name, path, want string
	}{
		{"parent directory", "../x", `path "../x" contains ".."`},
		{"parent inside an allowed path", filepath.Join(w.ws, "cycles", "c1") + "/../c1/plan.md", `contains ".."`},
		{"system file", "/etc/passwd", "/etc/passwd is not one of the files you may read (you may read: "},
		{"absolute path outside the set", filepath.Join(w.outside, "passwd"), "is not one of the files you may read"},
		{"sibling not in the set", filepath.Join(w.ws, "cycles", "c1", "secret.md"), "secret.md is not one of the files you may read"},
		{"sibling by base name", "secret.md", `no file named "secret.md" among the files you may read`},
		{"dot slash", "./plan.md", `path "./plan.md" is relative`},
		{"relative with directories", "cycles/c1/plan.md", `path "cycles/c1/plan.md" is relative`},
		{"dot", ".", `path "." is relative`},
		{"symlink in the set pointing outside", w.link, w.link + " is refused: it resolves through a symbolic link to another location"},
		{"symlink by base name", "link.md", "link.md is refused: it resolves through a symbolic link"},
		{"path through a symlinked directory", w.linkDirFile, w.linkDirFile + " is refused: it resolves through a symbolic link to another location"},
		{"dangling symlink", w.dangling, w.dangling + " is refused: it is a symbolic link"},
		{"directory", w.subdir, w.subdir + " is refused: it is a directory, not a file"},
		{"empty path", "", "path is empty; give the absolute path of one of your files or its base name"},
		{"NUL byte", w.plan + "\x00", "path contains a NUL byte"},
		{"ambiguous base name", "research.md", `"research.md" is ambiguous: it may be ` + w.mailbox + " or " + w.memory + "; give the absolute path"},
		{"missing allowed file", w.missing, w.missing + " does not exist yet"},
		{"missing by base name", "evaluate.md", w.missing + " does not exist yet"},
		{"binary", w.binary, w.binary + " is a binary file, not text"},
		{"not UTF-8", "latin1.txt", w.latin1 + " is a binary file, not UTF-8 text"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := call(read, map[string]any{"path": tc.path})
			if err == nil {
				t.Fatalf("read %q = %q, want refused", tc.path, got)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q\nwant it to contain %q", err, tc.want)
			}
			if strings.Contains(err.Error(), "root:x") {
				t.Errorf("error leaks the outside file: %q", err)
			}
		})
	}
}

func TestReadAllowed(t *testing.T) {
	w := newWorkspace(t)
	read, _ := tools(t, w.files())
	tests := []struct {
		name string
		args map[string]any
		want string
	}{
		{"absolute path", map[string]any{"path": w.plan}, "# Plan\n"},
		{"base name", map[string]any{"path": "plan.md"}, "# Plan\n"},
		{"unclean absolute path", map[string]any{"path": filepath.Join(w.ws, "cycles") + "//c1/./plan.md"}, "# Plan\n"},
		{"ambiguous name by absolute path", map[string]any{"path": w.memory}, "notes\n"},
		{"empty file", map[string]any{"path": w.empty}, "(" + w.empty + " is empty)"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := call(read, tc.args)
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Errorf("read = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestReadPages(t *testing.T) {
	dir := t.TempDir()
	digits := write(t, filepath.Join(dir, "digits.txt"), strings.Repeat("0123456789", 10))
	accents := write(t, filepath.Join(dir, "accents.txt"), strings.Repeat("é", 10)) // 20 bytes
	big := write(t, filepath.Join(dir, "big.txt"), strings.Repeat("a", MaxLimit+100))
	read, _ := tools(t, []string{digits, accents, big})
	tests := []struct {
		name    string
		args    map[string]any
		want    string
		wantErr string
	}{
		{"first page", map[string]any{"path": "digits.txt", "limit": 30},
			"012345678901234567890123456789\n\n[" + digits + ": bytes 0 to 30 of 100; to read on, call filesystem_read with offset 30]", ""},
		{"middle page", map[string]any{"path": "digits.txt", "offset": 30, "limit": 5},
			"01234\n\n[" + digits + ": bytes 30 to 35 of 100; to read on, call filesystem_read with offset 35]", ""},
		{"last page", map[string]any{"path": "digits.txt", "offset": 95, "limit": 30},
			"56789\n\n[" + digits + ": bytes 95 to 100 of 100; this is the end of the file]", ""},
		{"whole file within the default limit", map[string]any{"path": "digits.txt"}, strings.Repeat("0123456789", 10), ""},
		{"offset past the end", map[string]any{"path": "digits.txt", "offset": 100}, "", "offset 100 is past the end of " + digits + " (100 bytes)"},
		{"negative offset", map[string]any{"path": "digits.txt", "offset": -1}, "", "offset -1 is negative"},
		{"zero limit", map[string]any{"path": "digits.txt", "limit": 0}, "", "limit 0 must be at least 1"},
		{"page ends on a whole character", map[string]any{"path": "accents.txt", "limit": 5},
			"éé\n\n[" + accents + ": bytes 0 to 4 of 20; to read on, call filesystem_read with offset 4]", ""},
		{"offset inside a character moves on", map[string]any{"path": "accents.txt", "offset": 17},
			"é\n\n[" + accents + ": bytes 18 to 20 of 20; this is the end of the file]", ""},
		{"limit is bounded", map[string]any{"path": "big.txt", "limit": 1 << 20},
			strings.Repeat("a", MaxLimit) + "\n\n[" + big + ": bytes 0 to 61440 of 61540; to read on, call filesystem_read with offset 61440; limit reduced to 61440]", ""},
		{"unknown argument", map[string]any{"path": "digits.txt", "lines": 3}, "", `invalid arguments: unknown field "lines"`},
		{"path of the wrong type", map[string]any{"path": 3}, "", "invalid arguments: cannot unmarshal number"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := call(read, tc.args)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("read = %q, %v; want error containing %q", got, err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("page (-want +got):\n%s", diff)
			}
		})
	}
}

func TestTree(t *testing.T) {
	dir := t.TempDir()
	ws := filepath.Join(dir, "ws")
	outside := write(t, filepath.Join(dir, "outside.md"), "secret")
	files := []string{
		write(t, filepath.Join(ws, "cycles", "c1", "plan.md"), "hello"),
		filepath.Join(ws, "mailboxes", "research.md"),
		write(t, filepath.Join(ws, "memory", "research.md"), "mem"),
		write(t, filepath.Join(ws, "templates", "report.md"), "# Report\n"),
		write(t, filepath.Join(ws, "notes.md"), ""),
		symlink(t, outside, filepath.Join(ws, "link.md")),
		"relative.md",
	}
	_, tree := tools(t, files)
	tests := []struct {
		name string
		args string
		want string
	}{
		{"everything", `{}`, "You may read 7 files:\n" + ws + "/\n" +
			"  link.md (refused: it resolves through a symbolic link to another location)\n" +
			"  notes.md (0 bytes)\n" +
			"  cycles/c1/\n" +
			"    plan.md (5 bytes)\n" +
			"  mailboxes/\n" +
			"    research.md (does not exist yet)\n" +
			"  memory/\n" +
			"    research.md (3 bytes)\n" +
			"  templates/\n" +
			"    report.md (9 bytes)\n" +
			"relative.md (cannot be read: the runner gave a relative path)"},
		{"max depth", `{"max_depth":1}`, "You may read 7 files:\n" + ws + "/\n" +
			"  link.md (refused: it resolves through a symbolic link to another location)\n" +
			"  notes.md (0 bytes)\n" +
			"  cycles/c1/ (1 file below; raise max_depth to see them)\n" +
			"  mailboxes/ (1 file below; raise max_depth to see them)\n" +
			"  memory/ (1 file below; raise max_depth to see them)\n" +
			"  templates/ (1 file below; raise max_depth to see them)\n" +
			"relative.md (cannot be read: the runner gave a relative path)"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := tree.Call(context.Background(), json.RawMessage(tc.args))
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("tree (-want +got):\n%s", diff)
			}
			if strings.Contains(got, "secret") {
				t.Error("tree shows the outside file")
			}
		})
	}
	if _, err := tree.Call(context.Background(), json.RawMessage(`{"max_depth":0}`)); err == nil {
		t.Error("max_depth 0 accepted")
	}

	_, none := tools(t, nil)
	if got, err := none.Call(context.Background(), nil); err != nil || got != "You have no files to read." {
		t.Errorf("empty tree = %q, %v", got, err)
	}
}

// A symbolic link above the files' common directory is the operator's
// (a workspace reached through a link) and does not make files unreadable.
func TestSymlinkAboveTheFilesIsTrusted(t *testing.T) {
	dir := t.TempDir()
	write(t, filepath.Join(dir, "real", "ws", "a.md"), "A")
	write(t, filepath.Join(dir, "real", "ws", "sub", "b.md"), "B")
	alias := symlink(t, filepath.Join(dir, "real"), filepath.Join(dir, "alias"))
	read, _ := tools(t, []string{filepath.Join(alias, "ws", "a.md"), filepath.Join(alias, "ws", "sub", "b.md")})
	for name, want := range map[string]string{"a.md": "A", "b.md": "B"} {
		if got, err := call(read, map[string]any{"path": name}); err != nil || got != want {
			t.Errorf("read %s = %q, %v; want %q", name, got, err, want)
		}
	}
}

// Through the executor the model gets the tools' errors as results and
// its arguments are checked against the tools' schemas.
func TestThroughExecutor(t *testing.T) {
	dir := t.TempDir()
	plan := write(t, filepath.Join(dir, "plan.md"), "# Plan\n")
	scope := tool.NewExecutor(tool.NewRegistry(), tool.Options{}).Scope(nil, New([]string{plan})...)
	if err := scope.Err(); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, s := range scope.Specs() {
		names = append(names, s.Name)
	}
	if diff := cmp.Diff([]string{ReadName, TreeName}, names); diff != "" {
		t.Errorf("specs (-want +got):\n%s", diff)
	}
	tests := []struct {
		args string
		want agentrunner.ToolResult
	}{
		{`{"path":"plan.md"}`, agentrunner.ToolResult{Message: "# Plan\n"}},
		{`{"path":"/etc/passwd"}`, agentrunner.ToolResult{IsError: true,
			Message: "filesystem_read: /etc/passwd is not one of the files you may read (you may read: " + plan + ")"}},
		{`{"path":"plan.md","offset":-1}`, agentrunner.ToolResult{IsError: true,
			Message: "filesystem_read: invalid arguments:\n- at /offset: minimum: got -1, want 0"}},
	}
	for _, tc := range tests {
		got := scope.Execute(context.Background(), agentrunner.ToolCall{Name: ReadName, Arguments: json.RawMessage(tc.args)})
		if diff := cmp.Diff(tc.want, got); diff != "" {
			t.Errorf("%s (-want +got):\n%s", tc.args, diff)
		}
	}
}

// FuzzLookup checks that whatever path a model gives, the file resolved is
// one of the allowed files or the call is refused.
func FuzzLookup(f *testing.F) {
	for _, p := range []string{"", "plan.md", "/ws/plan.md", "../plan.md", "/ws/../etc/passwd", "./plan.md", "/ws//plan.md", "plan.md\x00", "/", "."} {
		f.Add(p)
	}
	allowed := []string{"/ws/plan.md", "/ws/mail/research.md", "/ws/memory/research.md", "/other/x.json"}
	for _, p := range []string{"memory/a.md", "/runs/r1/memory/a.md", "/runs/r1/memory/.tmp", "memory/../plan.md"} {
		f.Add(p)
	}
	s := newSet(allowed, []string{"/runs/r1/memory"})
	f.Fuzz(func(t *testing.T, p string) {
		got, err := s.lookup(p)
		if err != nil {
			if got != "" {
				t.Fatalf("lookup(%q) = %q with error %v", p, got, err)
			}
			return
		}
		found := strings.HasPrefix(got, "/runs/r1/memory/") && !strings.Contains(got, "/.")
		for _, a := range allowed {
			found = found || got == a
		}
		if !found {
			t.Fatalf("lookup(%q) = %q, not an allowed file", p, got)
		}
		if hasDotDot(p) {
			t.Fatalf("lookup(%q) accepted a path with a parent reference", p)
		}
	})
}

// TestFilesUnderAFolderAreReadAsTheyAppear: the memory/ folder of a run
// is given as a folder: the files written there after the tools were made
// (a sub-agent's report) are listed and read, by their absolute path, by
// their path from the run or by their base name, and nothing else of the
// run is, nor a hidden file or one that leads out through a link.
func TestFilesUnderAFolderAreReadAsTheyAppear(t *testing.T) {
	w := newWorkspace(t)
	run := filepath.Join(w.dir, "runs", "r1")
	write(t, filepath.Join(run, "answer.md"), "not a memory file\n")
	mem := filepath.Join(run, "memory")
	read, tree := toolsIn(t, []string{w.plan}, mem)

	got, err := call(tree, map[string]any{})
	if err != nil || strings.Contains(got, "memory") {
		t.Fatalf("tree before memory/ exists = %q, %v; want only the plan", got, err)
	}
	if _, err := call(read, map[string]any{"path": "memory/alpha.md"}); err == nil {
		t.Fatal("a report not yet written was read")
	}

	write(t, filepath.Join(mem, "alpha.md"), "# Alpha\nfound\n")
	write(t, filepath.Join(mem, "deep", "beta.json"), `{"b": 1}`)
	write(t, filepath.Join(mem, ".alpha.md.tmp"), "half written")
	symlink(t, filepath.Join(w.outside, "passwd"), filepath.Join(mem, "out.md"))
	got, err = call(tree, map[string]any{})
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"alpha.md (14 bytes)", "beta.json (8 bytes)", "plan.md (7 bytes)", "You may read 3 files"} {
		if !strings.Contains(got, want) {
			t.Errorf("tree lacks %q:\n%s", want, got)
		}
	}
	for _, not := range []string{".alpha.md.tmp", "out.md", "answer.md"} {
		if strings.Contains(got, not) {
			t.Errorf("tree shows %s:\n%s", not, got)
		}
	}
	for _, p := range []string{filepath.Join(mem, "alpha.md"), "memory/alpha.md", "alpha.md"} {
		if got, err := call(read, map[string]any{"path": p}); err != nil || got != "# Alpha\nfound\n" {
			t.Errorf("read %s = %q, %v", p, got, err)
		}
	}
	if got, err := call(read, map[string]any{"path": "memory/deep/beta.json"}); err != nil || got != `{"b": 1}` {
		t.Errorf("read memory/deep/beta.json = %q, %v", got, err)
	}
	for p, want := range map[string]string{
		filepath.Join(mem, ".alpha.md.tmp"): "is not one of the files you may read",
		"memory/.alpha.md.tmp":              "is relative",
		filepath.Join(run, "answer.md"):     "is not one of the files you may read",
		"memory/../answer.md":               `contains ".."`,
		"answer.md":                         "no file named",
		filepath.Join(mem, "out.md"):        "resolves through a symbolic link",
		filepath.Join(mem, "deep"):          "is a directory",
	} {
		if got, err := call(read, map[string]any{"path": p}); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("read %s = %q, %v; want an error with %q", p, got, err, want)
		}
	}
}

// toolsIn returns the handlers of the tools over files and dirs.
func toolsIn(t *testing.T, files []string, dirs ...string) (read, tree tool.Handler) {
	t.Helper()
	for _, l := range New(files, dirs...) {
		switch l.Spec.Name {
		case ReadName:
			read = l.Handler
		case TreeName:
			tree = l.Handler
		}
	}
	return read, tree
}
