package dashboard

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// TestScreenshots takes the pictures of the main pages that docs/ keeps
// and the README shows, of the review example served by the real binary:
// three runs, two of whose loops reached their cap and wait at the gate.
// It runs only when DASHBOARD_SCREENSHOTS names the folder to write them
// to (make screenshots).
func TestScreenshots(t *testing.T) {
	out := os.Getenv("DASHBOARD_SCREENSHOTS")
	if out == "" {
		t.Skip("set DASHBOARD_SCREENSHOTS to a folder to take the dashboard's screenshots (make screenshots)")
	}
	bin := agentrunnerBinary(t)
	dir := filepath.Join(t.TempDir(), "review")
	if b, err := exec.Command(bin, "init", dir, "--example", "review").CombinedOutput(); err != nil {
		t.Fatalf("init: %v\n%s", err, b)
	}
	port := freePort(t)
	base := fmt.Sprintf("http://127.0.0.1:%d", port)
	ctx, cancel := context.WithCancel(context.Background())
	cmd := exec.CommandContext(ctx, bin, "serve", "-c", filepath.Join(dir, "agentrunner.yaml"))
	cmd.Env = append(os.Environ(), fmt.Sprintf("AGENTRUNNER_SERVER_LISTEN=127.0.0.1:%d", port))
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cancel(); cmd.Wait() })
	s := &servedWorkspace{t: t, url: base}
	waitServing(t, base)
	var runs []string
	for _, in := range []string{`{"topic": "durable agents", "revisions_needed": 2}`, `{"topic": "retries with backoff"}`, `{"topic": "human gates"}`} {
		out := s.api(http.MethodPost, "/api/pipelines/review/runs", `{"inputs": `+in+`}`)
		run, _ := out["run"].(map[string]any)
		id, _ := run["id"].(string)
		runs = append(runs, id)
	}
	deadline := time.Now().Add(60 * time.Second)
	for s.runStatus(runs[0]) != "completed" || len(gates(s)) < 2 {
		if time.Now().After(deadline) {
			t.Fatal("the runs did not reach their ends and gates")
		}
		time.Sleep(200 * time.Millisecond)
	}
	c := newChrome(t, chromedp.WindowSize(1280, 1400))
	shots := []struct{ file, path, wait string }{
		{"dashboard-overview.png", "/", "#gates-h"},
		{"dashboard-run.png", "/runs/" + runs[1], ".graph"},
		{"dashboard-artifact.png", "/runs/" + runs[1] + "/artifacts/draft.md?step=fix&attempt=3&with_step=draft&with_attempt=1", "#diff-h"},
		{"dashboard-gates.png", "/gates", ".gate"},
		{"dashboard-confirm.png", "/confirm?action=approve&run=" + runs[1] + "&step=decide", "#confirm"},
		{"dashboard-metrics.png", "/charts?pipeline=review", ".chart"},
	}
	for _, shot := range shots {
		c.do("open "+shot.path, chromedp.Navigate(base+shot.path), chromedp.WaitVisible(chromedp.CSS(shot.wait)))
		// The window, not the whole page: a page's end (a run's events)
		// names the test's temporary folders.
		png, err := chromedp.Run(c.ctx, chromedp.CaptureScreenshot())
		if err != nil {
			t.Fatalf("screenshot of %s: %v", shot.path, err)
		}
		if !strings.HasPrefix(string(png), "\x89PNG") {
			t.Fatalf("the screenshot of %s is not a PNG", shot.path)
		}
		if err := os.WriteFile(filepath.Join(out, shot.file), png, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// waitServing waits until a server answers on base.
func waitServing(t *testing.T, base string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := http.Get(base + "/health/live")
		if err == nil {
			resp.Body.Close()
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("serve did not answer: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// gates lists the waiting gates through the API.
func gates(s *servedWorkspace) []any {
	out := s.api(http.MethodGet, "/api/gates", "")
	g, _ := out["gates"].([]any)
	return g
}
