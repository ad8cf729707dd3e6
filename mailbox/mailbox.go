// Package mailbox keeps one inbox file per agent, <dir>/mailbox.<agent>,
// that the runner writes and agents (child processes) read while they run
// (FR-025..033).
//
// A mailbox is JSON lines, one message per line, oldest first, so both a
// program and an LLM can read it. The runner rewrites the whole file
// atomically on every deposit, so another process reading it at any moment
// sees either the old or the new complete file, never a torn one.
package mailbox

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/agentrunner/agentrunner"
	"github.com/agentrunner/agentrunner/internal/atomicfile"
)

// Kind says why a message was sent; agents use it to weigh a message.
type Kind string

const (
	// Forward is context an agent hands to the next agent (FR-028).
	Forward Kind = "forward"
	// Backward is feedback to an earlier agent of the pipeline (FR-029).
	Backward Kind = "backward"
	// Broadcast is the evaluation's lessons, sent to all agents (FR-030).
	Broadcast Kind = "broadcast"
	// Inject is a message an operator put in by hand.
	Inject Kind = "inject"
	// Status is a notice from the runner, such as an execution outcome.
	Status Kind = "status"
)

// Valid reports whether k is one of the known kinds.
func (k Kind) Valid() bool {
	switch k {
	case Forward, Backward, Broadcast, Inject, Status:
		return true
	}
	return false
}

// Message is one line of a mailbox.
type Message struct {
	// ID is stable: depositing the same ID again replaces that message, so
	// a delivery retried after a crash does not double it.
	ID string `json:"id"`
	// Time is when the message was sent (FR-033); stored as UTC RFC 3339.
	Time    time.Time `json:"time"`
	From    string    `json:"from"`
	Kind    Kind      `json:"kind"`
	CycleID string    `json:"cycle_id,omitempty"`
	Body    string    `json:"body"`
}

// Validate reports the first thing wrong with m, so a bad message is
// refused before it reaches a file that agents read.
func (m *Message) Validate() error {
	switch {
	case m.ID == "":
		return errors.New("id is empty")
	case m.From == "":
		return errors.New("from is empty")
	case m.Kind == "":
		return errors.New("kind is empty")
	case !m.Kind.Valid():
		return fmt.Errorf("kind %q is not one of forward, backward, broadcast, inject, status", m.Kind)
	case m.Body == "":
		return errors.New("body is empty")
	case m.Time.IsZero():
		return errors.New("time is zero")
	}
	// JSON cannot carry these years in RFC 3339; refuse them here with a
	// clear message rather than fail inside the encoder.
	if y := m.Time.UTC().Year(); y < 0 || y > 9999 {
		return fmt.Errorf("time %s is outside the years 0000..9999", m.Time.UTC().Format(time.RFC3339))
	}
	// The JSON encoder would silently replace invalid UTF-8, changing the
	// message; refuse it instead.
	for _, f := range []struct{ name, value string }{
		{"id", m.ID}, {"from", m.From}, {"cycle_id", m.CycleID}, {"body", m.Body},
	} {
		if !utf8.ValidString(f.value) {
			return fmt.Errorf("%s is not valid UTF-8", f.name)
		}
	}
	return nil
}

// ErrCorrupt is wrapped by the error of Read and Deposit when a mailbox file
// holds a line that is not a valid message. Deposit then writes nothing, so
// an operator's data is never silently dropped.
var ErrCorrupt = errors.New("corrupt mailbox")

const (
	filePrefix = "mailbox."
	filePerm   = 0o644 // agents may run as another user and must read it
	dirPerm    = 0o755
	maxAgent   = 128
)

// ValidateAgent reports whether agent can name a mailbox: a safe file-name
// component of ASCII letters, digits, '_', '-' and '.', not starting with
// '.' and without "..", so a name can never reach outside the directory.
func ValidateAgent(agent string) error {
	if agent == "" {
		return agentrunner.Errorf(agentrunner.EINVALID, "agent name is empty")
	}
	if len(agent) > maxAgent {
		return agentrunner.Errorf(agentrunner.EINVALID, "agent name %.20q… is longer than %d characters", agent, maxAgent)
	}
	if agent[0] == '.' {
		return agentrunner.Errorf(agentrunner.EINVALID, "agent name %q starts with '.'", agent)
	}
	for i := 0; i < len(agent); i++ {
		c := agent[i]
		ok := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' ||
			c == '_' || c == '-' || c == '.'
		if !ok {
			return agentrunner.Errorf(agentrunner.EINVALID,
				"agent name %q has character %q at byte %d; use letters, digits, '_', '-' and '.'", agent, rune(c), i)
		}
		if c == '.' && i > 0 && agent[i-1] == '.' {
			return agentrunner.Errorf(agentrunner.EINVALID, "agent name %q contains \"..\"", agent)
		}
	}
	return nil
}

// Mailboxes is the set of mailboxes in one directory, keeping at most max
// messages each (FR-031). It is safe for concurrent use; deposits are
// serialized so none is lost to a concurrent read-modify-write.
type Mailboxes struct {
	dir string
	max int
	// mu serializes deposits in this process. The runner is the only
	// writer of a workspace's mailboxes; readers in other processes need no
	// lock because every write is an atomic rename.
	mu sync.Mutex
	// last holds each mailbox as this process last read or wrote it, so a
	// deposit on every step does not parse the file again: a write
	// renames a new file into place, so an unchanged identity (inode,
	// size, modification time) means unchanged content.
	last map[string]cached
}

type cached struct {
	id   fileID
	msgs []Message
}

type fileID struct {
	ino, size, mtime int64
}

func statID(path string) (fileID, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return fileID{}, err
	}
	ino, ok := inode(fi)
	if !ok {
		return fileID{}, fmt.Errorf("stat %s: no inode number", path)
	}
	return fileID{ino: ino, size: fi.Size(), mtime: fi.ModTime().UnixNano()}, nil
}

// New returns the mailboxes in dir, keeping at most max messages each;
// choosing the default (5) is the caller's job. dir is made absolute, so
// paths handed to agents do not depend on their working directory, and is
// created if missing.
func New(dir string, max int) (*Mailboxes, error) {
	if dir == "" {
		return nil, agentrunner.Errorf(agentrunner.EINVALID, "mailbox directory is empty")
	}
	if max < 1 {
		return nil, agentrunner.Errorf(agentrunner.EINVALID, "maximum messages per mailbox is %d; it must be at least 1", max)
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("mailbox directory %s: %w", dir, err)
	}
	if err := atomicfile.MkdirAll(abs, dirPerm); err != nil {
		return nil, fmt.Errorf("create mailbox directory: %w", err)
	}
	return &Mailboxes{dir: abs, max: max, last: map[string]cached{}}, nil
}

// Dir returns the absolute directory holding the mailboxes.
func (m *Mailboxes) Dir() string { return m.dir }

// Max returns the most messages a mailbox keeps.
func (m *Mailboxes) Max() int { return m.max }

// Path returns the file of agent's mailbox, to hand to the agent. It does
// not validate the name; check untrusted names with ValidateAgent first.
func (m *Mailboxes) Path(agent string) string {
	return filepath.Join(m.dir, filePrefix+agent)
}

// Deposit puts msg in agent's mailbox: it replaces the message with the same
// ID in place, or appends msg and drops the oldest messages beyond the
// maximum (FR-026, FR-032). replaced reports whether a message was replaced.
// msg.Time is stored in UTC. The file is rewritten atomically; when the
// current file is corrupt, Deposit fails and leaves it as it is.
func (m *Mailboxes) Deposit(agent string, msg Message) (replaced bool, err error) {
	r, err := m.DepositAll([]Delivery{{Agent: agent, Msg: msg}})
	if err != nil {
		return false, err
	}
	return r[0], nil
}

// Delivery is one message for one agent's mailbox.
type Delivery struct {
	Agent string
	Msg   Message
}

// DepositAll makes several deposits, in order, as Deposit does, with one
// fsync of the mailbox directory for all of them: a step delivers to a few
// mailboxes at once. replaced[i] tells whether ds[i] replaced a message.
// Nothing is written if any message is invalid or any mailbox it goes to
// is corrupt; each mailbox file is replaced atomically.
func (m *Mailboxes) DepositAll(ds []Delivery) (replaced []bool, err error) {
	for i := range ds {
		if err := ValidateAgent(ds[i].Agent); err != nil {
			return nil, err
		}
		if err := ds[i].Msg.Validate(); err != nil {
			return nil, agentrunner.Errorf(agentrunner.EINVALID, "message for mailbox of %s: %v", ds[i].Agent, err)
		}
	}

	m.mu.Lock()
	defer m.mu.Unlock()

	boxes := map[string][]Message{}
	var paths []string // in the order first deposited to
	replaced = make([]bool, len(ds))
	for i, d := range ds {
		msg := d.Msg
		msg.Time = msg.Time.UTC()
		path := m.Path(d.Agent)
		msgs, seen := boxes[path]
		if !seen {
			if msgs, err = m.current(path); err != nil {
				return nil, err
			}
			paths = append(paths, path)
		}
		for j := range msgs {
			if msgs[j].ID == msg.ID {
				msgs[j] = msg
				replaced[i] = true
				break
			}
		}
		if !replaced[i] {
			msgs = append(msgs, msg)
		}
		if len(msgs) > m.max {
			msgs = msgs[len(msgs)-m.max:]
		}
		boxes[path] = msgs
	}

	files := make([]atomicfile.File, len(paths))
	for i, path := range paths {
		data, err := encode(boxes[path])
		if err != nil {
			return nil, fmt.Errorf("encode mailbox %s: %w", path, err)
		}
		files[i] = atomicfile.File{Path: path, Data: data, Perm: filePerm}
	}
	if err := atomicfile.WriteFiles(files); err != nil {
		for _, path := range paths {
			delete(m.last, path)
		}
		return nil, fmt.Errorf("write mailboxes: %w", err)
	}
	for _, path := range paths {
		if id, err := statID(path); err == nil {
			m.last[path] = cached{id: id, msgs: boxes[path]}
		} else {
			delete(m.last, path)
		}
	}
	return replaced, nil
}

// current returns a copy of the messages in the mailbox at path, from
// m.last while the file is the one it describes; the caller holds mu.
func (m *Mailboxes) current(path string) ([]Message, error) {
	id, err := statID(path)
	if errors.Is(err, os.ErrNotExist) {
		delete(m.last, path)
		return nil, nil
	}
	if err == nil {
		if c, ok := m.last[path]; ok && c.id == id {
			return append([]Message(nil), c.msgs...), nil
		}
	}
	msgs, err := readFile(path)
	if err != nil {
		delete(m.last, path)
		return nil, err
	}
	if id2, err := statID(path); err == nil && id2 == id {
		m.last[path] = cached{id: id, msgs: msgs}
	}
	return append([]Message(nil), msgs...), nil
}

// Read returns the last n messages of agent's mailbox, oldest first, or all
// of them when n <= 0 (FR-027). A mailbox never written to is empty.
func (m *Mailboxes) Read(agent string, n int) ([]Message, error) {
	if err := ValidateAgent(agent); err != nil {
		return nil, err
	}
	msgs, err := readFile(m.Path(agent))
	if err != nil {
		return nil, err
	}
	if n > 0 && len(msgs) > n {
		msgs = msgs[len(msgs)-n:]
	}
	return msgs, nil
}

// ReadFile returns the messages of the mailbox file at path, oldest
// first, for readers without a Mailboxes (a running agent's runtime). A
// missing file is an empty mailbox.
func ReadFile(path string) ([]Message, error) { return readFile(path) }

// readFile parses a mailbox file; a missing file is an empty mailbox.
func readFile(path string) ([]Message, error) {
	data, err := atomicfile.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read mailbox: %w", err)
	}
	return parse(path, data)
}

// parse decodes JSON lines strictly: an unknown field, trailing data or a
// duplicate ID would be lost or changed by the next rewrite, so each is
// reported as corruption rather than dropped. Blank lines carry no data and
// are skipped.
func parse(path string, data []byte) ([]Message, error) {
	var msgs []Message
	seen := make(map[string]int)
	for i, line := range bytes.Split(data, []byte("\n")) {
		lineNo := i + 1
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		corrupt := func(format string, args ...any) error {
			return fmt.Errorf("%w: %s line %d: %s", ErrCorrupt, path, lineNo, fmt.Sprintf(format, args...))
		}
		if !utf8.Valid(line) {
			return nil, corrupt("not valid UTF-8")
		}
		dec := json.NewDecoder(bytes.NewReader(line))
		dec.DisallowUnknownFields()
		var msg Message
		if err := dec.Decode(&msg); err != nil {
			return nil, corrupt("not a JSON message: %v", err)
		}
		if _, err := dec.Token(); !errors.Is(err, io.EOF) {
			return nil, corrupt("data after the JSON message")
		}
		if err := msg.Validate(); err != nil {
			return nil, corrupt("invalid message: %v", err)
		}
		if first, ok := seen[msg.ID]; ok {
			return nil, corrupt("id %q repeats the message of line %d", msg.ID, first)
		}
		seen[msg.ID] = lineNo
		msg.Time = msg.Time.UTC()
		msgs = append(msgs, msg)
	}
	return msgs, nil
}

// encode writes messages as JSON lines, each ending in a newline.
func encode(msgs []Message) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	// Keep '<', '>' and '&' readable for the LLMs that read the file.
	enc.SetEscapeHTML(false)
	for i := range msgs {
		if err := enc.Encode(&msgs[i]); err != nil {
			return nil, fmt.Errorf("message %q: %w", msgs[i].ID, err)
		}
	}
	return buf.Bytes(), nil
}
