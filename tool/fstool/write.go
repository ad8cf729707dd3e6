package fstool

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
	"syscall"
	"unicode"

	"github.com/agentrunner/agentrunner/config"
	"github.com/agentrunner/agentrunner/internal/atomicfile"
	"github.com/agentrunner/agentrunner/tool"
)

// WriteName is spec 4's filesystem_write; it is also the name of its kind.
const WriteName = "filesystem_write"

// MemoryDir is the folder of the run directory filesystem_write writes
// in: the artifacts a sub-agent leaves for its lead.
const MemoryDir = "memory"

const (
	// DefaultMaxBytes bounds one written file unless the tool's max_bytes
	// says otherwise: a report, not a data dump.
	DefaultMaxBytes = 256 << 10
	// maxPath bounds the path a model gives; maxName one of its names,
	// leaving room for the temporary file beside it.
	maxPath = 512
	maxName = 128
)

// writeExts are the kinds of file a model may write: markdown, JSON and
// plain text.
var writeExts = []string{".md", ".json", ".txt"}

var writeSchema = json.RawMessage(`{
  "type": "object",
  "properties": {
    "path": {"type": "string", "minLength": 1, "maxLength": 512, "description": "Where to write, relative to the run's memory/ folder (a leading memory/ is accepted): notes.md, research/btc.json. Ends in .md, .json or .txt."},
    "content": {"type": "string", "description": "The whole content of the file; it replaces what the file held."}
  },
  "required": ["path", "content"],
  "additionalProperties": false
}`)

// WriteSettings are the keys of a filesystem_write tool's section
// besides those every tool has.
type WriteSettings struct {
	// MaxBytes bounds one written file; default DefaultMaxBytes.
	MaxBytes int `yaml:"max_bytes"`
}

// Check reports a negative limit.
func (s *WriteSettings) Check(report config.Reporter) {
	if s.MaxBytes < 0 {
		report("max_bytes", "must not be negative, got %d", s.MaxBytes)
	}
}

// WriteToolKind is what configuration knows of the kind: its settings.
func WriteToolKind() config.ToolKind {
	return config.ToolKind{Timeout: timeout, Settings: func() config.ToolSettings { return &WriteSettings{} }}
}

// runDirKey carries the run directory of the calls made under a context.
type runDirKey struct{}

// WithRunDir returns ctx carrying the run directory (the run's artifacts
// folder) of the attempt whose tool calls run under it: filesystem_write
// writes under its memory/ folder. The model runtime sets it for each
// attempt, so a declared filesystem_write works on the caller's own run
// like filesystem_read works on the caller's own files.
func WithRunDir(ctx context.Context, dir string) context.Context {
	return context.WithValue(ctx, runDirKey{}, dir)
}

func runDirOf(ctx context.Context) string {
	dir, _ := ctx.Value(runDirKey{}).(string)
	return dir
}

// NewWrite builds filesystem_write from its configuration and settings
// (nil means all defaults). Unlike filesystem_read it is declared under
// tools and given to the agents that list it (spec 4: sub-agents write,
// the lead reads); the run it writes in comes with each call's context
// (WithRunDir).
func NewWrite(cfg *config.Tool, set *WriteSettings) (tool.Spec, tool.Handler, error) {
	if cfg != nil && cfg.Kind != "" && cfg.Kind != WriteName {
		return tool.Spec{}, nil, fmt.Errorf("tool %q: kind is %q, not %s", cfg.Name, cfg.Kind, WriteName)
	}
	spec, err := tool.FromConfig(tool.Spec{
		Name: WriteName,
		Description: "Write a file under the memory/ folder of this run, for the agents after you to read: " +
			"a markdown report, JSON data or plain text (.md, .json, .txt). The content replaces the whole file, " +
			"which is written atomically. Paths are relative to memory/ and cannot leave it.",
		Parameters: writeSchema,
		Timeout:    timeout,
	}, cfg)
	if err != nil {
		return tool.Spec{}, nil, err
	}
	w := &writer{maxBytes: DefaultMaxBytes}
	if set != nil && set.MaxBytes > 0 {
		w.maxBytes = set.MaxBytes
	}
	return spec, tool.HandlerFunc(w.write), nil
}

// writer is the filesystem_write Handler.
type writer struct {
	maxBytes int
}

type writeArgs struct {
	Path    string  `json:"path"`
	Content *string `json:"content"`
}

func (w *writer) write(ctx context.Context, raw json.RawMessage) (string, error) {
	var a writeArgs
	if err := tool.DecodeArgs(raw, &a); err != nil {
		return "", err
	}
	rel, err := memoryPath(a.Path)
	if err != nil {
		return "", err
	}
	shown := MemoryDir + "/" + rel
	switch {
	case a.Content == nil:
		return "", errors.New("content is missing: give the whole content of the file")
	case len(*a.Content) > w.maxBytes:
		return "", fmt.Errorf("content is %d bytes, over the limit of %d bytes for one file; write a shorter file or split it", len(*a.Content), w.maxBytes)
	case strings.ContainsRune(*a.Content, 0):
		return "", errors.New("content contains a NUL byte; only text can be written")
	case path.Ext(rel) == ".json" && !json.Valid([]byte(*a.Content)):
		return "", fmt.Errorf("%s: content is not valid JSON; fix it or write a .md or .txt file", shown)
	}
	runDir := runDirOf(ctx)
	if runDir == "" || !filepath.IsAbs(runDir) {
		return "", errors.New("this call belongs to no run directory; only an agent on a model provider can write with it")
	}
	target, err := confine(runDir, rel, shown)
	if err != nil {
		return "", err
	}
	if err := atomicfile.WriteFile(target, []byte(*a.Content), 0o644); err != nil {
		return "", fmt.Errorf("%s cannot be written: %s", shown, reason(err))
	}
	return fmt.Sprintf("wrote %s (%d bytes)", shown, len(*a.Content)), nil
}

// memoryPath turns the path a model gave into a path relative to memory/,
// with forward slashes: relative, cleaned, inside memory/, with names that
// are not hidden and end in a writable extension. A path that starts with
// memory/ is taken as relative to the run directory.
func memoryPath(p string) (string, error) {
	switch {
	case p == "":
		return "", errors.New("path is empty; give a file name under memory/, such as notes.md")
	case len(p) > maxPath:
		return "", fmt.Errorf("path is %d bytes long, over the limit of %d", len(p), maxPath)
	case strings.ContainsRune(p, 0):
		return "", errors.New("path contains a NUL byte")
	case strings.ContainsRune(p, '\\'):
		return "", fmt.Errorf("path %q contains a backslash; separate folders with /", p)
	case path.IsAbs(p) || filepath.IsAbs(p) || filepath.VolumeName(p) != "":
		return "", fmt.Errorf("path %q is absolute; give a path relative to memory/, such as notes.md", p)
	}
	joined := p
	if p != MemoryDir && !strings.HasPrefix(p, MemoryDir+"/") {
		joined = MemoryDir + "/" + p
	}
	clean := path.Clean(joined)
	if clean == MemoryDir {
		return "", fmt.Errorf("path %q names the memory/ folder itself; give a file name, such as notes.md", p)
	}
	if !strings.HasPrefix(clean, MemoryDir+"/") {
		return "", fmt.Errorf("path %q leaves memory/", p)
	}
	rel := strings.TrimPrefix(clean, MemoryDir+"/")
	for _, name := range strings.Split(rel, "/") {
		switch {
		case strings.HasPrefix(name, "."):
			return "", fmt.Errorf("path %q: the name %q starts with a dot; hidden files are not written", p, name)
		case len(name) > maxName:
			return "", fmt.Errorf("path %q: the name %q is longer than %d bytes", p, clipName(name), maxName)
		case strings.IndexFunc(name, unicode.IsControl) >= 0:
			return "", fmt.Errorf("path %q contains a control character", p)
		}
	}
	ext := path.Ext(rel)
	for _, ok := range writeExts {
		if ext == ok {
			return rel, nil
		}
	}
	return "", fmt.Errorf("path %q: a memory file ends in %s, got %q", p, strings.Join(writeExts, ", "), ext)
}

func clipName(name string) string {
	if len(name) <= 32 {
		return name
	}
	return name[:32] + "…"
}

// confine returns where the file rel of memory/ is written, after making
// its folders, or why it may not be. As for reads, symbolic links at and
// above the run directory are the operator's and trusted; below it none
// may lead the file elsewhere, and the file itself must be absent or a
// regular file.
func confine(runDir, rel, shown string) (string, error) {
	runDir = filepath.Clean(runDir)
	if info, err := os.Stat(runDir); err != nil || !info.IsDir() {
		return "", errors.New("the run directory does not exist; nothing can be written")
	}
	local := filepath.FromSlash(rel)
	target := filepath.Join(runDir, MemoryDir, local)
	expected := filepath.Join(resolve(runDir), MemoryDir, local)
	check := func() error {
		if resolve(target) != expected {
			return refuseFile(shown, "it resolves through a symbolic link to another location")
		}
		info, err := os.Lstat(expected)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			return nil
		case err != nil:
			return fmt.Errorf("%s cannot be written: %s", shown, reason(err))
		case info.Mode()&fs.ModeSymlink != 0:
			return refuseFile(shown, "it is a symbolic link")
		case info.IsDir():
			return refuseFile(shown, "it is a directory, not a file")
		case !info.Mode().IsRegular():
			return refuseFile(shown, "it is not a regular file")
		}
		return nil
	}
	if err := check(); err != nil {
		return "", err
	}
	if err := atomicfile.MkdirAll(filepath.Dir(expected), 0o755); err != nil {
		return "", fmt.Errorf("%s cannot be written: its folder cannot be made: %s", shown, reason(err))
	}
	// Again, now that the folders exist: nothing may have turned up in
	// their place meanwhile.
	if err := check(); err != nil {
		return "", err
	}
	return expected, nil
}

// reason words a file system error without the paths it names, which
// are the runner's, not the model's.
func reason(err error) string {
	var errno syscall.Errno
	if errors.As(err, &errno) {
		return errno.Error()
	}
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err.Error()
	}
	return "an input/output error"
}
