package e2e

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/agentrunner/agentrunner"
	"github.com/agentrunner/agentrunner/internal/syncbuf"
	"github.com/agentrunner/agentrunner/sqlite"
)

// opsConfig is one pipeline of one step, work, whose agent is a shell
// script that sleeps as long as the workspace's file sleep says and then
// writes the Marker line of its identity prompt into its output. A
// failure would cost the step its only retry after an hour, and a second
// interruption would fail it: a shutdown must cost neither.
const opsConfig = `version: 1
name: ops
artifacts_dir: ./artifacts
server: {listen: "%s"}
shutdown: {grace: %s}
reload: {watch: %t}
scheduler: {max_interruptions: 1}

providers:
  scripts:
    kind: process
    command: [sh, "{workspace}/agents/{agent}.sh", "{output}", "{attempt}"]
    kill_grace: 1s

defaults:
  provider: scripts
  timeout: 1m
  retries: {max: 1, backoff: [1h]}

agents:
  worker:
    identity: prompts/worker.md
    output: {file: work.md, template: templates/note.md}

pipelines:
  ops:
    start: work
    steps:
      work: {agent: worker, next: end}
`

// opsAgent logs each attempt's start and end to calls.log, beside the
// configuration.
const opsAgent = `#!/bin/sh
set -eu
dir="$(dirname "$0")/.."
echo "START $2" >> "$dir/calls.log"
sleep "$(cat "$dir/sleep")"
marker=$(sed -n 's/^Marker: //p' "$AGENTRUNNER_PROMPT_FILE" | head -n 1)
printf '# Note\n\n## Body\nMarker: %s\n' "$marker" > "$1"
echo "END $2" >> "$dir/calls.log"
`

// opsWorkspace is a workspace of opsConfig served on a free port.
type opsWorkspace struct {
	dir, cfg, addr string
}

func newOpsWorkspace(t *testing.T, grace string, watch bool, sleep string) *opsWorkspace {
	t.Helper()
	addr := freeAddr(t)
	w := &opsWorkspace{dir: t.TempDir(), addr: addr}
	w.cfg = filepath.Join(w.dir, "agentrunner.yaml")
	for name, body := range map[string]string{
		"agentrunner.yaml":  fmt.Sprintf(opsConfig, addr, grace, watch),
		"agents/worker.sh":  opsAgent,
		"prompts/worker.md": "# Worker\n\nWrite the template's sections.\n\nMarker: v1\n",
		"templates/note.md": "# Note\n\n## Body\n<!-- the text -->\n",
		"sleep":             sleep,
	} {
		w.write(t, name, body)
	}
	return w
}

func (w *opsWorkspace) write(t *testing.T, name, body string) {
	t.Helper()
	path := filepath.Join(w.dir, name)
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(body), 0o755); err != nil {
		t.Fatal(err)
	}
}

// calls counts the lines of calls.log that start with what.
func (w *opsWorkspace) calls(what string) int {
	data, _ := os.ReadFile(filepath.Join(w.dir, "calls.log"))
	n := 0
	for _, line := range strings.Split(string(data), "\n") {
		if strings.HasPrefix(line, what+" ") {
			n++
		}
	}
	return n
}

// opsServer is a serve process of an opsWorkspace.
type opsServer struct {
	cmd    *exec.Cmd
	log    *syncbuf.Buffer
	exited chan error
}

// serve starts serve and waits until it answers.
func (w *opsWorkspace) serve(t *testing.T) *opsServer {
	t.Helper()
	s := &opsServer{cmd: exec.Command(binary, "serve", "-c", w.cfg), log: &syncbuf.Buffer{}, exited: make(chan error, 1)}
	s.cmd.Stderr = s.log
	if err := s.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { s.exited <- s.cmd.Wait() }()
	t.Cleanup(func() {
		s.cmd.Process.Kill()
		if t.Failed() {
			t.Logf("serve's log:\n%s", s.log)
		}
	})
	waitUntil(t, "serve answers /health/live", func() bool {
		resp, err := http.Get("http://" + w.addr + "/health/live")
		if err == nil {
			resp.Body.Close()
		}
		return err == nil && resp.StatusCode == http.StatusOK
	})
	return s
}

// stop sends sig and waits for serve to exit; it must exit 0.
func (s *opsServer) stop(t *testing.T, sig os.Signal) {
	t.Helper()
	s.cmd.Process.Signal(sig)
	select {
	case err := <-s.exited:
		if err != nil {
			t.Fatalf("serve exited with %v after %v, want 0", err, sig)
		}
	case <-time.After(60 * time.Second):
		t.Fatalf("serve did not exit after %v", sig)
	}
}

// start starts a run of ops through the CLI and returns its id.
func (w *opsWorkspace) start(t *testing.T) string {
	t.Helper()
	out, err := exec.Command(binary, "start", "ops", "--server", "http://"+w.addr).CombinedOutput()
	if err != nil {
		t.Fatalf("start: %v\n%s", err, out)
	}
	return strings.TrimSpace(string(out))
}

// attempts reads a run's attempts from the store (serve is stopped) as
// "step#number:status[:class][:backoff]", and the run.
func (w *opsWorkspace) attempts(t *testing.T, id string) ([]string, *agentrunner.Run) {
	t.Helper()
	store, err := sqlite.Open(context.Background(), filepath.Join(w.dir, "artifacts", "state.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	atts, err := store.Attempts(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, a := range atts {
		s := fmt.Sprintf("%s#%d:%s", a.Step, a.Number, a.Status)
		if a.ErrorClass != "" {
			s += ":" + string(a.ErrorClass)
		}
		if !a.NotBefore.IsZero() {
			s += ":backoff"
		}
		out = append(out, s)
	}
	r, err := store.Run(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	return out, r
}

// checkQuietShutdowns checks serve's log: one line per shutdown says how
// many attempts it drains and its grace, and nothing is logged as an
// error (no "context canceled").
func checkQuietShutdowns(t *testing.T, log string, want []string) {
	t.Helper()
	var got []string
	for _, line := range strings.Split(log, "\n") {
		if strings.Contains(line, `"msg":"shutting down`) {
			m := regexp.MustCompile(`"attempts":(\d+),"grace":"([^"]+)"`).FindStringSubmatch(line)
			if m == nil {
				t.Errorf("the shutdown line does not say its attempts and grace: %s", line)
				continue
			}
			got = append(got, m[1]+" in "+m[2])
		}
		if strings.Contains(line, `"level":"ERROR"`) || strings.Contains(line, "context canceled") {
			t.Errorf("serve logged an error about its shutdown: %s", line)
		}
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("shutdown lines (-want +got):\n%s", diff)
	}
}

// TestSIGTERMLetsTheRunningStepFinishWithinTheGrace: SIGTERM while the
// agent works; the grace (30s) lets it finish: its output is committed,
// the run completes and serve exits 0.
func TestSIGTERMLetsTheRunningStepFinishWithinTheGrace(t *testing.T) {
	w := newOpsWorkspace(t, "30s", false, "2")
	s := w.serve(t)
	id := w.start(t)
	waitUntil(t, "the agent starts", func() bool { return w.calls("START") == 1 })
	s.stop(t, syscall.SIGTERM)
	if w.calls("END") != 1 {
		t.Error("the agent did not finish its work")
	}
	atts, r := w.attempts(t, id)
	if diff := cmp.Diff([]string{"work#1:succeeded"}, atts); diff != "" || r.Status != agentrunner.RunCompleted {
		t.Errorf("run %s: %s (%s); attempts (-want +got):\n%s", id, r.Status, r.Error, diff)
	}
	checkQuietShutdowns(t, s.log.String(), []string{"1 in 30s"})
}

// TestRestartingServeThreeTimesDuringAStepCostsNoRetry: serve is stopped
// by SIGTERM three times while the agent works, with a grace too short
// for it. Each attempt is recorded as shut down; the next start runs the
// step again at once, with no backoff; the step, which has one retry and
// may be interrupted once, completes at the fourth attempt.
func TestRestartingServeThreeTimesDuringAStepCostsNoRetry(t *testing.T) {
	w := newOpsWorkspace(t, "300ms", false, "30")
	var id string
	var want, logs []string
	for i := 1; i <= 3; i++ {
		s := w.serve(t)
		started := time.Now()
		if i == 1 {
			id = w.start(t)
		}
		waitUntil(t, fmt.Sprintf("attempt %d starts", i), func() bool { return w.calls("START") == i })
		if wait := time.Since(started); wait > 15*time.Second {
			t.Errorf("attempt %d started %v after serve: a backoff?", i, wait)
		}
		s.stop(t, syscall.SIGTERM)
		want = append(want, fmt.Sprintf("work#%d:failed:shutdown", i))
		atts, r := w.attempts(t, id)
		if diff := cmp.Diff(append(want, fmt.Sprintf("work#%d:pending", i+1)), atts); diff != "" || r.Status != agentrunner.RunRunning {
			t.Fatalf("after shutdown %d, run %s is %s; attempts (-want +got):\n%s", i, id, r.Status, diff)
		}
		logs = append(logs, s.log.String())
	}
	w.write(t, "sleep", "0")
	s := w.serve(t)
	waitUntil(t, "the fourth attempt ends", func() bool { return w.calls("END") == 1 })
	status, err := exec.Command(binary, "run-status", id, "--server", "http://"+w.addr).CombinedOutput()
	if err != nil || !strings.Contains(string(status), "shutdown") {
		t.Errorf("run-status does not show the shut-down attempts (%v):\n%s", err, status)
	}
	s.stop(t, syscall.SIGTERM)
	atts, r := w.attempts(t, id)
	if diff := cmp.Diff(append(want, "work#4:succeeded"), atts); diff != "" || r.Status != agentrunner.RunCompleted {
		t.Errorf("run %s: %s (%s); attempts (-want +got):\n%s", id, r.Status, r.Error, diff)
	}
	checkQuietShutdowns(t, strings.Join(logs, "\n"), []string{"1 in 300ms", "1 in 300ms", "1 in 300ms"})
}

// waitOutput waits until run id's output says marker.
func (w *opsWorkspace) waitOutput(t *testing.T, id, marker string) {
	t.Helper()
	path := filepath.Join(w.dir, "artifacts", "runs", "ops", id, "work.md")
	waitUntil(t, id+"'s output says "+marker, func() bool {
		data, _ := os.ReadFile(path)
		return strings.Contains(string(data), "Marker: "+marker)
	})
}

// TestSIGHUPReloadsTheConfiguration: serve takes SIGHUP as a reload
// instead of dying: the next run's agent has the changed prompt.
func TestSIGHUPReloadsTheConfiguration(t *testing.T) {
	w := newOpsWorkspace(t, "30s", false, "0")
	s := w.serve(t)
	w.waitOutput(t, w.start(t), "v1")
	w.write(t, "prompts/worker.md", "# Worker\n\nWrite the template's sections.\n\nMarker: v2\n")
	s.cmd.Process.Signal(syscall.SIGHUP)
	waitUntil(t, "the reload", func() bool { return strings.Contains(s.log.String(), `"msg":"config.reloaded"`) })
	if !strings.Contains(s.log.String(), `"msg":"reloading the configuration","by":"sighup"`) {
		t.Error("serve did not log the SIGHUP")
	}
	w.waitOutput(t, w.start(t), "v2")
	s.stop(t, syscall.SIGTERM)
}

// TestSIGHUPReplacesAPipeline: a SIGHUP reload that renames pipeline ops
// to more is taken without a restart: a run of more completes, and a
// start of ops is refused, naming the pipeline there is.
func TestSIGHUPReplacesAPipeline(t *testing.T) {
	w := newOpsWorkspace(t, "30s", false, "0")
	s := w.serve(t)
	w.waitOutput(t, w.start(t), "v1")
	cfg := fmt.Sprintf(opsConfig, w.addr, "30s", false)
	w.write(t, "agentrunner.yaml", strings.Replace(cfg, "pipelines:\n  ops:\n", "pipelines:\n  more:\n", 1))
	s.cmd.Process.Signal(syscall.SIGHUP)
	waitUntil(t, "the reload", func() bool { return strings.Contains(s.log.String(), `"msg":"config.reloaded"`) })
	out, err := exec.Command(binary, "start", "more", "--server", "http://"+w.addr).CombinedOutput()
	if err != nil {
		t.Fatalf("start more: %v\n%s", err, out)
	}
	path := filepath.Join(w.dir, "artifacts", "runs", "more", strings.TrimSpace(string(out)), "work.md")
	waitUntil(t, "more's output", func() bool {
		data, _ := os.ReadFile(path)
		return strings.Contains(string(data), "Marker: v1")
	})
	out, err = exec.Command(binary, "start", "ops", "--server", "http://"+w.addr).CombinedOutput()
	if err == nil || !strings.Contains(string(out), `no pipeline "ops" (pipelines: more)`) {
		t.Errorf("start ops after the reload: %v\n%s", err, out)
	}
	s.stop(t, syscall.SIGTERM)
}

// TestAChangedPromptIsUsedByTheNextAttempt: with reload.watch, saving the
// identity prompt reloads the configuration, and the next attempt uses
// the new prompt; a change that breaks the configuration is refused with
// a warning, and the runner goes on with what it has.
func TestAChangedPromptIsUsedByTheNextAttempt(t *testing.T) {
	w := newOpsWorkspace(t, "30s", true, "0")
	s := w.serve(t)
	w.waitOutput(t, w.start(t), "v1")
	w.write(t, "prompts/worker.md", "# Worker\n\nWrite the template's sections.\n\nMarker: v2\n")
	waitUntil(t, "the reload", func() bool { return strings.Contains(s.log.String(), `"msg":"config.reloaded"`) })
	w.waitOutput(t, w.start(t), "v2")

	w.write(t, "prompts/worker.md", "")
	waitUntil(t, "the refused reload", func() bool {
		return strings.Contains(s.log.String(), `"level":"WARN","msg":"command.ignored"`) && strings.Contains(s.log.String(), "is empty")
	})
	w.waitOutput(t, w.start(t), "v2")
	s.stop(t, syscall.SIGTERM)
}
