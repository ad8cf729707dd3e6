package mailbox

import (
	"bytes"
	"context"
	"errors"
	"io/fs"
	"os"
	"time"

	"github.com/agentrunner/agentrunner"
	"github.com/agentrunner/agentrunner/artifact"
	"github.com/agentrunner/agentrunner/view"
)

// Render is the mailbox file that holds lines, the store's, oldest first:
// each line ends in a newline.
func Render(lines [][]byte) []byte {
	var buf bytes.Buffer
	for _, l := range lines {
		buf.Write(l)
		buf.WriteByte('\n')
	}
	return buf.Bytes()
}

// Sync writes the view of agent's mailbox from the store, after a commit
// that deposited into it: without an fsync, since the store holds the
// messages; a crash that loses the file is repaired by Check.
func (m *Mailboxes) Sync(ctx context.Context, store agentrunner.MailStore, agent string) error {
	if err := ValidateAgent(agent); err != nil {
		return err
	}
	m.views.Lock()
	defer m.views.Unlock()
	delete(m.known, agent) // the messages changed
	lines, err := store.Mailbox(ctx, agent)
	if err != nil {
		return err
	}
	if err := m.write(agent, lines); err != nil {
		return err
	}
	m.remember(agent)
	return nil
}

// remember records the state of agent's view, now the store's; the
// caller holds views.
func (m *Mailboxes) remember(agent string) {
	info, err := os.Stat(m.Path(agent))
	switch {
	case err == nil:
		m.known[agent] = fileState{info: info}
	case errors.Is(err, fs.ErrNotExist):
		m.known[agent] = fileState{}
	default:
		delete(m.known, agent)
	}
}

// unchanged reports whether agent's view is as this process last wrote or
// checked it; the caller holds views.
func (m *Mailboxes) unchanged(agent string) bool {
	k, ok := m.known[agent]
	if !ok {
		return false
	}
	info, err := os.Stat(m.Path(agent))
	if k.info == nil {
		return errors.Is(err, fs.ErrNotExist)
	}
	return err == nil && os.SameFile(k.info, info) && info.Size() == k.info.Size() && info.ModTime().Equal(k.info.ModTime())
}

// write writes a view; the caller holds views. A mailbox with no message
// has no file, as before its first message.
func (m *Mailboxes) write(agent string, lines [][]byte) error {
	path := m.Path(agent)
	if len(lines) == 0 {
		if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		return nil
	}
	return view.Write(path, stored(agent, lines))
}

// Check compares the view of agent's mailbox with the store's messages by
// hash and rewrites it when it is missing or differs, so an agent never
// reads a stale mailbox. A view this process wrote or checked, whose file
// has not changed since, is right without a look at the store. It returns why it rewrote it (view.Missing,
// view.Different), or "" when the file was right.
func (m *Mailboxes) Check(ctx context.Context, store agentrunner.MailStore, agent string) (string, error) {
	if err := ValidateAgent(agent); err != nil {
		return "", err
	}
	m.views.Lock()
	defer m.views.Unlock()
	if m.unchanged(agent) {
		return "", nil
	}
	delete(m.known, agent)
	reason, err := m.check(ctx, store, agent)
	if err == nil {
		m.remember(agent)
	}
	return reason, err
}

// check is Check once the view is known to need a look at the store; the
// caller holds views.
func (m *Mailboxes) check(ctx context.Context, store agentrunner.MailStore, agent string) (string, error) {
	lines, err := store.Mailbox(ctx, agent)
	if err != nil {
		return "", err
	}
	path := m.Path(agent)
	if len(lines) == 0 {
		if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
			return "", nil
		}
		if err := m.write(agent, nil); err != nil {
			return "", err
		}
		return view.Different, nil
	}
	return view.Check(path, stored(agent, lines))
}

// stored is a mailbox's file as the store's copy that view writes and
// checks.
func stored(agent string, lines [][]byte) *agentrunner.StoredFile {
	data := Render(lines)
	return &agentrunner.StoredFile{Name: filePrefix + agent, Data: data, SHA256: artifact.Hash(data)}
}

// Stored returns the messages of agent's mailbox as the store holds them,
// oldest first: the truth, which the file may lag behind after a crash.
func (m *Mailboxes) Stored(ctx context.Context, store agentrunner.MailStore, agent string) ([]Message, error) {
	return ReadStored(ctx, store, agent)
}

// ReadStored is Stored for readers without a Mailboxes (a running agent's
// runtime, which looks for an operator's messages between turns).
func ReadStored(ctx context.Context, store agentrunner.MailStore, agent string) ([]Message, error) {
	if err := ValidateAgent(agent); err != nil {
		return nil, err
	}
	lines, err := store.Mailbox(ctx, agent)
	if err != nil {
		return nil, err
	}
	return parse("the stored mailbox of "+agent, Render(lines))
}

// Repaired is the event that records the view of agent's mailbox
// rewritten from the store (details: path, mailbox, reason).
func (m *Mailboxes) Repaired(now time.Time, agent, reason string) *agentrunner.Event {
	return &agentrunner.Event{Timestamp: now, Type: agentrunner.EventViewRepaired, Agent: agent, Level: agentrunner.LevelWarn,
		Details: map[string]any{"path": m.Path(agent), "mailbox": agent, "reason": reason}}
}

// Legacy returns the deposits that bring the messages of agent's mailbox
// file into the store, oldest first: a workspace whose mailboxes were
// files before the store kept them is imported at start, so no message is
// lost. A corrupt file is an error (ErrCorrupt, naming its line), never
// dropped.
func (m *Mailboxes) Legacy(agent string) ([]*agentrunner.MailDeposit, error) {
	msgs, err := m.Read(agent, 0)
	if err != nil {
		return nil, err
	}
	ds := make([]*agentrunner.MailDeposit, len(msgs))
	for i, msg := range msgs {
		if ds[i], err = m.Deposit(agent, msg); err != nil {
			return nil, err
		}
	}
	return ds, nil
}
