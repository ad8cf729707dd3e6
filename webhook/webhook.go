// Package webhook notifies operators of what needs a person (FR-048..051):
// a step that failed for good, a strategy that expired, a loop that resumed.
//
// The runner stores each notification's body in its durable outbox in the
// same transaction as the state change that causes it, and a Sender then
// delivers it with retries: a receiver gets every event at least once and
// dedupes by its Idempotency-Key. Bodies are signed with HMAC-SHA256 over
// the timestamp and the exact bytes sent, so a receiver can check with
// Verify that an event comes from its runner and is recent. The contract
// for receivers is docs/webhooks.md.
package webhook

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/agentrunner/agentrunner/internal/clip"
)

// Event kinds. Receivers must ignore kinds they do not know, so new ones
// can be added without breaking them.
const (
	// KindEscalation: a step failed and will not be retried any more; Policy
	// says what the runner did about it.
	KindEscalation = "escalation"
	// KindStrategyExpired: the strategy the Execution Service trades passed
	// the end of its validity window and no newer one replaced it (FR-053).
	KindStrategyExpired = "strategy_expired"
	// KindResumed: a loop that a halt escalation stopped runs again.
	KindResumed = "resumed"
	// KindGateOpened: a run waits at a gate for an operator's decision.
	KindGateOpened = "gate_opened"
)

// Escalation policies (FR-050): what the runner does when a step fails for
// good.
const (
	// PolicyHalt: the loop stops until an operator resumes it.
	PolicyHalt = "halt"
	// PolicySkip: the cycle goes on with the step's last known good
	// artifact, named in Fallback.
	PolicySkip = "skip"
	// PolicyFail: the cycle ended failed; the next one runs on schedule.
	PolicyFail = "fail"
	// PolicyEnd: a loop reached its cap with on_cap end; the run ended
	// incomplete, and Step names the capped step.
	PolicyEnd = "end"
)

// Limits of an event, so one notification stays small enough for any
// receiver while a long error message can never stop it from being sent.
const (
	// MaxBodyBytes bounds a body, both when it is built and when it is sent.
	MaxBodyBytes = 256 << 10
	// MaxErrorBytes bounds Event.Error; Body shortens a longer message.
	MaxErrorBytes = 4 << 10
	// MaxIDLen bounds Event.ID, which is also a header value.
	MaxIDLen = 200
	// maxKindLen bounds Event.Kind, which is also a header value.
	maxKindLen = 64
)

// Event is what the runner tells operators: one flat JSON object whose
// fields are documented in docs/webhooks.md. Fields that do not apply to a
// kind are left out of the body.
type Event struct {
	// Kind is one of the Kind constants; it is also the Agentrunner-Event header.
	Kind string `json:"kind"`
	// ID is the idempotency key: the same for every delivery of one event,
	// and sent as the Idempotency-Key header.
	ID string `json:"id"`
	// Time is when the runner decided to notify; the body carries it in UTC.
	Time     time.Time `json:"time"`
	Pipeline string    `json:"pipeline"`
	CycleID  string    `json:"cycle_id,omitempty"`
	Step     string    `json:"step,omitempty"`
	Agent    string    `json:"agent,omitempty"`
	// Attempts is how many attempts of Step were made.
	Attempts int `json:"attempts,omitempty"`
	// ErrorClass and Error say why the last attempt failed.
	ErrorClass string `json:"error_class,omitempty"`
	Error      string `json:"error,omitempty"`
	// Inputs are the paths of the step's input artifacts (FR-048).
	Inputs []string `json:"inputs,omitempty"`
	// Policy is PolicyHalt, PolicySkip, PolicyFail or PolicyEnd; required for an escalation.
	Policy string `json:"policy,omitempty"`
	// Fallback is the artifact a skip used instead of the step's output.
	Fallback string `json:"fallback,omitempty"`
	// Details holds what is particular to a kind (for strategy_expired,
	// the strategy and its window); it must be JSON-encodable.
	Details map[string]any `json:"details,omitempty"`
}

// Body returns the exact bytes that are stored in the outbox, sent and
// signed: the event as compact JSON with its time in UTC and an Error
// longer than MaxErrorBytes shortened. It refuses an event that breaks
// the contract, saying which field is wrong.
func (e Event) Body() ([]byte, error) {
	if err := e.validate(); err != nil {
		return nil, fmt.Errorf("webhook event %q (kind %q): %w", clip.String(e.ID, 80), clip.String(e.Kind, 40), err)
	}
	e.Time = e.Time.UTC()
	e.Error = clip.String(e.Error, MaxErrorBytes)
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	// Error messages and paths stay readable in the raw body ("->", "<nil>").
	enc.SetEscapeHTML(false)
	if err := enc.Encode(e); err != nil {
		return nil, fmt.Errorf("webhook event %q (kind %s): encode: %w", e.ID, e.Kind, err)
	}
	body := bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
	if len(body) > MaxBodyBytes {
		return nil, fmt.Errorf("webhook event %q (kind %s): body is %d bytes, more than %d; shorten details or inputs", e.ID, e.Kind, len(body), MaxBodyBytes)
	}
	return body, nil
}

// validate checks what receivers rely on.
func (e *Event) validate() error {
	if err := checkKind(e.Kind); err != nil {
		return err
	}
	if err := checkID(e.ID); err != nil {
		return err
	}
	if e.Time.IsZero() {
		return errors.New("time is not set")
	}
	if e.Pipeline == "" {
		return errors.New("pipeline is empty")
	}
	if e.Attempts < 0 {
		return fmt.Errorf("attempts is %d, must not be negative", e.Attempts)
	}
	for i, in := range e.Inputs {
		if in == "" {
			return fmt.Errorf("inputs[%d] is empty", i)
		}
	}
	for k := range e.Details {
		if k == "" {
			return errors.New("details has an empty key")
		}
	}
	switch e.Policy {
	case "", PolicyHalt, PolicySkip, PolicyFail, PolicyEnd:
	default:
		return fmt.Errorf("policy %q is not %q, %q, %q or %q", clip.String(e.Policy, 40), PolicyHalt, PolicySkip, PolicyFail, PolicyEnd)
	}
	if e.Fallback != "" && e.Policy != PolicySkip {
		return fmt.Errorf("fallback is set but policy is %q; only %q uses a fallback artifact", e.Policy, PolicySkip)
	}
	if e.Kind == KindEscalation {
		if e.Step == "" {
			return errors.New("an escalation names no step")
		}
		if e.Policy == "" {
			return fmt.Errorf("an escalation must say its policy, %q, %q, %q or %q", PolicyHalt, PolicySkip, PolicyFail, PolicyEnd)
		}
	}
	return nil
}

// checkKind accepts the kind rule of the contract: 1 to 64 characters of
// lowercase letters, digits, '_' and '.', starting with a letter.
func checkKind(kind string) error {
	if kind == "" {
		return errors.New("kind is empty")
	}
	if len(kind) > maxKindLen {
		return fmt.Errorf("kind is %d characters, more than %d", len(kind), maxKindLen)
	}
	for i := 0; i < len(kind); i++ {
		c := kind[i]
		letter := c >= 'a' && c <= 'z'
		if !letter && (i == 0 || (c < '0' || c > '9') && c != '_' && c != '.') {
			return fmt.Errorf("kind %q: character %d is not allowed (lowercase letters, digits, '_' and '.', starting with a letter)", clip.String(kind, 40), i+1)
		}
	}
	return nil
}

// checkID accepts the idempotency key rule of the contract: 1 to 200
// printable ASCII characters, not starting or ending with a space. It is
// sent as a header, so nothing else could be sent as is.
func checkID(id string) error {
	if id == "" {
		return errors.New("id is empty")
	}
	if len(id) > MaxIDLen {
		return fmt.Errorf("id is %d characters, more than %d", len(id), MaxIDLen)
	}
	for i := 0; i < len(id); i++ {
		if c := id[i]; c < 0x20 || c > 0x7e {
			return fmt.Errorf("id has a character that is not printable ASCII at byte %d", i+1)
		}
	}
	if id[0] == ' ' || id[len(id)-1] == ' ' {
		return errors.New("id starts or ends with a space")
	}
	return nil
}
