package http

import (
	"context"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/subtle"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode"

	"github.com/agentrunner/agentrunner"
	"github.com/agentrunner/agentrunner/config"
	"github.com/golang-jwt/jwt/v5"
)

// How a request proved who it is: the values of Principal.Via.
const (
	ViaAPIKey   = "api_key"
	ViaJWT      = "jwt"
	ViaLoopback = "loopback"
)

// Header names and limits of the credentials.
const (
	// APIKeyHeader carries an API key, for clients that cannot set
	// Authorization.
	APIKeyHeader = "X-API-Key"
	// MaxCredentialBytes bounds a credential header; a longer one is
	// refused before it is parsed, so nobody makes the server hash or
	// decode megabytes.
	MaxCredentialBytes = 8 << 10
	// MinSecretBytes is the shortest API key or HS256 secret accepted, so a
	// placeholder like "changeme" is not taken for a key.
	MinSecretBytes = 16
	// jwtLeeway tolerates clock skew between the token's issuer and us.
	jwtLeeway = 30 * time.Second
	// maxSubjectBytes bounds the operator name taken from a token, which
	// goes into the audit log.
	maxSubjectBytes = 256
	// maxPEMBytes bounds the public key file, so a wrong path to a large
	// file fails instead of being read whole.
	maxPEMBytes = 64 << 10
	// minRSABits is the smallest RSA key that still resists factoring.
	minRSABits = 2048
)

// Principal is who made a request: the operator recorded in the audit log.
type Principal struct {
	// Name is the API key's name or the token's subject.
	Name string
	// Role is one of config.Roles.
	Role string
	// Via is ViaAPIKey, ViaJWT or ViaLoopback.
	Via string
	// Credential names what proved the caller, never the credential
	// itself: the SHA-256 of the API key, or of the key that verified the
	// token; zero for the local admin. A session keeps a tag of it, to end
	// once the credential is gone (Holds).
	Credential [sha256.Size]byte
	// Expires is when the token expires; zero for an API key.
	Expires time.Time
}

// Authenticator checks requests' credentials: API keys and, when
// configured, JWTs. Its credentials change only as a whole, by Replace
// (a reload that read rotated keys), and it is safe for concurrent use.
type Authenticator struct {
	creds   atomic.Pointer[credentials]
	refused *refusals
}

// credentials are the keys an Authenticator checks against.
type credentials struct {
	keys []apiKey
	// jwtKey is the HS256 secret ([]byte) or the RS256 key
	// (*rsa.PublicKey); nil when JWTs are not accepted.
	jwtKey  any
	jwtAlg  string
	jwtOpts []jwt.ParserOption
	// jwtKeyID is the SHA-256 of the secret or of the public key's DER.
	jwtKeyID [sha256.Size]byte
	// proxies are the trusted reverse proxies: a request from one is
	// counted against the client its X-Forwarded-For names.
	proxies []netip.Prefix
}

// apiKey is a configured key, kept only as its SHA-256 so the key itself
// does not stay in memory longer than construction.
type apiKey struct {
	name string
	role string
	hash [sha256.Size]byte
}

// NewAuthenticator reads the configured credentials: each API key from the
// environment variable named by its KeyEnv, the HS256 secret from
// SecretEnv, the RS256 public key from the PEM file PublicKeyFile (relative
// paths are resolved against baseDir, the workspace). lookup reads the
// environment (nil: os.LookupEnv); now is the clock for the tokens' exp,
// nbf and iat (nil: time.Now). Errors name the variable or file that is
// wrong, never its value.
func NewAuthenticator(auth config.Auth, baseDir string, lookup func(string) (string, bool), now func() time.Time) (*Authenticator, error) {
	if lookup == nil {
		lookup = os.LookupEnv
	}
	if now == nil {
		now = time.Now
	}
	a := &credentials{}
	owner := map[[sha256.Size]byte]string{}
	for i, k := range auth.APIKeys {
		where := fmt.Sprintf("server.auth.api_keys[%d] (%s)", i, k.Name)
		if k.Name == "" {
			return nil, fmt.Errorf("%s: the key has no name", where)
		}
		if !slices.Contains(config.Roles, k.Role) {
			return nil, fmt.Errorf("%s: unknown role %q (supported: %s)", where, k.Role, strings.Join(config.Roles, ", "))
		}
		v, err := secretFromEnv(lookup, k.KeyEnv)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", where, err)
		}
		h := sha256.Sum256([]byte(v))
		// Two names for one key would make the audit log name either.
		if other, dup := owner[h]; dup {
			return nil, fmt.Errorf("%s: the key in %s is the same as the key of %s; give each name its own key", where, k.KeyEnv, other)
		}
		owner[h] = k.Name
		a.keys = append(a.keys, apiKey{name: k.Name, role: k.Role, hash: h})
	}
	if j := auth.JWT; j != nil {
		switch j.Algorithm {
		case jwt.SigningMethodHS256.Alg():
			v, err := secretFromEnv(lookup, j.SecretEnv)
			if err != nil {
				return nil, fmt.Errorf("server.auth.jwt.secret_env: %w", err)
			}
			a.jwtKey, a.jwtKeyID = []byte(v), sha256.Sum256([]byte(v))
		case jwt.SigningMethodRS256.Alg():
			key, err := readRSAPublicKey(baseDir, j.PublicKeyFile)
			if err != nil {
				return nil, fmt.Errorf("server.auth.jwt.public_key_file: %w", err)
			}
			der, err := x509.MarshalPKIXPublicKey(key)
			if err != nil {
				return nil, fmt.Errorf("server.auth.jwt.public_key_file: %w", err)
			}
			a.jwtKey, a.jwtKeyID = key, sha256.Sum256(der)
		default:
			return nil, fmt.Errorf("server.auth.jwt.algorithm: unknown algorithm %q (supported: HS256, RS256)", j.Algorithm)
		}
		a.jwtAlg = j.Algorithm
		// Only the configured algorithm: this refuses "none" and a token
		// signed with HS256 using the RS256 public key as the secret.
		a.jwtOpts = []jwt.ParserOption{
			jwt.WithValidMethods([]string{j.Algorithm}),
			jwt.WithExpirationRequired(),
			jwt.WithIssuedAt(),
			jwt.WithLeeway(jwtLeeway),
			jwt.WithTimeFunc(now),
		}
		if j.Issuer != "" {
			a.jwtOpts = append(a.jwtOpts, jwt.WithIssuer(j.Issuer))
		}
		if j.Audience != "" {
			a.jwtOpts = append(a.jwtOpts, jwt.WithAudience(j.Audience))
		}
	}
	for i, e := range auth.TrustedProxies {
		p, err := config.ParseProxy(e)
		if err != nil {
			return nil, fmt.Errorf("server.auth.trusted_proxies[%d]: %w", i, err)
		}
		a.proxies = append(a.proxies, p)
	}
	out := &Authenticator{refused: newRefusals(now)}
	out.creds.Store(a)
	return out, nil
}

// Replace makes a check the credentials next holds from the next request
// on: a reload rebuilds the authenticator from the rotated secrets and
// puts its keys in the one the server uses.
func (a *Authenticator) Replace(next *Authenticator) { a.creds.Store(next.creds.Load()) }

// secretFromEnv reads a key or secret from the environment variable name.
// Errors name the variable and never quote its value.
func secretFromEnv(lookup func(string) (string, bool), name string) (string, error) {
	if name == "" {
		return "", errors.New("no environment variable is named")
	}
	v, ok := lookup(name)
	switch {
	case !ok:
		return "", fmt.Errorf("environment variable %s is not set", name)
	case v == "":
		return "", fmt.Errorf("environment variable %s is empty", name)
	case len(v) < MinSecretBytes:
		return "", fmt.Errorf("environment variable %s holds fewer than %d bytes; use a longer random value", name, MinSecretBytes)
	}
	// A header value cannot carry spaces at its ends or control
	// characters, so such a key could never be presented.
	for _, r := range v {
		if r > unicode.MaxASCII || !unicode.IsPrint(r) || r == ' ' {
			return "", fmt.Errorf("environment variable %s holds a space, a control or a non-ASCII character; use printable ASCII only", name)
		}
	}
	return v, nil
}

// readRSAPublicKey reads the PEM public key (PKIX, PKCS #1 or a
// certificate) from path, relative to baseDir unless absolute.
func readRSAPublicKey(baseDir, path string) (*rsa.PublicKey, error) {
	if path == "" {
		return nil, errors.New("RS256 needs the PEM file of the public key")
	}
	if !filepath.IsAbs(path) {
		path = filepath.Join(baseDir, path)
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxPEMBytes+1))
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	if len(data) > maxPEMBytes {
		return nil, fmt.Errorf("%s is longer than %d bytes; it should hold one PEM public key", path, maxPEMBytes)
	}
	block, _ := pem.Decode(data)
	if block == nil {
		return nil, fmt.Errorf("%s holds no PEM block", path)
	}
	if strings.Contains(block.Type, "PRIVATE KEY") {
		return nil, fmt.Errorf("%s holds a private key; give the public key only", path)
	}
	key, err := jwt.ParseRSAPublicKeyFromPEM(data)
	if err != nil {
		// The parser's message is about ASN.1 structure, not useful to an
		// operator; the block type says what the file does hold.
		return nil, fmt.Errorf("%s: the PEM block %q is not an RSA public key or certificate", path, block.Type)
	}
	if key.N.BitLen() < minRSABits {
		return nil, fmt.Errorf("%s: the RSA key has %d bits; at least %d are needed", path, key.N.BitLen(), minRSABits)
	}
	return key, nil
}

// Enabled reports whether any credential is configured. Without one every
// request is the local admin (see Authenticate), which is only safe when
// the server listens on loopback.
func (a *Authenticator) Enabled() bool { return a.creds.Load().enabled() }

func (c *credentials) enabled() bool { return len(c.keys) > 0 || c.jwtKey != nil }

// Authenticate returns the caller of r. Credentials are
// "Authorization: Bearer <key or token>" (scheme case-insensitive) or
// "X-API-Key: <key>", one of them only. A bearer value is first compared
// with the API keys; if none matches and JWTs are configured and the value
// has the three parts of a JWT, it is verified as one.
//
// When no credential is configured (Enabled is false) every request is
// Principal{Name: "local", Role: admin, Via: ViaLoopback}: the caller must
// only serve such an authenticator on a loopback address.
//
// Errors are EUNAUTHORIZED and say what is wrong in general terms; they
// never contain the presented credential.
func (a *Authenticator) Authenticate(r *http.Request) (Principal, error) {
	c := a.creds.Load()
	if !c.enabled() {
		return Principal{Name: "local", Role: config.RoleAdmin, Via: ViaLoopback}, nil
	}
	addr := clientAddr(r, c.proxies)
	if wait := a.refused.wait(addr); wait > 0 {
		return Principal{}, agentrunner.Errorf(agentrunner.ETOOMANY,
			"too many refused credentials from this address: try again in %s", wait.Round(time.Second))
	}
	p, err := c.authenticate(r)
	if err != nil && (len(r.Header.Values("Authorization")) > 0 || len(r.Header.Values(APIKeyHeader)) > 0) {
		a.refused.add(addr)
	}
	return p, err
}

// authenticate is Authenticate with credentials configured.
func (c *credentials) authenticate(r *http.Request) (Principal, error) {
	authz := r.Header.Values("Authorization")
	xkey := r.Header.Values(APIKeyHeader)
	// Sizes first, so nothing long is parsed or hashed.
	for _, v := range slices.Concat(authz, xkey) {
		if len(v) > MaxCredentialBytes {
			return Principal{}, unauthorized("the credential header is longer than %d bytes", MaxCredentialBytes)
		}
	}
	switch {
	case len(authz) == 0 && len(xkey) == 0:
		return Principal{}, unauthorized("missing credentials: send Authorization: Bearer <key or token>, or %s: <key>", APIKeyHeader)
	case len(authz)+len(xkey) > 1:
		// Two credentials could name two callers; refuse rather than pick.
		return Principal{}, unauthorized("more than one credential; send either one Authorization or one %s header", APIKeyHeader)
	case len(xkey) == 1:
		key := strings.TrimSpace(xkey[0])
		if key == "" {
			return Principal{}, unauthorized("the %s header is empty", APIKeyHeader)
		}
		if p, ok := c.matchKey(key); ok {
			return p, nil
		}
		return Principal{}, unauthorized("unknown API key")
	}
	scheme, cred, _ := strings.Cut(strings.TrimSpace(authz[0]), " ")
	if !strings.EqualFold(scheme, "Bearer") {
		return Principal{}, unauthorized("the Authorization header must use the Bearer scheme")
	}
	cred = strings.TrimSpace(cred)
	if cred == "" {
		return Principal{}, unauthorized("the Authorization header has no bearer credential")
	}
	if p, ok := c.matchKey(cred); ok {
		return p, nil
	}
	if c.jwtKey != nil && strings.Count(cred, ".") == 2 {
		return c.verifyJWT(cred)
	}
	return Principal{}, unauthorized("unknown API key")
}

// matchKey compares presented with every key in constant time, without
// stopping at a match, so the time taken says neither which key matched
// nor how many there are before it.
func (a *credentials) matchKey(presented string) (Principal, bool) {
	h := sha256.Sum256([]byte(presented))
	found := -1
	for i := range a.keys {
		eq := subtle.ConstantTimeCompare(h[:], a.keys[i].hash[:])
		found = subtle.ConstantTimeSelect(eq, i, found)
	}
	if found < 0 {
		return Principal{}, false
	}
	k := a.keys[found]
	return Principal{Name: k.name, Role: k.role, Via: ViaAPIKey, Credential: k.hash}, true
}

// Holds reports whether the credentials configured now still prove the
// caller a session was started for: an API key of that name and role
// (whose SHA-256 match accepts), or the key that verifies tokens (which
// match accepts; the token's role and expiry were checked at the login).
// A key removed or rotated by a reload, a role changed, or the JWT key
// replaced ends the sessions it had started.
func (a *Authenticator) Holds(name, role, via string, match func(credential [sha256.Size]byte) bool) bool {
	c := a.creds.Load()
	switch via {
	case ViaAPIKey:
		return slices.ContainsFunc(c.keys, func(k apiKey) bool { return k.name == name && k.role == role && match(k.hash) })
	case ViaJWT:
		return c.jwtKey != nil && match(c.jwtKeyID)
	}
	return false
}

// tokenClaims are the claims read from a JWT: the registered ones and the
// role. Role is a pointer to tell an absent claim (viewer) from an empty
// one (refused).
type tokenClaims struct {
	jwt.RegisteredClaims
	Role *string `json:"role"`
}

// verifyJWT checks the token's signature and claims and returns its
// subject with its role.
func (a *credentials) verifyJWT(token string) (Principal, error) {
	var claims tokenClaims
	_, err := jwt.ParseWithClaims(token, &claims, func(t *jwt.Token) (any, error) {
		// WithValidMethods already pins the algorithm; this also pins the
		// key type, so a key is never used with another method's family.
		if t.Method.Alg() != a.jwtAlg {
			return nil, errors.New("unexpected signing method")
		}
		return a.jwtKey, nil
	}, a.jwtOpts...)
	if err != nil {
		return Principal{}, jwtError(err)
	}
	sub := claims.Subject
	switch {
	case sub == "":
		return Principal{}, unauthorized("the token has no subject (sub); it names the operator")
	case len(sub) > maxSubjectBytes:
		return Principal{}, unauthorized("the token's subject is longer than %d bytes", maxSubjectBytes)
	case strings.ContainsFunc(sub, unicode.IsControl):
		return Principal{}, unauthorized("the token's subject contains control characters")
	}
	role := config.RoleViewer
	if claims.Role != nil {
		role = *claims.Role
		if !slices.Contains(config.Roles, role) {
			// The role is chosen by whoever signed the token, which we
			// trust; still, only the known names are quoted back.
			return Principal{}, unauthorized("the token's role is not one of %s", strings.Join(config.Roles, ", "))
		}
	}
	p := Principal{Name: sub, Role: role, Via: ViaJWT, Credential: a.jwtKeyID}
	if claims.ExpiresAt != nil { // required by the parser's options
		p.Expires = claims.ExpiresAt.Time
	}
	return p, nil
}

// jwtError turns the library's error into a general message: its text can
// quote parts of the token (the algorithm, JSON fragments), so it is not
// passed on.
func jwtError(err error) error {
	switch {
	case errors.Is(err, jwt.ErrTokenMalformed):
		return unauthorized("the bearer token is malformed")
	case errors.Is(err, jwt.ErrTokenSignatureInvalid), errors.Is(err, jwt.ErrTokenUnverifiable):
		return unauthorized("the bearer token's signature or algorithm is not accepted")
	case errors.Is(err, jwt.ErrTokenExpired):
		return unauthorized("the bearer token has expired")
	case errors.Is(err, jwt.ErrTokenNotValidYet):
		return unauthorized("the bearer token is not valid yet (nbf)")
	case errors.Is(err, jwt.ErrTokenUsedBeforeIssued):
		return unauthorized("the bearer token was issued in the future (iat)")
	case errors.Is(err, jwt.ErrTokenInvalidIssuer):
		return unauthorized("the bearer token's issuer is not accepted")
	case errors.Is(err, jwt.ErrTokenInvalidAudience):
		return unauthorized("the bearer token's audience is not accepted")
	case errors.Is(err, jwt.ErrTokenRequiredClaimMissing):
		return unauthorized("the bearer token lacks a required claim (exp, and iss or aud where configured)")
	}
	return unauthorized("the bearer token is not valid")
}

func unauthorized(format string, args ...any) error {
	return agentrunner.Errorf(agentrunner.EUNAUTHORIZED, format, args...)
}

// Allows reports whether role has at least the rights of need, in the order
// of config.Roles. An unknown role allows nothing and an unknown need is
// allowed to no one.
func Allows(role, need string) bool {
	have, want := slices.Index(config.Roles, role), slices.Index(config.Roles, need)
	return have >= 0 && want >= 0 && have >= want
}

// principalKey is the context key of the request's Principal.
type principalKey struct{}

// ContextWithPrincipal returns ctx carrying p; Require does this, and
// handlers' tests can too.
func ContextWithPrincipal(ctx context.Context, p Principal) context.Context {
	return context.WithValue(ctx, principalKey{}, p)
}

// PrincipalFrom returns the caller stored by Require, so handlers can
// record the operator of what they do.
func PrincipalFrom(ctx context.Context) (Principal, bool) {
	p, ok := ctx.Value(principalKey{}).(Principal)
	return p, ok
}

// Require wraps h so that it runs only for callers with at least role
// need: others get writeErr with EUNAUTHORIZED (no or bad credentials,
// with a WWW-Authenticate challenge) or EFORBIDDEN (role too low). h finds
// the caller with PrincipalFrom. need must be one of config.Roles; any
// other value is a programming error and panics here, at wiring time.
func (a *Authenticator) Require(need string, h http.Handler, writeErr func(http.ResponseWriter, *http.Request, error)) http.Handler {
	if !slices.Contains(config.Roles, need) {
		panic(fmt.Sprintf("arhttp.Require: unknown role %q", need))
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p, err := a.Authenticate(r)
		if err != nil {
			w.Header().Set("WWW-Authenticate", `Bearer realm="agentrunner"`)
			if agentrunner.ErrorCode(err) == agentrunner.ETOOMANY {
				w.Header().Set("Retry-After", strconv.Itoa(int(refusalWindow/time.Second)))
			}
			writeErr(w, r, err)
			return
		}
		if !Allows(p.Role, need) {
			writeErr(w, r, agentrunner.Errorf(agentrunner.EFORBIDDEN, "role %s may not %s %s; it needs role %s or higher", p.Role, r.Method, r.URL.Path, need))
			return
		}
		h.ServeHTTP(w, r.WithContext(ContextWithPrincipal(r.Context(), p)))
	})
}

// A client address whose credentials were refused maxRefusals times
// within refusalWindow is refused at once, whatever it sends, until the
// window that began with the first of them ends: a weak key cannot be
// guessed at the speed of the network.
const (
	maxRefusals   = 10
	refusalWindow = time.Minute
	// maxTracked bounds the addresses remembered; past it, the ones whose
	// window ended are forgotten.
	maxTracked = 4096
)

// refusals counts refused credentials by client address.
type refusals struct {
	now func() time.Time
	mu  sync.Mutex
	by  map[string]refusal
}

// refusal is an address's refusals in the window that began at since.
type refusal struct {
	n     int
	since time.Time
}

func newRefusals(now func() time.Time) *refusals {
	return &refusals{now: now, by: map[string]refusal{}}
}

// wait is how long addr is still refused at once; 0 if it is not.
func (l *refusals) wait(addr string) time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	f, ok := l.by[addr]
	if !ok || f.n < maxRefusals {
		return 0
	}
	return max(0, f.since.Add(refusalWindow).Sub(l.now()))
}

// add counts a refusal of addr's credentials.
func (l *refusals) add(addr string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.now()
	f := l.by[addr]
	if now.Sub(f.since) >= refusalWindow {
		f = refusal{since: now}
	}
	f.n++
	l.by[addr] = f
	if len(l.by) > maxTracked {
		for a, g := range l.by {
			if now.Sub(g.since) >= refusalWindow {
				delete(l.by, a)
			}
		}
	}
}

// clientAddr is the address a request came from, without its port. A
// request from a trusted proxy came from the last address of its
// X-Forwarded-For that is not a trusted proxy's: each proxy appends the
// address it was called from, so the entries left of that one are the
// client's to write, and could be forged.
func clientAddr(r *http.Request, proxies []netip.Prefix) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr
	}
	peer, err := netip.ParseAddr(host)
	if err != nil || !trusted(peer, proxies) {
		return host
	}
	var hops []string
	for _, v := range r.Header.Values("X-Forwarded-For") {
		hops = append(hops, strings.Split(v, ",")...)
	}
	for _, hop := range slices.Backward(hops) {
		a, err := netip.ParseAddr(strings.TrimSpace(hop))
		if err != nil {
			return host // a malformed chain names no client: count the proxy
		}
		if !trusted(a, proxies) {
			return a.Unmap().String()
		}
	}
	return host
}

// trusted reports whether a is one of the trusted proxies.
func trusted(a netip.Addr, proxies []netip.Prefix) bool {
	a = a.Unmap()
	return slices.ContainsFunc(proxies, func(p netip.Prefix) bool { return p.Contains(a) })
}
