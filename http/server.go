// Package http is agentrunner's operator HTTP surface: JSON under /api/ and
// health checks. Errors are {"error": {"code": "...", "message": "..."}},
// with the status taken from one table of error codes.
package http

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/agentrunner/agentrunner"
	"github.com/agentrunner/agentrunner/config"
	"github.com/agentrunner/agentrunner/engine"
)

// statusOf maps error codes to HTTP statuses, in one place.
var statusOf = map[string]int{
	agentrunner.EINVALID:     http.StatusBadRequest,
	agentrunner.ENOTFOUND:    http.StatusNotFound,
	agentrunner.ECONFLICT:    http.StatusConflict,
	agentrunner.EUNAVAILABLE: http.StatusServiceUnavailable,
	agentrunner.EINTERNAL:    http.StatusInternalServerError,
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
