package memory

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/agentrunner/agentrunner"
	"github.com/agentrunner/agentrunner/internal/atomicfile"
	"github.com/agentrunner/agentrunner/internal/fileop"
)

// MaxEntryChars bounds the text of one memory entry.
const MaxEntryChars = 8000

// OpWriteFile is the Log's file write, by the name its fault hook gets.
const OpWriteFile = "write memory file"

// Log is the agents' memories on a store. An append is committed to the
// store first, which indexes it for search, and then added to the
// agent's memory file, which is a view: each entry appears in it once,
// after a marker `<!-- memory:ID -->`, and an entry the store has but the
// file lacks (a crash between the two writes) is added at the next append
// or Sync. What an agent writes into its file by hand stays; it is not
// searched.
type Log struct {
	store agentrunner.MemoryStore
	opts  LogOptions
}

// LogOptions configure a Log.
type LogOptions struct {
	// Path is the memory file of an agent; required.
	Path func(agent string) string
	// Template is what a memory file starts with when it does not exist
	// yet; nil: a heading naming the agent.
	Template func(agent string) ([]byte, error)
	// Clock stamps the entries; nil: the system clock.
	Clock agentrunner.Clock
	// Faults, if set, is asked before the file write (OpWriteFile); an
	// error it returns is the write's. It is for tests.
	Faults func(op string) error
}

// NewLog returns the memories on store.
func NewLog(store agentrunner.MemoryStore, opts LogOptions) (*Log, error) {
	if store == nil || opts.Path == nil {
		return nil, errors.New("memory: a store and the path of a memory file are required")
	}
	if opts.Clock == nil {
		opts.Clock = agentrunner.SystemClock{}
	}
	return &Log{store: store, opts: opts}, nil
}

// Append adds text to the agent's memory: to the store, then to its file.
// An error after the store took the entry says so; the next Sync adds it
// to the file.
func (l *Log) Append(ctx context.Context, e agentrunner.MemoryEntry) (*agentrunner.MemoryEntry, error) {
	e.Text = strings.TrimSpace(e.Text)
	switch n := utf8.RuneCountInString(e.Text); {
	case e.Agent == "":
		return nil, agentrunner.Errorf(agentrunner.EINVALID, "the agent whose memory it is is required")
	case n == 0:
		return nil, agentrunner.Errorf(agentrunner.EINVALID, "text is empty: give the note to remember")
	case n > MaxEntryChars:
		return nil, agentrunner.Errorf(agentrunner.EINVALID, "text is %d characters, more than %d: keep a memory entry short, or split it", n, MaxEntryChars)
	}
	e.ID, e.CreatedAt = 0, l.opts.Clock.Now().UTC()
	stored, err := l.store.AppendMemory(ctx, &e)
	if err != nil {
		return nil, err
	}
	if err := l.Sync(ctx, e.Agent); err != nil {
		return stored, fmt.Errorf("memory entry %d is stored, and its memory file is behind (the next append or start adds it): %w", stored.ID, err)
	}
	return stored, nil
}

// marker matches an entry's marker in a memory file.
var marker = regexp.MustCompile(`<!-- memory:(\d+) -->`)

// Sync adds to the agent's memory file the entries the store has after
// the newest one the file shows, each once, in one atomic write.
func (l *Log) Sync(ctx context.Context, agent string) error {
	path := l.opts.Path(agent)
	data, err := os.ReadFile(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		if data, err = l.template(agent); err != nil {
			return err
		}
	case err != nil:
		return err
	}
	var last int64
	for _, m := range marker.FindAllSubmatch(data, -1) {
		if id, _ := strconv.ParseInt(string(m[1]), 10, 64); id > last {
			last = id
		}
	}
	missing, err := l.store.MemoryEntries(ctx, agent, last, 0)
	if err != nil || len(missing) == 0 {
		return err
	}
	var b bytes.Buffer
	b.Write(data)
	if len(data) > 0 && !bytes.HasSuffix(data, []byte("\n")) {
		b.WriteByte('\n')
	}
	for _, e := range missing {
		b.WriteString(render(e))
	}
	return fileop.Do(l.opts.Faults, OpWriteFile, func() error {
		if err := atomicfile.MkdirAll(filepath.Dir(path), dirPerm); err != nil {
			return err
		}
		return atomicfile.WriteFile(path, b.Bytes(), filePerm)
	})
}

// render is an entry as its memory file shows it.
func render(e *agentrunner.MemoryEntry) string {
	by := ""
	if e.RunID != "" {
		by = ", cycle " + e.RunID
		if e.Step != "" {
			by += " step " + e.Step
		}
	}
	return fmt.Sprintf("\n<!-- memory:%d -->\n### %s%s\n\n%s\n", e.ID, e.CreatedAt.UTC().Format("2006-01-02 15:04 UTC"), by, e.Text)
}

func (l *Log) template(agent string) ([]byte, error) {
	if l.opts.Template == nil {
		return []byte("# Memory of " + agent + "\n"), nil
	}
	return l.opts.Template(agent)
}

// Search finds memory entries, best first: of the agents named, or of
// every agent (the shared store, FR-040).
func (l *Log) Search(ctx context.Context, query string, agents []string, limit int) ([]*agentrunner.MemoryHit, error) {
	if strings.TrimSpace(query) == "" {
		return nil, agentrunner.Errorf(agentrunner.EINVALID, "query is empty: give the words to search for")
	}
	if limit < 0 || limit > 100 {
		return nil, agentrunner.Errorf(agentrunner.EINVALID, "limit must be from 1 to 100 (0: 20), got %d", limit)
	}
	return l.store.SearchMemory(ctx, query, agents, limit)
}

// Entries lists an agent's entries, oldest first.
func (l *Log) Entries(ctx context.Context, agent string) ([]*agentrunner.MemoryEntry, error) {
	return l.store.MemoryEntries(ctx, agent, 0, 0)
}
