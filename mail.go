package agentrunner

import "context"

// MailDeposit is one message put into an agent's mailbox, committed with
// the change that sends it: the store holds every agent's messages, and
// the mailbox file an agent reads is a view of them, rendered after the
// commit (see docs/durability.md).
type MailDeposit struct {
	// Agent names the mailbox.
	Agent string
	// ID is the message's stable id: a deposit with an id the mailbox
	// holds replaces that message where it is (a retried step replaces
	// its message rather than adding a second one), else it is appended.
	ID string
	// Line is the message as its mailbox file holds it: one line, without
	// its newline.
	Line []byte
	// Keep is how many messages the mailbox keeps: after the deposit, the
	// oldest beyond the newest Keep are dropped. At least 1.
	Keep int
}

// MailStore is the part of the store that keeps the agents' mailboxes.
type MailStore interface {
	// Mailbox returns the lines of agent's mailbox, oldest first; a
	// mailbox never deposited into is empty.
	Mailbox(ctx context.Context, agent string) ([][]byte, error)
}
