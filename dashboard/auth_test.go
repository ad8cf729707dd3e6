package dashboard

import (
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/agentrunner/agentrunner"
	"github.com/agentrunner/agentrunner/config"
	arhttp "github.com/agentrunner/agentrunner/http"
)

// TestLogin: without a session a page sends the browser to the login; a
// wrong key is refused there; the operator's key starts a session whose
// cookie is HttpOnly, SameSite=Strict and bounded in time, and whose
// pages name the operator.
func TestLogin(t *testing.T) {
	w := newWorld(t, true)
	b := w.browser()
	p := b.get("/runs")
	if p.status != http.StatusSeeOther || p.header.Get("Location") != "/login?next=%2Fruns" {
		t.Fatalf("GET /runs without a session: %d, Location %q; want 303 to the login", p.status, p.header.Get("Location"))
	}
	p = b.post("/login", url.Values{"credential": {"not-a-key-of-this-server"}})
	if p.status != http.StatusUnauthorized || !strings.Contains(p.body, "not accepted") {
		t.Fatalf("a wrong key: %d, want 401 with the login page saying so\n%s", p.status, p.body)
	}
	p = b.post("/login", url.Values{"credential": {operatorKey}, "next": {"/runs"}})
	if p.status != http.StatusSeeOther || p.header.Get("Location") != "/runs" {
		t.Fatalf("the operator's key: %d, Location %q; want 303 to /runs", p.status, p.header.Get("Location"))
	}
	cookie := p.header.Get("Set-Cookie")
	for _, want := range []string{CookieName + "=", "HttpOnly", "SameSite=Strict", "Path=/", "Max-Age=43200"} {
		if !strings.Contains(cookie, want) {
			t.Errorf("Set-Cookie %q lacks %s", cookie, want)
		}
	}
	if strings.Contains(cookie, operatorKey) {
		t.Error("the session cookie holds the API key")
	}
	p = b.get("/runs")
	if p.status != http.StatusOK || !strings.Contains(p.body, "Signed in as <strong>alice</strong>") {
		t.Fatalf("GET /runs signed in: %d\n%s", p.status, p.body)
	}
	if strings.Contains(p.body, operatorKey) {
		t.Error("a page shows the API key")
	}
}

// TestSessionEnds: a session is refused once it expired, after a logout
// the cookie is gone, and a cookie whose role was raised by hand does not
// verify.
func TestSessionEnds(t *testing.T) {
	w := newWorld(t, true)
	b := w.browser()
	b.login(viewerKey)
	if p := b.get("/"); p.status != http.StatusOK {
		t.Fatalf("GET / signed in: %d", p.status)
	}
	u, _ := url.Parse(w.url)
	cookies := b.client.Jar.Cookies(u)
	if len(cookies) != 1 {
		t.Fatalf("cookies: %v", cookies)
	}
	payload, sig, _ := strings.Cut(cookies[0].Value, ".")
	forged := strings.Replace(decodeB64(t, payload), `"r":"viewer"`, `"r":"admin"`, 1)
	forger := w.browser()
	forger.client.Jar.SetCookies(u, []*http.Cookie{{Name: CookieName, Value: encodeB64(forged) + "." + sig}})
	if p := forger.get("/"); p.status != http.StatusSeeOther {
		t.Errorf("a cookie with its role raised: %d, want 303 to the login", p.status)
	}

	copied := w.browser() // a copy of the cookie, taken before the logout
	copied.client.Jar.SetCookies(u, cookies)
	if p := copied.get("/"); p.status != http.StatusOK {
		t.Fatalf("GET / with a copy of the cookie: %d, want 200", p.status)
	}
	p := b.post("/logout", url.Values{"csrf": {b.csrf()}})
	if p.status != http.StatusSeeOther || !strings.Contains(p.header.Get("Set-Cookie"), "Max-Age=0") {
		t.Fatalf("logout: %d, Set-Cookie %q", p.status, p.header.Get("Set-Cookie"))
	}
	if p := b.get("/"); p.status != http.StatusSeeOther {
		t.Errorf("GET / after the logout: %d, want 303 to the login", p.status)
	}
	if p := copied.get("/"); p.status != http.StatusSeeOther {
		t.Errorf("GET / with a copy of the cookie taken before the logout: %d, want 303 to the login", p.status)
	}

	b.login(viewerKey)
	w.clock.Advance(DefaultSessionTTL + time.Second)
	if p := b.get("/"); p.status != http.StatusSeeOther {
		t.Errorf("GET / after the session's lifetime: %d, want 303 to the login", p.status)
	}
}

// TestActionsNeedTheCSRFToken: a POST without the session's token, or
// with another session's, is refused and writes no command; with it, the
// action is a command attributed to the operator.
func TestActionsNeedTheCSRFToken(t *testing.T) {
	w := newWorld(t, true)
	alice, other := w.browser(), w.browser()
	alice.login(operatorKey)
	other.login(operatorKey)
	for name, token := range map[string]string{"none": "", "another session's": other.csrf(), "garbage": "x!y"} {
		p := alice.post("/act", url.Values{"action": {"pause"}, "csrf": {token}})
		if p.status != http.StatusForbidden {
			t.Errorf("pause with %s token: %d, want 403", name, p.status)
		}
	}
	if cmds := commands(t, w); len(cmds) != 0 {
		t.Fatalf("refused posts wrote commands: %v", cmds)
	}
	p := alice.post("/act", url.Values{"action": {"pause"}, "csrf": {alice.csrf()}, "reason": {"maintenance"}})
	if p.status != http.StatusOK || !strings.Contains(p.body, "Command #") {
		t.Fatalf("pause with the token: %d\n%s", p.status, p.body)
	}
	got := commands(t, w)
	want := []string{"pause by alice: map[reason:maintenance]"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("the audit log (-want +got):\n%s", diff)
	}
}

// TestCrossOriginPostRefused: a form posted from another site's page is
// refused before it reaches the dashboard, even with a valid token.
func TestCrossOriginPostRefused(t *testing.T) {
	w := newWorld(t, true)
	b := w.browser()
	b.login(operatorKey)
	p := b.do(http.MethodPost, "/act", url.Values{"action": {"pause"}, "csrf": {b.csrf()}},
		map[string]string{"Origin": "http://evil.example", "Sec-Fetch-Site": "cross-site"})
	if p.status != http.StatusForbidden {
		t.Fatalf("a cross-site POST: %d, want 403", p.status)
	}
	if cmds := commands(t, w); len(cmds) != 0 {
		t.Fatalf("a cross-site POST wrote commands: %v", cmds)
	}
}

// TestViewerCannotAct: a viewer's pages offer no action, and an action
// posted anyway, with the viewer's own valid token, is refused.
func TestViewerCannotAct(t *testing.T) {
	w := newWorld(t, true)
	run := w.startRun(false)
	w.waitFor("the gate", func() bool { return w.gateWaits(run) })
	b := w.browser()
	b.login(viewerKey)
	for _, path := range []string{"/", "/gates", "/runs/" + run, "/mailboxes?agent=writer"} {
		p := b.get(path)
		if p.status != http.StatusOK {
			t.Fatalf("GET %s: %d", path, p.status)
		}
		if strings.Contains(p.body, `class="button action`) || strings.Contains(p.body, "/confirm?") {
			t.Errorf("GET %s shows a viewer an action", path)
		}
	}
	if p := b.get("/confirm?action=approve&run=" + run + "&step=signoff"); p.status != http.StatusForbidden {
		t.Errorf("a viewer's confirmation page: %d, want 403", p.status)
	}
	p := b.post("/act", url.Values{"action": {"approve"}, "run": {run}, "step": {"signoff"}, "csrf": {b.csrf()}})
	if p.status != http.StatusForbidden {
		t.Fatalf("a viewer's forged approve: %d, want 403\n%s", p.status, p.body)
	}
	if cmds := commands(t, w); len(cmds) != 1 { // the run.start
		t.Fatalf("a viewer's approve wrote a command: %v", cmds)
	}
	if !w.gateWaits(run) {
		t.Fatal("the gate does not wait any more")
	}
}

// TestLoopbackWithoutCredentials: without credentials the dashboard needs
// no login (every caller is the local admin, as for the API), and a Host
// that is not loopback is refused (DNS rebinding).
func TestLoopbackWithoutCredentials(t *testing.T) {
	w := newWorld(t, false)
	b := w.browser()
	p := b.get("/")
	if p.status != http.StatusOK || !strings.Contains(p.body, "Signed in as <strong>local</strong>") {
		t.Fatalf("GET /: %d\n%s", p.status, p.body)
	}
	if strings.Contains(p.body, "Sign out") {
		t.Error("a logout is offered without credentials")
	}
	if p := b.get("/login"); p.status != http.StatusSeeOther {
		t.Errorf("GET /login without credentials: %d, want 303 to /", p.status)
	}
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, w.url+"/", nil)
	req.Host = "rebound.example:80"
	resp, err := b.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMisdirectedRequest {
		t.Errorf("GET / for Host rebound.example: %d, want 421", resp.StatusCode)
	}
	p = b.post("/act", url.Values{"action": {"force-cycle"}, "csrf": {b.csrf()}})
	if p.status != http.StatusOK {
		t.Fatalf("force-cycle: %d\n%s", p.status, p.body)
	}
	if diff := cmp.Diff([]string{"force-cycle by local: map[]"}, commands(t, w)); diff != "" {
		t.Errorf("the audit log (-want +got):\n%s", diff)
	}
}

// TestApproveGate: an operator approves a waiting gate after its
// confirmation; the decision is the API's gate.decision command, in
// the operator's name, and the run completes.
func TestApproveGate(t *testing.T) {
	w := newWorld(t, true)
	run := w.startRun(false)
	w.waitFor("the gate", func() bool { return w.gateWaits(run) })
	b := w.browser()
	b.login(operatorKey)
	p := b.get("/confirm?action=approve&run=" + run + "&step=signoff")
	if p.status != http.StatusOK || !strings.Contains(p.body, `action="/act"`) {
		t.Fatalf("the confirmation: %d\n%s", p.status, p.body)
	}
	p = b.post("/act", url.Values{"action": {"approve"}, "run": {run}, "step": {"signoff"}, "comment": {"looks right"}, "csrf": {b.csrf()}})
	if p.status != http.StatusOK {
		t.Fatalf("approve: %d\n%s", p.status, p.body)
	}
	w.waitFor("the run to complete", func() bool { return w.runStatus(run) == agentrunner.RunCompleted })
	got := commands(t, w)
	want := []string{"gate.decision by alice: map[action:approve comment:looks right run:" + run + " step:signoff visit:1]", "run.start by alice: map[inputs:map[hold:false] pipeline:review]"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("the audit log (-want +got):\n%s", diff)
	}
	p = b.post("/act", url.Values{"action": {"approve"}, "run": {run}, "step": {"signoff"}, "csrf": {b.csrf()}})
	if p.status != http.StatusConflict {
		t.Errorf("a second decision: %d, want the API's 409", p.status)
	}
}

// TestSafeNext: the login only ever sends the browser on within this
// site.
func TestSafeNext(t *testing.T) {
	tests := []struct{ in, want string }{
		{"", "/"},
		{"/runs?status=running", "/runs?status=running"},
		{"/runs/review-000001", "/runs/review-000001"},
		{"//evil.example/", "/"},
		{"/\\evil.example", "/"},
		{"https://evil.example/", "/"},
		{"javascript:alert(1)", "/"},
		{"runs", "/"},
		{"/login", "/"},
		{"/a\r\nSet-Cookie: x=1", "/"},
	}
	var got, want []string
	for _, tc := range tests {
		got, want = append(got, tc.in+" → "+safeNext(tc.in)), append(want, tc.in+" → "+tc.want)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("safeNext (-want +got):\n%s", diff)
	}
}

// commands lists the audit log as "kind by operator: args", newest first.
func commands(t *testing.T, w *world) []string {
	t.Helper()
	cmds, err := w.store.Commands(t.Context(), agentrunner.CommandFilter{})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, c := range cmds {
		out = append(out, c.Kind+" by "+c.Operator+": "+fmtArgs(c.Args))
	}
	return out
}

// TestASessionEndsWithItsCredential: a reload that rotates a key, or
// changes its role, ends the sessions that key started at their next
// request, not when their cookie expires; the sessions of the keys the
// reload kept go on.
func TestASessionEndsWithItsCredential(t *testing.T) {
	w := newWorld(t, true)
	alice, grafana := w.browser(), w.browser()
	alice.login(operatorKey)
	grafana.login(viewerKey)
	reload := func(keys []config.APIKey, env map[string]string) {
		t.Helper()
		next, err := arhttp.NewAuthenticator(config.Auth{APIKeys: keys}, "", func(k string) (string, bool) { v, ok := env[k]; return v, ok }, nil)
		if err != nil {
			t.Fatal(err)
		}
		w.auth.Replace(next)
	}
	keys := []config.APIKey{
		{Name: "grafana", KeyEnv: "VIEWER_KEY", Role: config.RoleViewer},
		{Name: "alice", KeyEnv: "OPERATOR_KEY", Role: config.RoleOperator},
	}
	env := map[string]string{"VIEWER_KEY": viewerKey, "OPERATOR_KEY": "operator-key-rotated-0123456789"}
	reload(keys, env)
	if p := alice.get("/"); p.status != http.StatusSeeOther {
		t.Errorf("GET / with the session of a rotated key: %d, want 303 to the login", p.status)
	}
	if p := grafana.get("/"); p.status != http.StatusOK {
		t.Errorf("GET / with the session of a key the reload kept: %d, want 200", p.status)
	}
	env["OPERATOR_KEY"] = operatorKey
	reload(keys, env)
	alice.login(operatorKey)
	keys[1].Role = config.RoleViewer
	reload(keys, env)
	if p := alice.get("/"); p.status != http.StatusSeeOther {
		t.Errorf("GET / with an operator's session once the key is a viewer's: %d, want 303 to the login", p.status)
	}
}

// TestASessionOutlivesNoToken: a session started with a JWT ends when the
// token does, if that is before the session's own lifetime.
func TestASessionOutlivesNoToken(t *testing.T) {
	ss, err := newSessions(nil, DefaultSessionTTL)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Date(2026, 11, 27, 9, 0, 0, 0, time.UTC)
	short := ss.newSession(arhttp.Principal{Name: "alice", Role: config.RoleOperator, Via: arhttp.ViaJWT, Expires: now.Add(time.Hour)}, now)
	long := ss.newSession(arhttp.Principal{Name: "alice", Role: config.RoleOperator, Via: arhttp.ViaJWT, Expires: now.Add(48 * time.Hour)}, now)
	key := ss.newSession(arhttp.Principal{Name: "alice", Role: config.RoleOperator, Via: arhttp.ViaAPIKey}, now)
	for _, tc := range []struct {
		name string
		s    *session
		want time.Time
	}{
		{"a token expiring within the lifetime", short, now.Add(time.Hour)},
		{"a token expiring after it", long, now.Add(DefaultSessionTTL)},
		{"an API key", key, now.Add(DefaultSessionTTL)},
	} {
		if !tc.s.Expires.Equal(tc.want) {
			t.Errorf("%s: the session expires at %s, want %s", tc.name, tc.s.Expires, tc.want)
		}
	}
}
