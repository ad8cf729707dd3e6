package main

import (
	"context"
	"net/http"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/agentrunner/agentrunner"
	arhttp "github.com/agentrunner/agentrunner/http"
	"github.com/agentrunner/agentrunner/internal/runtest"
	"github.com/agentrunner/agentrunner/internal/syncbuf"
	"github.com/agentrunner/agentrunner/sqlite"
)

// runsFixture is the API with a real scheduler running the review and
// load pipelines; load's attempts of runs started with hold=true wait for
// Release.
type runsFixture struct {
	*remoteFixture
	kind  *runtest.HoldKind
	sched *runtest.Scheduler
}

func newRunsFixture(t *testing.T) *runsFixture {
	t.Helper()
	f := &runsFixture{kind: &runtest.HoldKind{Hold: runtest.HeldInputs}}
	t.Cleanup(f.kind.Release)
	f.kind.Fail = runtest.FailedInputs
	pipelines := runtest.Pipelines(runtest.ReviewPipeline(), runtest.LoadPipeline(0), runtest.HaltPipeline())
	f.remoteFixture = newRemoteFixtureWith(t, func(store *sqlite.Store, dir string, o *arhttp.Options) {
		f.sched = runtest.Start(t, store, dir, f.kind, pipelines)
		o.Pipelines, o.Runs = pipelines, f.sched
	})
	t.Setenv(envServer, f.url)
	t.Setenv(envAPIKey, remoteOperatorKey)
	return f
}

// cli runs the command line and fails unless it exits with code; it
// returns stdout and stderr.
func (f *runsFixture) cli(t *testing.T, code int, args ...string) (string, string) {
	t.Helper()
	got, stdout, stderr := cliRun(t, args...)
	if got != code {
		t.Fatalf("%s: exit %d, want %d; stdout:\n%s\nstderr:\n%s", strings.Join(args, " "), got, code, stdout, stderr)
	}
	return stdout, stderr
}

// waitRun polls the store until the run's status is status.
func (f *runsFixture) waitRun(t *testing.T, id string, status agentrunner.RunStatus) {
	t.Helper()
	end := time.Now().Add(30 * time.Second)
	for {
		r, err := f.store.Run(t.Context(), id)
		if err == nil && r.Status == status {
			return
		}
		if time.Now().After(end) {
			t.Fatalf("run %s: not %s within 30s (%+v, %v)", id, status, r, err)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// waitGate polls the store until the run's step waits.
func (f *runsFixture) waitGate(t *testing.T, id, step string) {
	t.Helper()
	end := time.Now().Add(30 * time.Second)
	for {
		srs, err := f.store.StepRuns(t.Context(), agentrunner.StepRunFilter{RunID: id, Status: agentrunner.StepRunWaiting})
		if err == nil && len(srs) == 1 && srs[0].Step == step {
			return
		}
		if time.Now().After(end) {
			t.Fatalf("run %s: gate %s not waiting within 30s (%v)", id, step, err)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// matchLines fails unless each pattern matches a whole line of out.
func matchLines(t *testing.T, what, out string, patterns ...string) {
	t.Helper()
	for _, p := range patterns {
		if !regexp.MustCompile(`(?m)^` + p + `$`).MatchString(out) {
			t.Errorf("%s: no line matches %s in:\n%s", what, p, out)
		}
	}
}

// TestRemoteStartRunsAndShow: start prints the run's id and passes its
// inputs; runs lists and filters; run-status shows the step runs.
func TestRemoteStartRunsAndShow(t *testing.T) {
	f := newRunsFixture(t)
	out, _ := f.cli(t, exitOK, "start", "load", "--input", "n=7", "--input", "name=BTC", "--input", `obj={"a": [1, true]}`,
		"--input", `quoted="7"`, "--input", "hold=true", "--input", "empty=")
	held := strings.TrimSpace(out)
	if held != "load-000001" {
		t.Fatalf("start printed %q, want the run id load-000001", out)
	}
	run, err := f.store.Run(t.Context(), held)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]any{"n": float64(7), "name": "BTC", "obj": map[string]any{"a": []any{float64(1), true}}, "quoted": "7", "hold": true, "empty": ""}
	if diff := cmp.Diff(want, run.Inputs); diff != "" {
		t.Errorf("the run's inputs (-want +got):\n%s", diff)
	}
	out, _ = f.cli(t, exitOK, "start", "review")
	review := strings.TrimSpace(out)
	f.waitGate(t, review, "signoff")

	out, _ = f.cli(t, exitOK, "runs")
	matchLines(t, "runs", out,
		`ID\s+PIPELINE\s+STATUS\s+STARTED\s+DURATION\s+ERROR`,
		review+`\s+review\s+running\s+\S+\s+\S+\s+-`,
		held+`\s+load\s+running\s+\S+\s+\S+\s+-`)
	out, _ = f.cli(t, exitOK, "runs", "--pipeline", "review", "--status", "running")
	if strings.Contains(out, held) || !strings.Contains(out, review) {
		t.Errorf("runs --pipeline review --status running:\n%s", out)
	}
	out, _ = f.cli(t, exitOK, "runs", "--status", "completed")
	matchLines(t, "runs --status completed", out, "no runs")

	out, _ = f.cli(t, exitOK, "run-status", held)
	matchLines(t, "run-status", out, `run:\s+`+held, `pipeline:\s+load`, `status:\s+running`,
		`STEP\s+VISIT\s+STATUS\s+LABEL\s+ATTEMPTS\s+OPENED\s+DETAIL`, `a\s+1\s+open\s+-\s+1:(pending|running)\s+\S+\s+-`)

	_, stderr := f.cli(t, exitFailure, "start", "nosuch")
	if !strings.Contains(stderr, `no pipeline "nosuch" (pipelines: halt, load, review)`) || !strings.Contains(stderr, "(not_found)") {
		t.Errorf("start of an unknown pipeline: %s", stderr)
	}
	_, stderr = f.cli(t, exitUsage, "start", "load", "--input", "novalue")
	if !strings.Contains(stderr, "want KEY=VALUE") {
		t.Errorf("start with a bad --input: %s", stderr)
	}
	f.cli(t, exitFailure, "run-status", "load-999999")

	// abort-run ends the held run.
	out, _ = f.cli(t, exitOK, "abort-run", held, "--reason", "wrong ticker")
	if !regexp.MustCompile(`^abort-run requested: command \d+ by alice;`).MatchString(out) {
		t.Errorf("abort-run printed %q", out)
	}
	f.waitRun(t, held, agentrunner.RunAborted)
	_, stderr = f.cli(t, exitFailure, "abort-run", held)
	if !strings.Contains(stderr, "already aborted") || !strings.Contains(stderr, "(conflict)") {
		t.Errorf("abort-run of an aborted run: %s", stderr)
	}
}

// TestRemoteResumeRun: resume-run resumes a halted run, which completes;
// a run that is not halted is refused.
func TestRemoteResumeRun(t *testing.T) {
	f := newRunsFixture(t)
	out, _ := f.cli(t, exitOK, "start", "halt", "--input", "fail=true")
	id := strings.TrimSpace(out)
	f.waitRun(t, id, agentrunner.RunHalted)
	out, _ = f.cli(t, exitOK, "resume-run", id, "--reason", "fixed the key")
	if !regexp.MustCompile(`^resume-run requested: command \d+ by alice;`).MatchString(out) {
		t.Errorf("resume-run printed %q", out)
	}
	f.waitRun(t, id, agentrunner.RunCompleted)
	_, stderr := f.cli(t, exitFailure, "resume-run", id)
	if !strings.Contains(stderr, "completed, not halted") || !strings.Contains(stderr, "(conflict)") {
		t.Errorf("resume-run of a completed run: %s", stderr)
	}
}

// TestRemoteGateDecisions: gates lists the waiting gate; approve decides
// it as the key's operator, audited; a second decision, a viewer's, and a
// route without --to are refused.
func TestRemoteGateDecisions(t *testing.T) {
	f := newRunsFixture(t)
	out, _ := f.cli(t, exitOK, "start", "review")
	approved := strings.TrimSpace(out)
	out, _ = f.cli(t, exitOK, "start", "review")
	routed := strings.TrimSpace(out)
	f.waitGate(t, approved, "signoff")
	f.waitGate(t, routed, "signoff")

	out, _ = f.cli(t, exitOK, "gates")
	matchLines(t, "gates", out,
		`RUN\s+PIPELINE\s+STEP\s+VISIT\s+OPENED\s+TIMEOUT`,
		approved+`\s+review\s+signoff\s+1\s+\S+\s+\S+ then reject`)

	t.Setenv(envAPIKey, remoteViewerKey)
	if _, stderr := f.cli(t, exitFailure, "approve", approved, "signoff"); !strings.Contains(stderr, "(forbidden)") {
		t.Errorf("a viewer's approve: %s", stderr)
	}
	t.Setenv(envAPIKey, remoteOperatorKey)
	if _, stderr := f.cli(t, exitUsage, "route", routed, "signoff"); !strings.Contains(stderr, "--to") {
		t.Errorf("route without --to: %s", stderr)
	}
	if _, stderr := f.cli(t, exitFailure, "route", routed, "signoff", "--to", "nowhere"); !strings.Contains(stderr, "(unprocessable)") {
		t.Errorf("route to nowhere: %s", stderr)
	}

	out, _ = f.cli(t, exitOK, "approve", approved, "signoff", "-m", "ship it")
	if !regexp.MustCompile(`^approve requested: command \d+ by alice;`).MatchString(out) {
		t.Errorf("approve printed %q", out)
	}
	f.waitRun(t, approved, agentrunner.RunCompleted)
	_, stderr := f.cli(t, exitFailure, "reject", approved, "signoff", "-m", "too late")
	if !strings.Contains(stderr, "(conflict)") || !strings.Contains(stderr, "not open") {
		t.Errorf("a second decision: %s", stderr)
	}
	t.Setenv(envAPIKey, remoteAdminKey)
	f.cli(t, exitOK, "route", routed, "signoff", "--to", "publish", "-m", "skip the review")
	f.waitRun(t, routed, agentrunner.RunCompleted)

	out, _ = f.cli(t, exitOK, "run-status", approved)
	matchLines(t, "run-status", out, `signoff\s+1\s+succeeded\s+approve\s+1:succeeded\s+\S+\s+approve by alice: ship it`, `publish\s+1\s+succeeded.*`)
	out, _ = f.cli(t, exitOK, "run-status", routed)
	matchLines(t, "run-status", out, `signoff\s+1\s+succeeded\s+route\s+1:succeeded\s+\S+\s+route by root to publish: skip the review`)

	cmds, err := f.store.Commands(t.Context(), agentrunner.CommandFilter{})
	if err != nil {
		t.Fatal(err)
	}
	var decisions []string
	for _, c := range cmds {
		if c.Kind == agentrunner.CommandGateDecision {
			decisions = append(decisions, c.Operator+" "+c.Target+" "+c.Args["action"].(string))
		}
	}
	want := []string{"root " + routed + "/signoff#1 route", "alice " + approved + "/signoff#1 approve"}
	if diff := cmp.Diff(want, decisions); diff != "" {
		t.Errorf("audited decisions (-want +got):\n%s", diff)
	}
	out, _ = f.cli(t, exitOK, "gates")
	matchLines(t, "gates", out, "no gates waiting")
}

func TestParseInputs(t *testing.T) {
	tests := []struct {
		flags []string
		want  map[string]any
		err   string
	}{
		{flags: nil, want: nil},
		{flags: []string{"a=1", "b=x y", "c=null", "d=[1]", "e=a=b"}, want: map[string]any{"a": float64(1), "b": "x y", "c": nil, "d": []any{float64(1)}, "e": "a=b"}},
		{flags: []string{"a"}, err: `--input "a": want KEY=VALUE`},
		{flags: []string{"=1"}, err: `--input "=1": want KEY=VALUE`},
		{flags: []string{"a=1", "a=2"}, err: "--input a is given twice"},
	}
	for _, tt := range tests {
		got, err := parseInputs(tt.flags)
		if tt.err != "" {
			if err == nil || err.Error() != tt.err {
				t.Errorf("%q: error %v, want %s", tt.flags, err, tt.err)
			}
			continue
		}
		if err != nil {
			t.Errorf("%q: %v", tt.flags, err)
		}
		if diff := cmp.Diff(tt.want, got); diff != "" {
			t.Errorf("%q (-want +got):\n%s", tt.flags, diff)
		}
	}
}

// TestServeRunsTheReviewExampleThroughTheCLI: serve drives the review
// example's pipeline; start, gates, approve and run-status reach it
// through the API, and the approved run ends completed.
func TestServeRunsTheReviewExampleThroughTheCLI(t *testing.T) {
	addr := cliFreeAddr(t)
	t.Setenv("AGENTRUNNER_SERVER_LISTEN", addr)
	t.Setenv(envServer, "http://"+addr)
	t.Setenv(envAPIKey, "")
	dir := filepath.Join(t.TempDir(), "review")
	if code, _, stderr := cliRun(t, "init", dir, "--example", "review"); code != exitOK {
		t.Fatalf("init --example review: exit %d\n%s", code, stderr)
	}
	ctx, cancel := context.WithCancel(t.Context())
	var stdout, stderr syncbuf.Buffer
	done := make(chan int, 1)
	go func() { done <- run(ctx, []string{"serve", "-c", cliConfigPath(dir)}, &stdout, &stderr) }()
	t.Cleanup(func() {
		cancel()
		if code := <-done; code != exitOK {
			t.Errorf("serve exited %d; stderr:\n%s", code, stderr.String())
		}
	})
	id := eventuallyOut(t, &stderr, func() (string, bool) {
		code, out, _ := cliRun(t, "start", "review", "--input", "topic=durable agents")
		return strings.TrimSpace(out), code == exitOK
	})
	eventuallyOut(t, &stderr, func() (string, bool) {
		_, out, _ := cliRun(t, "gates")
		return out, strings.Contains(out, id+" ")
	})
	wantMetrics(t, ctx, "http://"+addr+"/metrics", `agentrunner_gates_waiting\{[^}]*\} 1`)
	if code, out, errOut := cliRun(t, "approve", id, "decide", "-m", "ship it"); code != exitOK {
		t.Fatalf("approve: exit %d %s %s", code, out, errOut)
	}
	out := eventuallyOut(t, &stderr, func() (string, bool) {
		_, out, _ := cliRun(t, "run-status", id)
		return out, strings.Contains(out, "status:    completed")
	})
	matchLines(t, "run-status", out, `decide\s+1\s+succeeded\s+approve\s+\S+\s+\S+\s+approve by local: ship it`)
	wantMetrics(t, ctx, "http://"+addr+"/metrics", `agentrunner_gates_waiting\{[^}]*\} 0`,
		`agentrunner_gate_decisions_total\{action="approve",[^}]*run_pipeline="review"\} 1`,
		`agentrunner_runs_ended_total\{[^}]*run_pipeline="review",status="completed"\} 1`,
		`agentrunner_step_transitions_total\{outcome="succeeded",[^}]*run_pipeline="review"\} [1-9]`)
}

// wantMetrics fetches the metrics at url and checks that each pattern
// matches a whole line.
func wantMetrics(t *testing.T, ctx context.Context, url string, patterns ...string) {
	t.Helper()
	status, body, err := cliGet(ctx, url)
	if err != nil || status != http.StatusOK {
		t.Fatalf("GET /metrics: %d %v", status, err)
	}
	for _, p := range patterns {
		if !regexp.MustCompile(`(?m)^` + p + `$`).Match(body) {
			t.Errorf("GET /metrics has no line %s:\n%s", p, grepLines(string(body), "agentrunner_"))
		}
	}
}

// grepLines is the lines of s that start with prefix.
func grepLines(s, prefix string) string {
	var out []string
	for line := range strings.Lines(s) {
		if strings.HasPrefix(line, prefix) {
			out = append(out, line)
		}
	}
	return strings.Join(out, "")
}

// eventuallyOut polls f until it reports done, and returns its output.
func eventuallyOut(t *testing.T, serveErr *syncbuf.Buffer, f func() (string, bool)) string {
	t.Helper()
	end := time.Now().Add(30 * time.Second)
	for {
		out, ok := f()
		if ok {
			return out
		}
		if time.Now().After(end) {
			t.Fatalf("not within 30s; last output:\n%s\nserve's stderr:\n%s", out, serveErr.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestRunStatusShowsASignal: run-status shows the SIGNAL BLOCK recorded
// for a step run in its DETAIL column.
func TestRunStatusShowsASignal(t *testing.T) {
	f := newRunsFixture(t)
	out, _ := f.cli(t, exitOK, "start", "load")
	id := strings.TrimSpace(out)
	f.waitRun(t, id, agentrunner.RunCompleted)
	ev := &agentrunner.Event{Timestamp: time.Now(), Type: "signal.received", CycleID: id, Step: "a", Level: agentrunner.LevelInfo,
		Details: map[string]any{"agent": "comparator", "cycle": id, "step": "COMPARE", "confidence": 4, "risk": "medium", "next": "STOP", "visit": 1}}
	if err := f.store.Apply(t.Context(), &agentrunner.Change{Events: []*agentrunner.Event{ev}}); err != nil {
		t.Fatal(err)
	}
	out, _ = f.cli(t, exitOK, "run-status", id)
	matchLines(t, "run-status", out, `a\s+1\s+succeeded\s+-\s+1:succeeded\s+\S+\s+signal COMPARE: confidence 4, risk medium, next STOP`)
}
