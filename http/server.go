// Package http is agentrunner's operator HTTP surface: JSON under /api/ and
// health checks. Errors are {"error": {"code": "...", "message": "..."}},
// with the status taken from one table of error codes.
package http

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/agentrunner/agentrunner"
	"github.com/agentrunner/agentrunner/config"
	"github.com/agentrunner/agentrunner/engine"
	"github.com/agentrunner/agentrunner/execsvc"
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
}

// Server serves the API of one workspace. It only reads the store.
type Server struct {
	store  agentrunner.Store
	cfg    *config.Config
	clock  agentrunner.Clock
	log    *slog.Logger
	mux    *http.ServeMux
	server *http.Server
}

// NewServer returns a server reading from store.
func NewServer(store agentrunner.Store, cfg *config.Config, clock agentrunner.Clock, log *slog.Logger) *Server {
	s := &Server{store: store, cfg: cfg, clock: clock, log: log, mux: http.NewServeMux()}
	s.mux.HandleFunc("GET /api/status", s.handleStatus)
	s.mux.HandleFunc("GET /health/live", s.handleLive)
	s.mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		s.writeError(w, r, agentrunner.Errorf(agentrunner.ENOTFOUND, "no route %s %s", r.Method, r.URL.Path))
	})
	return s
}

// Handler returns the server's routes.
func (s *Server) Handler() http.Handler { return s.mux }

// maxCallbackBytes bounds a callback's body.
const maxCallbackBytes = 64 << 10

// callbackTolerance is how old a callback's signature may be.
const callbackTolerance = 5 * time.Minute

// WithCallback enables POST /api/execution/callback: the Execution
// Service's status reports, signed with secret in the webhook format
// (docs/execution-service.md), become commands the engine consumes; wake
// tells the engine one arrived.
func (s *Server) WithCallback(secret []byte, wake func()) *Server {
	s.mux.HandleFunc("POST /api/execution/callback", func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(io.LimitReader(r.Body, maxCallbackBytes+1))
		if err != nil || len(body) > maxCallbackBytes {
			s.writeError(w, r, agentrunner.Errorf(agentrunner.EINVALID, "the body is unreadable or longer than %d bytes", maxCallbackBytes))
			return
		}
		if err := webhook.Verify(secret, body, r.Header.Get(webhook.SignatureHeader), s.clock.Now(), callbackTolerance); err != nil {
			s.writeError(w, r, agentrunner.Errorf(agentrunner.EUNAUTHORIZED, "the callback's signature does not verify"))
			return
		}
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
		if cb.StrategyID == "" || !execsvc.Status(cb.Status).Valid() {
			s.writeError(w, r, agentrunner.Errorf(agentrunner.EINVALID, "strategy_id is required and status must be acknowledged, executing, completed or error"))
			return
		}
		cmd := &agentrunner.Command{Kind: agentrunner.CommandExecutionStatus, Operator: "execution-service", CreatedAt: s.clock.Now(),
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
// gracefully.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	s.server = &http.Server{Handler: s.mux, ReadHeaderTimeout: 10 * time.Second, ErrorLog: slog.NewLogLogger(s.log.Handler(), slog.LevelWarn)}
	errc := make(chan error, 1)
	go func() { errc <- s.server.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
		shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		s.server.Shutdown(shutdown)
		if err := <-errc; !errors.Is(err, http.ErrServerClosed) {
			return err
		}
		return nil
	}
}

func (s *Server) handleStatus(w http.ResponseWriter, r *http.Request) {
	st, err := engine.ReadStatus(r.Context(), s.store, s.cfg, s.clock.Now())
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, st)
}

func (s *Server) handleLive(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.Encode(v)
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
	writeJSON(w, status, map[string]any{"error": map[string]string{"code": code, "message": agentrunner.ErrorMessage(err)}})
}
