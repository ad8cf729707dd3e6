// Package fstool gives a model read access to exactly the files the runner
// hands its agent (spec 4's filesystem_read and filesystem_tree): a model
// cannot open files, so an agent that talks to a provider over HTTP reads
// its mailbox, memory, input artifacts, output template and schema
// through these tools, and nothing else.
//
// Every path a model passes is resolved against the allowed set: the model
// may name a file by its absolute path, as its prompt gives it, or by its
// base name when that is unambiguous. Anything else is refused, as is a
// file reached through a symbolic link that leads elsewhere.
//
// filesystem_write (write.go) is spec 4's other side: an agent that lists
// it writes markdown, JSON or text files under the memory/ folder of its
// run, atomically, and nowhere else.
package fstool

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/agentrunner/agentrunner/internal/clip"
	"github.com/agentrunner/agentrunner/tool"
)

// Tool names, as spec 4 calls them.
const (
	ReadName = "filesystem_read"
	TreeName = "filesystem_tree"
)

const (
	// DefaultLimit is the page size of filesystem_read when the model gives
	// no limit: big enough for a typical artifact, small for its context.
	DefaultLimit = 32 << 10
	// MaxLimit bounds a page so that a page and its note stay within the
	// executor's default result size.
	MaxLimit = 60 << 10
	// timeout bounds a call: reading a local file is quick (FR-114's data
	// query default).
	timeout = 10 * time.Second
	// sniffBytes of a file's start are checked for NUL bytes, the mark of
	// a binary file.
	sniffBytes = 8 << 10
)

var readSchema = json.RawMessage(`{
  "type": "object",
  "properties": {
    "path": {"type": "string", "description": "The file's absolute path as given in your instructions, or its base name."},
    "offset": {"type": "integer", "minimum": 0, "description": "Byte offset to start reading at; default 0."},
    "limit": {"type": "integer", "minimum": 1, "description": "Most bytes to read; default 32768, at most 61440."}
  },
  "required": ["path"],
  "additionalProperties": false
}`)

var treeSchema = json.RawMessage(`{
  "type": "object",
  "properties": {
    "max_depth": {"type": "integer", "minimum": 1, "description": "Most directory levels to show; default all."}
  },
  "additionalProperties": false
}`)

// New returns filesystem_read and filesystem_tree confined to files, which
// must be absolute paths. Empty entries are skipped (an optional file the
// agent does not have); a relative entry is a runner bug and is refused
// whenever the model asks for it.
//
// dirs are folders (absolute paths) whose files may be read too: the
// regular files found below them at the time of each call, so a file
// written during the conversation (a sub-agent's report under the run's
// memory/) is read like the others. Hidden names are left out, and so is
// a folder that does not exist (yet). A file under a folder may also be
// named by its path relative to the folder's parent (memory/report.md).
func New(files []string, dirs ...string) []tool.Local {
	s := newSet(files, dirs)
	return []tool.Local{
		{
			Spec: tool.Spec{
				Name: ReadName,
				Description: "Read one of the files you were given (inputs, mailbox, memory, output template, schema) by its absolute path " +
					"as written in your instructions, or by its base name; a report under your run's memory/ folder also by its path from the run (memory/report.md). Text files only. A large file is read in pages: " +
					"the answer says the total size and the offset to read on from.",
				Parameters: readSchema,
				Timeout:    timeout,
			},
			Handler: tool.HandlerFunc(s.read),
		},
		{
			Spec: tool.Spec{
				Name:        TreeName,
				Description: "List the files you may read, grouped by directory, with their sizes: the files you were given and the reports under your run's memory/ folder; a file that does not exist yet is marked so.",
				Parameters:  treeSchema,
				Timeout:     timeout,
			},
			Handler: tool.HandlerFunc(s.tree),
		},
	}
}

// set is the allowed files.
type set struct {
	files    []string // cleaned absolute paths, sorted, unique
	relative []string // entries that were not absolute
	// dirs are folders whose files below are allowed, cleaned absolute
	// paths; their files are listed at each call (current).
	dirs []string
	// root is the deepest directory holding every file; rootReal is where
	// it resolves to. Symbolic links above the root (a system's /var, a
	// workspace reached through a link) are the operator's and trusted;
	// below it, none may lead a file elsewhere.
	root, rootReal string
}

func newSet(files, dirs []string) *set {
	s := &set{}
	seen := map[string]bool{}
	for _, d := range dirs {
		if d == "" || !filepath.IsAbs(d) {
			continue
		}
		if d = filepath.Clean(d); !slices.Contains(s.dirs, d) {
			s.dirs = append(s.dirs, d)
		}
	}
	for _, f := range files {
		if f == "" {
			continue
		}
		if !filepath.IsAbs(f) {
			s.relative = append(s.relative, f)
			continue
		}
		f = filepath.Clean(f)
		if !seen[f] {
			seen[f] = true
			s.files = append(s.files, f)
		}
	}
	sort.Strings(s.files)
	// The root holds the folders too: a file below one of them is
	// checked for links like the others.
	entries := slices.Clone(s.files)
	for _, d := range s.dirs {
		entries = append(entries, filepath.Join(d, "_"))
	}
	if len(entries) > 0 {
		s.root = filepath.Dir(entries[0])
		for _, f := range entries[1:] {
			for !within(f, s.root) {
				s.root = filepath.Dir(s.root)
			}
		}
		s.rootReal = resolve(s.root)
	}
	return s
}

// within reports whether path is inside dir.
func within(path, dir string) bool {
	if dir == string(filepath.Separator) {
		return true
	}
	return strings.HasPrefix(path, dir+string(filepath.Separator))
}

// resolve returns where path leads once every symbolic link is followed,
// for the part of the path that exists; the rest is appended unchanged.
func resolve(path string) string {
	rest := ""
	for {
		if r, err := filepath.EvalSymlinks(path); err == nil {
			return filepath.Join(r, rest)
		}
		parent := filepath.Dir(path)
		if parent == path {
			return filepath.Join(path, rest)
		}
		rest = filepath.Join(filepath.Base(path), rest)
		path = parent
	}
}

// errRefused is a path the model may not read.
type errRefused struct {
	msg string
	// reason is why an allowed file is refused, for the tree.
	reason string
}

func (e *errRefused) Error() string { return e.msg }

func refuse(format string, args ...any) error {
	return &errRefused{msg: fmt.Sprintf(format, args...)}
}

// refuseFile refuses an allowed file for what it has become.
func refuseFile(path, reason string) error {
	return &errRefused{msg: path + " is refused: " + reason, reason: reason}
}

// lookup turns the path a model gave into an allowed file.
func (s *set) lookup(p string) (string, error) {
	switch {
	case p == "":
		return "", refuse("path is empty; give the absolute path of one of your files or its base name (%s)", s.listing())
	case strings.ContainsRune(p, 0):
		return "", refuse("path contains a NUL byte")
	case hasDotDot(p):
		return "", refuse("path %q contains \"..\"; give the absolute path of one of your files or its base name (%s)", p, s.listing())
	}
	if filepath.IsAbs(p) {
		clean := filepath.Clean(p)
		i := sort.SearchStrings(s.files, clean)
		if i < len(s.files) && s.files[i] == clean {
			return clean, nil
		}
		if s.inDir(clean) {
			return clean, nil
		}
		return "", refuse("%s is not one of the files you may read (%s)", p, s.listing())
	}
	if strings.ContainsRune(p, '/') || strings.ContainsRune(p, filepath.Separator) || p == "." {
		// A path from a folder's parent: memory/report.md.
		for _, d := range s.dirs {
			if clean := filepath.Join(filepath.Dir(d), filepath.FromSlash(p)); s.inDir(clean) {
				return clean, nil
			}
		}
		return "", refuse("path %q is relative; give the absolute path of one of your files or its base name (%s)", p, s.listing())
	}
	var matches []string
	for _, f := range s.current() {
		if filepath.Base(f) == p {
			matches = append(matches, f)
		}
	}
	for _, f := range s.relative {
		if filepath.Base(f) == p {
			return "", refuse("%s cannot be read: the runner gave its path as %q, which is not absolute", p, f)
		}
	}
	switch len(matches) {
	case 0:
		return "", refuse("no file named %q among the files you may read (%s)", p, s.listing())
	case 1:
		return matches[0], nil
	}
	return "", refuse("%q is ambiguous: it may be %s; give the absolute path", p, strings.Join(matches, " or "))
}

func hasDotDot(p string) bool {
	for _, part := range strings.FieldsFunc(p, func(r rune) bool { return r == '/' || r == filepath.Separator }) {
		if part == ".." {
			return true
		}
	}
	return false
}

// listing names the allowed files for an error message.
func (s *set) listing() string {
	files := s.current()
	if len(files) == 0 {
		return "you have no files to read"
	}
	if len(files) > maxListed {
		return fmt.Sprintf("you may read: %s and %d more; call %s to see them all", strings.Join(files[:maxListed], ", "), len(files)-maxListed, TreeName)
	}
	return "you may read: " + strings.Join(files, ", ")
}

// maxListed bounds the files an error message names; maxDirFiles the
// files listed below the folders, as a model reads a few reports, not
// thousands.
const (
	maxListed   = 40
	maxDirFiles = 1000
)

// inDir reports whether path (clean, absolute) names a file below one of
// the folders with no hidden name between: whether it may be read if it
// is a regular file there.
func (s *set) inDir(path string) bool {
	for _, d := range s.dirs {
		if !within(path, d) {
			continue
		}
		rel := strings.TrimPrefix(path, d+string(filepath.Separator))
		hidden := false
		for _, name := range strings.Split(rel, string(filepath.Separator)) {
			if name == "" || strings.HasPrefix(name, ".") {
				hidden = true
			}
		}
		if !hidden {
			return true
		}
	}
	return false
}

// current is the allowed files now: the given files and the regular
// files found below the folders, sorted, unique. Links below a folder
// are not followed, and hidden names (a write's temporary file) are
// left out.
func (s *set) current() []string {
	if len(s.dirs) == 0 {
		return s.files
	}
	files := slices.Clone(s.files)
	found := 0
	for _, d := range s.dirs {
		filepath.WalkDir(d, func(path string, e fs.DirEntry, err error) error {
			switch {
			case err != nil:
				return nil // a folder that cannot be read (or is absent) has nothing to read
			case path == d:
				if !e.IsDir() {
					return filepath.SkipDir
				}
				return nil
			case strings.HasPrefix(e.Name(), "."):
				if e.IsDir() {
					return filepath.SkipDir
				}
				return nil
			case found >= maxDirFiles:
				return filepath.SkipAll
			case e.Type().IsRegular():
				files = append(files, path)
				found++
			}
			return nil
		})
	}
	sort.Strings(files)
	return slices.Compact(files)
}

// errMissing is an allowed file that is not there (yet).
var errMissing = errors.New("does not exist yet")

// check confirms that an allowed file may be opened: it is not reached
// through a symbolic link leading elsewhere, exists and is a regular file.
// It returns the path to open and the file's info.
func (s *set) check(path string) (string, fs.FileInfo, error) {
	expected := path
	if s.rootReal != "" {
		expected = filepath.Join(s.rootReal, strings.TrimPrefix(path, s.root))
	}
	if resolve(path) != expected {
		return "", nil, refuseFile(path, "it resolves through a symbolic link to another location")
	}
	info, err := os.Lstat(expected)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return "", nil, fmt.Errorf("%s %w", path, errMissing)
	case err != nil:
		return "", nil, fmt.Errorf("%s cannot be read: %v", path, describe(err))
	case info.Mode()&fs.ModeSymlink != 0:
		return "", nil, refuseFile(path, "it is a symbolic link")
	case info.IsDir():
		return "", nil, refuseFile(path, "it is a directory, not a file")
	case !info.Mode().IsRegular():
		return "", nil, refuseFile(path, "it is not a regular file")
	}
	return expected, info, nil
}

// describe words a file system error without the path it repeats.
func describe(err error) string {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err.Error()
	}
	return err.Error()
}

type readArgs struct {
	Path   string `json:"path"`
	Offset *int64 `json:"offset"`
	Limit  *int64 `json:"limit"`
}

func (s *set) read(_ context.Context, raw json.RawMessage) (string, error) {
	var a readArgs
	if err := tool.DecodeArgs(raw, &a); err != nil {
		return "", err
	}
	offset, limit := int64(0), int64(DefaultLimit)
	if a.Offset != nil {
		if *a.Offset < 0 {
			return "", fmt.Errorf("offset %d is negative", *a.Offset)
		}
		offset = *a.Offset
	}
	clamped := false
	if a.Limit != nil {
		if *a.Limit < 1 {
			return "", fmt.Errorf("limit %d must be at least 1", *a.Limit)
		}
		limit = *a.Limit
		if limit > MaxLimit {
			limit, clamped = MaxLimit, true
		}
	}
	path, err := s.lookup(a.Path)
	if err != nil {
		return "", err
	}
	open, _, err := s.check(path)
	if err != nil {
		return "", err
	}
	f, err := os.Open(open)
	if err != nil {
		return "", fmt.Errorf("%s cannot be read: %v", path, describe(err))
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return "", fmt.Errorf("%s cannot be read: %v", path, describe(err))
	}
	if !info.Mode().IsRegular() {
		return "", refuseFile(path, "it is not a regular file")
	}
	size := info.Size()
	if size == 0 {
		return fmt.Sprintf("(%s is empty)", path), nil
	}
	if offset >= size {
		return "", fmt.Errorf("offset %d is past the end of %s (%d bytes)", offset, path, size)
	}
	head := make([]byte, min(size, sniffBytes))
	if _, err := io.ReadFull(io.NewSectionReader(f, 0, size), head); err != nil {
		return "", fmt.Errorf("%s cannot be read: %v", path, describe(err))
	}
	if bytes.IndexByte(head, 0) >= 0 {
		return "", fmt.Errorf("%s is a binary file, not text; it cannot be read", path)
	}
	// Read a little more than the page so the page can end on a whole
	// character.
	buf := make([]byte, min(limit+utf8.UTFMax, size-offset))
	if _, err := io.ReadFull(io.NewSectionReader(f, offset, size-offset), buf); err != nil {
		return "", fmt.Errorf("%s cannot be read: %v", path, describe(err))
	}
	// An offset inside a character moves on to the next whole one.
	skip := 0
	for skip < len(buf) && skip < utf8.UTFMax && !utf8.RuneStart(buf[skip]) {
		skip++
	}
	start := offset + int64(skip)
	page := buf[skip:]
	if int64(len(page)) > limit {
		page = page[:clip.Index(string(page), int(limit))]
	}
	if !utf8.Valid(page) || bytes.IndexByte(page, 0) >= 0 {
		return "", fmt.Errorf("%s is a binary file, not UTF-8 text; it cannot be read", path)
	}
	end := start + int64(len(page))
	if start == 0 && end == size {
		return string(page), nil
	}
	note := fmt.Sprintf("[%s: bytes %d to %d of %d", path, start, end, size)
	if end < size {
		note += fmt.Sprintf("; to read on, call %s with offset %d", ReadName, end)
	} else {
		note += "; this is the end of the file"
	}
	if clamped {
		note += fmt.Sprintf("; limit reduced to %d", MaxLimit)
	}
	return string(page) + "\n\n" + note + "]", nil
}

type treeArgs struct {
	MaxDepth *int `json:"max_depth"`
}

func (s *set) tree(_ context.Context, raw json.RawMessage) (string, error) {
	var a treeArgs
	if err := tool.DecodeArgs(raw, &a); err != nil {
		return "", err
	}
	maxDepth := -1
	if a.MaxDepth != nil {
		if *a.MaxDepth < 1 {
			return "", fmt.Errorf("max_depth %d must be at least 1", *a.MaxDepth)
		}
		maxDepth = *a.MaxDepth
	}
	files := s.current()
	if len(files) == 0 && len(s.relative) == 0 {
		return "You have no files to read.", nil
	}
	var b strings.Builder
	fmt.Fprintf(&b, "You may read %s:\n", plural(len(files)+len(s.relative), "file"))
	if len(files) > 0 {
		root := &node{children: map[string]*node{}}
		for _, f := range files {
			root.add(strings.Split(strings.TrimPrefix(strings.TrimPrefix(f, s.root), string(filepath.Separator)), string(filepath.Separator)), f)
		}
		b.WriteString(dirLabel(s.root) + "\n")
		s.render(&b, root, 1, maxDepth)
	}
	for _, f := range s.relative {
		fmt.Fprintf(&b, "%s (cannot be read: the runner gave a relative path)\n", f)
	}
	return strings.TrimSuffix(b.String(), "\n"), nil
}

// node is a directory or a file of the tree, relative to the set's root.
type node struct {
	path     string // a file's absolute path; empty for a directory
	children map[string]*node
}

func (n *node) add(parts []string, path string) {
	if len(parts) == 1 {
		n.children[parts[0]] = &node{path: path}
		return
	}
	child := n.children[parts[0]]
	if child == nil {
		child = &node{children: map[string]*node{}}
		n.children[parts[0]] = child
	}
	child.add(parts[1:], path)
}

func (n *node) files() int {
	if n.path != "" {
		return 1
	}
	total := 0
	for _, c := range n.children {
		total += c.files()
	}
	return total
}

// render writes n's children at depth, files first, then directories;
// a chain of directories holding a single directory is written as one.
func (s *set) render(b *strings.Builder, n *node, depth, maxDepth int) {
	indent := strings.Repeat("  ", depth)
	names := make([]string, 0, len(n.children))
	for name := range n.children {
		names = append(names, name)
	}
	sort.Slice(names, func(i, j int) bool {
		fi, fj := n.children[names[i]].path != "", n.children[names[j]].path != ""
		if fi != fj {
			return fi
		}
		return names[i] < names[j]
	})
	for _, name := range names {
		c := n.children[name]
		if c.path != "" {
			fmt.Fprintf(b, "%s%s (%s)\n", indent, name, s.status(c.path))
			continue
		}
		label := name
		for len(c.children) == 1 {
			var only string
			for k := range c.children {
				only = k
			}
			if c.children[only].path != "" {
				break
			}
			label, c = label+string(filepath.Separator)+only, c.children[only]
		}
		if maxDepth > 0 && depth >= maxDepth {
			fmt.Fprintf(b, "%s%s/ (%s below; raise max_depth to see them)\n", indent, label, plural(c.files(), "file"))
			continue
		}
		fmt.Fprintf(b, "%s%s/\n", indent, label)
		s.render(b, c, depth+1, maxDepth)
	}
}

// status says whether a file can be read and how big it is.
func (s *set) status(path string) string {
	_, info, err := s.check(path)
	switch {
	case errors.Is(err, errMissing):
		return "does not exist yet"
	case err != nil:
		var r *errRefused
		if errors.As(err, &r) && r.reason != "" {
			return "refused: " + r.reason
		}
		return "cannot be read"
	}
	return fmt.Sprintf("%d bytes", info.Size())
}

func plural(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return fmt.Sprintf("%d %ss", n, what)
}

func dirLabel(dir string) string {
	if strings.HasSuffix(dir, string(filepath.Separator)) {
		return dir
	}
	return dir + string(filepath.Separator)
}
