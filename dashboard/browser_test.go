package dashboard

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	cdppage "github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"
)

// The browser tests drive headless Chromium (the Debian package
// chromium; `make test` installs it when it can) against the real
// agentrunner binary serving a workspace whose agent is a shell script.
// Without a browser they are skipped, saying so.

// chromiumPath finds the browser, or skips the test.
func chromiumPath(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	t.Skip("browser tests skipped: no chromium on PATH (make test installs the Debian package chromium when run as root with apt-get)")
	return ""
}

var (
	buildOnce sync.Once
	binary    string
	buildErr  error
)

// agentrunnerBinary builds the agentrunner binary once for the tests.
func agentrunnerBinary(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "agentrunner-dashboard-")
		if err != nil {
			buildErr = err
			return
		}
		binary = filepath.Join(dir, "agentrunner")
		out, err := exec.Command("go", "build", "-o", binary, "../cmd/agentrunner").CombinedOutput()
		if err != nil {
			buildErr = fmt.Errorf("build agentrunner: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return binary
}

// The keys of the served workspace.
const (
	browserOperatorKey = "browser-operator-key-0123456789"
	browserViewerKey   = "browser-viewer-key-0123456789ab"
)

// browserWorkspace is a pipeline "report": the agent writer (a shell
// script that takes two seconds, then writes report.md from the file
// named by REPORT_SOURCE), then the gate signoff.
const browserWorkspace = `version: 1
name: dash
artifacts_dir: ./artifacts
providers:
  scripts:
    kind: process
    command: [sh, "{workspace}/writer.sh", "{cycle_dir}", "{output}"]
    kill_grace: 2s
    env: {pass: [REPORT_SOURCE]}
defaults:
  provider: scripts
  timeout: 1m
agents:
  writer:
    identity: p.md
    output: {file: report.md, template: t.md}
pipelines:
  report:
    start: draft
    steps:
      draft: {agent: writer, next: signoff}
      signoff:
        kind: gate
        next: end
        gate: {timeout: 72h, default: reject}
server:
  listen: 127.0.0.1:%d
  auth:
    api_keys:
      - {name: alice, key_env: DASH_OPERATOR_KEY, role: operator}
      - {name: grafana, key_env: DASH_VIEWER_KEY, role: viewer}
`

// writerScript is the agent: it waits, so a browser sees it run, then
// writes its report.
const writerScript = `#!/bin/sh
set -eu
sleep 2
cat "$REPORT_SOURCE" > "$2"
`

// servedWorkspace is a real agentrunner serve on 127.0.0.1.
type servedWorkspace struct {
	t   *testing.T
	url string
}

// serveWorkspace writes the workspace and serves it with the binary
// until the test ends; report is what the agent writes.
func serveWorkspace(t *testing.T, report string) *servedWorkspace {
	t.Helper()
	bin := agentrunnerBinary(t)
	dir := t.TempDir()
	port := freePort(t)
	files := map[string]string{
		"agentrunner.yaml": fmt.Sprintf(browserWorkspace, port),
		"writer.sh":        writerScript,
		"p.md":             "You write reports.\n",
		"t.md":             "# Output\n",
		"report-source.md": report,
	}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	cmd := exec.CommandContext(ctx, bin, "serve", "-c", filepath.Join(dir, "agentrunner.yaml"))
	cmd.Env = append(os.Environ(), "DASH_OPERATOR_KEY="+browserOperatorKey, "DASH_VIEWER_KEY="+browserViewerKey,
		"REPORT_SOURCE="+filepath.Join(dir, "report-source.md"))
	log, err := os.Create(filepath.Join(dir, "serve.log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cancel()
		cmd.Wait()
		log.Close()
		if t.Failed() {
			data, _ := os.ReadFile(log.Name())
			t.Logf("serve's log:\n%s", data)
		}
	})
	s := &servedWorkspace{t: t, url: fmt.Sprintf("http://127.0.0.1:%d", port)}
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := http.Get(s.url + "/login")
		if err == nil {
			resp.Body.Close()
			return s
		}
		if time.Now().After(deadline) {
			t.Fatalf("serve did not answer: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// freePort returns a port free on 127.0.0.1 a moment ago.
func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// api calls the served API with the operator's key.
func (s *servedWorkspace) api(method, path, body string) map[string]any {
	s.t.Helper()
	req, err := http.NewRequest(method, s.url+path, strings.NewReader(body))
	if err != nil {
		s.t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+browserOperatorKey)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		s.t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	if resp.StatusCode >= 300 {
		s.t.Fatalf("%s %s: %d %s", method, path, resp.StatusCode, data)
	}
	var out map[string]any
	json.Unmarshal(data, &out)
	return out
}

// startRun starts a run of report and returns its id.
func (s *servedWorkspace) startRun() string {
	s.t.Helper()
	out := s.api(http.MethodPost, "/api/pipelines/report/runs", "{}")
	run, _ := out["run"].(map[string]any)
	id, _ := run["id"].(string)
	if id == "" {
		s.t.Fatalf("the start answered no run: %v", out)
	}
	return id
}

// runStatus reads a run's status from the API.
func (s *servedWorkspace) runStatus(id string) string {
	s.t.Helper()
	out := s.api(http.MethodGet, "/api/runs/"+id, "")
	run, _ := out["run"].(map[string]any)
	status, _ := run["status"].(string)
	return status
}

// chrome is one headless browser with a fresh profile, which counts the
// JavaScript dialogs (alert, confirm, prompt) pages open, and dismisses
// them.
type chrome struct {
	t       *testing.T
	ctx     context.Context
	dialogs atomic.Int64
}

// newChrome starts Chromium with the flags of a test run; it is stopped
// when the test ends.
func newChrome(t *testing.T, extra ...chromedp.ExecAllocatorOption) *chrome {
	t.Helper()
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(chromiumPath(t)),
		chromedp.Flag("headless", true),
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.NoFirstRun,
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1280, 1000),
	}
	opts = append(opts, extra...)
	alloc, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelCtx := chromedp.NewContext(alloc)
	t.Cleanup(func() { cancelCtx(); cancelAlloc() })
	c := &chrome{t: t, ctx: ctx}
	dialogs := chromedp.Events(ctx, cdppage.JavascriptDialogOpening)
	go func() {
		for _, err := range dialogs {
			if err != nil {
				return
			}
			c.dialogs.Add(1)
			chromedp.Call(ctx, cdppage.HandleJavaScriptDialog, cdppage.HandleJavaScriptDialogParams{Accept: false})
		}
	}()
	return c
}

// do runs actions within a time limit, failing the test on an error.
func (c *chrome) do(what string, actions ...chromedp.Action[chromedp.Void]) {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(c.ctx, 30*time.Second)
	defer cancel()
	if err := chromedp.Do(ctx, actions...); err != nil {
		c.t.Fatalf("%s: %v", what, err)
	}
}

// eval evaluates a script to a value.
func eval[T any](c *chrome, script string) T {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(c.ctx, 30*time.Second)
	defer cancel()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](script, chromedp.EvalAwaitPromise))
	if err != nil {
		c.t.Fatalf("evaluate %s: %v", script, err)
	}
	return v
}

// login signs in through the login page, typing the key and pressing
// Enter.
func (c *chrome) login(base, key string) {
	c.t.Helper()
	c.do("sign in",
		chromedp.Navigate(base+"/"),
		chromedp.WaitVisible(chromedp.CSS("#credential")),
		chromedp.SendKeys(chromedp.CSS("#credential"), key+"\r"),
		chromedp.WaitVisible(chromedp.CSS(".who strong")),
	)
}

// text is the text of the first element a CSS selector matches.
func (c *chrome) text(sel string) string {
	c.t.Helper()
	return eval[string](c, fmt.Sprintf(`(document.querySelector(%q) || {}).textContent || ""`, sel))
}

// waitText waits until the element's text contains want.
func (c *chrome) waitText(what, sel, want string) {
	c.t.Helper()
	c.do(what, chromedp.Poll[chromedp.Void](fmt.Sprintf(`((document.querySelector(%q) || {}).textContent || "").includes(%q)`, sel, want),
		chromedp.WithPollingTimeout(20*time.Second)))
}

// report is the agent's output in the browser tests: a document whose
// markdown tries every way to run a script.
const report = "# Output\n\nThe findings.\n\n" + xssMarkdown

// TestBrowser drives the dashboard as an operator and a viewer would, in
// a real browser against a real serve: signing in; watching a run move
// from its agent to its gate without reloading; opening the artifact the
// agent wrote, whose scripts and javascript: links stay inert; approving
// the gate with the keyboard; and a viewer who is offered no action and
// whose forged one is refused.
func TestBrowser(t *testing.T) {
	if testing.Short() {
		t.Skip("browser tests are not short")
	}
	path := chromiumPath(t)
	_ = path
	s := serveWorkspace(t, report)
	op := newChrome(t)

	// Signing in.
	op.do("open the dashboard", chromedp.Navigate(s.url+"/runs"), chromedp.WaitVisible(chromedp.CSS("#credential")))
	if loc := eval[string](op, "location.pathname + location.search"); loc != "/login?next=%2Fruns" {
		t.Fatalf("without a session the dashboard shows %s, want the login", loc)
	}
	op.do("sign in", chromedp.SendKeys(chromedp.CSS("#credential"), browserOperatorKey+"\r"), chromedp.WaitVisible(chromedp.CSS(".who strong")))
	if who := op.text(".who strong"); who != "alice" {
		t.Fatalf("signed in as %q, want alice", who)
	}
	if cookie := eval[string](op, "document.cookie"); strings.Contains(cookie, CookieName) {
		t.Errorf("a script can read the session cookie: %q", cookie)
	}

	// A run progressing, live: the page is not reloaded (a mark put on
	// the window stays), its parts are.
	run := s.startRun()
	op.do("open the run", chromedp.Navigate(s.url+"/runs/"+run), chromedp.WaitVisible(chromedp.CSS("#run-current")))
	if now := op.text("#run-current"); !strings.Contains(now, "draft#1") {
		t.Fatalf("the run is at %q, want draft#1 (its agent takes two seconds)", now)
	}
	eval[bool](op, "window.notReloaded = true")
	op.waitText("the run to reach its gate, live", "#run-current", "signoff#1")
	op.waitText("the gate's event, live", "#events-body", "gate.opened")
	if !eval[bool](op, "window.notReloaded === true") {
		t.Fatal("the page was reloaded: the update was not live")
	}
	if eval[int](op, `document.querySelectorAll('.graph .node.current[data-step="signoff"]').length`) != 1 {
		t.Error("the graph does not outline the gate as the current step")
	}

	// Opening the artifact, from the run's page: its markdown is a
	// document, and nothing in it runs.
	op.do("open the artifact", chromedp.Click(chromedp.CSS(`a[href$="/artifacts/report.md"]`)), chromedp.WaitVisible(chromedp.CSS("#artifact-body h1")))
	if h := op.text("#artifact-body h1"); h != "Output" {
		t.Errorf("the artifact's heading is %q", h)
	}
	inert := eval[map[string]int](op, `(() => {
		const body = document.querySelector("#artifact-body");
		let handlers = 0;
		for (const el of body.querySelectorAll("*")) for (const a of el.attributes) if (a.name.startsWith("on")) handlers++;
		const bad = /^\s*(javascript|data|vbscript):/i;
		return {
			scripts: body.querySelectorAll("script").length,
			frames: body.querySelectorAll("iframe, object, embed").length,
			handlers: handlers,
			links: [...body.querySelectorAll("a[href], img[src]")].filter(e => bad.test(e.getAttribute("href") || e.getAttribute("src") || "")).length,
			safeLinks: body.querySelectorAll('a[href="https://example.com/ok"]').length,
		};
	})()`)
	if want := map[string]int{"scripts": 0, "frames": 0, "handlers": 0, "links": 0, "safeLinks": 1}; fmt.Sprint(inert) != fmt.Sprint(want) {
		t.Errorf("the artifact's content: %v, want %v", inert, want)
	}
	for _, sel := range []string{`a[href="#"]`} { // the neutralised links, clicked
		op.do("click a neutralised link", chromedp.Click(chromedp.CSS("#artifact-body "+sel)))
	}
	time.Sleep(300 * time.Millisecond)
	if n := op.dialogs.Load(); n != 0 {
		t.Fatalf("%d dialogs opened: a script of the artifact ran", n)
	}

	// A viewer sees the waiting gate but no action, and a decision posted
	// from their page with their own valid token is refused.
	viewer := newChrome(t)
	viewer.login(s.url, browserViewerKey)
	viewer.do("open the gates", chromedp.Navigate(s.url+"/gates"), chromedp.WaitVisible(chromedp.CSS(".gate")))
	if n := eval[int](viewer, `document.querySelectorAll(".action, form[action='/act'], a[href^='/confirm']").length`); n != 0 {
		t.Errorf("a viewer is offered %d actions", n)
	}
	status := eval[int](viewer, fmt.Sprintf(`fetch("/act", {method: "POST", body: new URLSearchParams({action: "approve", run: %q, step: "signoff",
		csrf: document.querySelector("input[name=csrf]").value})}).then(r => r.status)`, run))
	if status != http.StatusForbidden {
		t.Errorf("a viewer's forged approve answered %d, want 403", status)
	}
	if st := s.runStatus(run); st != "running" {
		t.Fatalf("after the viewer's forged approve the run is %s", st)
	}

	// Approving the gate, with the keyboard only: Tab to the link, Enter,
	// type a comment, Enter on the confirm button.
	op.do("open the gates", chromedp.Navigate(s.url+"/gates"), chromedp.WaitVisible(chromedp.CSS(".gate")))
	if !eval[bool](op, `(() => { const a = [...document.querySelectorAll("a.action")].find(a => a.textContent === "Approve"); a.focus(); return document.activeElement === a; })()`) {
		t.Fatal("the Approve link cannot take the keyboard's focus")
	}
	op.do("approve with the keyboard", chromedp.KeyEvent("\r"), chromedp.WaitVisible(chromedp.CSS("#comment")),
		chromedp.SendKeys(chromedp.CSS("#comment"), "ship it"), chromedp.Focus(chromedp.CSS("#confirm")), chromedp.KeyEvent("\r"),
		chromedp.WaitVisible(chromedp.CSS("#res-h")))
	if got := op.text("[role=status]"); !strings.Contains(got, "gate.decision") || !strings.Contains(got, "alice") {
		t.Errorf("after the approve the page says %q", got)
	}
	deadline := time.Now().Add(20 * time.Second)
	for s.runStatus(run) != "completed" {
		if time.Now().After(deadline) {
			t.Fatalf("the run is %s after the approve, want completed", s.runStatus(run))
		}
		time.Sleep(100 * time.Millisecond)
	}
	op.do("open the audit log", chromedp.Navigate(s.url+"/audit"), chromedp.WaitVisible(chromedp.CSS("table.audit")))
	if row := op.text("table.audit tbody tr"); !strings.Contains(row, "alice") || !strings.Contains(row, "gate.decision") || !strings.Contains(row, "ship it") {
		t.Errorf("the audit log's newest entry: %q", row)
	}
	if n := op.dialogs.Load() + viewer.dialogs.Load(); n != 0 {
		t.Errorf("%d dialogs opened", n)
	}
}
