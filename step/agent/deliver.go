package agent

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/agentrunner/agentrunner"
	"github.com/agentrunner/agentrunner/artifact"
	"github.com/agentrunner/agentrunner/config"
	"github.com/agentrunner/agentrunner/mailbox"
)

// delivery is what a step's messages are made of.
type delivery struct {
	run *agentrunner.Run
	// dir is the run directory the step's artifact is in.
	dir  string
	step *config.Step
	// data is the step's artifact, quoted by the deliveries; spans its
	// sections when the caller has them.
	data  []byte
	spans []artifact.Span
	// note, if set, is the body instead of "step finished file".
	note string
}

// Deliver adds to res the messages of a step that produced no artifact
// of its own, or whose artifact stands in for it (an execution step, a
// fallback): note is their body, data what they quote. Like the step's
// own (deliver), they are committed with the step's outcome.
func (k *Kind) Deliver(res *agentrunner.StepResult, run *agentrunner.Run, step *config.Step, data []byte, note string) error {
	return k.deliver(res, &delivery{run: run, dir: run.Dir, step: step, data: data, note: note})
}

// deliver adds the step's messages (Appendix A) to res: forward,
// backward, broadcast or status, as deposits (res.Mail) that the
// scheduler commits with the step's outcome when it succeeds, and writes
// into the mailbox files after that commit; with a mailbox.delivered event
// each. Each message has a stable id, so a retried step replaces its
// earlier message instead of adding a second one; whether it did is known
// only at the commit, so the event does not say.
func (k *Kind) deliver(res *agentrunner.StepResult, d *delivery) error {
	for _, m := range k.messages(d) {
		dep, err := k.opts.Mailboxes.Deposit(m.to, m.msg)
		if err != nil {
			return agentrunner.Fail(agentrunner.ClassInternal, "deliver to mailboxes: %w", err)
		}
		res.Mail = append(res.Mail, dep)
		res.Events = append(res.Events, k.event(d.run, d.step, agentrunner.EventMailboxDelivered, agentrunner.LevelInfo, map[string]any{
			"to": m.to, "kind": string(m.msg.Kind), "id": m.msg.ID, "bytes": len(m.msg.Body),
		}))
	}
	return nil
}

// message is one message of a step for one agent's mailbox.
type message struct {
	to  string
	msg mailbox.Message
}

// messages makes the step's messages, one per configured delivery and
// recipient.
func (k *Kind) messages(d *delivery) []message {
	var ms []message
	for _, dv := range d.step.Deliver {
		body := d.body(k.stepFile(d.step))
		if quote := excerpt(d.data, d.sections, dv); quote != "" {
			body += "\n\n" + quote
		}
		for _, to := range dv.To {
			ms = append(ms, message{to: to, msg: mailbox.Message{
				ID: fmt.Sprintf("%s/%s/%s/%s", d.run.ID, d.step.ID, dv.Kind, to), Time: k.clock.Now(),
				From: d.step.ID, Kind: mailbox.Kind(dv.Kind), CycleID: d.run.ID, Body: body,
			}})
		}
	}
	return ms
}

// stepFile is the artifact a step produces, or hands over.
func (k *Kind) stepFile(s *config.Step) string {
	if a := k.ws.Agents[s.Agent]; a != nil {
		return a.Output.File
	}
	return s.Artifact
}

// body is a message's text before its quote.
func (d *delivery) body(file string) string {
	if d.note != "" {
		return d.note
	}
	return fmt.Sprintf("%s finished %s for cycle %s: %s", d.step.ID, file, d.run.ID, filepath.Join(d.dir, file))
}

// sections are the artifact's sections, found once for all deliveries.
func (d *delivery) sections() []artifact.Span {
	if d.spans == nil {
		d.spans = artifact.MarkdownSections(d.data)
	}
	return d.spans
}

var (
	htmlComment = regexp.MustCompile(`(?s)<!--.*?-->`)
	blankLines  = regexp.MustCompile(`\n\s*\n(\s*\n)+`)
)

// excerpt quotes the configured section (markdown) or field (JSON) of an
// artifact for a message.
func excerpt(data []byte, sections func() []artifact.Span, d config.Delivery) string {
	switch {
	case d.Section != "":
		if s, ok := artifact.Find(sections(), d.Section); ok {
			quote := htmlComment.ReplaceAllString(string(data[s.Start:s.End]), "")
			return strings.TrimSpace(blankLines.ReplaceAllString(quote, "\n\n"))
		}
	case d.Field != "":
		return field(data, d.Field)
	}
	return ""
}

// field quotes the value at a JSON pointer: a string as it is, anything
// else as indented JSON.
func field(data []byte, pointer string) string {
	var doc any
	if json.Unmarshal(data, &doc) != nil {
		return ""
	}
	v, ok := artifact.Lookup(doc, pointer)
	if !ok {
		return ""
	}
	if s, isString := v.(string); isString {
		return s
	}
	b, _ := json.MarshalIndent(v, "", "  ")
	return string(b)
}
