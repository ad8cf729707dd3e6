package http

import (
	"net/http"
	"strings"
	"sync"

	"github.com/agentrunner/agentrunner"
	"github.com/agentrunner/agentrunner/internal/clip"
)

// apiPrefixes are the paths the API answers; every other path is the web
// dashboard's once one is mounted.
var apiPrefixes = []string{"/api/", "/health/", "/metrics"}

// IsAPIPath reports whether path belongs to the API (JSON under /api/,
// the health checks and the metrics) rather than to the dashboard.
func IsAPIPath(path string) bool {
	for _, p := range apiPrefixes {
		if strings.HasPrefix(path, p) || path == strings.TrimSuffix(p, "/") {
			return true
		}
	}
	return false
}

// Mount serves h, the web dashboard, on every path that is not the API's,
// on the same listener and connection cap. It must be called before
// Serve. The dashboard's requests pass the guard's Host check (without
// credentials) and Origin check, but not its Content-Type check: the
// dashboard's actions are HTML forms, which it protects with its own
// per-session CSRF token on top of the Origin check. The API's requests
// are served exactly as before.
func (s *Server) Mount(h http.Handler) *Server {
	api := s.handler
	dash := s.conns.inHandler(s.browserGuard(s.writeDeadline(h)))
	s.handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if IsAPIPath(r.URL.Path) {
			api.ServeHTTP(w, r)
			return
		}
		dash.ServeHTTP(w, r)
	})
	return s
}

// browserGuard refuses what check refuses, except a body that is not
// JSON, and answers in plain text: a person reads it.
func (s *Server) browserGuard(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := s.CheckBrowserRequest(r); err != nil {
			code := agentrunner.ErrorCode(err)
			w.Header().Set("Connection", "close")
			w.Header().Set("Content-Type", "text/plain; charset=utf-8")
			w.Header().Set("X-Content-Type-Options", "nosniff")
			s.conns.refused(code)
			w.WriteHeader(statusOf[code])
			w.Write([]byte(agentrunner.ErrorMessage(err) + "\n"))
			return
		}
		h.ServeHTTP(w, r)
	})
}

// CheckBrowserRequest is the guard's check of a request to the dashboard:
// without credentials, a Host that is a loopback name on the listening
// port (DNS rebinding); and a state-changing request from this origin
// only. It returns EMISDIRECTED or EFORBIDDEN, or nil.
func (s *Server) CheckBrowserRequest(r *http.Request) error {
	if !s.auth.Enabled() {
		if err := checkLoopbackHost(r); err != nil {
			return err
		}
	}
	return checkOrigin(r)
}

// MarkAuthenticated lifts the connection of r out of the unauthenticated
// share of the connection cap: the dashboard calls it for a request that
// carries a valid session.
func (s *Server) MarkAuthenticated(r *http.Request) { s.conns.authenticated(r) }

// Authenticator returns the server's credential checker, which the
// dashboard's login uses so that a key or token is checked in one place.
func (s *Server) Authenticator() *Authenticator { return s.auth }

// ServeAs serves r through the API's own route handlers as p, whom the
// caller authenticated by other means (the dashboard's session cookie):
// the role each route needs is checked as for any caller, and commands
// are written, attributed and audited by the same code as the API's. It
// skips the guard and the credential check, so it is for the dashboard's
// in-process calls only, never for a request as it came from the network.
func (s *Server) ServeAs(p Principal, w http.ResponseWriter, r *http.Request) {
	s.asOnce.Do(s.buildAsMux)
	s.conns.authenticated(r)
	s.asMux.ServeHTTP(w, r.WithContext(ContextWithPrincipal(r.Context(), p)))
}

// asRoutes is the mux of ServeAs, built once on first use.
type asRoutes struct {
	asOnce sync.Once
	asMux  *http.ServeMux
}

// buildAsMux registers every route with a role check on the principal in
// the request's context.
func (s *Server) buildAsMux() {
	s.asMux = http.NewServeMux()
	for _, rt := range s.routes() {
		need, h := rt.role, rt.handler
		s.asMux.HandleFunc(rt.pattern, func(w http.ResponseWriter, r *http.Request) {
			p, ok := PrincipalFrom(r.Context())
			if !ok || !Allows(p.Role, need) {
				s.writeError(w, r, agentrunner.Errorf(agentrunner.EFORBIDDEN, "role %s may not %s %s; it needs role %s or higher", p.Role, r.Method, r.URL.Path, need))
				return
			}
			h(w, r)
		})
	}
	s.asMux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		s.writeError(w, r, agentrunner.Errorf(agentrunner.ENOTFOUND, "no route %s %s", r.Method, clip.String(r.URL.Path, maxQuoted)))
	})
}
