// Package mailboxtest puts messages into mailboxes for tests the way the
// runner does: each committed in the store, then written into its
// mailbox's file, which is a view of the store.
package mailboxtest

import (
	"context"
	"testing"

	"github.com/agentrunner/agentrunner"
	"github.com/agentrunner/agentrunner/mailbox"
)

// Store is where the messages are committed.
type Store interface {
	agentrunner.MailStore
	Apply(ctx context.Context, ch *agentrunner.Change) error
}

// Deposit commits each of msgs into agent's mailbox in its own change and
// writes the mailbox's file after each commit.
func Deposit(tb testing.TB, store Store, boxes *mailbox.Mailboxes, agent string, msgs ...mailbox.Message) {
	tb.Helper()
	ctx := context.Background()
	for _, m := range msgs {
		d, err := boxes.Deposit(agent, m)
		if err != nil {
			tb.Fatal(err)
		}
		if err := store.Apply(ctx, &agentrunner.Change{Mail: []*agentrunner.MailDeposit{d}}); err != nil {
			tb.Fatal(err)
		}
		if err := boxes.Sync(ctx, store, agent); err != nil {
			tb.Fatal(err)
		}
	}
}
