package execsvc

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/agentrunner/agentrunner"
	"github.com/agentrunner/agentrunner/internal/clip"
)

// Reasons for safe mode that the contract names. Reason codes are open: a
// service keeps whatever code it was given and may set its own.
const (
	// ReasonStrategyExpired: the runner's current strategy passed the end
	// of its validity window and no newer one followed (FR-053/054).
	ReasonStrategyExpired = "strategy_expired"
	// ReasonOperator: a person asked for safe mode.
	ReasonOperator = "operator"
	// ReasonHeartbeatLost: the service stopped hearing the runner's
	// heartbeat and entered safe mode by itself (FR-056).
	ReasonHeartbeatLost = "heartbeat_lost"
)

// Bounds of the heartbeat and safe-mode contract.
const (
	// MaxHeartbeatInterval bounds interval_seconds: a runner that beats
	// less than daily gives the service nothing to watch.
	MaxHeartbeatInterval = 24 * time.Hour
	// maxReasonLen bounds reason codes; they are identifiers, not prose.
	maxReasonLen = 64
	// maxDetailLen bounds the human-readable detail of a safe-mode request.
	maxDetailLen = 1000
)

// HeartbeatRequest is the body of POST /v1/heartbeat: the runner telling
// the service it is alive, so the service can enter safe mode when the
// beats stop (the dead man's switch, FR-055/056).
type HeartbeatRequest struct {
	// Runner is the pipeline's name: 1..200 printable ASCII characters.
	Runner string `json:"runner"`
	// SentAt is the runner's clock when it sent the beat. The service
	// judges liveness by its own clock; this is for diagnosing skew.
	SentAt time.Time `json:"sent_at"`
	// IntervalSeconds is how often the runner beats, 1..86400, so the
	// service can check its switch's timeout against it.
	IntervalSeconds int `json:"interval_seconds"`
}

// Validate checks a heartbeat against the contract.
func (h HeartbeatRequest) Validate() error {
	if err := checkToken("runner", h.Runner); err != nil {
		return err
	}
	if h.SentAt.IsZero() {
		return errors.New("sent_at is missing")
	}
	if most := int(MaxHeartbeatInterval / time.Second); h.IntervalSeconds < 1 || h.IntervalSeconds > most {
		return fmt.Errorf("interval_seconds is %d; it must be 1 to %d", h.IntervalSeconds, most)
	}
	return nil
}

// ParseHeartbeatRequest decodes and validates a heartbeat body. Unknown
// fields are refused, as for every request of the contract.
func ParseHeartbeatRequest(body []byte) (HeartbeatRequest, error) {
	var w struct {
		Runner          *string          `json:"runner"`
		SentAt          *string          `json:"sent_at"`
		IntervalSeconds *json.RawMessage `json:"interval_seconds"`
	}
	if err := decodeStrict(body, &w, "heartbeat"); err != nil {
		return HeartbeatRequest{}, err
	}
	var h HeartbeatRequest
	switch {
	case w.Runner == nil:
		return HeartbeatRequest{}, errors.New("runner is missing")
	case w.SentAt == nil:
		return HeartbeatRequest{}, errors.New("sent_at is missing")
	case w.IntervalSeconds == nil:
		return HeartbeatRequest{}, errors.New("interval_seconds is missing")
	}
	h.Runner = *w.Runner
	t, err := time.Parse(time.RFC3339Nano, *w.SentAt)
	if err != nil {
		return HeartbeatRequest{}, fmt.Errorf("sent_at %q is not an RFC 3339 time", clip.String(*w.SentAt, 80))
	}
	h.SentAt = t
	// Decoded apart so 1.5 or "30" is refused rather than truncated.
	if err := json.Unmarshal(*w.IntervalSeconds, &h.IntervalSeconds); err != nil {
		return HeartbeatRequest{}, fmt.Errorf("interval_seconds %s is not a whole number", clip.String(string(*w.IntervalSeconds), 40))
	}
	if err := h.Validate(); err != nil {
		return HeartbeatRequest{}, err
	}
	return h, nil
}

// SafeModeRequest is the body of POST /v1/safe-mode: why the runner asks
// the service to stop opening positions (FR-054).
type SafeModeRequest struct {
	// Reason is a code: a lowercase letter, then lowercase letters, digits
	// and underscores, at most 64 in all; see the Reason constants.
	Reason string `json:"reason"`
	// Detail is for people: at most 1000 bytes of UTF-8 text without
	// control characters other than newline and tab. Optional.
	Detail string `json:"detail,omitempty"`
	// StrategySHA256 is the sha256 of the strategy concerned (its
	// submission's hash); required with ReasonStrategyExpired.
	StrategySHA256 string `json:"strategy_sha256,omitempty"`
	// ExpiredAt is when that strategy's validity window ended. Optional.
	ExpiredAt time.Time `json:"expired_at,omitzero"`
}

// Validate checks a safe-mode request against the contract.
func (r SafeModeRequest) Validate() error {
	if err := checkReason("reason", r.Reason); err != nil {
		return err
	}
	if len(r.Detail) > maxDetailLen {
		return fmt.Errorf("detail is %d bytes, more than %d", len(r.Detail), maxDetailLen)
	}
	if !utf8.ValidString(r.Detail) {
		return errors.New("detail is not valid UTF-8")
	}
	for i, c := range r.Detail {
		if c != '\n' && c != '\t' && unicode.IsControl(c) {
			return fmt.Errorf("detail has a control character at byte %d", i)
		}
	}
	if r.StrategySHA256 != "" && !isLowerHex(r.StrategySHA256, sha256.Size*2) {
		return fmt.Errorf("strategy_sha256 %q is not 64 lowercase hex digits", clip.String(r.StrategySHA256, 80))
	}
	if r.Reason == ReasonStrategyExpired && r.StrategySHA256 == "" {
		return errors.New("strategy_sha256 is missing; it is required with reason strategy_expired")
	}
	return nil
}

// Body returns the request body, after validating the request, for the
// outbox to store and resend unchanged.
func (r SafeModeRequest) Body() ([]byte, error) {
	if err := r.Validate(); err != nil {
		return nil, err
	}
	w := r
	if !w.ExpiredAt.IsZero() {
		w.ExpiredAt = w.ExpiredAt.UTC()
	}
	b, err := json.Marshal(w)
	if err != nil {
		return nil, fmt.Errorf("encode safe-mode request: %w", err)
	}
	return b, nil
}

// equal reports whether two requests ask for the same thing, comparing
// times as instants so a resend in another offset is the same request.
func (r SafeModeRequest) equal(o SafeModeRequest) bool {
	return r.Reason == o.Reason && r.Detail == o.Detail && r.StrategySHA256 == o.StrategySHA256 && r.ExpiredAt.Equal(o.ExpiredAt)
}

// ParseSafeModeRequest decodes and validates a safe-mode body. Unknown
// fields are refused so a misspelt field is not silently dropped.
func ParseSafeModeRequest(body []byte) (SafeModeRequest, error) {
	var w struct {
		Reason         *string `json:"reason"`
		Detail         *string `json:"detail"`
		StrategySHA256 *string `json:"strategy_sha256"`
		ExpiredAt      *string `json:"expired_at"`
	}
	if err := decodeStrict(body, &w, "safe-mode request"); err != nil {
		return SafeModeRequest{}, err
	}
	if w.Reason == nil {
		return SafeModeRequest{}, errors.New("reason is missing")
	}
	r := SafeModeRequest{Reason: *w.Reason}
	if w.Detail != nil {
		r.Detail = *w.Detail
	}
	if w.StrategySHA256 != nil {
		if *w.StrategySHA256 == "" {
			return SafeModeRequest{}, errors.New("strategy_sha256 is empty; leave it out instead")
		}
		r.StrategySHA256 = *w.StrategySHA256
	}
	if w.ExpiredAt != nil {
		t, err := time.Parse(time.RFC3339Nano, *w.ExpiredAt)
		if err != nil {
			return SafeModeRequest{}, fmt.Errorf("expired_at %q is not an RFC 3339 time", clip.String(*w.ExpiredAt, 80))
		}
		r.ExpiredAt = t
	}
	if err := r.Validate(); err != nil {
		return SafeModeRequest{}, err
	}
	return r, nil
}

// SafeModeState is the service's safe mode: the answer of GET and POST
// /v1/safe-mode. While in safe mode the service opens no positions and
// refuses new strategies with 423 until an operator lifts it.
type SafeModeState struct {
	SafeMode bool
	// Since and Reason say when and why safe mode began; both are zero
	// when SafeMode is false.
	Since  time.Time
	Reason string
	// LastHeartbeat is when the service last received a heartbeat, by its
	// own clock; zero when it never did. Only GET answers carry it.
	LastHeartbeat time.Time
	// Replayed is true when POST answered 200: the service had the
	// idempotency key already, did not act again and repeated its first
	// answer, which may no longer be the current state.
	Replayed bool
}

var (
	_ json.Marshaler   = SafeModeState{}
	_ json.Unmarshaler = (*SafeModeState)(nil)
)

// safeModeWire is the GET answer's shape: absent times are null.
type safeModeWire struct {
	SafeMode      bool       `json:"safe_mode"`
	Since         *time.Time `json:"since"`
	Reason        string     `json:"reason"`
	LastHeartbeat *time.Time `json:"last_heartbeat"`
}

// MarshalJSON writes the state as the GET /v1/safe-mode answer, with null
// for zero times, so a stored state reads back with ParseSafeModeState.
func (s SafeModeState) MarshalJSON() ([]byte, error) {
	w := safeModeWire{SafeMode: s.SafeMode, Reason: s.Reason, Since: utcOrNil(s.Since), LastHeartbeat: utcOrNil(s.LastHeartbeat)}
	return json.Marshal(w)
}

// UnmarshalJSON decodes and validates a state with the rules of
// ParseSafeModeState.
func (s *SafeModeState) UnmarshalJSON(body []byte) error {
	var w struct {
		SafeMode      *bool   `json:"safe_mode"`
		Since         *string `json:"since"`
		Reason        *string `json:"reason"`
		LastHeartbeat *string `json:"last_heartbeat"`
	}
	if err := json.Unmarshal(body, &w); err != nil {
		return fmt.Errorf("body is not a JSON safe-mode state: %v", err)
	}
	if w.SafeMode == nil {
		return errors.New("safe_mode is missing")
	}
	out := SafeModeState{SafeMode: *w.SafeMode}
	v := &fieldChecker{}
	if out.SafeMode {
		if w.Since == nil {
			return errors.New("since is missing; it is required while safe_mode is true")
		}
		out.Since = v.time("since", w.Since)
		if w.Reason == nil || *w.Reason == "" {
			return errors.New("reason is missing; it is required while safe_mode is true")
		}
		if err := checkReason("reason", *w.Reason); err != nil {
			return err
		}
		out.Reason = *w.Reason
	} else {
		// A state that contradicts itself is not one to act on.
		if w.Since != nil {
			return fmt.Errorf("since is %q but safe_mode is false", clip.String(*w.Since, 80))
		}
		if w.Reason != nil && *w.Reason != "" {
			return fmt.Errorf("reason is %q but safe_mode is false", clip.String(*w.Reason, 80))
		}
	}
	if w.LastHeartbeat != nil {
		out.LastHeartbeat = v.time("last_heartbeat", w.LastHeartbeat)
	}
	if v.err != nil {
		return v.err
	}
	*s = out
	return nil
}

// ParseSafeModeState decodes and validates an answer of /v1/safe-mode.
// Unknown fields are allowed. safe_mode is required; while it is true,
// since and reason are required too, and while it is false they must be
// null or absent (reason may be ""); last_heartbeat is null, absent or a
// time.
func ParseSafeModeState(body []byte) (*SafeModeState, error) {
	var s SafeModeState
	if err := s.UnmarshalJSON(body); err != nil {
		return nil, err
	}
	return &s, nil
}

// IsSafeMode reports whether err is the service refusing because it is in
// safe mode (423 Locked), so a caller can say so instead of a bare failure.
func IsSafeMode(err error) bool {
	var apiErr *APIError
	return errors.As(err, &apiErr) && apiErr.StatusCode == http.StatusLocked
}

// Heartbeat tells the service the runner is alive (POST /v1/heartbeat) and
// returns whether the service is in safe mode, which the caller should
// log: the service may have entered it by itself. runner is the
// pipeline's name; interval is how often the caller beats, sent rounded up
// to whole seconds. Heartbeats are not idempotent and carry no key: a lost
// one is replaced by the next.
func (c *Client) Heartbeat(ctx context.Context, runner string, interval time.Duration) (bool, error) {
	if interval <= 0 || interval > MaxHeartbeatInterval {
		return false, agentrunner.Fail(agentrunner.ClassConfig, "send heartbeat: interval %s must be positive and at most %s", interval, MaxHeartbeatInterval)
	}
	hb := HeartbeatRequest{Runner: runner, SentAt: c.now().UTC(), IntervalSeconds: int((interval + time.Second - 1) / time.Second)}
	if err := hb.Validate(); err != nil {
		return false, agentrunner.Fail(agentrunner.ClassConfig, "send heartbeat: %v", err)
	}
	body, err := json.Marshal(hb)
	if err != nil {
		return false, agentrunner.Fail(agentrunner.ClassInternal, "send heartbeat: encode: %v", err)
	}
	what := fmt.Sprintf("send heartbeat of runner %q", runner)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.endpoint+"/v1/heartbeat", bytes.NewReader(body))
	if err != nil {
		return false, agentrunner.Fail(agentrunner.ClassInternal, "%s: build request: %v", what, err)
	}
	req.Header.Set("Content-Type", "application/json")
	status, answer, err := c.send(req, what, http.StatusOK)
	if err != nil {
		return false, err
	}
	var w struct {
		SafeMode *bool `json:"safe_mode"`
	}
	if err := json.Unmarshal(answer, &w); err != nil {
		return false, agentrunner.Fail(agentrunner.ClassUnavailable, "%s: invalid response (status %d): %s",
			what, status, c.clean("body is not a JSON heartbeat answer: "+err.Error()))
	}
	if w.SafeMode == nil {
		return false, agentrunner.Fail(agentrunner.ClassUnavailable, "%s: invalid response (status %d): safe_mode is missing", what, status)
	}
	return *w.SafeMode, nil
}

// EnterSafeMode asks the service to enter safe mode (POST /v1/safe-mode)
// under an idempotency key (1..200 printable ASCII characters). Sending
// the same key and request again returns the first answer with Replayed
// set; the service acts only once. The same key with another request is a
// 409, a ClassConfig error.
func (c *Client) EnterSafeMode(ctx context.Context, key string, r SafeModeRequest) (*SafeModeState, error) {
	if err := checkToken("idempotency key", key); err != nil {
		return nil, agentrunner.Fail(agentrunner.ClassInternal, "enter safe mode: %v", err)
	}
	body, err := r.Body()
	if err != nil {
		return nil, agentrunner.Fail(agentrunner.ClassInternal, "enter safe mode with key %q: %v", key, err)
	}
	what := fmt.Sprintf("enter safe mode (%s) with key %q", r.Reason, key)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.endpoint+"/v1/safe-mode", bytes.NewReader(body))
	if err != nil {
		return nil, agentrunner.Fail(agentrunner.ClassInternal, "%s: build request: %v", what, err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Idempotency-Key", key)
	status, answer, err := c.send(req, what, http.StatusAccepted, http.StatusOK)
	if err != nil {
		return nil, err
	}
	st, err := ParseSafeModeState(answer)
	if err != nil {
		return nil, agentrunner.Fail(agentrunner.ClassUnavailable, "%s: invalid response (status %d): %s", what, status, c.clean(err.Error()))
	}
	if !st.SafeMode {
		return nil, agentrunner.Fail(agentrunner.ClassUnavailable, "%s: invalid response (status %d): safe_mode is false", what, status)
	}
	st.Replayed = status == http.StatusOK
	return st, nil
}

// SafeMode asks whether the service is in safe mode, since when and why,
// and when it last heard a heartbeat (GET /v1/safe-mode).
func (c *Client) SafeMode(ctx context.Context) (*SafeModeState, error) {
	const what = "query safe mode"
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.endpoint+"/v1/safe-mode", nil)
	if err != nil {
		return nil, agentrunner.Fail(agentrunner.ClassInternal, "%s: build request: %v", what, err)
	}
	status, answer, err := c.send(req, what, http.StatusOK)
	if err != nil {
		return nil, err
	}
	st, err := ParseSafeModeState(answer)
	if err != nil {
		return nil, agentrunner.Fail(agentrunner.ClassUnavailable, "%s: invalid response (status %d): %s", what, status, c.clean(err.Error()))
	}
	return st, nil
}

// decodeStrict decodes one JSON object of a request body into v, refusing
// unknown fields and trailing data.
func decodeStrict(body []byte, v any, what string) error {
	if len(body) > MaxBodyBytes {
		return fmt.Errorf("body is %d bytes, more than the limit of %d", len(body), MaxBodyBytes)
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("body is not a valid %s object: %w", what, err)
	}
	if dec.More() {
		return fmt.Errorf("body has data after the %s object", what)
	}
	return nil
}

// checkReason checks a reason code: a lowercase letter, then lowercase
// letters, digits and underscores, 64 at most.
func checkReason(what, v string) error {
	if v == "" {
		return fmt.Errorf("%s is empty", what)
	}
	ok := len(v) <= maxReasonLen && v[0] >= 'a' && v[0] <= 'z'
	for i := 1; ok && i < len(v); i++ {
		c := v[i]
		ok = c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '_'
	}
	if !ok {
		return fmt.Errorf("%s %q is not a code (a lowercase letter, then lowercase letters, digits and _, at most %d)", what, clip.String(v, 80), maxReasonLen)
	}
	return nil
}

func utcOrNil(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	u := t.UTC()
	return &u
}
