package sqlite

import (
	"bytes"
	"context"

	"github.com/agentrunner/agentrunner"
)

// The statements of the mailboxes. A deposit takes the next seq of its
// agent, or keeps its message's seq when the id is there (replaced in
// place); the cap then deletes what is older than the newest keep.
const (
	sqlDepositMail = `
		INSERT INTO mailbox_messages (agent, id, seq, line)
		VALUES (?1, ?2, (SELECT COALESCE(MAX(seq), 0) + 1 FROM mailbox_messages WHERE agent = ?1), ?3)
		ON CONFLICT (agent, id) DO UPDATE SET line = excluded.line`
	sqlCapMail = `
		DELETE FROM mailbox_messages WHERE agent = ?1 AND seq <= (
			SELECT seq FROM mailbox_messages WHERE agent = ?1 ORDER BY seq DESC LIMIT 1 OFFSET ?2)`
	sqlMailbox = `SELECT line FROM mailbox_messages WHERE agent = ? ORDER BY seq`
)

// depositMail makes a change's deposits, in order; the caller holds mu.
func (w *writer) depositMail(ctx context.Context, ds []*agentrunner.MailDeposit) error {
	for _, d := range ds {
		if err := validDeposit(d); err != nil {
			return err
		}
		what := "mailbox of " + d.Agent
		if _, err := w.exec(ctx, sqlDepositMail, d.Agent, d.ID, d.Line); err != nil {
			return translate(err, what, "")
		}
		if _, err := w.exec(ctx, sqlCapMail, d.Agent, d.Keep); err != nil {
			return translate(err, what, "")
		}
	}
	return nil
}

// validDeposit refuses a deposit the mailbox table cannot hold as one
// line of one agent's mailbox.
func validDeposit(d *agentrunner.MailDeposit) error {
	switch {
	case d.Agent == "" || d.ID == "":
		return agentrunner.Errorf(agentrunner.EINVALID, "mail deposit %q for agent %q: an agent and an id are required", d.ID, d.Agent)
	case len(d.Line) == 0 || bytes.IndexByte(d.Line, '\n') >= 0:
		return agentrunner.Errorf(agentrunner.EINVALID, "mail deposit %q for agent %s: the message must be one line that is not empty", d.ID, d.Agent)
	case d.Keep < 1:
		return agentrunner.Errorf(agentrunner.EINVALID, "mail deposit %q for agent %s: keep is %d; a mailbox keeps at least 1 message", d.ID, d.Agent, d.Keep)
	}
	return nil
}

// Mailbox returns the lines of agent's mailbox, oldest first.
func (s *Store) Mailbox(ctx context.Context, agent string) ([][]byte, error) {
	return queryAll(ctx, s.read, scanLine, sqlMailbox, agent)
}

func scanLine(row scanner) ([]byte, error) {
	var line []byte
	err := row.Scan(&line)
	return line, err
}
