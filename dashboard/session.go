package dashboard

import (
	"bytes"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/agentrunner/agentrunner/config"
	arhttp "github.com/agentrunner/agentrunner/http"
)

// CookieName is the session cookie's name.
const CookieName = "agentrunner_session"

// MinSessionKeyBytes is the shortest key accepted to sign sessions.
const MinSessionKeyBytes = 32

// maxCookieBytes bounds a session cookie read back: ours are a few
// hundred bytes, so anything longer is not one and is not decoded.
const maxCookieBytes = 2048

// session is who a signed-in browser is: the principal its credential
// proved at the login (the credential itself is never kept), until
// Expires. Nonce ties the CSRF token to this one login.
type session struct {
	Name    string    `json:"n"`
	Role    string    `json:"r"`
	Via     string    `json:"v"`
	Expires time.Time `json:"e"`
	Nonce   string    `json:"c"`
	// Cred is a tag of the credential that proved the principal (a MAC of
	// its hash under the session key, which says nothing of the key to
	// whoever reads the cookie): each request checks that the credentials
	// configured now still hold it.
	Cred string `json:"k,omitempty"`
}

// principal is the session as the API's handlers see the caller.
func (s *session) principal() arhttp.Principal {
	return arhttp.Principal{Name: s.Name, Role: s.Role, Via: s.Via}
}

// may reports whether the session's role has the rights of need.
func (s *session) may(need string) bool { return arhttp.Allows(s.Role, need) }

// sessions signs and checks session cookies and CSRF tokens with one key.
// The cookie holds the session in clear (nothing in it is secret: a name
// and a role) with an HMAC-SHA256 over it, so the server keeps no state
// and a forged or altered cookie is refused.
type sessions struct {
	key []byte
	ttl time.Duration
}

func newSessions(key []byte, ttl time.Duration) (*sessions, error) {
	if key == nil {
		key = make([]byte, MinSessionKeyBytes)
		rand.Read(key)
	}
	if len(key) < MinSessionKeyBytes {
		return nil, fmt.Errorf("dashboard: the session key has %d bytes; at least %d are needed", len(key), MinSessionKeyBytes)
	}
	if ttl <= 0 {
		return nil, errors.New("dashboard: the session lifetime must be positive")
	}
	return &sessions{key: bytes.Clone(key), ttl: ttl}, nil
}

// newSession starts a session for p, valid for the lifetime from now.
func (ss *sessions) newSession(p arhttp.Principal, now time.Time) *session {
	nonce := make([]byte, 16)
	rand.Read(nonce)
	expires := now.Add(ss.ttl)
	if !p.Expires.IsZero() && p.Expires.Before(expires) {
		expires = p.Expires // a session outlives no token
	}
	s := &session{Name: p.Name, Role: p.Role, Via: p.Via, Expires: expires.UTC().Truncate(time.Second),
		Nonce: base64.RawURLEncoding.EncodeToString(nonce)}
	if p.Via != arhttp.ViaLoopback {
		s.Cred = ss.credTag(p.Credential)
	}
	return s
}

// credTag is the session's tag of the credential whose hash is h.
func (ss *sessions) credTag(h [sha256.Size]byte) string {
	return base64.RawURLEncoding.EncodeToString(ss.mac("credential", h[:]))
}

// holds reports whether the credentials auth checks now still prove s.
func (ss *sessions) holds(auth *arhttp.Authenticator, s *session) bool {
	return s.Cred != "" && auth.Holds(s.Name, s.Role, s.Via, func(h [sha256.Size]byte) bool {
		return hmac.Equal([]byte(ss.credTag(h)), []byte(s.Cred))
	})
}

// mac signs data with a purpose, so a signature made for one use (a
// cookie) is never valid for another (a CSRF token).
func (ss *sessions) mac(purpose string, data []byte) []byte {
	m := hmac.New(sha256.New, ss.key)
	m.Write([]byte(purpose))
	m.Write([]byte{0})
	m.Write(data)
	return m.Sum(nil)
}

// encode is the cookie value of s: payload "." signature, both base64url.
func (ss *sessions) encode(s *session) string {
	payload, _ := json.Marshal(s) // strings and a time: it cannot fail
	return base64.RawURLEncoding.EncodeToString(payload) + "." + base64.RawURLEncoding.EncodeToString(ss.mac("cookie", payload))
}

// decode checks a cookie value's signature, shape and expiry and returns
// its session.
func (ss *sessions) decode(value string, now time.Time) (*session, error) {
	if len(value) > maxCookieBytes {
		return nil, errors.New("the session cookie is too long")
	}
	p, sig, ok := strings.Cut(value, ".")
	if !ok {
		return nil, errors.New("the session cookie is malformed")
	}
	payload, err1 := base64.RawURLEncoding.DecodeString(p)
	mac, err2 := base64.RawURLEncoding.DecodeString(sig)
	if err1 != nil || err2 != nil || !hmac.Equal(mac, ss.mac("cookie", payload)) {
		return nil, errors.New("the session cookie's signature does not verify")
	}
	var s session
	if err := json.Unmarshal(payload, &s); err != nil {
		return nil, errors.New("the session cookie is malformed")
	}
	switch {
	case !now.Before(s.Expires):
		return nil, errors.New("the session has expired")
	case s.Name == "" || s.Nonce == "" || !slices.Contains(config.Roles, s.Role):
		return nil, errors.New("the session cookie is malformed")
	}
	return &s, nil
}

// csrfToken is the token the session's forms carry: it proves a POST
// comes from a page this server rendered for this session, which a page
// of another site cannot read.
func (ss *sessions) csrfToken(s *session) string {
	return base64.RawURLEncoding.EncodeToString(ss.mac("csrf", []byte(s.Nonce)))
}

// checkCSRF reports whether token is the session's CSRF token, in
// constant time.
func (ss *sessions) checkCSRF(s *session, token string) bool {
	got, err := base64.RawURLEncoding.DecodeString(token)
	return err == nil && hmac.Equal(got, ss.mac("csrf", []byte(s.Nonce)))
}

// cookie is the session cookie for s: HttpOnly (no script reads it),
// SameSite=Strict (no other site's request carries it), Secure when the
// request came over TLS, and expiring with the session.
func (ss *sessions) cookie(r *http.Request, s *session) *http.Cookie {
	return &http.Cookie{Name: CookieName, Value: ss.encode(s), Path: "/", Expires: s.Expires,
		MaxAge: int(ss.ttl.Seconds()), HttpOnly: true, Secure: r.TLS != nil, SameSite: http.SameSiteStrictMode}
}

// clearCookie removes the session cookie.
func clearCookie(r *http.Request) *http.Cookie {
	return &http.Cookie{Name: CookieName, Value: "", Path: "/", MaxAge: -1, HttpOnly: true, Secure: r.TLS != nil, SameSite: http.SameSiteStrictMode}
}
