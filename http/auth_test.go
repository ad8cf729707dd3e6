package http_test

import (
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentrunner/agentrunner"
	"github.com/agentrunner/agentrunner/config"
	arhttp "github.com/agentrunner/agentrunner/http"
	"github.com/golang-jwt/jwt/v5"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

// authNow is the clock of every authentication test.
var authNow = time.Date(2026, 3, 14, 9, 26, 53, 0, time.UTC)

// The credentials of the tests: one API key per role and the HS256 secret.
const (
	authViewerKey   = "viewer-key-5f1c9a7e0b"
	authOperatorKey = "operator-key-8d2e4b6f1a"
	authAdminKey    = "admin-key-3c7a9e1d5b2f"
	authHSSecret    = "hs256-secret-0a1b2c3d4e5f6a7b"
	authIssuer      = "https://idp.example"
	authAudience    = "agentrunner"
)

// authEnv is the environment holding the test credentials.
func authEnv() map[string]string {
	return map[string]string{
		"VIEWER_KEY":   authViewerKey,
		"OPERATOR_KEY": authOperatorKey,
		"ADMIN_KEY":    authAdminKey,
		"JWT_SECRET":   authHSSecret,
	}
}

func authLookup(env map[string]string) func(string) (string, bool) {
	return func(name string) (string, bool) {
		v, ok := env[name]
		return v, ok
	}
}

// authKeys configures one key per role.
func authKeys() []config.APIKey {
	return []config.APIKey{
		{Name: "dashboard", KeyEnv: "VIEWER_KEY", Role: config.RoleViewer},
		{Name: "oncall", KeyEnv: "OPERATOR_KEY", Role: config.RoleOperator},
		{Name: "deployer", KeyEnv: "ADMIN_KEY", Role: config.RoleAdmin},
	}
}

func newTestAuthenticator(t *testing.T, auth config.Auth, baseDir string) *arhttp.Authenticator {
	t.Helper()
	a, err := arhttp.NewAuthenticator(auth, baseDir, authLookup(authEnv()), func() time.Time { return authNow })
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// authClaims are valid claims for the HS256 configuration; change lists
// the claims to set (a nil value deletes the claim).
func authClaims(change map[string]any) jwt.MapClaims {
	c := jwt.MapClaims{
		"sub":  "alice",
		"iss":  authIssuer,
		"aud":  authAudience,
		"iat":  authNow.Add(-time.Minute).Unix(),
		"exp":  authNow.Add(time.Hour).Unix(),
		"role": config.RoleOperator,
	}
	for k, v := range change {
		if v == nil {
			delete(c, k)
			continue
		}
		c[k] = v
	}
	return c
}

func signToken(t *testing.T, method jwt.SigningMethod, key any, claims jwt.MapClaims) string {
	t.Helper()
	s, err := jwt.NewWithClaims(method, claims).SignedString(key)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// authCase is one request to Authenticate: its credential headers and the
// caller or the error message part expected.
type authCase struct {
	name    string
	headers map[string]string
	want    arhttp.Principal
	wantErr string
}

// runAuthCases checks each case, and that no error quotes the presented
// credential. Each case comes from its own address: the refusals of one
// are not another's.
func runAuthCases(t *testing.T, a *arhttp.Authenticator, cases []authCase) {
	t.Helper()
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := httptest.NewRequest(http.MethodGet, "/api/status", nil)
			r.RemoteAddr = fmt.Sprintf("198.51.100.%d:40000", i%250+1)
			for k, v := range tc.headers {
				r.Header.Set(k, v)
			}
			got, err := a.Authenticate(r)
			if tc.wantErr == "" {
				if err != nil {
					t.Fatalf("Authenticate: %v", err)
				}
				if diff := cmp.Diff(tc.want, got, whoOnly); diff != "" {
					t.Errorf("principal (-want +got):\n%s", diff)
				}
				return
			}
			if err == nil {
				t.Fatalf("Authenticate = %+v, want an error containing %q", got, tc.wantErr)
			}
			if code := agentrunner.ErrorCode(err); code != agentrunner.EUNAUTHORIZED {
				t.Errorf("code = %q, want %q (error %v)", code, agentrunner.EUNAUTHORIZED, err)
			}
			if !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("error = %q, want it to contain %q", err, tc.wantErr)
			}
			if got != (arhttp.Principal{}) {
				t.Errorf("principal = %+v with an error, want none", got)
			}
			for _, v := range tc.headers {
				_, cred, _ := strings.Cut(v, " ")
				for _, secret := range []string{v, cred} {
					if len(secret) >= 8 && strings.Contains(err.Error(), secret) {
						t.Errorf("error %q quotes the presented credential", err)
					}
				}
			}
		})
	}
}

func TestAuthenticateAPIKeysAndHS256(t *testing.T) {
	a := newTestAuthenticator(t, config.Auth{
		APIKeys: authKeys(),
		JWT:     &config.JWT{Algorithm: "HS256", SecretEnv: "JWT_SECRET", Issuer: authIssuer, Audience: authAudience},
	}, t.TempDir())
	if !a.Enabled() {
		t.Fatal("Enabled = false with keys and a JWT configured")
	}
	hs := func(change map[string]any) string {
		return "Bearer " + signToken(t, jwt.SigningMethodHS256, []byte(authHSSecret), authClaims(change))
	}
	bearer := func(s string) map[string]string { return map[string]string{"Authorization": s} }
	none := signToken(t, jwt.SigningMethodNone, jwt.UnsafeAllowNoneSignatureType, authClaims(nil))

	runAuthCases(t, a, []authCase{
		{name: "viewer key", headers: bearer("Bearer " + authViewerKey),
			want: arhttp.Principal{Name: "dashboard", Role: config.RoleViewer, Via: arhttp.ViaAPIKey}},
		{name: "operator key", headers: bearer("Bearer " + authOperatorKey),
			want: arhttp.Principal{Name: "oncall", Role: config.RoleOperator, Via: arhttp.ViaAPIKey}},
		{name: "admin key", headers: bearer("Bearer " + authAdminKey),
			want: arhttp.Principal{Name: "deployer", Role: config.RoleAdmin, Via: arhttp.ViaAPIKey}},
		{name: "X-API-Key header", headers: map[string]string{"X-API-Key": authOperatorKey},
			want: arhttp.Principal{Name: "oncall", Role: config.RoleOperator, Via: arhttp.ViaAPIKey}},
		{name: "lowercase bearer scheme", headers: bearer("bearer " + authAdminKey),
			want: arhttp.Principal{Name: "deployer", Role: config.RoleAdmin, Via: arhttp.ViaAPIKey}},
		{name: "wrong key", headers: bearer("Bearer wrong-key-0123456789abcdef"), wantErr: "unknown API key"},
		{name: "key with a suffix", headers: bearer("Bearer " + authAdminKey + "x"), wantErr: "unknown API key"},
		{name: "wrong X-API-Key", headers: map[string]string{"X-API-Key": "wrong-key-0123456789abcdef"}, wantErr: "unknown API key"},
		{name: "missing credentials", headers: nil, wantErr: "missing credentials"},
		{name: "basic scheme", headers: bearer("Basic " + authAdminKey), wantErr: "Bearer scheme"},
		{name: "bearer without a value", headers: bearer("Bearer "), wantErr: "no bearer credential"},
		{name: "two credentials", headers: map[string]string{"Authorization": "Bearer " + authViewerKey, "X-API-Key": authAdminKey},
			wantErr: "more than one credential"},
		{name: "JWT in X-API-Key is not a key", headers: map[string]string{"X-API-Key": hs(nil)[len("Bearer "):]}, wantErr: "unknown API key"},

		{name: "HS256 valid", headers: bearer(hs(nil)),
			want: arhttp.Principal{Name: "alice", Role: config.RoleOperator, Via: arhttp.ViaJWT}},
		{name: "HS256 admin role", headers: bearer(hs(map[string]any{"role": config.RoleAdmin})),
			want: arhttp.Principal{Name: "alice", Role: config.RoleAdmin, Via: arhttp.ViaJWT}},
		{name: "HS256 without role is viewer", headers: bearer(hs(map[string]any{"role": nil})),
			want: arhttp.Principal{Name: "alice", Role: config.RoleViewer, Via: arhttp.ViaJWT}},
		{name: "HS256 expired within the leeway", headers: bearer(hs(map[string]any{"exp": authNow.Add(-10 * time.Second).Unix()})),
			want: arhttp.Principal{Name: "alice", Role: config.RoleOperator, Via: arhttp.ViaJWT}},
		{name: "HS256 expired", headers: bearer(hs(map[string]any{"exp": authNow.Add(-time.Minute).Unix()})), wantErr: "expired"},
		{name: "HS256 without exp", headers: bearer(hs(map[string]any{"exp": nil})), wantErr: "lacks a required claim"},
		{name: "HS256 not yet valid", headers: bearer(hs(map[string]any{"nbf": authNow.Add(5 * time.Minute).Unix()})), wantErr: "not valid yet"},
		{name: "HS256 issued in the future", headers: bearer(hs(map[string]any{"iat": authNow.Add(5 * time.Minute).Unix()})), wantErr: "issued in the future"},
		{name: "HS256 wrong secret", headers: bearer("Bearer " + signToken(t, jwt.SigningMethodHS256, []byte("another-secret-0123456789"), authClaims(nil))),
			wantErr: "signature or algorithm"},
		{name: "HS512 with the right secret", headers: bearer("Bearer " + signToken(t, jwt.SigningMethodHS512, []byte(authHSSecret), authClaims(nil))),
			wantErr: "signature or algorithm"},
		{name: "alg none", headers: bearer("Bearer " + none), wantErr: "signature or algorithm"},
		{name: "HS256 missing sub", headers: bearer(hs(map[string]any{"sub": nil})), wantErr: "no subject"},
		{name: "HS256 control character in sub", headers: bearer(hs(map[string]any{"sub": "alice\nadmin"})), wantErr: "control characters"},
		{name: "HS256 unknown role", headers: bearer(hs(map[string]any{"role": "root"})), wantErr: "role is not one of"},
		{name: "HS256 empty role", headers: bearer(hs(map[string]any{"role": ""})), wantErr: "role is not one of"},
		{name: "HS256 role not a string", headers: bearer(hs(map[string]any{"role": 3})), wantErr: "malformed"},
		{name: "HS256 wrong issuer", headers: bearer(hs(map[string]any{"iss": "https://evil.example"})), wantErr: "issuer is not accepted"},
		{name: "HS256 without issuer", headers: bearer(hs(map[string]any{"iss": nil})), wantErr: "lacks a required claim"},
		{name: "HS256 wrong audience", headers: bearer(hs(map[string]any{"aud": "someone-else"})), wantErr: "audience is not accepted"},
		{name: "three parts but not a JWT", headers: bearer("Bearer not.a-jwt.at-all"), wantErr: "malformed"},

		{name: "oversize Authorization", headers: bearer("Bearer " + strings.Repeat("k", arhttp.MaxCredentialBytes)), wantErr: "longer than"},
		{name: "oversize X-API-Key", headers: map[string]string{"X-API-Key": strings.Repeat("k", arhttp.MaxCredentialBytes+1)}, wantErr: "longer than"},
	})
}

// TestAuthenticateAPIKeysWithoutJWT shows a JWT-shaped bearer is only an
// unknown key when no JWT is configured.
func TestAuthenticateAPIKeysWithoutJWT(t *testing.T) {
	a := newTestAuthenticator(t, config.Auth{APIKeys: authKeys()}, t.TempDir())
	token := signToken(t, jwt.SigningMethodHS256, []byte(authHSSecret), authClaims(nil))
	runAuthCases(t, a, []authCase{
		{name: "key", headers: map[string]string{"Authorization": "Bearer " + authViewerKey},
			want: arhttp.Principal{Name: "dashboard", Role: config.RoleViewer, Via: arhttp.ViaAPIKey}},
		{name: "token", headers: map[string]string{"Authorization": "Bearer " + token}, wantErr: "unknown API key"},
	})
}

// writeRSAKey writes key's public half as PKIX PEM under dir/name and
// returns the PEM bytes.
func writeRSAKey(t *testing.T, dir, name string, key *rsa.PrivateKey) []byte {
	t.Helper()
	der, err := x509.MarshalPKIXPublicKey(&key.PublicKey)
	if err != nil {
		t.Fatal(err)
	}
	data := pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der})
	path := filepath.Join(dir, name)
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return data
}

func TestAuthenticateRS256(t *testing.T) {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	other, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	pub := writeRSAKey(t, dir, "keys/jwt.pem", key)
	// Relative to the workspace, without issuer or audience.
	a := newTestAuthenticator(t, config.Auth{JWT: &config.JWT{Algorithm: "RS256", PublicKeyFile: "keys/jwt.pem"}}, dir)
	if !a.Enabled() {
		t.Fatal("Enabled = false with a JWT configured")
	}
	claims := authClaims(map[string]any{"iss": nil, "aud": nil, "sub": "bob", "role": config.RoleAdmin})
	rs := signToken(t, jwt.SigningMethodRS256, key, claims)
	bearer := func(s string) map[string]string { return map[string]string{"Authorization": "Bearer " + s} }

	runAuthCases(t, a, []authCase{
		{name: "RS256 valid", headers: bearer(rs),
			want: arhttp.Principal{Name: "bob", Role: config.RoleAdmin, Via: arhttp.ViaJWT}},
		{name: "RS256 signed by another key", headers: bearer(signToken(t, jwt.SigningMethodRS256, other, claims)),
			wantErr: "signature or algorithm"},
		{name: "alg confusion: HS256 keyed with the public key PEM", headers: bearer(signToken(t, jwt.SigningMethodHS256, pub, claims)),
			wantErr: "signature or algorithm"},
		{name: "alg none", headers: bearer(signToken(t, jwt.SigningMethodNone, jwt.UnsafeAllowNoneSignatureType, claims)),
			wantErr: "signature or algorithm"},
		{name: "RS256 expired", headers: bearer(signToken(t, jwt.SigningMethodRS256, key, authClaims(map[string]any{"exp": authNow.Add(-time.Hour).Unix()}))),
			wantErr: "expired"},
		{name: "API key not configured", headers: bearer(authAdminKey), wantErr: "unknown API key"},
	})

	// An absolute path ignores the base directory.
	abs := newTestAuthenticator(t, config.Auth{JWT: &config.JWT{Algorithm: "RS256", PublicKeyFile: filepath.Join(dir, "keys/jwt.pem")}}, "/nonexistent")
	runAuthCases(t, abs, []authCase{{name: "absolute path", headers: bearer(rs),
		want: arhttp.Principal{Name: "bob", Role: config.RoleAdmin, Via: arhttp.ViaJWT}}})
}

// TestAuthenticateHS256RejectsRS256 is the other direction of algorithm
// confusion: an RS256 token presented where HS256 is configured.
func TestAuthenticateHS256RejectsRS256(t *testing.T) {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	a := newTestAuthenticator(t, config.Auth{JWT: &config.JWT{Algorithm: "HS256", SecretEnv: "JWT_SECRET"}}, t.TempDir())
	claims := authClaims(map[string]any{"iss": nil, "aud": nil})
	runAuthCases(t, a, []authCase{
		{name: "HS256 without issuer or audience configured", headers: map[string]string{"Authorization": "Bearer " + signToken(t, jwt.SigningMethodHS256, []byte(authHSSecret), claims)},
			want: arhttp.Principal{Name: "alice", Role: config.RoleOperator, Via: arhttp.ViaJWT}},
		{name: "RS256 token", headers: map[string]string{"Authorization": "Bearer " + signToken(t, jwt.SigningMethodRS256, key, claims)},
			wantErr: "signature or algorithm"},
	})
}

func TestAuthenticateWithoutCredentialsIsLoopbackAdmin(t *testing.T) {
	a := newTestAuthenticator(t, config.Auth{}, t.TempDir())
	if a.Enabled() {
		t.Fatal("Enabled = true with no credentials configured")
	}
	want := arhttp.Principal{Name: "local", Role: config.RoleAdmin, Via: arhttp.ViaLoopback}
	runAuthCases(t, a, []authCase{
		{name: "no header", want: want},
		{name: "any header", headers: map[string]string{"Authorization": "Bearer whatever-0123456789"}, want: want},
	})
}

func TestNewAuthenticatorErrors(t *testing.T) {
	dir := t.TempDir()
	small, err := rsa.GenerateKey(rand.Reader, 1024)
	if err != nil {
		t.Fatal(err)
	}
	writeRSAKey(t, dir, "small.pem", small)
	if err := os.WriteFile(filepath.Join(dir, "garbage.pem"), []byte("not a pem file at all"), 0o644); err != nil {
		t.Fatal(err)
	}
	badBlock := pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: []byte("definitely-not-der")})
	if err := os.WriteFile(filepath.Join(dir, "badblock.pem"), badBlock, 0o644); err != nil {
		t.Fatal(err)
	}
	priv := pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(small)})
	if err := os.WriteFile(filepath.Join(dir, "private.pem"), priv, 0o600); err != nil {
		t.Fatal(err)
	}
	key := func(env string) config.Auth {
		return config.Auth{APIKeys: []config.APIKey{{Name: "ci", KeyEnv: env, Role: config.RoleOperator}}}
	}
	hs := func(env string) config.Auth {
		return config.Auth{JWT: &config.JWT{Algorithm: "HS256", SecretEnv: env}}
	}
	rs := func(file string) config.Auth {
		return config.Auth{JWT: &config.JWT{Algorithm: "RS256", PublicKeyFile: file}}
	}
	env := map[string]string{
		"EMPTY":     "",
		"SHORT":     "short-secret",
		"SPACED":    "spaced secret value 0123",
		"TRAILING":  "trailing-space-0123456 ",
		"CONTROL":   "control\tchar-0123456789",
		"GOOD_A":    "same-key-0123456789abcdef",
		"GOOD_B":    "same-key-0123456789abcdef",
		"GOOD_C":    "another-key-0123456789abcdef",
		"SECRET_OK": "hs-secret-0123456789abcdef",
	}
	tests := []struct {
		name string
		auth config.Auth
		want []string // parts of the message
	}{
		{"key variable unset", key("UNSET"), []string{"api_keys[0] (ci)", "UNSET", "not set"}},
		{"key variable empty", key("EMPTY"), []string{"EMPTY", "is empty"}},
		{"key too short", key("SHORT"), []string{"SHORT", "fewer than 16 bytes"}},
		{"key with a space", key("SPACED"), []string{"SPACED", "printable ASCII"}},
		{"key with a trailing space", key("TRAILING"), []string{"TRAILING", "printable ASCII"}},
		{"key with a control character", key("CONTROL"), []string{"CONTROL", "printable ASCII"}},
		{"key without name", config.Auth{APIKeys: []config.APIKey{{KeyEnv: "GOOD_C", Role: config.RoleViewer}}}, []string{"no name"}},
		{"unknown key role", config.Auth{APIKeys: []config.APIKey{{Name: "ci", KeyEnv: "GOOD_C", Role: "root"}}}, []string{"unknown role"}},
		{"two names, one key", config.Auth{APIKeys: []config.APIKey{
			{Name: "a", KeyEnv: "GOOD_A", Role: config.RoleViewer},
			{Name: "b", KeyEnv: "GOOD_B", Role: config.RoleAdmin},
		}}, []string{"api_keys[1] (b)", "GOOD_B", "same as the key of a"}},
		{"HS256 secret unset", hs("UNSET"), []string{"jwt.secret_env", "UNSET", "not set"}},
		{"HS256 secret short", hs("SHORT"), []string{"jwt.secret_env", "SHORT", "fewer than 16 bytes"}},
		{"unknown algorithm", config.Auth{JWT: &config.JWT{Algorithm: "ES256"}}, []string{"jwt.algorithm", "ES256"}},
		{"RS256 file missing", rs("missing.pem"), []string{"jwt.public_key_file", "missing.pem", "no such file"}},
		{"RS256 no file", rs(""), []string{"jwt.public_key_file", "needs the PEM file"}},
		{"RS256 not PEM", rs("garbage.pem"), []string{"garbage.pem", "no PEM block"}},
		{"RS256 bad PEM block", rs("badblock.pem"), []string{"badblock.pem", "not an RSA public key"}},
		{"RS256 private key", rs("private.pem"), []string{"private.pem", "private key"}},
		{"RS256 key too small", rs("small.pem"), []string{"small.pem", "1024 bits"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			a, err := arhttp.NewAuthenticator(tc.auth, dir, authLookup(env), nil)
			if err == nil {
				t.Fatalf("NewAuthenticator = %v, want an error", a)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
			for name, v := range env {
				if v != "" && strings.Contains(err.Error(), v) {
					t.Errorf("error %q quotes the value of %s", err, name)
				}
			}
			if strings.Contains(err.Error(), "not a pem file") || strings.Contains(err.Error(), "definitely-not-der") {
				t.Errorf("error %q quotes the file's content", err)
			}
		})
	}
}

// TestNewAuthenticatorDefaults shows nil lookup and clock fall back to the
// process environment and time.Now.
func TestNewAuthenticatorDefaults(t *testing.T) {
	t.Setenv("AGENTRUNNER_TEST_AUTH_KEY", authAdminKey)
	a, err := arhttp.NewAuthenticator(config.Auth{APIKeys: []config.APIKey{{Name: "env", KeyEnv: "AGENTRUNNER_TEST_AUTH_KEY", Role: config.RoleAdmin}}}, "", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	runAuthCases(t, a, []authCase{{name: "key from the environment",
		headers: map[string]string{"X-API-Key": authAdminKey},
		want:    arhttp.Principal{Name: "env", Role: config.RoleAdmin, Via: arhttp.ViaAPIKey}}})
}

func TestAllows(t *testing.T) {
	roles := []string{config.RoleViewer, config.RoleOperator, config.RoleAdmin, "root", ""}
	// want[role][need]
	want := map[string]map[string]bool{
		config.RoleViewer:   {config.RoleViewer: true},
		config.RoleOperator: {config.RoleViewer: true, config.RoleOperator: true},
		config.RoleAdmin:    {config.RoleViewer: true, config.RoleOperator: true, config.RoleAdmin: true},
	}
	got := map[string]map[string]bool{}
	for _, role := range roles {
		for _, need := range roles {
			if arhttp.Allows(role, need) {
				if got[role] == nil {
					got[role] = map[string]bool{}
				}
				got[role][need] = true
			}
		}
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Allows matrix (-want +got):\n%s", diff)
	}
}

func TestRequire(t *testing.T) {
	a := newTestAuthenticator(t, config.Auth{APIKeys: authKeys()}, t.TempDir())
	var mu sync.Mutex
	var seen []arhttp.Principal
	inner := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p, ok := arhttp.PrincipalFrom(r.Context())
		if !ok {
			t.Error("handler ran without a principal in its context")
		}
		mu.Lock()
		seen = append(seen, p)
		mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	})
	// writeErr stands for the server's: the status from the code, the
	// message in the body.
	writeErr := func(w http.ResponseWriter, r *http.Request, err error) {
		status := map[string]int{agentrunner.EUNAUTHORIZED: 401, agentrunner.EFORBIDDEN: 403}[agentrunner.ErrorCode(err)]
		if status == 0 {
			status = 500
		}
		w.WriteHeader(status)
		json.NewEncoder(w).Encode(map[string]string{"code": agentrunner.ErrorCode(err), "message": agentrunner.ErrorMessage(err)})
	}
	h := a.Require(config.RoleOperator, inner, writeErr)

	tests := []struct {
		name      string
		key       string
		status    int
		message   string
		principal *arhttp.Principal
	}{
		{name: "no credentials", status: 401, message: "missing credentials"},
		{name: "wrong key", key: "wrong-key-0123456789abcdef", status: 401, message: "unknown API key"},
		{name: "viewer is forbidden", key: authViewerKey, status: 403,
			message: "role viewer may not POST /api/overrides; it needs role operator or higher"},
		{name: "operator passes", key: authOperatorKey, status: 204,
			principal: &arhttp.Principal{Name: "oncall", Role: config.RoleOperator, Via: arhttp.ViaAPIKey}},
		{name: "admin passes", key: authAdminKey, status: 204,
			principal: &arhttp.Principal{Name: "deployer", Role: config.RoleAdmin, Via: arhttp.ViaAPIKey}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			mu.Lock()
			seen = nil
			mu.Unlock()
			r := httptest.NewRequest(http.MethodPost, "/api/overrides", nil)
			if tc.key != "" {
				r.Header.Set("Authorization", "Bearer "+tc.key)
			}
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, r)
			if rec.Code != tc.status {
				t.Fatalf("status = %d, want %d (body %s)", rec.Code, tc.status, rec.Body)
			}
			if tc.message != "" && !strings.Contains(rec.Body.String(), tc.message) {
				t.Errorf("body = %s, want it to contain %q", rec.Body, tc.message)
			}
			if tc.key != "" && strings.Contains(rec.Body.String(), tc.key) {
				t.Errorf("body %s quotes the presented key", rec.Body)
			}
			if challenge := rec.Header().Get("WWW-Authenticate"); (tc.status == 401) != (challenge != "") {
				t.Errorf("WWW-Authenticate = %q with status %d; want it exactly on 401", challenge, tc.status)
			}
			var want []arhttp.Principal
			if tc.principal != nil {
				want = []arhttp.Principal{*tc.principal}
			}
			mu.Lock()
			defer mu.Unlock()
			if diff := cmp.Diff(want, seen, whoOnly); diff != "" {
				t.Errorf("principals the handler saw (-want +got):\n%s", diff)
			}
		})
	}
}

func TestRequireWithoutCredentialsPassesLoopbackAdmin(t *testing.T) {
	a := newTestAuthenticator(t, config.Auth{}, t.TempDir())
	var got arhttp.Principal
	h := a.Require(config.RoleAdmin, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got, _ = arhttp.PrincipalFrom(r.Context())
	}), func(w http.ResponseWriter, r *http.Request, err error) { t.Errorf("writeErr(%v)", err) })
	h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodPost, "/api/reload", nil))
	if diff := cmp.Diff(arhttp.Principal{Name: "local", Role: config.RoleAdmin, Via: arhttp.ViaLoopback}, got); diff != "" {
		t.Errorf("principal (-want +got):\n%s", diff)
	}
}

func TestRequireUnknownRolePanics(t *testing.T) {
	a := newTestAuthenticator(t, config.Auth{}, t.TempDir())
	defer func() {
		if recover() == nil {
			t.Error("Require with an unknown role did not panic")
		}
	}()
	a.Require("root", http.NotFoundHandler(), nil)
}

func TestPrincipalFrom(t *testing.T) {
	if p, ok := arhttp.PrincipalFrom(t.Context()); ok {
		t.Errorf("PrincipalFrom(empty context) = %+v, true; want false", p)
	}
	want := arhttp.Principal{Name: "alice", Role: config.RoleViewer, Via: arhttp.ViaJWT}
	got, ok := arhttp.PrincipalFrom(arhttp.ContextWithPrincipal(t.Context(), want))
	if !ok || got != want {
		t.Errorf("PrincipalFrom = %+v, %v; want %+v, true", got, ok, want)
	}
}

// TestAuthenticateConcurrent runs keys and tokens through one
// Authenticator from many goroutines, for the race detector.
func TestAuthenticateConcurrent(t *testing.T) {
	a := newTestAuthenticator(t, config.Auth{
		APIKeys: authKeys(),
		JWT:     &config.JWT{Algorithm: "HS256", SecretEnv: "JWT_SECRET", Issuer: authIssuer, Audience: authAudience},
	}, t.TempDir())
	token := signToken(t, jwt.SigningMethodHS256, []byte(authHSSecret), authClaims(nil))
	var wg sync.WaitGroup
	for i := range 16 {
		wg.Go(func() {
			cred, want := authViewerKey, "dashboard"
			if i%2 == 1 {
				cred, want = token, "alice"
			}
			r := httptest.NewRequest(http.MethodGet, "/api/status", nil)
			r.Header.Set("Authorization", "Bearer "+cred)
			p, err := a.Authenticate(r)
			if err != nil || p.Name != want {
				t.Errorf("Authenticate = %+v, %v; want %s", p, err, want)
			}
		})
	}
	wg.Wait()
}

// TestRefusedCredentialsSlowGuessing: after 10 refused credentials within
// a minute, an address is refused at once with 429 and Retry-After, even
// with the right key, until the minute that began with its first refusal
// ends; another address is not affected, and a request without
// credentials counts for nothing.
func TestRefusedCredentialsSlowGuessing(t *testing.T) {
	now := time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)
	env := map[string]string{"OPS_KEY": "right-key-0123456789abcdef"}
	a, err := arhttp.NewAuthenticator(config.Auth{APIKeys: []config.APIKey{{Name: "ops", Role: config.RoleOperator, KeyEnv: "OPS_KEY"}}}, "",
		func(k string) (string, bool) { v, ok := env[k]; return v, ok }, func() time.Time { return now })
	if err != nil {
		t.Fatal(err)
	}
	h := a.Require(config.RoleViewer, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}), func(w http.ResponseWriter, r *http.Request, err error) {
		http.Error(w, err.Error(), map[string]int{agentrunner.EUNAUTHORIZED: 401, agentrunner.ETOOMANY: 429}[agentrunner.ErrorCode(err)])
	})
	call := func(addr, key string) *httptest.ResponseRecorder {
		r := httptest.NewRequest(http.MethodGet, "/api/status", nil)
		r.RemoteAddr = addr + ":50000"
		if key != "" {
			r.Header.Set("Authorization", "Bearer "+key)
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		return w
	}
	for i := 0; i < 20; i++ {
		call("203.0.113.7", "") // no credentials: not a guess
	}
	for i := 0; i < 10; i++ {
		if w := call("203.0.113.7", fmt.Sprintf("guess-%d", i)); w.Code != http.StatusUnauthorized {
			t.Fatalf("guess %d: %d, want 401", i, w.Code)
		}
		now = now.Add(time.Second)
	}
	w := call("203.0.113.7", "right-key-0123456789abcdef")
	if w.Code != http.StatusTooManyRequests || w.Header().Get("Retry-After") == "" {
		t.Fatalf("the right key after 10 refusals: %d, Retry-After %q; want 429 with Retry-After", w.Code, w.Header().Get("Retry-After"))
	}
	if w := call("203.0.113.8", "right-key-0123456789abcdef"); w.Code != http.StatusOK {
		t.Errorf("another address: %d, want 200", w.Code)
	}
	now = now.Add(51 * time.Second) // a minute after the first refusal
	if w := call("203.0.113.7", "right-key-0123456789abcdef"); w.Code != http.StatusOK {
		t.Errorf("a minute after the first refusal: %d, want 200", w.Code)
	}
}

// TestRefusedCredentialsBehindAProxy: behind a trusted proxy, the limit on
// refused credentials counts the client the proxy's X-Forwarded-For names,
// the last entry that is not a trusted proxy's, so one client's guesses do
// not lock out the others sharing the proxy; entries a client wrote itself
// (left of that one) and a chain sent by an untrusted peer are ignored.
func TestRefusedCredentialsBehindAProxy(t *testing.T) {
	now := time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)
	env := map[string]string{"OPS_KEY": "right-key-0123456789abcdef"}
	auth := config.Auth{APIKeys: []config.APIKey{{Name: "ops", Role: config.RoleOperator, KeyEnv: "OPS_KEY"}},
		TrustedProxies: []string{"10.0.0.0/8", "192.0.2.1"}}
	a, err := arhttp.NewAuthenticator(auth, "", func(k string) (string, bool) { v, ok := env[k]; return v, ok }, func() time.Time { return now })
	if err != nil {
		t.Fatal(err)
	}
	h := a.Require(config.RoleViewer, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}), func(w http.ResponseWriter, r *http.Request, err error) {
		http.Error(w, err.Error(), map[string]int{agentrunner.EUNAUTHORIZED: 401, agentrunner.ETOOMANY: 429}[agentrunner.ErrorCode(err)])
	})
	call := func(peer, forwarded, key string) int {
		r := httptest.NewRequest(http.MethodGet, "/api/status", nil)
		r.RemoteAddr = peer + ":50000"
		if forwarded != "" {
			r.Header.Set("X-Forwarded-For", forwarded)
		}
		r.Header.Set("Authorization", "Bearer "+key)
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		return w.Code
	}
	const right = "right-key-0123456789abcdef"
	// A client that forges an address of its own left of the one the
	// proxies saw: its guesses count against 203.0.113.7.
	for i := 0; i < 10; i++ {
		if code := call("10.0.0.5", fmt.Sprintf("198.51.100.%d, 203.0.113.7, 192.0.2.1", i), "guess"); code != http.StatusUnauthorized {
			t.Fatalf("guess %d: %d, want 401", i, code)
		}
	}
	for _, tc := range []struct {
		name, peer, forwarded string
		want                  int
	}{
		{"the guessing client, through another proxy of the chain", "10.9.9.9", "203.0.113.7", http.StatusTooManyRequests},
		{"another client of the same proxy", "10.0.0.5", "203.0.113.8, 192.0.2.1", http.StatusOK},
		{"the proxy's own request", "10.0.0.5", "", http.StatusOK},
		{"an untrusted peer naming the locked client", "198.51.100.50", "203.0.113.8", http.StatusOK},
		{"a malformed chain counts the proxy", "10.0.0.5", "203.0.113.7, not-an-address", http.StatusOK},
	} {
		if code := call(tc.peer, tc.forwarded, right); code != tc.want {
			t.Errorf("%s: %d, want %d", tc.name, code, tc.want)
		}
	}
	// An untrusted peer cannot shift its own guesses onto someone else.
	for i := 0; i < 10; i++ {
		call("198.51.100.60", "203.0.113.9", "guess")
	}
	if code := call("10.0.0.5", "203.0.113.9", right); code != http.StatusOK {
		t.Errorf("the address an untrusted peer named: %d, want 200", code)
	}
	if code := call("198.51.100.60", "", right); code != http.StatusTooManyRequests {
		t.Errorf("the untrusted peer itself: %d, want 429", code)
	}
	if _, err := arhttp.NewAuthenticator(config.Auth{TrustedProxies: []string{"proxy.local"}}, "", nil, nil); err == nil || !strings.Contains(err.Error(), "server.auth.trusted_proxies[0]") {
		t.Errorf("a bad trusted proxy: %v, want an error naming it", err)
	}
}

// whoOnly compares principals by who they are: what proved them is
// checked by TestSessionsEndWithTheirCredential.
var whoOnly = cmpopts.IgnoreFields(arhttp.Principal{}, "Credential", "Expires")

// TestSessionsEndWithTheirCredential: a principal names what proved it
// (the hash of its API key, or of the key that verified its token) and a
// token's expiry; Holds says whether the credentials configured now still
// prove it, so that a session ends when a reload removes or rotates its
// key, changes its role, or replaces the JWT key.
func TestSessionsEndWithTheirCredential(t *testing.T) {
	jwtConf := &config.JWT{Algorithm: "HS256", SecretEnv: "JWT_SECRET", Issuer: authIssuer, Audience: authAudience}
	a := newTestAuthenticator(t, config.Auth{APIKeys: authKeys(), JWT: jwtConf}, "")
	req := func(cred string) *http.Request {
		r := httptest.NewRequest(http.MethodGet, "/api/status", nil)
		r.Header.Set("Authorization", "Bearer "+cred)
		return r
	}
	key, err := a.Authenticate(req(authOperatorKey))
	if err != nil {
		t.Fatal(err)
	}
	tok, err := a.Authenticate(req(signToken(t, jwt.SigningMethodHS256, []byte(authHSSecret), authClaims(nil))))
	if err != nil {
		t.Fatal(err)
	}
	if key.Credential == ([32]byte{}) || !key.Expires.IsZero() || tok.Credential == ([32]byte{}) || !tok.Expires.Equal(authNow.Add(time.Hour)) {
		t.Fatalf("principals: key %+v, token %+v; want what proved them, and the token's expiry", key, tok)
	}
	holds := func(p arhttp.Principal) bool {
		return a.Holds(p.Name, p.Role, p.Via, func(c [32]byte) bool { return c == p.Credential })
	}
	if !holds(key) || !holds(tok) {
		t.Fatal("the credentials that proved them do not hold")
	}
	renamed := key
	renamed.Role = config.RoleAdmin
	if holds(renamed) {
		t.Error("a principal with another role holds")
	}

	reload := func(keys []config.APIKey, env map[string]string) {
		t.Helper()
		next, err := arhttp.NewAuthenticator(config.Auth{APIKeys: keys, JWT: jwtConf}, "", authLookup(env), func() time.Time { return authNow })
		if err != nil {
			t.Fatal(err)
		}
		a.Replace(next)
	}
	for _, tc := range []struct {
		name           string
		role, env, val string // the operator key's role, and a variable set to val
		key, token     bool   // whether each session holds after the reload
	}{
		{"the operator key rotated", config.RoleOperator, "OPERATOR_KEY", "operator-key-rotated-7e3d", false, true},
		{"the operator key made a viewer's", config.RoleViewer, "", "", false, true},
		{"the JWT key replaced", config.RoleOperator, "JWT_SECRET", "hs256-secret-replaced-9f8e7d6c", true, false},
		{"nothing changed", config.RoleOperator, "", "", true, true},
	} {
		keys, env := authKeys(), authEnv()
		keys[1].Role = tc.role
		if tc.env != "" {
			env[tc.env] = tc.val
		}
		reload(keys, env)
		if holds(key) != tc.key || holds(tok) != tc.token {
			t.Errorf("%s: the key's session holds %v, the token's %v; want %v and %v", tc.name, holds(key), holds(tok), tc.key, tc.token)
		}
	}
}
