package execsvc

import (
	"bytes"
	"context"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/agentrunner/agentrunner/internal/clip"
)

// Mock is an Execution Service for tests and the demo. It speaks the
// contract on a real HTTP server and records every request it receives, so
// a test can check what agentrunner sent without a live service.
// A Mock is safe for concurrent use.
type Mock struct {
	opts MockOptions

	mu         sync.Mutex
	requests   []Request
	byKey      map[string]*accepted
	byID       map[string]*accepted
	strategies []Submission

	// heartbeats are the receive times of accepted heartbeats.
	heartbeats []time.Time
	safe       SafeModeState
	// liftedAt is when an operator last lifted safe mode; the dead man's
	// switch counts from it when it is later than the last heartbeat.
	liftedAt time.Time
	// safeByKey holds safe-mode requests by idempotency key.
	safeByKey map[string]*safeEntry

	// pushes are the status callbacks waiting to be sent, in order;
	// pushing says a sender is at work on them; pushed are those sent.
	pushes  []Push
	pushing bool
	pushed  []Push

	srvMu  sync.Mutex
	server *http.Server
	served chan struct{}

	// bg is the mock's background work (advancing strategies, pushing
	// callbacks), nil while there is none; Close ends it.
	bgMu sync.Mutex
	bg   *background
}

// MockOptions says how the mock behaves.
type MockOptions struct {
	// ExecutingAfter, CompletedAfter and FailWith script how a strategy
	// moves on. Each GET of a strategy counts as a poll and answers from
	// the number of polls before it: with at least CompletedAfter of them
	// the strategy is completed (or, when FailWith is set, in status error
	// with FailWith as its message); else with at least ExecutingAfter it
	// is executing; else acknowledged. The zero values complete at the
	// first poll. Negative values count as zero.
	ExecutingAfter, CompletedAfter int
	FailWith                       string
	// Token, when set, is the bearer token every request must carry;
	// requests without it get 401.
	Token string
	// Now is the mock's clock; nil means time.Now.
	Now func() time.Time
	// Account is what GET /v1/account answers. Nil serves an empty USD
	// account (no equity, positions, balances or orders); a zero AsOf is
	// replaced with the mock's clock at each request. An Account that breaks
	// the contract is answered with 500, so a test cannot pass by accident.
	Account *Account
	// HeartbeatTimeout arms the dead man's switch (FR-056): once a
	// heartbeat was received, when more than this passes by Now without
	// another one (or since an operator last lifted safe mode, if that is
	// later), the mock is in safe mode with reason heartbeat_lost, since
	// the moment the timeout ran out. It is evaluated on every request and
	// by SafeMode, so a fake clock needs no sleeping. Zero (or negative)
	// disarms the switch.
	HeartbeatTimeout time.Duration
	// Advance, when positive, moves each strategy on by itself as a real
	// service would, without waiting for polls: one status every Advance
	// after its acceptance (executing, then completed, or error with
	// FailWith). Polls still move it as scripted above; a status never
	// goes back. Zero: only polls move strategies.
	Advance time.Duration
	// After waits for Advance; nil means time.After. A test gives a fake
	// clock's After so nothing sleeps.
	After func(d time.Duration) <-chan time.Time
	// Callback, when its URL is set, has the mock push every change of a
	// strategy's status to the runner, signed, as POST
	// /api/execution/callback expects (see MockCallback).
	Callback MockCallback
	// OnRequest, if set, is called with each request after it was
	// answered, in the request's goroutine: for logging and recording.
	OnRequest func(Request)
	// OnPush, if set, is called with each callback push once sent (or
	// failed), in the sender's goroutine.
	OnPush func(Push)
}

// Request is one request the mock received, whatever its outcome.
type Request struct {
	Method string
	Path   string
	// IdempotencyKey is the Idempotency-Key header, when sent.
	IdempotencyKey string
	// Body is the request body, cut at MaxBodyBytes+1 bytes.
	Body []byte
	Time time.Time
	// StatusCode is what the mock answered.
	StatusCode int
}

// safeEntry is one safe-mode request the mock took, under its key.
type safeEntry struct {
	req        SafeModeRequest
	firstReply []byte
}

// accepted is one strategy the mock took, under its idempotency key.
type accepted struct {
	id         string
	sha256     string
	firstReply []byte
	polls      int
	status     Status
	updatedAt  time.Time
}

// NewMock returns a mock Execution Service; serve it with Start or mount it
// as an http.Handler.
func NewMock(opts MockOptions) *Mock {
	opts.ExecutingAfter = max(opts.ExecutingAfter, 0)
	opts.CompletedAfter = max(opts.CompletedAfter, 0)
	opts.HeartbeatTimeout = max(opts.HeartbeatTimeout, 0)
	opts.Advance = max(opts.Advance, 0)
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.After == nil {
		opts.After = time.After
	}
	return &Mock{opts: opts, byKey: map[string]*accepted{}, byID: map[string]*accepted{}, safeByKey: map[string]*safeEntry{}}
}

var _ http.Handler = (*Mock)(nil)

// Start listens on addr (such as "127.0.0.1:0") and serves in the
// background. It returns the base URL to give a Client.
func (m *Mock) Start(addr string) (string, error) {
	m.srvMu.Lock()
	defer m.srvMu.Unlock()
	if m.server != nil {
		return "", errors.New("mock execution service: already started")
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return "", fmt.Errorf("mock execution service: listen on %s: %w", addr, err)
	}
	m.server = &http.Server{Handler: m, ReadHeaderTimeout: 10 * time.Second}
	m.served = make(chan struct{})
	go func(srv *http.Server, done chan struct{}) {
		defer close(done)
		// Serve returns ErrServerClosed after Close; nothing else to report.
		_ = srv.Serve(ln)
	}(m.server, m.served)
	return "http://" + ln.Addr().String(), nil
}

// Close stops a started server, drops its connections and waits until it
// has stopped; it ends the background work too (strategies stop
// advancing, a callback being pushed is finished, those queued dropped). Closing a mock that is not
// serving stops only its background work.
func (m *Mock) Close() error {
	m.srvMu.Lock()
	defer m.srvMu.Unlock()
	defer m.stopBackground()
	if m.server == nil {
		return nil
	}
	err := m.server.Close()
	<-m.served
	m.server, m.served = nil, nil
	if err != nil {
		return fmt.Errorf("mock execution service: close: %w", err)
	}
	return nil
}

// Requests returns every request received so far, in the order received.
func (m *Mock) Requests() []Request {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]Request, len(m.requests))
	for i, r := range m.requests {
		r.Body = bytes.Clone(r.Body)
		out[i] = r
	}
	return out
}

// Strategies returns the distinct strategies accepted, one per idempotency
// key, in the order accepted: what the service would have traded.
func (m *Mock) Strategies() []Submission {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]Submission, len(m.strategies))
	for i, s := range m.strategies {
		s.Strategy = bytes.Clone(s.Strategy)
		out[i] = s
	}
	return out
}

// Heartbeats returns the receive times, by the mock's clock, of the
// heartbeats it accepted, in order.
func (m *Mock) Heartbeats() []time.Time {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]time.Time(nil), m.heartbeats...)
}

// SafeMode returns the mock's safe mode as GET /v1/safe-mode would answer
// now, evaluating the dead man's switch against the mock's clock first.
func (m *Mock) SafeMode() SafeModeState {
	now := m.opts.Now()
	m.mu.Lock()
	defer m.mu.Unlock()
	m.checkSwitch(now)
	return m.safeState()
}

// reply is an answer computed under the lock and written after it, so a
// slow client cannot hold up the others.
type reply struct {
	status int
	header http.Header
	body   []byte
}

// ServeHTTP answers one request of the contract and records it.
func (m *Mock) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, readErr := io.ReadAll(io.LimitReader(r.Body, MaxBodyBytes+1))

	m.mu.Lock()
	now := m.opts.Now()
	m.requests = append(m.requests, Request{
		Method:         r.Method,
		Path:           r.URL.Path,
		IdempotencyKey: r.Header.Get("Idempotency-Key"),
		Body:           body,
		Time:           now,
	})
	idx := len(m.requests) - 1
	// Before routing, so a heartbeat arriving after the timeout does not
	// undo the switch: the service was without a runner meanwhile.
	m.checkSwitch(now)
	rep := m.route(r, body, readErr, now)
	m.requests[idx].StatusCode = rep.status
	logged := m.requests[idx]
	m.mu.Unlock()
	if m.opts.OnRequest != nil {
		// A copy, so the hook cannot change what Requests returns.
		logged.Body = bytes.Clone(logged.Body)
		defer m.opts.OnRequest(logged)
	}

	for k, vs := range rep.header {
		w.Header()[k] = vs
	}
	if rep.body != nil {
		w.Header().Set("Content-Type", "application/json")
	}
	w.WriteHeader(rep.status)
	_, _ = w.Write(rep.body) // the client hanging up is its own problem
}

// route picks the endpoint. The mock routes by hand rather than with a
// ServeMux so 404 and 405 answers have the contract's error shape too.
func (m *Mock) route(r *http.Request, body []byte, readErr error, now time.Time) reply {
	if !m.authorized(r) {
		rep := errorReply(http.StatusUnauthorized, "unauthorized", "missing or wrong bearer token")
		rep.header = http.Header{"Www-Authenticate": {`Bearer realm="execution-service"`}}
		return rep
	}
	const collection = "/v1/strategies"
	path := r.URL.Path
	switch {
	case path == "/v1/account":
		if r.Method != http.MethodGet {
			return methodNotAllowed(http.MethodGet)
		}
		return m.account()
	case path == "/v1/heartbeat":
		if r.Method != http.MethodPost {
			return methodNotAllowed(http.MethodPost)
		}
		return m.heartbeat(r, body, readErr, now)
	case path == "/v1/safe-mode":
		switch r.Method {
		case http.MethodGet:
			return reply{status: http.StatusOK, body: encodeJSON(m.safeState())}
		case http.MethodPost:
			return m.enterSafeMode(r, body, readErr, now)
		case http.MethodDelete:
			m.safe = SafeModeState{}
			m.liftedAt = now
			return reply{status: http.StatusNoContent}
		}
		return methodNotAllowed("GET, POST, DELETE")
	case path == collection:
		if r.Method != http.MethodPost {
			return methodNotAllowed(http.MethodPost)
		}
		return m.submit(r, body, readErr, now)
	case strings.HasPrefix(path, collection+"/") && path != collection+"/" && !strings.Contains(path[len(collection)+1:], "/"):
		if r.Method != http.MethodGet {
			return methodNotAllowed(http.MethodGet)
		}
		return m.status(path[len(collection)+1:])
	}
	return errorReply(http.StatusNotFound, "not_found", fmt.Sprintf("no endpoint %s", clip.String(path, 200)))
}

func (m *Mock) authorized(r *http.Request) bool {
	if m.opts.Token == "" {
		return true
	}
	got, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	return ok && subtle.ConstantTimeCompare([]byte(got), []byte(m.opts.Token)) == 1
}

// submit is POST /v1/strategies; now is the request's clock reading.
func (m *Mock) submit(r *http.Request, body []byte, readErr error, now time.Time) reply {
	keys := r.Header.Values("Idempotency-Key")
	if len(keys) != 1 {
		return errorReply(http.StatusBadRequest, "invalid_request", "exactly one Idempotency-Key header is required")
	}
	key := keys[0]
	if err := checkToken("Idempotency-Key", key); err != nil {
		return errorReply(http.StatusBadRequest, "invalid_request", err.Error())
	}
	if rep, ok := checkJSONBody(r, body, readErr); !ok {
		return rep
	}
	sub, err := ParseSubmission(body)
	if err != nil {
		return errorReply(http.StatusBadRequest, "invalid_request", err.Error())
	}
	if a, ok := m.byKey[key]; ok {
		if a.sha256 != sub.SHA256 {
			return errorReply(http.StatusConflict, "idempotency_conflict",
				fmt.Sprintf("Idempotency-Key %q was used for strategy %s with sha256 %s, not %s", key, a.id, a.sha256, sub.SHA256))
		}
		return reply{status: http.StatusOK, body: bytes.Clone(a.firstReply)}
	}
	// After the key lookup: a replay starts nothing new, so it is answered
	// even when the window is over or in safe mode. That is what lets a
	// runner that lost the first answer ask again after the window.
	if !sub.ValidUntil.IsZero() && !sub.ValidUntil.After(now) {
		return errorReply(http.StatusUnprocessableEntity, CodeStrategyExpired, fmt.Sprintf(
			"the strategy's validity window ended at %s (now %s); the service takes no expired strategy",
			sub.ValidUntil.UTC().Format(time.RFC3339Nano), now.UTC().Format(time.RFC3339Nano)))
	}
	if m.safe.SafeMode {
		return errorReply(http.StatusLocked, "safe_mode", fmt.Sprintf(
			"the service is in safe mode since %s (reason %s) and takes no new strategy until an operator lifts it",
			m.safe.Since.Format(time.RFC3339Nano), m.safe.Reason))
	}
	received := m.opts.Now().UTC()
	a := &accepted{
		id:        fmt.Sprintf("strat-%06d", len(m.strategies)+1),
		sha256:    sub.SHA256,
		status:    StatusAcknowledged,
		updatedAt: received,
	}
	a.firstReply = encodeJSON(Receipt{StrategyID: a.id, Status: StatusAcknowledged, ReceivedAt: received})
	m.byKey[key] = a
	m.byID[a.id] = a
	sub.Strategy = bytes.Clone(sub.Strategy)
	m.strategies = append(m.strategies, sub)
	if m.opts.Advance > 0 {
		m.goBackground(context.Background(), func(ctx context.Context) { m.advance(ctx, a) })
	}
	return reply{status: http.StatusAccepted, body: a.firstReply}
}

// status is GET /v1/strategies/{id}; each call is one poll.
func (m *Mock) status(id string) reply {
	a, ok := m.byID[id]
	if !ok {
		return errorReply(http.StatusNotFound, "not_found", fmt.Sprintf("no strategy %q", clip.String(id, 200)))
	}
	before := a.polls
	a.polls++
	next := StatusAcknowledged
	switch {
	case before >= m.opts.CompletedAfter:
		next = m.final()
	case before >= m.opts.ExecutingAfter:
		next = StatusExecuting
	}
	m.moveTo(context.Background(), a, next)
	rc := Receipt{StrategyID: a.id, Status: a.status, UpdatedAt: a.updatedAt}
	if a.status == StatusErrored {
		rc.Error = m.opts.FailWith
	}
	return reply{status: http.StatusOK, body: encodeJSON(rc)}
}

// checkJSONBody checks what every POST body shares: the media type, a
// complete read and the size limit.
func checkJSONBody(r *http.Request, body []byte, readErr error) (reply, bool) {
	if mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type")); err != nil || mt != "application/json" {
		return errorReply(http.StatusUnsupportedMediaType, "unsupported_media_type", "Content-Type must be application/json"), false
	}
	if readErr != nil {
		return errorReply(http.StatusBadRequest, "invalid_request", "could not read the body: "+readErr.Error()), false
	}
	if len(body) > MaxBodyBytes {
		return errorReply(http.StatusRequestEntityTooLarge, "too_large", fmt.Sprintf("body is larger than %d bytes", MaxBodyBytes)), false
	}
	return reply{}, true
}

// heartbeat is POST /v1/heartbeat. Liveness is judged by the mock's clock
// at receipt, not by sent_at, so a runner's skewed clock cannot fool it.
func (m *Mock) heartbeat(r *http.Request, body []byte, readErr error, now time.Time) reply {
	if rep, ok := checkJSONBody(r, body, readErr); !ok {
		return rep
	}
	if _, err := ParseHeartbeatRequest(body); err != nil {
		return errorReply(http.StatusBadRequest, "invalid_request", err.Error())
	}
	m.heartbeats = append(m.heartbeats, now)
	return reply{status: http.StatusOK, body: encodeJSON(struct {
		SafeMode bool `json:"safe_mode"`
	}{m.safe.SafeMode})}
}

// enterSafeMode is POST /v1/safe-mode. Checks run in the order of
// POST /v1/strategies: key, media type, body, then the key lookup.
func (m *Mock) enterSafeMode(r *http.Request, body []byte, readErr error, now time.Time) reply {
	keys := r.Header.Values("Idempotency-Key")
	if len(keys) != 1 {
		return errorReply(http.StatusBadRequest, "invalid_request", "exactly one Idempotency-Key header is required")
	}
	key := keys[0]
	if err := checkToken("Idempotency-Key", key); err != nil {
		return errorReply(http.StatusBadRequest, "invalid_request", err.Error())
	}
	if rep, ok := checkJSONBody(r, body, readErr); !ok {
		return rep
	}
	req, err := ParseSafeModeRequest(body)
	if err != nil {
		return errorReply(http.StatusBadRequest, "invalid_request", err.Error())
	}
	if e, ok := m.safeByKey[key]; ok {
		if !e.req.equal(req) {
			return errorReply(http.StatusConflict, "idempotency_conflict",
				fmt.Sprintf("Idempotency-Key %q was used for another safe-mode request (reason %s)", key, e.req.Reason))
		}
		return reply{status: http.StatusOK, body: bytes.Clone(e.firstReply)}
	}
	// Already in safe mode: nothing changes, and the answer keeps the
	// first reason and time.
	if !m.safe.SafeMode {
		m.safe = SafeModeState{SafeMode: true, Since: now.UTC(), Reason: req.Reason}
	}
	e := &safeEntry{req: req, firstReply: encodeJSON(struct {
		SafeMode bool      `json:"safe_mode"`
		Since    time.Time `json:"since"`
		Reason   string    `json:"reason"`
	}{true, m.safe.Since, m.safe.Reason})}
	m.safeByKey[key] = e
	return reply{status: http.StatusAccepted, body: e.firstReply}
}

// checkSwitch is the dead man's switch: it enters safe mode when the
// heartbeats stopped for longer than HeartbeatTimeout before now.
func (m *Mock) checkSwitch(now time.Time) {
	if m.opts.HeartbeatTimeout == 0 || m.safe.SafeMode || len(m.heartbeats) == 0 {
		return
	}
	from := m.heartbeats[len(m.heartbeats)-1]
	if m.liftedAt.After(from) {
		from = m.liftedAt
	}
	if now.Sub(from) > m.opts.HeartbeatTimeout {
		m.safe = SafeModeState{SafeMode: true, Since: from.Add(m.opts.HeartbeatTimeout).UTC(), Reason: ReasonHeartbeatLost}
	}
}

// safeState is the full state as GET /v1/safe-mode answers it.
func (m *Mock) safeState() SafeModeState {
	s := m.safe
	if n := len(m.heartbeats); n > 0 {
		s.LastHeartbeat = m.heartbeats[n-1].UTC()
	}
	return s
}

// account is GET /v1/account.
func (m *Mock) account() reply {
	a := Account{Currency: "USD"}
	if m.opts.Account != nil {
		a = *m.opts.Account
	}
	if a.AsOf.IsZero() {
		a.AsOf = m.opts.Now().UTC()
	}
	// Lists are sent as [] rather than null, as the contract requires.
	a.Positions = nonNil(a.Positions)
	a.Balances = nonNil(a.Balances)
	a.OpenOrders = nonNil(a.OpenOrders)
	if err := a.Validate(); err != nil {
		return errorReply(http.StatusInternalServerError, "internal", "the mock's configured account breaks the contract: "+err.Error())
	}
	return reply{status: http.StatusOK, body: encodeJSON(a)}
}

func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

func methodNotAllowed(allow string) reply {
	rep := errorReply(http.StatusMethodNotAllowed, "method_not_allowed", "use "+allow)
	rep.header = http.Header{"Allow": {allow}}
	return rep
}

func errorReply(status int, code, message string) reply {
	var eb errorBody
	eb.Error.Code, eb.Error.Message = code, message
	return reply{status: status, body: encodeJSON(eb)}
}

// encodeJSON encodes the mock's own answer types, which always encode;
// the fallback keeps the answer in the contract's shape regardless.
func encodeJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		return []byte(`{"error":{"code":"internal","message":"encode answer"}}`)
	}
	return b
}
