package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/agentrunner/agentrunner"
	"github.com/agentrunner/agentrunner/engine"
	"github.com/agentrunner/agentrunner/execsvc"
	"github.com/agentrunner/agentrunner/internal/syncbuf"
	"github.com/agentrunner/agentrunner/workspace"
	"github.com/google/go-cmp/cmp"
)

// cliArtifacts is what one completed cycle of the example leaves in its
// cycle directory.
var cliArtifacts = []string{"analysis.md", "evaluation.md", "plan.md", "research.md", "strategy.json"}

// cliSteps are the example's steps in pipeline order.
var cliSteps = []string{"plan", "research", "analyze", "synthesize", "execute", "evaluate"}

// cliMockExec serves a mock Execution Service on loopback for the test and
// points the configuration at it through the environment.
func cliMockExec(t *testing.T) *execsvc.Mock {
	t.Helper()
	es := execsvc.NewMock(execsvc.MockOptions{})
	url, err := es.Start("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { es.Close() })
	t.Setenv("AGENTRUNNER_EXECUTION_SERVICE_URL", url)
	t.Setenv("AGENTRUNNER_EXECUTION_SERVICE_POLL_INTERVAL", "10ms")
	return es
}

// cliFreeAddr returns a loopback address nothing listens on: a port the
// kernel handed out and that was closed again.
func cliFreeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	if err := ln.Close(); err != nil {
		t.Fatal(err)
	}
	return addr
}

// cliCycleDirs returns the cycle directories of a workspace written by init.
func cliCycleDirs(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(filepath.Join(dir, "artifacts", "cycles"))
	if err != nil {
		t.Fatalf("list cycles: %v", err)
	}
	var dirs []string
	for _, e := range entries {
		if e.IsDir() && e.Name() != "history" {
			dirs = append(dirs, filepath.Join(dir, "artifacts", "cycles", e.Name()))
		}
	}
	return dirs
}

// cliNames lists the names in a directory, sorted.
func cliNames(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	slices.Sort(names)
	return names
}

// cliStepLines checks that out has, in pipeline order, one line per step
// saying its first attempt succeeded.
func cliStepLines(t *testing.T, out string) {
	t.Helper()
	prev := -1
	for _, step := range cliSteps {
		re := regexp.MustCompile(`(?m)^\s+` + step + `\s+attempt 1\s.*succeeded$`)
		locs := re.FindAllStringIndex(out, -1)
		if len(locs) != 1 {
			t.Errorf("want one line saying %s succeeded, got %d in:\n%s", step, len(locs), out)
			continue
		}
		if locs[0][0] < prev {
			t.Errorf("the line of %s comes before the step preceding it:\n%s", step, out)
		}
		prev = locs[0][0]
	}
}

func TestRunOnceCompletesACycle(t *testing.T) {
	es := cliMockExec(t)
	dir := cliExample(t)
	cfg := cliConfigPath(dir)

	code, stdout, stderr := cliRun(t, "run", "--once", "-c", cfg)
	if code != exitOK {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	cliStepLines(t, stdout)
	cycles := cliCycleDirs(t, dir)
	if len(cycles) != 1 {
		t.Fatalf("want one cycle directory, got %v", cycles)
	}
	cycleDir, id := cycles[0], filepath.Base(cycles[0])
	if diff := cmp.Diff(cliArtifacts, cliNames(t, cycleDir)); diff != "" {
		t.Errorf("artifacts of the cycle (-want +got):\n%s", diff)
	}
	if !strings.Contains(stdout, "cycle dir: "+cycleDir) {
		t.Errorf("stdout does not name the cycle dir %s:\n%s", cycleDir, stdout)
	}

	// What the Execution Service received is the cycle's strategy.json.
	strategy, err := os.ReadFile(filepath.Join(cycleDir, "strategy.json"))
	if err != nil {
		t.Fatal(err)
	}
	subs := es.Strategies()
	if len(subs) != 1 {
		t.Fatalf("the Execution Service received %d strategies, want 1", len(subs))
	}
	if subs[0].CycleID != id || !bytes.Equal(subs[0].Strategy, bytes.TrimSpace(strategy)) {
		t.Errorf("submitted strategy of cycle %q is not strategy.json of cycle %s:\n%s", subs[0].CycleID, id, subs[0].Strategy)
	}

	st := cliStatus(t, cfg)
	if st.LastCycle == nil {
		t.Fatalf("status has no last cycle: %+v", st)
	}
	got := engine.Status{
		Pipeline: st.Pipeline, CurrentState: st.CurrentState, CurrentCycleID: st.CurrentCycleID,
		LastCompletedStep: st.LastCompletedStep, NextScheduledTime: st.NextScheduledTime,
		LastCycle: &engine.CycleSummary{ID: st.LastCycle.ID, Status: st.LastCycle.Status},
	}
	want := engine.Status{
		Pipeline: "crypton", CurrentState: agentrunner.StateWaiting, CurrentCycleID: id,
		LastCompletedStep: "evaluate", NextScheduledTime: st.LastCycle.StartedAt.Add(6 * time.Hour),
		LastCycle: &engine.CycleSummary{ID: id, Status: agentrunner.CycleCompleted},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("status after the cycle (-want +got):\n%s", diff)
	}
	if st.LastCycle.EndedAt == nil || st.LastCycle.EndedAt.Before(st.LastCycle.StartedAt) {
		t.Errorf("last cycle ended at %v, started at %v", st.LastCycle.EndedAt, st.LastCycle.StartedAt)
	}
}

func TestRunOnceFailsWhenTheExecutionServiceIsDown(t *testing.T) {
	t.Setenv("AGENTRUNNER_EXECUTION_SERVICE_URL", "http://"+cliFreeAddr(t))
	t.Setenv("AGENTRUNNER_EXECUTION_SERVICE_POLL_INTERVAL", "10ms")
	t.Setenv("AGENTRUNNER_DEFAULTS_RETRIES_MAX", "0")
	dir := cliExample(t)
	cfg := cliConfigPath(dir)

	code, stdout, stderr := cliRun(t, "run", "--once", "-c", cfg)
	if code != exitFailure {
		t.Errorf("exit %d, want %d", code, exitFailure)
	}
	lastLine := stderr[strings.LastIndex(strings.TrimSpace(stderr), "\n")+1:]
	for _, why := range []string{"step execute (visit 1) failed after 1 attempt(s)", "connection refused"} {
		if !strings.Contains(lastLine, why) {
			t.Errorf("the last line of stderr should say %q:\n%s", why, lastLine)
		}
	}
	if !regexp.MustCompile(`(?m)^cycle \S+ halted at execute: waiting for an operator`).MatchString(stdout) {
		t.Errorf("stdout should say the cycle halted at execute:\n%s", stdout)
	}
	cycles := cliCycleDirs(t, dir)
	if len(cycles) != 1 {
		t.Fatalf("want one cycle directory, got %v", cycles)
	}
	want := []string{"analysis.md", "plan.md", "research.md", "strategy.json"}
	if diff := cmp.Diff(want, cliNames(t, cycles[0])); diff != "" {
		t.Errorf("artifacts of the failed cycle (-want +got):\n%s", diff)
	}
	if st := cliStatus(t, cfg); st.LastCycle == nil || st.LastCycle.Status != agentrunner.CycleHalted || st.CurrentState != agentrunner.StateHalted || st.LastCompletedStep != "synthesize" {
		t.Errorf("status should show the loop halted after synthesize, got %+v (last cycle %+v)", st, st.LastCycle)
	}

	// The operator brings the Execution Service back and resumes.
	if code, _, _ := cliRun(t, "run", "--once", "-c", cfg); code != exitFailure {
		t.Errorf("a halted loop ran on without an operator: exit %d", code)
	}
	code, stdout, stderr = cliRun(t, "resume", "-c", cfg, "--operator", "alice", "--note", "the service is back")
	if code != exitOK || !strings.Contains(stdout, "resumes cycle "+filepath.Base(cycles[0])+" at step execute") || !strings.Contains(stderr, "--note is an old name of --reason") {
		t.Fatalf("resume: exit %d\n%s%s", code, stdout, stderr)
	}
	cliMockExec(t)
	code, stdout, stderr = cliRun(t, "run", "--once", "-c", cfg)
	if code != exitOK || !strings.Contains(stdout, "resumed at execute by alice") {
		t.Fatalf("run after resume: exit %d\n%s%s", code, stdout, stderr)
	}
	if code, _, stderr := cliRun(t, "resume", "-c", cfg); code != exitFailure || !strings.Contains(stderr, "not halted") {
		t.Errorf("resume of a loop that is not halted: exit %d\n%s", code, stderr)
	}
}

func TestRunRefusesAWorkspaceAnotherRunnerHolds(t *testing.T) {
	cliMockExec(t)
	dir := cliExample(t)
	lock, err := workspace.Layout{Root: filepath.Join(dir, "artifacts")}.Acquire()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { lock.Release() })

	code, _, stderr := cliRun(t, "run", "--once", "-c", cliConfigPath(dir))
	if code == exitOK {
		t.Fatal("run --once succeeded on a locked workspace")
	}
	if want := fmt.Sprintf("another agentrunner (pid %d) is already running on the workspace", os.Getpid()); !strings.Contains(stderr, want) {
		t.Errorf("stderr should say %q:\n%s", want, stderr)
	}
	if diff := cmp.Diff([]string{"agentrunner.lock"}, cliNames(t, filepath.Join(dir, "artifacts"))); diff != "" {
		t.Errorf("the refused run wrote into the artifacts dir (-want +got):\n%s", diff)
	}
}

func TestDemoRunsOneCycleOffline(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "demo")
	code, stdout, stderr := cliRun(t, "demo", "--dir", dir)
	if code != exitOK {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	cliStepLines(t, stdout)
	cycles := cliCycleDirs(t, dir)
	if len(cycles) != 1 {
		t.Fatalf("want one cycle directory, got %v", cycles)
	}
	if !strings.Contains(stdout, "cycle dir: "+cycles[0]+"\n") {
		t.Errorf("the summary does not name the cycle dir %s:\n%s", cycles[0], stdout)
	}
	if !regexp.MustCompile(`(?m)^cycle \S+ completed in `).MatchString(stdout) {
		t.Errorf("the summary does not say the cycle completed:\n%s", stdout)
	}
	if diff := cmp.Diff(cliArtifacts, cliNames(t, cycles[0])); diff != "" {
		t.Errorf("artifacts of the demo cycle (-want +got):\n%s", diff)
	}
}

func TestServeRefusesANonLoopbackAddress(t *testing.T) {
	cliMockExec(t)
	t.Setenv("AGENTRUNNER_SERVER_LISTEN", "0.0.0.0:0")
	dir := cliExample(t)
	code, _, stderr := cliRun(t, "serve", "-c", cliConfigPath(dir))
	if code != exitUsage {
		t.Errorf("exit %d, want %d", code, exitUsage)
	}
	if !strings.Contains(stderr, "server.listen 0.0.0.0:0 is not a loopback address") {
		t.Errorf("stderr should say why the address is refused:\n%s", stderr)
	}
	if _, err := os.Stat(filepath.Join(dir, "artifacts")); !os.IsNotExist(err) {
		t.Errorf("a refused serve touched the workspace (stat artifacts: %v)", err)
	}
}

// cliGet fetches url and returns the status and body; err when nothing
// answered.
func cliGet(ctx context.Context, url string) (int, []byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, nil, err
	}
	client := &http.Client{Timeout: 2 * time.Second}
	resp, err := client.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	return resp.StatusCode, body, err
}

func TestServeAnswersTheAPIAndStopsCleanly(t *testing.T) {
	cliMockExec(t)
	addr := cliFreeAddr(t)
	t.Setenv("AGENTRUNNER_SERVER_LISTEN", addr)
	t.Setenv("AGENTRUNNER_SCHEDULE_EVERY", "24h")
	dir := cliExample(t)

	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	var stdout, stderr syncbuf.Buffer
	done := make(chan int, 1)
	go func() { done <- run(ctx, []string{"serve", "-c", cliConfigPath(dir)}, &stdout, &stderr) }()

	// Poll until the server is up and the engine has run the first cycle
	// (due at once: the workspace has none), or give up.
	base := "http://" + addr
	deadline := time.Now().Add(15 * time.Second)
	var st engine.Status
	for {
		select {
		case code := <-done:
			t.Fatalf("serve exited %d before it was stopped; stderr:\n%s", code, stderr.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("serve did not report a finished cycle in time; last status %+v; stderr:\n%s", st, stderr.String())
		}
		status, body, err := cliGet(ctx, base+"/health/live")
		if err == nil && status == http.StatusOK {
			var live map[string]string
			if err := json.Unmarshal(body, &live); err != nil || live["status"] != "ok" {
				t.Fatalf("GET /health/live answered %s", body)
			}
			status, body, err = cliGet(ctx, base+"/api/status")
			if err != nil || status != http.StatusOK {
				t.Fatalf("GET /api/status: %d %v %s", status, err, body)
			}
			if err := json.Unmarshal(body, &st); err != nil || st.CurrentState == "" {
				t.Fatalf("GET /api/status answered no status with a current_state (%v): %s", err, body)
			}
			if st.CurrentState == agentrunner.StateWaiting {
				break
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	if st.Pipeline != "crypton" || st.LastCycle == nil || st.LastCycle.Status != agentrunner.CycleCompleted {
		t.Errorf("status after the first cycle: %+v, last cycle %+v", st, st.LastCycle)
	}
	if want := st.LastCycle.StartedAt.Add(24 * time.Hour); !st.NextScheduledTime.Equal(want) {
		t.Errorf("next_scheduled_time %v, want %v (24h after the cycle started)", st.NextScheduledTime, want)
	}
	first := st.LastCycle.ID

	// Metrics and readiness come from the running process.
	status, body, err := cliGet(ctx, base+"/metrics")
	if err != nil || status != http.StatusOK || !strings.Contains(string(body), `agentrunner_cycles_total{outcome="completed",pipeline="crypton"} 1`) ||
		!strings.Contains(string(body), `agentrunner_step_outcomes_total{agent="plan",error_class="",outcome="succeeded",pipeline="crypton",step="plan"} 1`) {
		t.Errorf("GET /metrics: %d %v\n%s", status, err, body)
	}
	if status, body, err := cliGet(ctx, base+"/health/ready"); err != nil || status != http.StatusOK {
		t.Errorf("GET /health/ready: %d %v %s", status, err, body)
	}
	// An operator appends to an agent's memory: the store has it, and the
	// agent's memory file.
	resp, err := http.Post(base+"/api/memory/plan", "application/json", strings.NewReader(`{"text": "Funding flips before the expiry."}`))
	if err != nil || resp.StatusCode != http.StatusCreated {
		t.Fatalf("POST /api/memory/plan: %v %v", resp, err)
	}
	resp.Body.Close()
	if status, body, err := cliGet(ctx, base+"/api/memory/plan"); err != nil || status != http.StatusOK || !strings.Contains(string(body), "Funding flips before the expiry.") {
		t.Errorf("GET /api/memory/plan: %d %v %s", status, err, body)
	}
	ws, err := loadWorkspace(cliConfigPath(dir))
	if err != nil {
		t.Fatal(err)
	}
	if data, err := os.ReadFile(ws.Layout.Memory("plan")); err != nil || !strings.Contains(string(data), "Funding flips before the expiry.") {
		t.Errorf("the memory file of plan: %v\n%s", err, data)
	}
	// An operator forces a cycle: the engine, waiting 24h, starts one now.
	resp, err = http.Post(base+"/api/override/force-cycle", "application/json", strings.NewReader(`{"reason": "new data"}`))
	if err != nil || resp.StatusCode != http.StatusAccepted {
		t.Fatalf("POST /api/override/force-cycle: %v %v", resp, err)
	}
	resp.Body.Close()
	for deadline := time.Now().Add(15 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the forced cycle did not complete; status %+v", st)
		}
		_, body, _ := cliGet(ctx, base+"/api/status")
		json.Unmarshal(body, &st)
		if st.LastCycle != nil && st.LastCycle.ID != first && st.LastCycle.Status == agentrunner.CycleCompleted {
			break
		}
	}
	// A reload reads the workspace again while the loop waits.
	resp, err = http.Post(base+"/api/admin/reload", "application/json", nil)
	if err != nil || resp.StatusCode != http.StatusAccepted {
		t.Fatalf("POST /api/admin/reload: %v %v", resp, err)
	}
	resp.Body.Close()
	for deadline := time.Now().Add(15 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the reload was not applied")
		}
		_, body, _ := cliGet(ctx, base+"/api/audit?limit=1")
		if strings.Contains(string(body), `"result": "reloaded `) {
			break
		}
	}
	if !strings.Contains(stderr.String(), "serving the API without credentials: listening on loopback only") {
		t.Errorf("serve did not say it runs without credentials:\n%s", stderr.String())
	}
	// Events are JSON log lines too.
	if !strings.Contains(stderr.String(), `"event_type":"cycle.completed"`) {
		t.Errorf("no cycle.completed log line in:\n%s", stderr.String())
	}

	cancel()
	select {
	case code := <-done:
		if code != exitOK {
			t.Errorf("serve exited %d after being stopped; stderr:\n%s", code, stderr.String())
		}
	case <-time.After(10 * time.Second):
		t.Fatal("serve did not return within 10s of its context ending")
	}
	if _, _, err := cliGet(t.Context(), base+"/health/live"); err == nil {
		t.Error("the API still answers after serve returned")
	}
}

func TestDemoOfTheSignalFlowPrintsEachHandOffAndTheArchive(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "flow")
	code, stdout, stderr := cliRun(t, "demo", "--example", "signal-flow", "--dir", dir)
	if code != exitOK {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	var handOffs []string
	for _, m := range regexp.MustCompile(`(?m)^  (\w+) +→ (\w+) +confidence [1-5], risk (low|medium|high)$`).FindAllStringSubmatch(stdout, -1) {
		handOffs = append(handOffs, m[1]+"→"+m[2])
	}
	want := []string{"orchestrator→comparator", "comparator→diagnoser", "diagnoser→planner", "planner→actor", "actor→verifier", "verifier→STOP"}
	if diff := cmp.Diff(want, handOffs); diff != "" {
		t.Errorf("hand-offs (-want +got):\n%s\nstdout:\n%s", diff, stdout)
	}
	m := regexp.MustCompile(`(?m)^archived:  (\S+_cycle-001\.md)$`).FindStringSubmatch(stdout)
	if m == nil {
		t.Fatalf("the summary names no archived document:\n%s", stdout)
	}
	if data, err := os.ReadFile(m[1]); err != nil || !strings.Contains(string(data), "Next=STOP") {
		t.Errorf("the archived document %s: %v\n%s", m[1], err, data)
	}
}

func TestRunOnceOfAWorkspaceOfPipelinesNeedsToKnowWhichOne(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "flow")
	if code, _, stderr := cliRun(t, "init", dir, "--example", "signal-flow"); code != exitOK {
		t.Fatal(stderr)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--pipeline", "nope"}, `--pipeline "nope": no such pipeline (the workspace has signal-flow)`},
		{[]string{"--input", "goal"}, `--input "goal": want KEY=VALUE`},
		{[]string{"--input", "colour=red"}, "colour"},
	} {
		code, _, stderr := cliRun(t, append([]string{"run", "--once", "-c", cliConfigPath(dir)}, tc.args...)...)
		if code == exitOK || !strings.Contains(stderr, tc.want) {
			t.Errorf("run --once %v: exit %d, stderr %q; want it refused, saying %q", tc.args, code, stderr, tc.want)
		}
	}
}
