//go:build unix

package process_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/agentrunner/agentrunner"
	"github.com/agentrunner/agentrunner/runtime/process"
	"github.com/google/go-cmp/cmp"
)

// returnBound is how long a test waits for Run before declaring it stuck.
// It bounds a hang; it does not measure speed.
const returnBound = 15 * time.Second

func TestRunGivesTheAgentItsPromptEnvironmentArgumentsAndFolder(t *testing.T) {
	t.Setenv("AGENTRUNNER_TEST_INHERITED", "from the runner")
	inv := newInvocation(t)
	inv.Prompt = "# Identity\nYou plan.\n\nÜnïcode and 'quotes' and $HOME\n"
	script := writeScript(t, `
cat > stdin.txt
printf '%s\n' "$@" > args.txt
{
  printf 'AGENTRUNNER_PROMPT_FILE=%s\n' "$AGENTRUNNER_PROMPT_FILE"
  printf 'AGENTRUNNER_OUTPUT=%s\n' "$AGENTRUNNER_OUTPUT"
  printf 'AGENTRUNNER_CYCLE_ID=%s\n' "$AGENTRUNNER_CYCLE_ID"
  printf 'AGENTRUNNER_CYCLE_DIR=%s\n' "$AGENTRUNNER_CYCLE_DIR"
  printf 'AGENTRUNNER_STEP=%s\n' "$AGENTRUNNER_STEP"
  printf 'AGENTRUNNER_AGENT=%s\n' "$AGENTRUNNER_AGENT"
  printf 'AGENTRUNNER_ATTEMPT=%s\n' "$AGENTRUNNER_ATTEMPT"
  printf 'AGENTRUNNER_ATTEMPT_DIR=%s\n' "$AGENTRUNNER_ATTEMPT_DIR"
  printf 'AGENTRUNNER_MAILBOX=%s\n' "$AGENTRUNNER_MAILBOX"
  printf 'AGENTRUNNER_MEMORY=%s\n' "$AGENTRUNNER_MEMORY"
  printf 'AGENTRUNNER_TEMPLATE=%s\n' "$AGENTRUNNER_TEMPLATE"
  printf 'AGENTRUNNER_SCHEMA=%s\n' "$AGENTRUNNER_SCHEMA"
  printf 'EXTRA=%s\n' "$EXTRA"
  printf 'AGENTRUNNER_TEST_INHERITED=%s\n' "$AGENTRUNNER_TEST_INHERITED"
  printf 'PWD=%s\n' "$PWD"
} > env.txt
printf '%s' "$AGENTRUNNER_INPUTS" > inputs.txt
echo "to stdout"
echo "to stderr" >&2
`)
	rt := mustNew(t, process.Config{
		Command: []string{"sh", script,
			"{prompt_file}", "--output={output}", "{dir}", "{cycle_dir}", "{mailbox}", "{memory}",
			"{template}", "{schema}", "{cycle_id}/{step}/{agent}/{attempt}", "{workspace}", "{{literal}", "${HOME}"},
		Env: process.Env{Set: map[string]string{"EXTRA": "configured value"}},
	})

	res, err := rt.Run(context.Background(), inv)
	if err != nil {
		t.Fatalf("Run: %v", err)
	}

	wantResult := &agentrunner.RunResult{
		ExitCode:   ptr(0),
		StdoutPath: filepath.Join(inv.Dir, "stdout.log"),
		StderrPath: filepath.Join(inv.Dir, "stderr.log"),
	}
	if diff := cmp.Diff(wantResult, res); diff != "" {
		t.Errorf("result (-want +got):\n%s", diff)
	}
	// The script wrote these with relative paths, so finding them in
	// inv.Dir also shows that it ran there.
	if got := readFile(t, inv.Dir, "stdin.txt"); got != inv.Prompt {
		t.Errorf("stdin = %q, want the prompt %q", got, inv.Prompt)
	}
	wantArgs := []string{
		inv.PromptPath, "--output=" + inv.OutputPath, inv.Dir, inv.CycleDir, inv.MailboxPath, inv.MemoryPath,
		inv.TemplatePath, inv.SchemaPath, "20250102_030405/plan/planner/2", inv.WorkspaceDir, "{literal}", "${HOME}",
	}
	if diff := cmp.Diff(wantArgs, lines(readFile(t, inv.Dir, "args.txt"))); diff != "" {
		t.Errorf("arguments (-want +got):\n%s", diff)
	}
	wantEnv := []string{
		"AGENTRUNNER_PROMPT_FILE=" + inv.PromptPath,
		"AGENTRUNNER_OUTPUT=" + inv.OutputPath,
		"AGENTRUNNER_CYCLE_ID=20250102_030405",
		"AGENTRUNNER_CYCLE_DIR=" + inv.CycleDir,
		"AGENTRUNNER_STEP=plan",
		"AGENTRUNNER_AGENT=planner",
		"AGENTRUNNER_ATTEMPT=2",
		"AGENTRUNNER_ATTEMPT_DIR=" + inv.Dir,
		"AGENTRUNNER_MAILBOX=" + inv.MailboxPath,
		"AGENTRUNNER_MEMORY=" + inv.MemoryPath,
		"AGENTRUNNER_TEMPLATE=" + inv.TemplatePath,
		"AGENTRUNNER_SCHEMA=" + inv.SchemaPath,
		"EXTRA=configured value",
		"AGENTRUNNER_TEST_INHERITED=", // not inherited: see TestRunGivesTheAgentOnlyTheAllowedEnvironment
		"PWD=" + inv.Dir,
	}
	if diff := cmp.Diff(wantEnv, lines(readFile(t, inv.Dir, "env.txt"))); diff != "" {
		t.Errorf("environment (-want +got):\n%s", diff)
	}
	wantInputs := inv.Inputs[0].Path + "\n" + inv.Inputs[1].Path
	if got := readFile(t, inv.Dir, "inputs.txt"); got != wantInputs {
		t.Errorf("AGENTRUNNER_INPUTS = %q, want %q", got, wantInputs)
	}
	if got := readFile(t, inv.Dir, "stdout.log"); got != "to stdout\n" {
		t.Errorf("stdout.log = %q", got)
	}
	if got := readFile(t, inv.Dir, "stderr.log"); got != "to stderr\n" {
		t.Errorf("stderr.log = %q", got)
	}
}

// runnerSecrets stand for what the runner's environment holds that no agent
// may see unless its configuration passes it: provider and tool keys,
// operator API keys, the JWT, webhook and callback secrets, the Execution
// Service token.
var runnerSecrets = map[string]string{
	"AGENTRUNNER_TEST_SECRET":     "test-secret-value",
	"OPENAI_API_KEY":              "sk-openai-secret",
	"ANTHROPIC_API_KEY":           "sk-ant-secret",
	"BRAVE_API_KEY":               "brave-secret",
	"EXECUTION_SERVICE_TOKEN":     "es-token-secret",
	"EXECUTION_CALLBACK_SECRET":   "callback-secret",
	"AGENTRUNNER_WEBHOOK_SECRET":  "webhook-secret",
	"AGENTRUNNER_KEY_ALICE":       "alice-api-key",
	"AGENTRUNNER_JWT_SECRET":      "jwt-secret",
	"GITHUB_TOKEN":                "ghp-secret",
	"AUTH_TOKEN":                  "x-cookie-secret",
	"AGENTRUNNER_SERVER_LISTEN":   "127.0.0.1:9999",
	"UNRELATED_SETTING_OF_RUNNER": "runner-only",
	"HTTPS_PROXY":                 "http://user:pass@proxy:3128",
}

func TestRunGivesTheAgentOnlyTheAllowedEnvironment(t *testing.T) {
	for k, v := range runnerSecrets {
		t.Setenv(k, v)
	}
	base := map[string]string{"PATH": os.Getenv("PATH"), "HOME": "/home/operator", "LANG": "C.UTF-8", "TZ": "UTC", "TMPDIR": os.TempDir(), "LC_ALL": "C"}
	for k, v := range base {
		t.Setenv(k, v)
	}
	os.Unsetenv("NOT_SET_ANYWHERE")
	inv := newInvocation(t) // agent "planner"
	rt := mustNew(t, process.Config{
		Command: []string{"env"},
		Env:     process.Env{Pass: []string{"GITHUB_TOKEN", "NOT_SET_ANYWHERE"}, Set: map[string]string{"MODE": "provider", "CLI_FLAGS": "--quiet"}},
		Agents: map[string]process.Env{
			"planner": {Pass: []string{"ANTHROPIC_API_KEY"}, Set: map[string]string{"MODE": "planner"}},
			"other":   {Pass: []string{"OPENAI_API_KEY"}},
		},
	})

	if _, err := rt.Run(context.Background(), inv); err != nil {
		t.Fatalf("Run: %v", err)
	}

	got := map[string]string{}
	for _, line := range lines(readFile(t, inv.Dir, "stdout.log")) {
		if k, v, ok := strings.Cut(line, "="); ok { // not the second line of AGENTRUNNER_INPUTS
			got[k] = v
		}
	}
	want := map[string]string{
		"GITHUB_TOKEN": "ghp-secret", "ANTHROPIC_API_KEY": "sk-ant-secret", // passed by the provider, by the agent
		"MODE": "planner", "CLI_FLAGS": "--quiet", // set; the agent's value wins
		"PWD": inv.Dir,
	}
	for k, v := range base {
		want[k] = v
	}
	for k, v := range got {
		if _, secret := runnerSecrets[k]; strings.HasPrefix(k, "AGENTRUNNER_") && !secret {
			want[k] = v // the invocation's variables, checked by TestRunGivesTheAgentItsPromptEnvironmentArgumentsAndFolder
		}
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("the agent's environment (-want +got):\n%s", diff)
	}
	for k := range runnerSecrets {
		if _, leaked := got[k]; leaked && k != "GITHUB_TOKEN" && k != "ANTHROPIC_API_KEY" {
			t.Errorf("the agent got the runner's %s", k)
		}
	}
}

// TestRunReadsThePassedVariablesAtEachStart: with Config.Lookup (the
// runner's secrets), a passed variable comes from it, not from the
// environment, and is read again for each agent: a secret rotated between
// two runs reaches the second.
func TestRunReadsThePassedVariablesAtEachStart(t *testing.T) {
	t.Setenv("GITHUB_TOKEN", "ghp-environment")
	var mu sync.Mutex
	secrets := map[string]string{"GITHUB_TOKEN": "ghp-from-the-file", "BRAVE_API_KEY": "brave-1"}
	lookup := func(name string) (string, bool) {
		mu.Lock()
		defer mu.Unlock()
		v, ok := secrets[name]
		return v, ok
	}
	rt := mustNew(t, process.Config{Command: []string{"env"}, Env: process.Env{Pass: []string{"GITHUB_TOKEN"}},
		Agents: map[string]process.Env{"planner": {Pass: []string{"BRAVE_API_KEY"}}}, Lookup: lookup})
	run := func() map[string]string {
		t.Helper()
		inv := newInvocation(t) // agent "planner"
		if _, err := rt.Run(context.Background(), inv); err != nil {
			t.Fatalf("Run: %v", err)
		}
		got := map[string]string{}
		for _, line := range lines(readFile(t, inv.Dir, "stdout.log")) {
			if k, v, ok := strings.Cut(line, "="); ok && (k == "GITHUB_TOKEN" || k == "BRAVE_API_KEY") {
				got[k] = v
			}
		}
		return got
	}
	if diff := cmp.Diff(map[string]string{"GITHUB_TOKEN": "ghp-from-the-file", "BRAVE_API_KEY": "brave-1"}, run()); diff != "" {
		t.Errorf("first run (-want +got):\n%s", diff)
	}
	mu.Lock()
	secrets["BRAVE_API_KEY"] = "brave-2"
	mu.Unlock()
	if got := run()["BRAVE_API_KEY"]; got != "brave-2" {
		t.Errorf("after the rotation the agent got BRAVE_API_KEY=%q, want brave-2", got)
	}
}

// Programs that trust PWD over getcwd must see the attempt folder. A shell
// would correct a wrong PWD itself, so env shows what the runtime passed.
func TestRunSetsPWDToTheAttemptFolder(t *testing.T) {
	t.Parallel()
	inv := newInvocation(t)
	rt := mustNew(t, process.Config{Command: []string{"env"}})

	if _, err := rt.Run(context.Background(), inv); err != nil {
		t.Fatalf("Run: %v", err)
	}

	var pwds []string
	for _, line := range lines(readFile(t, inv.Dir, "stdout.log")) {
		if strings.HasPrefix(line, "PWD=") {
			pwds = append(pwds, line)
		}
	}
	if diff := cmp.Diff([]string{"PWD=" + inv.Dir}, pwds); diff != "" {
		t.Errorf("PWD in the environment (-want +got):\n%s", diff)
	}
}

func TestRunReportsAFailedAgentAsACrash(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		script   string
		wantCode int
		// wantMessage must match the whole error message.
		wantMessage *regexp.Regexp
	}{
		{
			name:        "non-zero exit quotes the end of stderr",
			script:      `i=0; while [ $i -lt 300 ]; do echo "noise $i" >&2; i=$((i+1)); done; echo "fatal: boom" >&2; exit 3`,
			wantCode:    3,
			wantMessage: regexp.MustCompile(`^crash: agent exited with status 3; end of stderr:\n(noise \d+\n)+fatal: boom$`),
		},
		{
			name:        "non-zero exit without stderr",
			script:      `exit 42`,
			wantCode:    42,
			wantMessage: regexp.MustCompile(`^crash: agent exited with status 42 \(stderr is empty\)$`),
		},
		{
			name:        "killed by a signal names it",
			script:      `echo "about to die" >&2; kill -KILL $$`,
			wantCode:    -1,
			wantMessage: regexp.MustCompile(`^crash: agent was killed by signal 9 \(killed\); end of stderr:\nabout to die$`),
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			inv := newInvocation(t)
			rt := mustNew(t, process.Config{Command: []string{"sh", writeScript(t, tt.script)}})

			res, err := rt.Run(context.Background(), inv)

			if got := agentrunner.ClassOf(err); got != agentrunner.ClassCrash {
				t.Fatalf("class = %q (err %v), want crash", got, err)
			}
			if !tt.wantMessage.MatchString(err.Error()) {
				t.Errorf("error = %q, want it to match %s", err, tt.wantMessage)
			}
			if len(err.Error()) > 1200 {
				t.Errorf("error is %d bytes long, want the stderr quote bounded", len(err.Error()))
			}
			wantResult := &agentrunner.RunResult{
				ExitCode:   ptr(tt.wantCode),
				StdoutPath: filepath.Join(inv.Dir, "stdout.log"),
				StderrPath: filepath.Join(inv.Dir, "stderr.log"),
			}
			if diff := cmp.Diff(wantResult, res); diff != "" {
				t.Errorf("result (-want +got):\n%s", diff)
			}
		})
	}
}

// FR-092: an agent that ignores SIGTERM is killed at its timeout together
// with the children it started.
func TestRunKillsAnAgentIgnoringSIGTERMWithItsChildrenAtTheTimeout(t *testing.T) {
	t.Parallel()
	inv := newInvocation(t)
	inv.Timeout = 300 * time.Millisecond
	rt := mustNew(t, process.Config{
		Command: []string{"sh", writeScript(t, `
trap "" TERM
echo $$ > pids
sleep 30 &
echo $! >> pids
sleep 30 &
echo $! >> pids
touch ready
wait
`)},
		KillGrace: 200 * time.Millisecond,
	})
	ctx := newManualDeadline(t)

	run := runInBackground(ctx, rt, inv)
	waitForFile(t, filepath.Join(inv.Dir, "ready"))
	ctx.expire()
	out := run.wait(t)

	if got := agentrunner.ClassOf(out.err); got != agentrunner.ClassTimeout {
		t.Fatalf("class = %q (err %v), want timeout", got, out.err)
	}
	if want := "timeout: agent timed out after 300ms (killed: it did not exit on SIGTERM)"; out.err.Error() != want {
		t.Errorf("error = %q, want %q", out.err, want)
	}
	if out.res == nil || out.res.ExitCode == nil || *out.res.ExitCode != -1 {
		t.Errorf("result = %+v, want exit code -1 (killed)", out.res)
	}
	pids := readPids(t, inv.Dir, "pids")
	if len(pids) != 3 {
		t.Fatalf("recorded pids %v, want the agent and two children", pids)
	}
	for _, pid := range pids {
		waitGone(t, pid)
	}
}

func TestRunLetsACooperativeAgentExitOnSIGTERM(t *testing.T) {
	t.Parallel()
	inv := newInvocation(t)
	rt := mustNew(t, process.Config{
		Command: []string{"sh", writeScript(t, `
trap 'echo cleaned up > marker; exit 7' TERM
sleep 30 &
touch ready
wait
`)},
		// Long enough that a SIGKILL would be the runtime's mistake.
		KillGrace: 10 * time.Second,
	})
	ctx := newManualDeadline(t)

	run := runInBackground(ctx, rt, inv)
	waitForFile(t, filepath.Join(inv.Dir, "ready"))
	ctx.expire()
	out := run.wait(t)

	if got := agentrunner.ClassOf(out.err); got != agentrunner.ClassTimeout {
		t.Fatalf("class = %q (err %v), want timeout", got, out.err)
	}
	if strings.Contains(out.err.Error(), "killed") {
		t.Errorf("error = %q, want no mention of a kill", out.err)
	}
	// Exit status 7 comes from the trap: a SIGKILLed shell has none.
	if out.res == nil || out.res.ExitCode == nil || *out.res.ExitCode != 7 {
		t.Errorf("result = %+v, want exit code 7 from the SIGTERM trap", out.res)
	}
	if got := readFile(t, inv.Dir, "marker"); got != "cleaned up\n" {
		t.Errorf("marker = %q, want the trap's output", got)
	}
}

func TestRunTimesOutOnARealDeadline(t *testing.T) {
	t.Parallel()
	inv := newInvocation(t)
	rt := mustNew(t, process.Config{Command: []string{"sh", "-c", "exec sleep 30"}, KillGrace: time.Second})
	// No inv.Timeout: the message falls back to how long the agent ran.
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()

	out := runInBackground(ctx, rt, inv).wait(t)

	if got := agentrunner.ClassOf(out.err); got != agentrunner.ClassTimeout {
		t.Fatalf("class = %q (err %v), want timeout", got, out.err)
	}
	if !regexp.MustCompile(`^timeout: agent timed out after \d+(\.\d+)?m?s$`).MatchString(out.err.Error()) {
		t.Errorf("error = %q, want a duration", out.err)
	}
	if out.res == nil || out.res.ExitCode == nil {
		t.Errorf("result = %+v, want the exit code of the stopped agent", out.res)
	}
}

func TestRunReportsCancellationAsAnInterruption(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name        string
		cause       error
		wantMessage string
	}{
		{name: "plain cancel", wantMessage: "interrupted: agent interrupted: context canceled"},
		{name: "cancel with a cause", cause: errors.New("runner shutting down"), wantMessage: "interrupted: agent interrupted: runner shutting down"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			inv := newInvocation(t)
			rt := mustNew(t, process.Config{Command: []string{"sh", writeScript(t, "touch ready\nexec sleep 30\n")}, KillGrace: time.Second})
			ctx, cancel := context.WithCancelCause(context.Background())
			defer cancel(nil)

			run := runInBackground(ctx, rt, inv)
			waitForFile(t, filepath.Join(inv.Dir, "ready"))
			cancel(tt.cause)
			out := run.wait(t)

			if got := agentrunner.ClassOf(out.err); got != agentrunner.ClassInterrupted {
				t.Fatalf("class = %q (err %v), want interrupted", got, out.err)
			}
			if out.err.Error() != tt.wantMessage {
				t.Errorf("error = %q, want %q", out.err, tt.wantMessage)
			}
			if out.res == nil || out.res.ExitCode == nil {
				t.Errorf("result = %+v, want the exit code of the stopped agent", out.res)
			}
		})
	}
}

func TestRunDoesNotStartAnAgentWhenTheContextHasEnded(t *testing.T) {
	t.Parallel()
	expired, cancelExpired := context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
	defer cancelExpired()
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	tests := []struct {
		name      string
		ctx       context.Context
		wantClass agentrunner.ErrorClass
	}{
		{name: "deadline passed", ctx: expired, wantClass: agentrunner.ClassTimeout},
		{name: "cancelled", ctx: cancelled, wantClass: agentrunner.ClassInterrupted},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			inv := newInvocation(t)
			rt := mustNew(t, process.Config{Command: []string{"sh", "-c", "touch ran"}})

			res, err := rt.Run(tt.ctx, inv)

			if got := agentrunner.ClassOf(err); got != tt.wantClass {
				t.Errorf("class = %q (err %v), want %q", got, err, tt.wantClass)
			}
			if res != nil {
				t.Errorf("result = %+v, want nil: no process ran", res)
			}
			if _, err := os.Stat(filepath.Join(inv.Dir, "ran")); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("the agent ran (stat: %v)", err)
			}
		})
	}
}

func TestRunKillsChildrenLeftBehindByAnAgentThatExited(t *testing.T) {
	t.Parallel()
	inv := newInvocation(t)
	rt := mustNew(t, process.Config{Command: []string{"sh", writeScript(t, "sleep 30 &\necho $! > child.pid\n")}})

	out := runInBackground(context.Background(), rt, inv).wait(t)

	if out.err != nil {
		t.Fatalf("Run: %v", out.err)
	}
	pids := readPids(t, inv.Dir, "child.pid")
	if len(pids) != 1 {
		t.Fatalf("recorded pids %v, want one", pids)
	}
	waitGone(t, pids[0])
}

// A child holding stdin open without reading it must not keep Run waiting
// for the prompt to be written once the agent itself has exited.
func TestRunReturnsWhenAChildHoldsAnUnreadPrompt(t *testing.T) {
	t.Parallel()
	inv := newInvocation(t)
	inv.Prompt = strings.Repeat("a long prompt that fills the pipe\n", 1<<15) // about 1 MiB
	// fd 3 keeps stdin for the background child, which sh would otherwise
	// give /dev/null.
	rt := mustNew(t, process.Config{Command: []string{"sh", writeScript(t, "exec 3<&0\nsleep 30 &\necho $! > child.pid\n")}})

	out := runInBackground(context.Background(), rt, inv).wait(t)

	if out.err != nil {
		t.Fatalf("Run: %v", out.err)
	}
	waitGone(t, readPids(t, inv.Dir, "child.pid")[0])
}

func TestRunRejectsACommandThatCannotBeRun(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	notExecutable := filepath.Join(dir, "agent.sh")
	if err := os.WriteFile(notExecutable, []byte("#!/bin/sh\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		program string
	}{
		{name: "not on PATH", program: "agentrunner-test-no-such-command"},
		{name: "missing file", program: filepath.Join(dir, "absent")},
		{name: "not executable", program: notExecutable},
		{name: "a directory", program: dir},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			rt := mustNew(t, process.Config{Command: []string{tt.program, "--flag"}})

			res, err := rt.Run(context.Background(), newInvocation(t))

			if got := agentrunner.ClassOf(err); got != agentrunner.ClassConfig {
				t.Fatalf("class = %q (err %v), want config", got, err)
			}
			if !strings.Contains(err.Error(), strconv.Quote(tt.program)) {
				t.Errorf("error = %q, want it to name %q", err, tt.program)
			}
			if res != nil {
				t.Errorf("result = %+v, want nil: no process started", res)
			}
		})
	}
}

func TestRunRejectsABadInvocation(t *testing.T) {
	t.Parallel()
	rt := mustNew(t, process.Config{Command: []string{"sh", "-c", "true"}})
	tests := []struct {
		name string
		inv  *agentrunner.Invocation
	}{
		{name: "nil", inv: nil},
		{name: "no folder", inv: &agentrunner.Invocation{}},
		{name: "relative folder", inv: &agentrunner.Invocation{Dir: "attempt"}},
		{name: "missing folder", inv: &agentrunner.Invocation{Dir: filepath.Join(t.TempDir(), "absent")}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, err := rt.Run(context.Background(), tt.inv)
			if got := agentrunner.ClassOf(err); got != agentrunner.ClassInternal {
				t.Errorf("class = %q (err %v), want internal", got, err)
			}
			var stepErr *agentrunner.StepError
			if !errors.As(err, &stepErr) {
				t.Errorf("error %v is not a StepError", err)
			}
			if res != nil {
				t.Errorf("result = %+v, want nil", res)
			}
		})
	}
}

func TestNewValidatesTheConfig(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		cfg  process.Config
		// wantErr lists substrings of the error; none means New succeeds.
		wantErr []string
	}{
		{name: "minimal", cfg: process.Config{Command: []string{"claude"}}},
		{name: "every placeholder, escapes and shell expansions", cfg: process.Config{
			Command: []string{"claude", "-p", "{prompt_file}", "{output}", "{dir}", "{cycle_dir}", "{mailbox}", "{memory}",
				"{template}", "{schema}", "{cycle_id}", "{step}", "{agent}", "{attempt}", "{{not_a_placeholder}", "${HOME}", `{"json": true}`},
			Env:       process.Env{Pass: []string{"ANTHROPIC_API_KEY"}, Set: map[string]string{"ANTHROPIC_MODEL": "x", "EMPTY": ""}},
			Agents:    map[string]process.Env{"coder": {Pass: []string{"GITHUB_TOKEN"}, Set: map[string]string{"ANTHROPIC_MODEL": "y"}}},
			KillGrace: time.Second,
		}},
		{name: "no command", cfg: process.Config{}, wantErr: []string{"command is empty"}},
		{name: "empty program", cfg: process.Config{Command: []string{""}}, wantErr: []string{"command[0] (the program) is empty"}},
		{name: "unknown placeholders are all named", cfg: process.Config{Command: []string{"claude", "--out={ouptut}", "{step}", "{mcp_cfg}"}},
			wantErr: []string{`command[1] "--out={ouptut}": unknown placeholder {ouptut}`, `command[3] "{mcp_cfg}": unknown placeholder {mcp_cfg}`, "known: {prompt_file}"}},
		{name: "NUL in argument", cfg: process.Config{Command: []string{"claude", "a\x00b"}}, wantErr: []string{"command[1] contains a NUL byte"}},
		{name: "negative grace", cfg: process.Config{Command: []string{"claude"}, KillGrace: -time.Second}, wantErr: []string{"kill grace -1s is negative"}},
		{name: "bad env names", cfg: process.Config{Command: []string{"claude"}, Env: process.Env{Pass: []string{"A-B"}, Set: map[string]string{"": "x", "A=B": "x"}}},
			wantErr: []string{`env: pass: "A-B" is not an environment variable name`, `env: set: "" is not`, `env: set: "A=B" is not`}},
		{name: "reserved env names", cfg: process.Config{Command: []string{"claude"}, Env: process.Env{Pass: []string{"AGENTRUNNER_OUTPUT"}, Set: map[string]string{"PWD": "/"}}},
			wantErr: []string{"env: variable AGENTRUNNER_OUTPUT is set by the runner", "env: variable PWD is set by the runner"}},
		{name: "NUL in env value", cfg: process.Config{Command: []string{"claude"}, Env: process.Env{Set: map[string]string{"KEY": "a\x00"}}}, wantErr: []string{"env: set: the value of KEY contains a NUL byte"}},
		{name: "agent env", cfg: process.Config{Command: []string{"claude"}, Agents: map[string]process.Env{"coder": {Pass: []string{"X"}, Set: map[string]string{"X": "1", "AGENTRUNNER_STEP": "s"}}}},
			wantErr: []string{"agent coder: env: X is both passed and set", "agent coder: env: variable AGENTRUNNER_STEP is set by the runner"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			rt, err := process.New(tt.cfg)
			if len(tt.wantErr) == 0 {
				if err != nil || rt == nil {
					t.Fatalf("New = %v, %v; want a runtime", rt, err)
				}
				return
			}
			if err == nil {
				t.Fatal("New succeeded, want an error")
			}
			if code := agentrunner.ErrorCode(err); code != agentrunner.EINVALID {
				t.Errorf("code = %q, want %q", code, agentrunner.EINVALID)
			}
			for _, want := range tt.wantErr {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error = %q, want it to contain %q", err, want)
				}
			}
		})
	}
}

// newInvocation returns an invocation whose attempt folder exists, with
// every path set, as the engine would give it.
func newInvocation(t *testing.T) *agentrunner.Invocation {
	t.Helper()
	root := t.TempDir()
	dir := filepath.Join(root, "cycles", "20250102_030405", ".attempts", "plan-2")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return &agentrunner.Invocation{
		CycleID:      "20250102_030405",
		Step:         "plan",
		Agent:        "planner",
		Attempt:      2,
		Prompt:       "plan the next cycle\n",
		PromptPath:   filepath.Join(dir, "prompt.md"),
		Dir:          dir,
		OutputPath:   filepath.Join(dir, "plan.md"),
		CycleDir:     filepath.Join(root, "cycles", "20250102_030405"),
		MailboxPath:  filepath.Join(root, "mailboxes", "mailbox.planner"),
		MemoryPath:   filepath.Join(root, "plan", "memory.md"),
		Inputs:       []agentrunner.Input{{Name: "evaluation", Path: filepath.Join(root, "cycles", "prev", "evaluation.md")}, {Name: "notes", Path: filepath.Join(root, "notes.md")}},
		TemplatePath: filepath.Join(root, "templates", "plan.md"),
		SchemaPath:   filepath.Join(root, "schemas", "plan.json"),
		WorkspaceDir: root,
	}
}

// writeScript writes a shell script outside the attempt folder and returns
// its path, to be run as "sh <path>".
func writeScript(t *testing.T, body string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "agent.sh")
	if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func mustNew(t *testing.T, cfg process.Config) *process.Runtime {
	t.Helper()
	rt, err := process.New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return rt
}

type runOutcome struct {
	res *agentrunner.RunResult
	err error
}

type backgroundRun chan runOutcome

// runInBackground runs the agent in a goroutine so the test can act while
// it runs.
func runInBackground(ctx context.Context, rt *process.Runtime, inv *agentrunner.Invocation) backgroundRun {
	run := make(backgroundRun, 1)
	go func() {
		res, err := rt.Run(ctx, inv)
		run <- runOutcome{res, err}
	}()
	return run
}

// wait returns Run's outcome, failing the test if Run seems stuck.
func (run backgroundRun) wait(t *testing.T) runOutcome {
	t.Helper()
	select {
	case out := <-run:
		return out
	case <-time.After(returnBound):
		t.Fatalf("Run did not return within %v", returnBound)
		return runOutcome{}
	}
}

// manualDeadline is a context whose deadline the test makes pass, once the
// agent has set itself up: a real deadline could pass earlier on a slow
// machine and test something else.
type manualDeadline struct {
	context.Context
	done chan struct{}
}

func newManualDeadline(t *testing.T) *manualDeadline {
	ctx := &manualDeadline{Context: context.Background(), done: make(chan struct{})}
	// A failing test must not leave Run and its agent running.
	t.Cleanup(ctx.expire)
	return ctx
}

func (c *manualDeadline) expire() {
	select {
	case <-c.done:
	default:
		close(c.done)
	}
}

func (c *manualDeadline) Done() <-chan struct{} { return c.done }

func (c *manualDeadline) Err() error {
	select {
	case <-c.done:
		return context.DeadlineExceeded
	default:
		return nil
	}
}

// waitForFile polls until the agent created path.
func waitForFile(t *testing.T, path string) {
	t.Helper()
	poll(t, "file "+path+" to appear", func() bool {
		_, err := os.Stat(path)
		return err == nil
	})
}

// waitGone polls until the process is gone. A zombie counts as gone: it
// runs nothing, and only its new parent can reap it.
func waitGone(t *testing.T, pid int) {
	t.Helper()
	poll(t, fmt.Sprintf("process %d to be gone", pid), func() bool {
		return errors.Is(syscall.Kill(pid, 0), syscall.ESRCH) || isZombie(pid)
	})
}

func isZombie(pid int) bool {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	// The state follows the command name, which is in parentheses and may
	// itself contain them.
	fields := strings.Fields(string(stat[bytes.LastIndexByte(stat, ')')+1:]))
	return len(fields) > 0 && fields[0] == "Z"
}

func poll(t *testing.T, what string, done func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !done() {
		if time.Now().After(deadline) {
			t.Fatalf("gave up waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func readFile(t *testing.T, dir, name string) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(dir, name))
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

func readPids(t *testing.T, dir, name string) []int {
	t.Helper()
	var pids []int
	for _, field := range strings.Fields(readFile(t, dir, name)) {
		pid, err := strconv.Atoi(field)
		if err != nil || pid <= 0 {
			t.Fatalf("%s holds %q, not a pid", name, field)
		}
		pids = append(pids, pid)
	}
	return pids
}

func lines(s string) []string { return strings.Split(strings.TrimSuffix(s, "\n"), "\n") }

func ptr[T any](v T) *T { return &v }

// TestAFailedAgentsStderrKeepsItsSecrets: the end of stderr an error
// quotes, stored with the attempt and shown by the API, has the values
// the agent was passed redacted, whichever of the provider's or the
// agent's env passed them; the log file in the attempt folder keeps them.
func TestAFailedAgentsStderrKeepsItsSecrets(t *testing.T) {
	secrets := map[string]string{"GITHUB_TOKEN": "ghp-0123456789abcdef", "BRAVE_API_KEY": "brave-key-fedcba9876"}
	lookup := func(name string) (string, bool) {
		if v, ok := secrets[name]; ok {
			return v, ok
		}
		return os.LookupEnv(name)
	}
	rt := mustNew(t, process.Config{
		Command: []string{"sh", "-c", `echo "auth failed for $GITHUB_TOKEN and $BRAVE_API_KEY in $HOME" >&2; exit 3`},
		Env:     process.Env{Pass: []string{"GITHUB_TOKEN", "HOME"}},
		Agents:  map[string]process.Env{"planner": {Pass: []string{"BRAVE_API_KEY"}}}, Lookup: lookup})
	inv := newInvocation(t) // agent "planner"
	_, err := rt.Run(context.Background(), inv)
	if err == nil {
		t.Fatal("Run: no error for an agent that exited with 3")
	}
	msg := err.Error()
	if strings.Contains(msg, "ghp-0123456789abcdef") || strings.Contains(msg, "brave-key-fedcba9876") ||
		!strings.Contains(msg, "auth failed for [redacted] and [redacted] in "+os.Getenv("HOME")) {
		t.Errorf("the error = %q, want the passed secrets redacted and HOME shown", msg)
	}
	if log := readFile(t, inv.Dir, "stderr.log"); !strings.Contains(log, "ghp-0123456789abcdef") {
		t.Errorf("stderr.log = %q, want the agent's own output", log)
	}
}
