package http

import (
	"mime"
	"net"
	"net/http"
	"net/url"
	"strings"

	"github.com/agentrunner/agentrunner"
	"github.com/agentrunner/agentrunner/internal/clip"
)

// crossOrigin is the standard library's check of Sec-Fetch-Site and
// Origin against Host; check adds the Referer for browsers that send
// neither.
var crossOrigin = http.NewCrossOriginProtection()

// guard runs before every route, the Execution Service's callback and
// health included. It refuses what a web page can make the operator's
// browser send: a request addressed to another name (DNS rebinding) while
// no credentials are configured, a state-changing request from another
// origin, and a body that is not declared JSON (a browser sends text/plain
// cross-site without asking first). The connection of a refused request
// is closed (see writeError).
func (s *Server) guard(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := s.check(r); err != nil {
			s.writeError(w, r, err)
			return
		}
		h.ServeHTTP(w, r)
	})
}

// check returns why r is refused, or nil.
func (s *Server) check(r *http.Request) error {
	if !s.auth.Enabled() {
		if err := checkLoopbackHost(r); err != nil {
			return err
		}
	}
	if err := checkOrigin(r); err != nil {
		return err
	}
	return checkContentType(r)
}

// safeMethod reports whether a request with this method changes nothing.
func safeMethod(m string) bool {
	return m == http.MethodGet || m == http.MethodHead || m == http.MethodOptions
}

// checkLoopbackHost refuses a Host that is not a loopback name or address
// on the port the request came in on. Without credentials every caller is
// the admin, trusted because it is on this machine; a web page whose name
// its owner rebinds to 127.0.0.1 is on this machine too, but its requests
// still name its own host, which is how they are told apart.
func checkLoopbackHost(r *http.Request) error {
	host, port := splitHost(r.Host)
	local := localPort(r)
	if port == "" {
		port = "80"
	}
	if loopbackName(host) && (local == "" || port == local) {
		return nil
	}
	example := "http://127.0.0.1"
	if local != "" {
		example += ":" + local
	}
	return agentrunner.Errorf(agentrunner.EMISDIRECTED,
		"Host %q is not this server: without credentials (server.auth) the API answers only requests addressed to a loopback name or address on the port it listens on (localhost, *.localhost, 127.0.0.0/8 or [::1]), such as %s; this keeps a web page whose name points at 127.0.0.1 (DNS rebinding) out. To serve other names, configure server.auth",
		clip.String(r.Host, maxQuoted), example)
}

// splitHost splits a Host header into its host, without brackets, and its
// port ("" when it has none).
func splitHost(hostport string) (string, string) {
	if host, port, err := net.SplitHostPort(hostport); err == nil {
		return host, port
	}
	return strings.TrimSuffix(strings.TrimPrefix(hostport, "["), "]"), ""
}

// loopbackName reports whether host can only mean this machine: localhost,
// a name under .localhost (RFC 6761; browsers resolve them to loopback
// themselves) or a loopback address.
func loopbackName(host string) bool {
	host = strings.TrimSuffix(strings.ToLower(host), ".")
	if host == "localhost" || strings.HasSuffix(host, ".localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// localPort is the port of the connection r came in on; "" when r was not
// served from a connection (a handler called directly).
func localPort(r *http.Request) string {
	addr, ok := r.Context().Value(http.LocalAddrContextKey).(net.Addr)
	if !ok {
		return ""
	}
	_, port, err := net.SplitHostPort(addr.String())
	if err != nil {
		return ""
	}
	return port
}

// checkOrigin refuses a state-changing request that a browser says comes
// from another origin: Sec-Fetch-Site cross-site or same-site, an Origin
// whose host and port are not the request's Host, or, from a browser that
// sends neither, such a Referer. Clients that are not browsers (the CLI,
// curl, the Execution Service) send none of them and pass.
func checkOrigin(r *http.Request) error {
	if safeMethod(r.Method) {
		return nil
	}
	origin, site := r.Header.Get("Origin"), r.Header.Get("Sec-Fetch-Site")
	if err := crossOrigin.Check(r); err != nil {
		return agentrunner.Errorf(agentrunner.EFORBIDDEN,
			"cross-origin request refused (Origin %q, Sec-Fetch-Site %q): %s %s changes state and is accepted only from this server's own origin (http://%s) or from clients that are not browsers",
			clip.String(origin, maxQuoted), clip.String(site, maxQuoted), r.Method, r.URL.Path, clip.String(r.Host, maxQuoted))
	}
	ref := r.Header.Get("Referer")
	if origin != "" || site != "" || ref == "" {
		return nil
	}
	if u, err := url.Parse(ref); err != nil || u.Host != r.Host {
		return agentrunner.Errorf(agentrunner.EFORBIDDEN,
			"cross-origin request refused (Referer %q): %s %s changes state and is accepted only from this server's own origin (http://%s) or from clients that are not browsers",
			clip.String(ref, maxQuoted), r.Method, r.URL.Path, clip.String(r.Host, maxQuoted))
	}
	return nil
}

// checkContentType refuses a state-changing request whose body is not
// declared application/json. Every body the API reads is JSON (a capsule
// import's JSON lines may be declared application/x-ndjson too, which a
// browser does not send cross-site without a preflight either); the check
// comes before any route, so a form or text/plain body, which browsers
// send cross-site without a preflight, never reaches a decoder.
func checkContentType(r *http.Request) error {
	if safeMethod(r.Method) || r.ContentLength == 0 {
		return nil
	}
	ct := r.Header.Get("Content-Type")
	if mt, _, err := mime.ParseMediaType(ct); err == nil && (mt == "application/json" || mt == ndjson && r.URL.Path == importPath) {
		return nil
	}
	return agentrunner.Errorf(agentrunner.EUNSUPPORTED,
		"%s %s has a body of Content-Type %q; the API reads JSON only: send Content-Type: application/json", r.Method, r.URL.Path, clip.String(ct, maxQuoted))
}
