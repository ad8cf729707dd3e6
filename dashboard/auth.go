package dashboard

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/agentrunner/agentrunner"
	arhttp "github.com/agentrunner/agentrunner/http"
)

// maxFormBytes bounds a form's body: the longest field is an injected
// message (16 KiB in the API) or a gate's comment.
const maxFormBytes = 64 << 10

// withSession runs h with the request's session. Without a valid one:
// when no credentials are configured, a session of the local admin is
// started at once (being on this machine is the credential, as for the
// API, and the guard already refused a Host that is not loopback); else a
// page is sent to the login and anything else is answered 401.
func (d *Dashboard) withSession(h func(http.ResponseWriter, *http.Request, *session)) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s, ok := d.currentSession(r)
		if !ok {
			auth := d.opts.API.Authenticator()
			if auth.Enabled() {
				d.toLogin(w, r)
				return
			}
			p, _ := auth.Authenticate(r) // the local admin: it cannot fail without credentials
			s = d.sessions.newSession(p, d.clock.Now())
			http.SetCookie(w, d.sessions.cookie(r, s))
		}
		if d.opts.OnAuthenticated != nil {
			d.opts.OnAuthenticated(r)
		}
		h(w, r, s)
	})
}

// currentSession returns the session of r's cookie, if it is valid.
func (d *Dashboard) currentSession(r *http.Request) (*session, bool) {
	c, err := r.Cookie(CookieName)
	if err != nil {
		return nil, false
	}
	s, err := d.sessions.decode(c.Value, d.clock.Now())
	if err != nil {
		return nil, false
	}
	auth := d.opts.API.Authenticator()
	switch {
	case !auth.Enabled():
		if s.Via != arhttp.ViaLoopback {
			return nil, false // a session from when credentials were configured
		}
	case !d.sessions.holds(auth, s):
		return nil, false // its key was removed or rotated, its role changed
	}
	ended, err := d.opts.Store.SessionEnded(r.Context(), s.Nonce)
	if err != nil {
		// Refused rather than let a session signed out slip through.
		d.log.Warn("reading the sessions signed out", "error", err)
		return nil, false
	}
	if ended {
		return nil, false // signed out: this is a copy of its cookie
	}
	return s, true
}

// toLogin sends a browser without a session to the login page, back to
// where it was going once signed in; other requests get 401.
func (d *Dashboard) toLogin(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		d.render(w, r, nil, http.StatusUnauthorized, "error", "Sign in", errorView{Code: agentrunner.EUNAUTHORIZED,
			Message: "your session has ended or was never started: sign in again, then repeat the action"})
		return
	}
	http.Redirect(w, r, "/login?next="+url.QueryEscape(r.URL.RequestURI()), http.StatusSeeOther)
}

// loginView is the login page's data.
type loginView struct {
	Next  string
	Error string
}

// handleLoginPage shows the form that takes an API key or a JWT.
func (d *Dashboard) handleLoginPage(w http.ResponseWriter, r *http.Request) {
	if !d.opts.API.Authenticator().Enabled() {
		http.Redirect(w, r, "/", http.StatusSeeOther)
		return
	}
	d.render(w, r, nil, http.StatusOK, "login", "Sign in", loginView{Next: safeNext(r.URL.Query().Get("next"))})
}

// handleLogin checks the credential with the API's authenticator and
// starts a session for whom it names. The credential is not kept: the
// session holds the name and the role only.
func (d *Dashboard) handleLogin(w http.ResponseWriter, r *http.Request) {
	auth := d.opts.API.Authenticator()
	if !auth.Enabled() {
		http.Redirect(w, r, "/", http.StatusSeeOther)
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, maxFormBytes)
	if err := r.ParseForm(); err != nil {
		d.render(w, r, nil, http.StatusBadRequest, "login", "Sign in", loginView{Error: "the form could not be read; try again"})
		return
	}
	next := safeNext(r.PostForm.Get("next"))
	cred := strings.TrimSpace(r.PostForm.Get("credential"))
	if cred == "" || len(cred) > arhttp.MaxCredentialBytes {
		d.render(w, r, nil, http.StatusBadRequest, "login", "Sign in", loginView{Next: next, Error: "enter an API key or a JWT"})
		return
	}
	// The proxies' chain goes along: behind a trusted proxy, the limit on
	// refused credentials counts the client it names.
	check := &http.Request{Header: http.Header{"Authorization": {"Bearer " + cred},
		"X-Forwarded-For": r.Header.Values("X-Forwarded-For")}, RemoteAddr: r.RemoteAddr}
	p, err := auth.Authenticate(check)
	if err != nil {
		d.log.Warn("dashboard login refused", "remote", r.RemoteAddr, "reason", agentrunner.ErrorMessage(err))
		status := http.StatusUnauthorized
		if agentrunner.ErrorCode(err) == agentrunner.ETOOMANY {
			status = http.StatusTooManyRequests
		}
		d.render(w, r, nil, status, "login", "Sign in", loginView{Next: next, Error: "that API key or token is not accepted: " + agentrunner.ErrorMessage(err)})
		return
	}
	s := d.sessions.newSession(p, d.clock.Now())
	http.SetCookie(w, d.sessions.cookie(r, s))
	d.log.Info("dashboard login", "operator", p.Name, "role", p.Role, "via", p.Via, "remote", r.RemoteAddr)
	http.Redirect(w, r, next, http.StatusSeeOther)
}

// handleLogout ends the session: its cookie is removed, and the session
// is recorded as ended in the store until it would have expired, so a
// copy of the cookie taken before is refused too, across restarts.
func (d *Dashboard) handleLogout(w http.ResponseWriter, r *http.Request, s *session) {
	if !d.checkForm(w, r, s) {
		return
	}
	if err := d.opts.Store.EndSession(r.Context(), s.Nonce, s.Expires, d.clock.Now()); err != nil {
		d.fail(w, r, s, fmt.Errorf("sign out: %w", err))
		return
	}
	http.SetCookie(w, clearCookie(r))
	http.Redirect(w, r, "/login", http.StatusSeeOther)
}

// checkForm reads a POSTed form (bounded) and checks its CSRF token
// against the session, answering 403 when it does not match.
func (d *Dashboard) checkForm(w http.ResponseWriter, r *http.Request, s *session) bool {
	r.Body = http.MaxBytesReader(w, r.Body, maxFormBytes)
	if err := r.ParseForm(); err != nil {
		d.fail(w, r, s, errorf(agentrunner.EINVALID, "the form could not be read (at most %d bytes)", maxFormBytes))
		return false
	}
	if !d.sessions.checkCSRF(s, r.PostForm.Get("csrf")) {
		d.fail(w, r, s, errorf(agentrunner.EFORBIDDEN, "the form's security token does not match your session: reload the page and try again"))
		return false
	}
	return true
}

// safeNext is next if it is a path of this site, else "/": the login
// never redirects to another site.
func safeNext(next string) string {
	if next == "" || len(next) > 1024 || !strings.HasPrefix(next, "/") || strings.HasPrefix(next, "//") || strings.ContainsAny(next, "\\\r\n\t") {
		return "/"
	}
	u, err := url.Parse(next)
	if err != nil || u.Scheme != "" || u.Host != "" || u.Path == "/login" {
		return "/"
	}
	return next
}
