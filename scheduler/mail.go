package scheduler

import (
	"context"
	"fmt"
	"slices"

	"github.com/agentrunner/agentrunner"
)

// EventMailboxImported records the messages of a mailbox file from before
// the store kept mailboxes, imported into the store at start (details:
// path, messages).
const EventMailboxImported = "mailbox.imported"

// Injection is what an inject command delivers (Options.Inject).
type Injection struct {
	// Mail is the operator's message, committed in the transaction that
	// consumes the command; the mailbox's file is written after it.
	Mail *agentrunner.MailDeposit
	// Event says so (EventInjected).
	Event *agentrunner.Event
	// Result is the command's result.
	Result string
}

// keepMail adds the messages a succeeded attempt sent to its change; a
// failed attempt (its output could not route the run) delivers nothing,
// and its mailbox.delivered events are dropped with its messages.
func (s *Scheduler) keepMail(ch *agentrunner.Change, res *agentrunner.StepResult, succeeded bool) {
	if len(res.Mail) == 0 {
		return
	}
	if !succeeded {
		ch.Events = slices.DeleteFunc(ch.Events, func(ev *agentrunner.Event) bool {
			return ev.Type == agentrunner.EventMailboxDelivered && slices.Contains(res.Events, ev)
		})
		return
	}
	s.deposit(ch, res.Mail...)
}

// deposit adds deposits to a change of the batch, whose mailboxes' files
// are written once it is committed.
func (s *Scheduler) deposit(ch *agentrunner.Change, ds ...*agentrunner.MailDeposit) {
	ch.Mail = append(ch.Mail, ds...)
	for _, d := range ds {
		s.batch.mail = append(s.batch.mail, d.Agent)
	}
}

// syncMailboxes writes the files of the mailboxes a committed batch
// deposited into, each from the store once, without an fsync, in the
// background when Options.Views is set. A failure
// loses nothing (the store has the messages): it is logged, and the file
// is rewritten before its agent reads it, or at the next start. A stop
// asked for meanwhile does not skip them: the batch is committed.
func (s *Scheduler) syncMailboxes(ctx context.Context, agents []string) {
	if s.opts.Mailboxes == nil {
		return
	}
	ctx = context.WithoutCancel(ctx)
	slices.Sort(agents)
	for _, agent := range slices.Compact(agents) {
		s.opts.Views.Add(s.opts.Mailboxes.Path(agent), func() {
			if err := s.opts.Mailboxes.Sync(ctx, s.store, agent); err != nil {
				s.log.Warn("writing a mailbox's file", "agent", agent, "error", err)
			}
		})
	}
}

// checkMailboxes, at start, compares the mailbox file of each of
// Options.Agents with the store and rewrites those missing or different,
// each with an EventViewRepaired. The file of an agent the store has no
// message for is one from before the store kept mailboxes: its messages
// are imported, committed in the first batch, so none is lost.
func (s *Scheduler) checkMailboxes(ctx context.Context) error {
	boxes := s.opts.Mailboxes
	if boxes == nil {
		return nil
	}
	ch := &agentrunner.Change{}
	for _, agent := range s.opts.Agents {
		lines, err := s.store.Mailbox(ctx, agent)
		if err != nil {
			return err
		}
		if len(lines) == 0 {
			ds, err := boxes.Legacy(agent)
			if err != nil {
				return fmt.Errorf("import the mailbox of %s into the store: %w", agent, err)
			}
			if len(ds) > 0 {
				s.deposit(ch, ds...)
				ch.Events = append(ch.Events, &agentrunner.Event{Timestamp: s.clock.Now(), Type: EventMailboxImported, Agent: agent,
					Level: agentrunner.LevelInfo, Details: map[string]any{"path": boxes.Path(agent), "messages": len(ds)}})
				continue
			}
		}
		reason, err := boxes.Check(ctx, s.store, agent)
		if err != nil {
			s.log.Warn("checking a mailbox's file", "agent", agent, "error", err)
		}
		if reason != "" {
			ch.Events = append(ch.Events, boxes.Repaired(s.clock.Now(), agent, reason))
		}
	}
	if len(ch.Events) > 0 {
		s.batch.changes = append(s.batch.changes, ch)
	}
	return nil
}
