// Package execsvc speaks to the Execution Service, the separate system that
// trades a strategy once the Synthesize step has produced a validated
// strategy.json (FR-079..085). It holds the client agentrunner uses and a
// mock service that speaks the same contract on a real HTTP server, so tests
// and the offline demo run the production code path unchanged (FR-095).
//
// The contract is written up in docs/execution-service.md.
package execsvc

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/agentrunner/agentrunner/internal/clip"
)

// MaxBodyBytes caps every request and response body of the contract, so
// neither side can be made to buffer an unbounded answer.
const MaxBodyBytes = 1 << 20

// maxKeyLen bounds idempotency keys and cycle ids; the service stores them.
const maxKeyLen = 200

// Status is where the Execution Service is with a strategy.
type Status string

// The four statuses of the contract.
const (
	// StatusAcknowledged: the service stored the strategy and has not begun.
	StatusAcknowledged Status = "acknowledged"
	// StatusExecuting: the service is trading the strategy.
	StatusExecuting Status = "executing"
	// StatusCompleted: the service finished the strategy.
	StatusCompleted Status = "completed"
	// StatusErrored: the service gave up on the strategy; Receipt.Error says why.
	StatusErrored Status = "error"
)

// Valid reports whether s is one of the four statuses of the contract, so an
// answer with anything else is refused rather than tracked forever.
func (s Status) Valid() bool {
	switch s {
	case StatusAcknowledged, StatusExecuting, StatusCompleted, StatusErrored:
		return true
	}
	return false
}

// Terminal reports whether the strategy will not change status again, which
// is when agentrunner stops polling and moves on to evaluation.
func (s Status) Terminal() bool { return s == StatusCompleted || s == StatusErrored }

// Submission is the body of POST /v1/strategies: one strategy of one cycle.
//
// Strategy is sent byte for byte and SHA256 is the hash of exactly those
// bytes. Marshalling a Submission with encoding/json compacts and
// HTML-escapes Strategy, which can break the hash; store and restore a
// submission with Body and ParseSubmission, which keep the bytes.
type Submission struct {
	CycleID string `json:"cycle_id"`
	SHA256  string `json:"sha256"`
	// ValidUntil, when set, is the end of the strategy's validity window.
	// The service takes no new strategy whose window is over (422
	// strategy_expired) but still answers a known key with its first
	// answer, so a resend after the window asks whether it has the
	// strategy without handing over an expired one.
	ValidUntil time.Time       `json:"valid_until,omitzero"`
	Strategy   json.RawMessage `json:"strategy"`
}

// NewSubmission builds the submission of a strategy file's content: the
// surrounding whitespace (a trailing newline) is trimmed, because the value
// inside a JSON body cannot carry it, and the hash is taken of what is left.
func NewSubmission(cycleID string, strategy []byte) (Submission, error) {
	raw := bytes.TrimSpace(strategy)
	sum := sha256.Sum256(raw)
	s := Submission{CycleID: cycleID, SHA256: hex.EncodeToString(sum[:]), Strategy: json.RawMessage(bytes.Clone(raw))}
	if err := s.Validate(); err != nil {
		return Submission{}, err
	}
	return s, nil
}

// Validate checks a submission against the contract: cycle_id is 1..200
// printable ASCII characters, sha256 is 64 lowercase hex digits equal to the
// SHA-256 of Strategy, Strategy is a JSON object, and ValidUntil, when set,
// can be written in RFC 3339.
func (s Submission) Validate() error {
	if err := checkToken("cycle_id", s.CycleID); err != nil {
		return err
	}
	if len(s.Strategy) == 0 {
		return errors.New("strategy is missing")
	}
	if s.Strategy[0] != '{' || !json.Valid(s.Strategy) {
		return errors.New("strategy is not a JSON object")
	}
	if !isLowerHex(s.SHA256, sha256.Size*2) {
		return fmt.Errorf("sha256 %q is not 64 lowercase hex digits", clip.String(s.SHA256, 80))
	}
	// Outside these years RFC 3339 cannot write the time back.
	if y := s.ValidUntil.UTC().Year(); !s.ValidUntil.IsZero() && (y < 1 || y > 9999) {
		return fmt.Errorf("valid_until is in the year %d, outside 1 to 9999", y)
	}
	sum := sha256.Sum256(s.Strategy)
	if got := hex.EncodeToString(sum[:]); got != s.SHA256 {
		return fmt.Errorf("sha256 %s does not match the strategy bytes (their sha256 is %s)", s.SHA256, got)
	}
	return nil
}

// Body returns the request body of the submission with Strategy inserted
// verbatim, so the receiver hashes the same bytes the sender did.
func (s Submission) Body() ([]byte, error) {
	if err := s.Validate(); err != nil {
		return nil, err
	}
	cycleID, err := json.Marshal(s.CycleID)
	if err != nil {
		return nil, fmt.Errorf("encode cycle_id: %w", err)
	}
	var b bytes.Buffer
	b.Grow(len(s.Strategy) + len(cycleID) + 120)
	b.WriteString(`{"cycle_id":`)
	b.Write(cycleID)
	b.WriteString(`,"sha256":"`)
	b.WriteString(s.SHA256)
	b.WriteString(`",`)
	if !s.ValidUntil.IsZero() {
		b.WriteString(`"valid_until":"`)
		b.WriteString(s.ValidUntil.UTC().Format(time.RFC3339Nano))
		b.WriteString(`",`)
	}
	b.WriteString(`"strategy":`)
	b.Write(s.Strategy)
	b.WriteString(`}`)
	return b.Bytes(), nil
}

// ParseSubmission decodes and validates a request body. Strategy keeps the
// exact bytes of the body's strategy value. Unknown fields are refused so a
// sender's mistake (a misspelt field) is not silently dropped.
func ParseSubmission(body []byte) (Submission, error) {
	if len(body) > MaxBodyBytes {
		return Submission{}, fmt.Errorf("body is %d bytes, more than the limit of %d", len(body), MaxBodyBytes)
	}
	var wire struct {
		CycleID    *string         `json:"cycle_id"`
		SHA256     *string         `json:"sha256"`
		ValidUntil *string         `json:"valid_until"`
		Strategy   json.RawMessage `json:"strategy"`
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&wire); err != nil {
		return Submission{}, fmt.Errorf("body is not a valid submission object: %w", err)
	}
	if dec.More() {
		return Submission{}, errors.New("body has data after the submission object")
	}
	if wire.CycleID == nil {
		return Submission{}, errors.New("cycle_id is missing")
	}
	if wire.SHA256 == nil {
		return Submission{}, errors.New("sha256 is missing")
	}
	if len(wire.Strategy) == 0 || bytes.Equal(wire.Strategy, []byte("null")) {
		return Submission{}, errors.New("strategy is missing")
	}
	s := Submission{CycleID: *wire.CycleID, SHA256: *wire.SHA256, Strategy: wire.Strategy}
	if wire.ValidUntil != nil {
		t, err := time.Parse(time.RFC3339Nano, *wire.ValidUntil)
		if err != nil {
			return Submission{}, fmt.Errorf("valid_until %q is not an RFC 3339 time", clip.String(*wire.ValidUntil, 80))
		}
		s.ValidUntil = t
	}
	if err := s.Validate(); err != nil {
		return Submission{}, err
	}
	return s, nil
}

// Receipt is the service's answer about one strategy: to a submission
// (ReceivedAt set) or to a status query (UpdatedAt set).
type Receipt struct {
	StrategyID string `json:"strategy_id"`
	Status     Status `json:"status"`
	// Error is the service's reason, only with StatusErrored.
	Error      string    `json:"error,omitempty"`
	ReceivedAt time.Time `json:"received_at,omitzero"`
	UpdatedAt  time.Time `json:"updated_at,omitzero"`
	// Replayed is true when a submission answered 200: the service had the
	// idempotency key already and did not act again.
	Replayed bool `json:"-"`
}

// APIError is an answer of the Execution Service other than success. The
// client wraps it in an agentrunner.StepError whose class decides whether
// the engine retries; errors.As finds it for callers that need the status.
type APIError struct {
	StatusCode int
	// Code and Message come from the contract's error body; both are empty
	// when the body did not have that shape, and then Message holds a
	// cleaned excerpt of the body instead.
	Code    string
	Message string
}

// Error says the status and the service's reason.
func (e *APIError) Error() string {
	msg := fmt.Sprintf("execution service answered %d", e.StatusCode)
	if e.Code != "" {
		msg += " " + e.Code
	}
	if e.Message != "" {
		msg += ": " + e.Message
	}
	return msg
}

// errorBody is the contract's error shape.
type errorBody struct {
	Error struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

// checkToken checks a header-safe identifier: 1..200 printable ASCII
// characters, not starting or ending with a space (HTTP trims those).
func checkToken(what, v string) error {
	if v == "" {
		return fmt.Errorf("%s is empty", what)
	}
	if len(v) > maxKeyLen {
		return fmt.Errorf("%s is %d characters, more than %d", what, len(v), maxKeyLen)
	}
	for i := 0; i < len(v); i++ {
		if c := v[i]; c < 0x20 || c > 0x7e {
			return fmt.Errorf("%s has a character that is not printable ASCII at byte %d", what, i)
		}
	}
	if v[0] == ' ' || v[len(v)-1] == ' ' {
		return fmt.Errorf("%s starts or ends with a space", what)
	}
	return nil
}

func isLowerHex(s string, n int) bool {
	if len(s) != n {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}
