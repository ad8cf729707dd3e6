// Package mailbox keeps one inbox file per agent, <dir>/mailbox.<agent>,
// that agents (child processes) read while they run (FR-025..033).
//
// A mailbox is JSON lines, one message per line, oldest first, so both a
// program and an LLM can read it. The store is the truth of a mailbox: a
// message is deposited (Deposit) in the transaction of the change that
// sends it, and the file is a view of the store's messages, rendered after
// the commit without an fsync (Sync). A crash can leave a view stale or
// missing, never the store wrong: the runner checks every view at start
// and an agent's own before the agent runs (Check). A view is replaced by
// renaming a new file over it, so another process reading it at any moment
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

// ErrCorrupt is wrapped by the error of Read and Legacy when a mailbox
// file holds a line that is not a valid message.
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

// Mailboxes are the files of the agents' mailboxes in one directory,
// each a view of the store's messages of its agent, and the size they
// keep (FR-031). It is safe for concurrent use.
type Mailboxes struct {
	dir string
	max int
	// views serializes the reading of the store and the writing of a view
	// that follows it, for every Mailboxes of the directory (WithMax
	// shares it): a check that read the store before a commit must not
	// write its older view over the newer one written after the commit.
	views *sync.Mutex
	// known are the views this process wrote or checked against the store
	// (under views, shared like it), by agent: a view whose file has not
	// changed since (the same file, size and modification time) needs no
	// store read before its agent runs, because only this process's
	// commits change the messages and each one is followed by Sync.
	known map[string]fileState
}

// fileState is a view's file as last written or checked; nil info: no
// file, for a mailbox without messages.
type fileState struct{ info os.FileInfo }

// New returns the mailboxes in dir, keeping at most max messages each;
// choosing the default (5) is the caller's job. dir is made absolute, so
// paths handed to agents do not depend on their working directory, and is
// created if missing.
func New(dir string, max int) (*Mailboxes, error) {
	if dir == "" {
		return nil, agentrunner.Errorf(agentrunner.EINVALID, "mailbox directory is empty")
	}
	if err := validMax(max); err != nil {
		return nil, err
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("mailbox directory %s: %w", dir, err)
	}
	if err := atomicfile.MkdirAll(abs, dirPerm); err != nil {
		return nil, fmt.Errorf("create mailbox directory: %w", err)
	}
	return &Mailboxes{dir: abs, max: max, views: &sync.Mutex{}, known: map[string]fileState{}}, nil
}

func validMax(max int) error {
	if max < 1 {
		return agentrunner.Errorf(agentrunner.EINVALID, "maximum messages per mailbox is %d; it must be at least 1", max)
	}
	return nil
}

// WithMax returns the same mailboxes keeping max messages each, for a
// reloaded configuration: its views are written under the same lock.
func (m *Mailboxes) WithMax(max int) (*Mailboxes, error) {
	if err := validMax(max); err != nil {
		return nil, err
	}
	c := *m
	c.max = max
	return &c, nil
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

// Deposit makes the deposit of msg into agent's mailbox for a change to
// commit: the agent's name and the message are checked and the message
// encoded as its line, in UTC, keeping Max messages. Nothing is written
// here: the store replaces the message with the same ID in place, or
// appends msg and drops the oldest beyond the maximum (FR-026, FR-032),
// and the file is rendered from the store after the commit (Sync).
func (m *Mailboxes) Deposit(agent string, msg Message) (*agentrunner.MailDeposit, error) {
	if err := ValidateAgent(agent); err != nil {
		return nil, err
	}
	if err := msg.Validate(); err != nil {
		return nil, agentrunner.Errorf(agentrunner.EINVALID, "message for mailbox of %s: %v", agent, err)
	}
	msg.Time = msg.Time.UTC()
	line, err := encode([]Message{msg})
	if err != nil {
		return nil, fmt.Errorf("encode a message for mailbox of %s: %w", agent, err)
	}
	return &agentrunner.MailDeposit{Agent: agent, ID: msg.ID, Line: bytes.TrimSuffix(line, []byte("\n")), Keep: m.max}, nil
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
