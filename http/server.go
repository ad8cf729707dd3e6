// Package http is agentrunner's operator HTTP surface: JSON under /api/ and
// health checks. Errors are {"error": {"code": "...", "message": "..."}},
// with the status taken from one table of error codes.
package http

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/agentrunner/agentrunner"
	"github.com/agentrunner/agentrunner/capsule"
	"github.com/agentrunner/agentrunner/config"
	"github.com/agentrunner/agentrunner/execsvc"
	"github.com/agentrunner/agentrunner/mailbox"
	"github.com/agentrunner/agentrunner/memory"
	"github.com/agentrunner/agentrunner/step/execution"
	"github.com/agentrunner/agentrunner/tool"
	"github.com/agentrunner/agentrunner/webhook"
)

// statusOf maps error codes to HTTP statuses, in one place.
var statusOf = map[string]int{
	agentrunner.EINVALID:      http.StatusBadRequest,
	agentrunner.ENOTFOUND:     http.StatusNotFound,
	agentrunner.ECONFLICT:     http.StatusConflict,
	agentrunner.EUNAVAILABLE:  http.StatusServiceUnavailable,
	agentrunner.EUNAUTHORIZED: http.StatusUnauthorized,
	agentrunner.EFORBIDDEN:    http.StatusForbidden,
	agentrunner.EINTERNAL:     http.StatusInternalServerError,
	agentrunner.EUNSUPPORTED:  http.StatusUnsupportedMediaType,
	agentrunner.EMISDIRECTED:  http.StatusMisdirectedRequest,
	// Unprocessable after EINVALID's 400: the body parsed, its content is
	// refused.
	agentrunner.EUNPROCESSABLE: http.StatusUnprocessableEntity,
	agentrunner.EMETHOD:        http.StatusMethodNotAllowed,
	agentrunner.ETOOMANY:       http.StatusTooManyRequests,
}

// Server serves the API of one workspace. It reads the store and writes
// only commands, which the engine consumes (the engine is the only writer
// of pipeline state).
type Server struct {
	opts   Options
	store  agentrunner.Store
	cfg    *config.Config
	clock  agentrunner.Clock
	log    *slog.Logger
	auth   *Authenticator
	mux    *http.ServeMux
	server *http.Server
	// handler is mux behind the guard.
	handler http.Handler
	// conns tracks and limits the connections Serve accepts.
	conns *conns
	// stop ends the event streams when the server shuts down.
	stop     chan struct{}
	stopOnce sync.Once
	// streams counts the open event streams.
	streams atomic.Int64
	// callback is set when the Execution Service's callback is served.
	callback bool
	// asRoutes serve the dashboard's in-process calls (ServeAs).
	asRoutes
}

// Options wire a server. Store and Config are required.
type Options struct {
	Store  agentrunner.Store
	Config *config.Config
	// Clock defaults to the system clock; Logger discards by default.
	Clock  agentrunner.Clock
	Logger *slog.Logger
	// Auth checks callers; nil: no credentials are configured and every
	// caller is the local admin (the server must listen on loopback).
	Auth *Authenticator
	// Mailboxes read the store's messages for GET /api/mailboxes/{agent};
	// an Engine that has its own (MailboxKeeper) is asked instead, so the
	// API follows a reload.
	Mailboxes *mailbox.Mailboxes
	// Capsules serves the capsule routes (/api/capsules…); nil: they
	// answer 503.
	Capsules *capsule.Service
	// Memory serves the agents' memories (/api/memory…); nil: those
	// routes answer 503.
	Memory *memory.Log
	// Tools are the registered tools; ToolStats their in-process counters
	// and breaker states (optional).
	Tools     []tool.Spec
	ToolStats func() map[string]tool.Stats
	// Metrics serves /metrics; nil: no metrics endpoint.
	Metrics http.Handler
	// Wake tells the engine a command was written (optional).
	Wake func()
	// Engine reports the engine loop's lag for readiness, and the
	// configuration it runs with now (a reload replaces it); optional.
	Engine Engine
	// Pipelines are the pipelines whose runs the API starts, by name;
	// Runs is the scheduler that runs them (optional: without it a start
	// answers with its command), asked instead of Pipelines when it knows
	// them (Graphs), so that the API follows a reload. StartWait bounds
	// how long a start waits for its run (default DefaultStartWait).
	Pipelines map[string]*agentrunner.Pipeline
	Runs      Runner
	StartWait time.Duration
}

// Engine is what the server asks of the running engine.
type Engine interface {
	Stalled() time.Duration
	Config() *config.Config
}

// MailboxKeeper is an Engine that keeps the agents' mailboxes, which a
// reload may resize (mailbox.max_messages).
type MailboxKeeper interface {
	Mailboxes() *mailbox.Mailboxes
}

// mailboxes are the mailboxes the engine keeps now, else Options'.
func (s *Server) mailboxes() *mailbox.Mailboxes {
	if k, ok := s.opts.Engine.(MailboxKeeper); ok {
		if m := k.Mailboxes(); m != nil {
			return m
		}
	}
	return s.opts.Mailboxes
}

// maxStreams bounds the open event streams, each of which polls the store.
const maxStreams = 64

// New returns a server with every route of the API.
func New(opts Options) (*Server, error) {
	if opts.Store == nil || opts.Config == nil {
		return nil, errors.New("http: a store and a configuration are required")
	}
	if opts.Clock == nil {
		opts.Clock = agentrunner.SystemClock{}
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Auth == nil {
		var err error
		if opts.Auth, err = NewAuthenticator(config.Auth{}, "", nil, nil); err != nil {
			return nil, err
		}
	}
	s := &Server{opts: opts, store: opts.Store, cfg: opts.Config, clock: opts.Clock, log: opts.Logger, auth: opts.Auth,
		mux: http.NewServeMux(), stop: make(chan struct{}), conns: newConns()}
	for _, rt := range s.routes() {
		h := http.Handler(rt.handler)
		if !rt.public {
			h = s.auth.Require(rt.role, s.authenticated(h), s.writeError)
		}
		s.mux.Handle(rt.pattern, h)
	}
	s.handler = s.conns.inHandler(s.guard(s.writeDeadline(http.HandlerFunc(s.route))))
	return s, nil
}

// route serves a request through the mux, and answers one that no route
// takes in the API's error format. The mux is not given a catch-all "/"
// route: that route would match every method, so a wrong method on a
// known path would become a 404 instead of the mux's 405 with Allow.
func (s *Server) route(w http.ResponseWriter, r *http.Request) {
	h, pattern := s.mux.Handler(r)
	if pattern != "" {
		s.mux.ServeHTTP(w, r) // sets the path values Handler does not
		return
	}
	// The mux's own answer (404, 405 or a redirect) is run on a recorder
	// of its status and headers only: its plain-text body is replaced.
	rec := &headerRecorder{header: http.Header{}}
	h.ServeHTTP(rec, r)
	switch rec.status {
	case http.StatusMethodNotAllowed:
		w.Header().Set("Allow", rec.header.Get("Allow"))
		s.writeError(w, r, agentrunner.Errorf(agentrunner.EMETHOD, "%s is not allowed on %s; allowed: %s", r.Method, r.URL.Path, rec.header.Get("Allow")))
	case http.StatusNotFound:
		s.writeError(w, r, agentrunner.Errorf(agentrunner.ENOTFOUND, "no route %s %s", r.Method, r.URL.Path))
	default:
		s.mux.ServeHTTP(w, r)
	}
}

// headerRecorder keeps the status and headers of an answer and drops its
// body.
type headerRecorder struct {
	header http.Header
	status int
}

func (h *headerRecorder) Header() http.Header { return h.header }

func (h *headerRecorder) Write(p []byte) (int, error) {
	if h.status == 0 {
		h.status = http.StatusOK
	}
	return len(p), nil
}

func (h *headerRecorder) WriteHeader(code int) {
	if h.status == 0 {
		h.status = code
	}
}

// authenticated marks the connection of a request that passed
// authentication, which lifts it out of the unauthenticated share.
func (s *Server) authenticated(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.conns.authenticated(r)
		h.ServeHTTP(w, r)
	})
}

// writeDeadline bounds the writing of each answer by server.write_timeout,
// per request rather than for the server, so that the event stream can
// set its own deadline for each event.
func (s *Server) writeDeadline(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// Not every ResponseWriter has a deadline (a test's recorder).
		_ = http.NewResponseController(w).SetWriteDeadline(time.Now().Add(s.writeTimeout()))
		h.ServeHTTP(w, r)
	})
}

// Routes lists the patterns ("GET /api/status") of every endpoint this
// server answers, for documentation and its tests.
func (s *Server) Routes() []string {
	var out []string
	for _, rt := range s.routes() {
		out = append(out, rt.pattern)
	}
	if s.callback {
		out = append(out, callbackRoute)
	}
	return out
}

// callbackRoute is the Execution Service's status callback (WithCallback).
const callbackRoute = "POST /api/execution/callback"

// route is one endpoint: who may call it and what answers.
type route struct {
	pattern string
	role    string
	public  bool
	handler http.HandlerFunc
}

// routes lists every endpoint; the OpenAPI document describes the same
// list (a test holds them together).
func (s *Server) routes() []route {
	public := func(group string) bool { return slices.Contains(s.cfg.Server.Public, group) }
	rs := []route{
		{pattern: "GET /api/status", role: config.RoleViewer, handler: s.handleStatus},
		{pattern: "GET /api/cycles", role: config.RoleViewer, handler: s.handleCycles},
		{pattern: "GET /api/cycles/{id}", role: config.RoleViewer, handler: s.handleCycle},
		{pattern: "GET /api/cycles/{id}/artifacts/{name}", role: config.RoleViewer, handler: s.handleArtifact},
		{pattern: "GET /api/errors", role: config.RoleViewer, handler: s.handleErrors},
		{pattern: "GET /api/tools", role: config.RoleViewer, handler: s.handleTools},
		{pattern: "GET /api/mailboxes/{agent}", role: config.RoleViewer, handler: s.handleMailbox},
		{pattern: "POST /api/mailboxes/{agent}", role: config.RoleOperator, handler: s.handlePostMailbox},
		{pattern: "GET /api/memory/search", role: config.RoleViewer, handler: s.handleSearchMemory},
		{pattern: "GET /api/memory/{agent}", role: config.RoleViewer, handler: s.handleMemory},
		{pattern: "POST /api/memory/{agent}", role: config.RoleOperator, handler: s.handlePostMemory},
		{pattern: "GET /api/capsules", role: config.RoleViewer, handler: s.handleCapsules},
		{pattern: "GET /api/capsules/search", role: config.RoleViewer, handler: s.handleSearchCapsules},
		{pattern: "GET /api/capsules/inventory", role: config.RoleViewer, handler: s.handleCapsuleInventory},
		{pattern: "GET /api/capsules/latest", role: config.RoleViewer, handler: s.handleLatestCapsule},
		{pattern: "GET /api/capsules/export", role: config.RoleViewer, handler: s.handleExportCapsules},
		{pattern: "POST " + importPath, role: config.RoleOperator, handler: s.handleImportCapsules},
		{pattern: "GET /api/capsules/{id}", role: config.RoleViewer, handler: s.handleCapsule},
		{pattern: "GET /api/workspaces/{workspace}/capsules/{name}", role: config.RoleViewer, handler: s.handleCapsuleByName},
		{pattern: "POST /api/capsules", role: config.RoleOperator, handler: s.handlePostCapsule},
		{pattern: "PATCH /api/capsules/{id}", role: config.RoleOperator, handler: s.handlePatchCapsule},
		{pattern: "DELETE /api/capsules/{id}", role: config.RoleOperator, handler: s.handleDeleteCapsule},
		{pattern: "POST /api/capsules/bulk-update", role: config.RoleOperator, handler: s.handleBulkUpdateCapsules},
		{pattern: "POST /api/capsules/bulk-delete", role: config.RoleOperator, handler: s.handleBulkDeleteCapsules},
		{pattern: "POST /api/capsules/compose", role: config.RoleViewer, handler: s.handleComposeCapsules},
		{pattern: "GET /api/events", role: config.RoleViewer, handler: s.handleEvents},
		{pattern: "GET /api/events/stream", role: config.RoleViewer, handler: s.handleStream},
		{pattern: "GET /api/audit", role: config.RoleViewer, handler: s.handleAudit},
		{pattern: "POST /api/override/{kind}", role: config.RoleOperator, handler: s.handleOverride},
		{pattern: "GET /api/runs", role: config.RoleViewer, handler: s.handleRuns},
		{pattern: "GET /api/runs/{run}", role: config.RoleViewer, handler: s.handleRun},
		{pattern: "GET /api/runs/{run}/artifacts/{name}", role: config.RoleViewer, handler: s.handleRunArtifact},
		{pattern: "GET /api/runs/{run}/steps", role: config.RoleViewer, handler: s.handleRunSteps},
		{pattern: "GET /api/runs/{run}/todos", role: config.RoleViewer, handler: s.handleTodos},
		{pattern: "GET /api/runs/{run}/steps/{step}/attempts/{n}/prompt", role: config.RoleViewer, handler: s.handleAttemptFile(agentrunner.FilePrompt)},
		{pattern: "GET /api/runs/{run}/steps/{step}/attempts/{n}/validation", role: config.RoleViewer, handler: s.handleAttemptFile(agentrunner.FileValidation)},
		{pattern: "POST /api/runs/{run}/abort", role: config.RoleOperator, handler: s.handleAbortRun},
		{pattern: "POST /api/runs/{run}/resume", role: config.RoleOperator, handler: s.handleResumeRun},
		{pattern: "POST /api/pipelines/{name}/runs", role: config.RoleOperator, handler: s.handleStartRun},
		{pattern: "GET /api/gates", role: config.RoleViewer, handler: s.handleGates},
		{pattern: "POST /api/runs/{run}/gates/{step}", role: config.RoleOperator, handler: s.handleDecide},
		{pattern: "GET /api/backlog", role: config.RoleViewer, handler: s.handleBacklog},
		{pattern: "POST /api/backlog", role: config.RoleOperator, handler: s.handleAddBacklogItem},
		{pattern: "GET /api/backlog/{id}", role: config.RoleViewer, handler: s.handleBacklogItem},
		{pattern: "GET /api/tasks", role: config.RoleViewer, handler: s.handleTasks},
		{pattern: "GET /api/tasks/{id}", role: config.RoleViewer, handler: s.handleTask},
		{pattern: "GET /api/config", role: config.RoleAdmin, handler: s.handleConfig},
		{pattern: "POST /api/admin/reload", role: config.RoleAdmin, handler: s.handleReload},
		{pattern: "GET /api/openapi.json", role: config.RoleViewer, handler: s.handleOpenAPI},
		{pattern: "GET /health/live", role: config.RoleViewer, public: public(config.PublicHealth), handler: s.handleLive},
		{pattern: "GET /health/ready", role: config.RoleViewer, public: public(config.PublicHealth), handler: s.handleReady},
	}
	if s.opts.Metrics != nil {
		rs = append(rs, route{pattern: "GET /metrics", role: config.RoleViewer, public: public(config.PublicMetrics), handler: s.opts.Metrics.ServeHTTP})
	}
	return rs
}

// Handler returns the server's routes behind its guard: the Host, Origin
// and Content-Type checks apply to every route.
func (s *Server) Handler() http.Handler { return s.handler }

// ConnStats returns the connection counters of Serve, for metrics.
func (s *Server) ConnStats() ConnStats { return s.conns.stats() }

// maxCallbackBytes bounds a callback's body.
const maxCallbackBytes = 64 << 10

// callbackTolerance is how old a callback's signature may be.
const callbackTolerance = 5 * time.Minute

// WithCallback enables POST /api/execution/callback: the Execution
// Service's status reports, signed with secret in the webhook format
// (docs/execution-service.md), become commands the engine consumes; wake
// tells the engine one arrived.
func (s *Server) WithCallback(secret []byte, wake func()) *Server {
	return s.WithCallbackFrom(func() []byte { return secret }, wake)
}

// WithCallbackFrom is WithCallback with the secret read at each callback,
// so a rotated secret is checked from the next one on.
func (s *Server) WithCallbackFrom(secret func() []byte, wake func()) *Server {
	s.callback = true
	s.mux.HandleFunc(callbackRoute, func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(io.LimitReader(r.Body, maxCallbackBytes+1))
		if err != nil || len(body) > maxCallbackBytes {
			s.writeError(w, r, agentrunner.Errorf(agentrunner.EINVALID, "the body is unreadable or longer than %d bytes", maxCallbackBytes))
			return
		}
		if err := webhook.Verify(secret(), body, r.Header.Get(webhook.SignatureHeader), s.clock.Now(), callbackTolerance); err != nil {
			s.writeError(w, r, agentrunner.Errorf(agentrunner.EUNAUTHORIZED, "the callback's signature does not verify"))
			return
		}
		s.conns.authenticated(r)
		var cb struct {
			StrategyID string `json:"strategy_id"`
			Status     string `json:"status"`
			Error      string `json:"error"`
		}
		dec := json.NewDecoder(bytes.NewReader(body))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&cb); err != nil {
			s.writeError(w, r, agentrunner.Errorf(agentrunner.EINVALID, "the body is not a status callback: %v", err))
			return
		}
		if dec.More() {
			s.writeError(w, r, agentrunner.Errorf(agentrunner.EINVALID, "the body holds more than one JSON value"))
			return
		}
		if cb.StrategyID == "" || !execsvc.Status(cb.Status).Valid() {
			s.writeError(w, r, agentrunner.Errorf(agentrunner.EINVALID, "strategy_id is required and status must be acknowledged, executing, completed or error"))
			return
		}
		cmd := &agentrunner.Command{Kind: execution.CommandExecutionStatus, Operator: "execution-service", CreatedAt: s.clock.Now(),
			Args: map[string]any{"strategy_id": cb.StrategyID, "status": cb.Status, "error": cb.Error}}
		if err := s.store.AddCommand(r.Context(), cmd); err != nil {
			s.writeError(w, r, err)
			return
		}
		if wake != nil {
			wake()
		}
		writeJSON(w, http.StatusAccepted, map[string]any{"accepted": true, "command": cmd.ID})
	})
	return s
}

// Serve accepts connections on ln until ctx ends, then shuts down
// gracefully. It applies the server's timeouts and caps the open
// connections (see conns).
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	set := s.cfg.Server
	limit := ConnectionLimit(set.MaxConnections)
	s.server = &http.Server{
		Handler:           s.handler,
		ReadHeaderTimeout: orDefault(set.ReadHeaderTimeout, config.DefaultReadHeaderTimeout),
		ReadTimeout:       orDefault(set.ReadTimeout, config.DefaultReadTimeout),
		IdleTimeout:       orDefault(set.IdleTimeout, config.DefaultIdleTimeout),
		MaxHeaderBytes:    cmp.Or(set.MaxHeaderBytes, config.DefaultMaxHeaderBytes),
		ConnState:         s.conns.connState,
		ConnContext:       connContext,
		ErrorLog:          slog.NewLogLogger(s.log.Handler(), slog.LevelWarn),
	}
	s.log.Info("API connections", "max_connections", limit, "unauthenticated", max(1, limit/unauthenticatedShare))
	ln = s.conns.listen(ln, limit)
	errc := make(chan error, 1)
	go func() { errc <- s.server.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
		s.stopOnce.Do(func() { close(s.stop) })
		shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		s.server.Shutdown(shutdown)
		if err := <-errc; !errors.Is(err, http.ErrServerClosed) {
			return err
		}
		return nil
	}
}

// orDefault is d, or def when d is not set (a configuration built without
// WithDefaults, in tests).
func orDefault(d config.Duration, def time.Duration) time.Duration {
	if d > 0 {
		return d.D()
	}
	return def
}

// writeTimeout bounds the writing of one answer.
func (s *Server) writeTimeout() time.Duration {
	return orDefault(s.cfg.Server.WriteTimeout, config.DefaultWriteTimeout)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	// Encoded before the status is sent, so a value that cannot be encoded
	// is a 500, not a 200 with a cut-off body.
	data, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		status = http.StatusInternalServerError
		data = []byte(`{"error": {"code": "internal", "message": "internal error"}}`)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	w.Write(append(data, '\n'))
}

// closesConnection reports whether an answer with this code closes the
// connection: the caller is not who it must be, or is not a client of
// this API (a foreign Host, Origin or body).
func closesConnection(code string) bool {
	switch code {
	case agentrunner.EUNAUTHORIZED, agentrunner.EFORBIDDEN, agentrunner.EMISDIRECTED, agentrunner.EUNSUPPORTED:
		return true
	}
	return false
}

// writeError answers with the error's code and message. Internal errors are
// logged and answered with a generic message, so nothing internal leaks.
func (s *Server) writeError(w http.ResponseWriter, r *http.Request, err error) {
	code := agentrunner.ErrorCode(err)
	status, ok := statusOf[code]
	if !ok {
		status = http.StatusInternalServerError
	}
	if code == agentrunner.EINTERNAL {
		s.log.Error("request failed", "method", r.Method, "path", r.URL.Path, "error", err)
	}
	if closesConnection(code) {
		// A refused client does not keep its connection: it would
		// otherwise hold a descriptor for nothing.
		w.Header().Set("Connection", "close")
		s.conns.refused(code)
	}
	writeJSON(w, status, map[string]any{"error": map[string]string{"code": code, "message": agentrunner.ErrorMessage(err)}})
}
