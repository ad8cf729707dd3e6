// Package process is the agent runtime that runs an agent as a child
// process: typically a coding-agent CLI ("claude -p …") that reads its
// prompt, reads the files it is pointed to and writes its artifact itself.
//
// The agent runs in a process group of its own, in the attempt's folder,
// with its stdout and stderr in files there. When the attempt times out or is
// cancelled, the whole group gets SIGTERM, then SIGKILL after a grace period;
// when the agent exits, whatever it left running in its group is killed, so
// nothing an attempt started outlives it (FR-092). A child that leaves the
// group (setsid, a daemonizing tool) escapes this; containing those needs a
// cgroup, which is outside this package.
package process

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
	"unicode/utf8"

	"github.com/agentrunner/agentrunner"
	"github.com/agentrunner/agentrunner/internal/childenv"
)

// DefaultKillGrace is how long an agent may take to exit after SIGTERM when
// Config.KillGrace is zero: enough for a CLI to flush its logs.
const DefaultKillGrace = 5 * time.Second

// Names of the log files Run writes in the attempt's folder.
const (
	StdoutFile = "stdout.log"
	StderrFile = "stderr.log"
)

// stderrTailBytes bounds how much of stderr an error message quotes: enough
// for the operator to see why the agent failed, little enough for an event.
const stderrTailBytes = 1024

// invocationEnvNames are the variables Run sets for every agent. Config.Env
// may not name them, because Run would silently override them.
var invocationEnvNames = []string{
	"AGENTRUNNER_PROMPT_FILE", "AGENTRUNNER_OUTPUT", "AGENTRUNNER_CYCLE_ID",
	"AGENTRUNNER_CYCLE_DIR", "AGENTRUNNER_STEP", "AGENTRUNNER_AGENT",
	"AGENTRUNNER_ATTEMPT", "AGENTRUNNER_ATTEMPT_DIR", "AGENTRUNNER_MAILBOX",
	"AGENTRUNNER_MEMORY", "AGENTRUNNER_TEMPLATE", "AGENTRUNNER_SCHEMA",
	"AGENTRUNNER_INPUTS", "AGENTRUNNER_MCP_CONFIG", "AGENTRUNNER_WORKDIR", "PWD",
}

// InvocationEnvNames are the variables Run sets for every agent, which
// are not configuration: validate does not take them for overrides.
func InvocationEnvNames() []string { return slices.Clone(invocationEnvNames) }

// Env is what an agent gets from the runner's environment besides the base
// variables: see childenv.Spec.
type Env = childenv.Spec

// Config is how to start the agent process.
type Config struct {
	// Command is the argv, not a shell string. Its arguments may contain
	// placeholders replaced per invocation: {prompt_file} {output} {dir}
	// {cycle_dir} {mailbox} {memory} {template} {schema} {cycle_id} {step}
	// {agent} {attempt} {mcp_config} {workspace} {workdir}. Any other {name} is rejected as a likely typo; write
	// "{{" for a literal "{". "${" is left alone for the shell, so
	// ["sh", "-c", "agent < ${AGENTRUNNER_PROMPT_FILE}"] works as written.
	// A Command[0] without a slash is looked up in the runner's PATH.
	Command []string
	// Env is what every agent of this runtime gets besides the base
	// variables (see Run): variables of the runner's secrets passed by
	// name (see Lookup), and variables set to a value.
	Env Env
	// Agents adds, per agent name, to Env: its Pass names join Env's, its
	// Set values replace Env's of the same name.
	Agents map[string]Env
	// KillGrace is how long a process gets between SIGTERM and SIGKILL when
	// its attempt times out or is cancelled. Zero means DefaultKillGrace.
	KillGrace time.Duration
	// Lookup, if set, reads the passed variables when each agent starts:
	// the runner's secrets (its environment, NAME_FILE files, the secrets
	// file), so a secret rotated and reloaded reaches the next agent.
	// nil: the runner's environment.
	Lookup func(string) (string, bool)
}

// Runtime runs agents as child processes. It is immutable, so one Runtime
// may run many attempts at once.
type Runtime struct {
	command   []argTemplate
	env       Env
	agents    map[string]Env
	killGrace time.Duration
	lookup    func(string) (string, bool)
}

var _ agentrunner.Runtime = (*Runtime)(nil)

// New validates cfg and returns a Runtime for it, so configuration mistakes
// surface when the runner starts rather than at the first attempt. The
// error, of code EINVALID, lists every problem found.
func New(cfg Config) (*Runtime, error) {
	if unsupported != nil {
		return nil, &agentrunner.Error{Code: agentrunner.EINVALID, Message: "process runtime", Err: unsupported}
	}
	var problems []string
	if len(cfg.Command) == 0 {
		problems = append(problems, "command is empty")
	} else if cfg.Command[0] == "" {
		problems = append(problems, "command[0] (the program) is empty")
	}
	r := &Runtime{killGrace: cfg.KillGrace, lookup: cfg.Lookup}
	for i, arg := range cfg.Command {
		if strings.IndexByte(arg, 0) >= 0 {
			problems = append(problems, fmt.Sprintf("command[%d] contains a NUL byte", i))
			continue
		}
		tmpl, unknown := parseArg(arg)
		for _, name := range unknown {
			problems = append(problems, fmt.Sprintf("command[%d] %q: unknown placeholder {%s} (known: %s)", i, arg, name, knownPlaceholders()))
		}
		r.command = append(r.command, tmpl)
	}
	r.env, r.agents = cloneEnv(cfg.Env), map[string]Env{}
	problems = append(problems, envProblems("env", r.env)...)
	for _, name := range slices.Sorted(maps.Keys(cfg.Agents)) {
		r.agents[name] = cloneEnv(cfg.Agents[name])
		problems = append(problems, envProblems("agent "+name+": env", r.agents[name])...)
	}
	switch {
	case cfg.KillGrace < 0:
		problems = append(problems, fmt.Sprintf("kill grace %v is negative", cfg.KillGrace))
	case cfg.KillGrace == 0:
		r.killGrace = DefaultKillGrace
	}
	if len(problems) > 0 {
		return nil, agentrunner.Errorf(agentrunner.EINVALID, "process runtime: %s", strings.Join(problems, "; "))
	}
	return r, nil
}

// Run starts the agent for inv, waits until it exits or ctx ends, and
// reports what it saw. The prompt goes to the agent's stdin; stdout and
// stderr go to files in inv.Dir. Errors are built with agentrunner.Fail;
// whenever the process started, the RunResult (exit code, log paths) comes
// with the error too. Whether the agent wrote its artifact is for the caller
// to check.
//
// The agent's environment is built, not inherited: the base variables of
// package childenv (PATH, HOME, LANG, TZ, TMPDIR, LC_*, and on Windows the
// few a process needs to start), what Config.Env and Config.Agents pass
// (read through Config.Lookup now) and set, and the AGENTRUNNER_* variables
// of the invocation. Nothing else of the runner's environment reaches the
// agent, so none of the runner's secrets does unless the configuration
// passes it by name.
func (r *Runtime) Run(ctx context.Context, inv *agentrunner.Invocation) (*agentrunner.RunResult, error) {
	if err := checkInvocation(inv); err != nil {
		return nil, err
	}
	if ctx.Err() != nil {
		return nil, stoppedError(ctx, inv, 0, false)
	}

	argv := make([]string, len(r.command))
	for i, tmpl := range r.command {
		argv[i] = tmpl.expand(inv)
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Dir = WorkDir(inv)
	// Never os.Environ() as a whole: it holds the runner's secrets.
	cmd.Env = childenv.BuildWith(r.lookup, os.Environ(), invocationEnv(inv), r.env, r.agents[inv.Agent])
	// What the agent was passed is never quoted back from its stderr.
	secrets := childenv.PassedValues(cmd.Env, r.env, r.agents[inv.Agent])
	cmd.SysProcAttr = sysProcAttr()

	result := &agentrunner.RunResult{
		StdoutPath: filepath.Join(inv.Dir, StdoutFile),
		StderrPath: filepath.Join(inv.Dir, StderrFile),
	}
	// Files rather than pipes: a grandchild that keeps them open cannot
	// block Run, and the logs survive a crash of the runner.
	stdout, err := createLog(result.StdoutPath)
	if err != nil {
		return nil, err
	}
	defer stdout.Close()
	stderr, err := createLog(result.StderrPath)
	if err != nil {
		return nil, err
	}
	defer stderr.Close()
	// A pipe of our own rather than an io.Reader: exec.Cmd would copy a
	// Reader in a goroutine that Wait waits for, so a grandchild holding
	// stdin without reading it could keep Run waiting after the agent exited.
	stdinR, stdinW, err := os.Pipe()
	if err != nil {
		return nil, agentrunner.Fail(agentrunner.ClassUnavailable, "create stdin pipe for the agent: %w", err)
	}
	defer stdinW.Close()
	cmd.Stdin, cmd.Stdout, cmd.Stderr = stdinR, stdout, stderr

	startErr := cmd.Start()
	stdinR.Close() // the child has its own copy
	if startErr != nil {
		return nil, startError(argv[0], startErr)
	}
	started := time.Now()
	pid := cmd.Process.Pid

	promptWritten := make(chan struct{})
	go func() {
		defer close(promptWritten)
		// An agent may ignore stdin and exit; the broken pipe is expected.
		_, _ = io.WriteString(stdinW, inv.Prompt)
		_ = stdinW.Close()
	}()
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()

	var (
		waitErr         error
		stopped, killed bool
	)
	select {
	case waitErr = <-exited:
	case <-ctx.Done():
		stopped = true
		waitErr, killed = r.stop(pid, cmd.Process, exited)
	}
	// Whatever the agent left running in its group must not outlive the
	// attempt. A failure here leaves nothing we could still do.
	_ = signalGroup(pid, sigkill)
	// Unblocks the prompt writer if a process outside the group holds stdin.
	_ = stdinW.Close()
	<-promptWritten

	if cmd.ProcessState != nil {
		code := cmd.ProcessState.ExitCode()
		result.ExitCode = &code
	}
	if stopped {
		return result, stoppedError(ctx, inv, time.Since(started), killed)
	}
	var exitErr *exec.ExitError
	if waitErr != nil && !errors.As(waitErr, &exitErr) {
		return result, agentrunner.Fail(agentrunner.ClassInternal, "wait for agent process %d: %v", pid, waitErr)
	}
	if sig, ok := killedBy(cmd.ProcessState); ok {
		return result, agentrunner.Fail(agentrunner.ClassCrash, "agent was killed by signal %d (%v)%s", int(sig), sig, stderrSuffix(result.StderrPath, secrets))
	}
	if code := cmd.ProcessState.ExitCode(); code != 0 {
		return result, agentrunner.Fail(agentrunner.ClassCrash, "agent exited with status %d%s", code, stderrSuffix(result.StderrPath, secrets))
	}
	return result, nil
}

// stop ends an agent whose attempt is over: SIGTERM to its group so it can
// clean up, SIGKILL once the grace period is over. It returns Wait's error
// and whether SIGKILL was needed.
func (r *Runtime) stop(pid int, proc *os.Process, exited <-chan error) (error, bool) {
	if err := signalGroup(pid, sigterm); err != nil {
		// The group is out of reach; the agent itself must stop at least.
		_ = proc.Signal(sigterm)
	}
	grace := time.NewTimer(r.killGrace)
	defer grace.Stop()
	select {
	case err := <-exited:
		return err, false
	case <-grace.C:
	}
	if err := signalGroup(pid, sigkill); err != nil {
		_ = proc.Kill()
	}
	return <-exited, true
}

// envProblems checks one Env, including that it names none of the
// variables Run sets itself.
func envProblems(what string, e Env) []string {
	var problems []string
	for _, p := range childenv.Check(e) {
		problems = append(problems, what+": "+p)
	}
	for _, name := range slices.Concat(e.Pass, slices.Sorted(maps.Keys(e.Set))) {
		if slices.Contains(invocationEnvNames, name) {
			problems = append(problems, fmt.Sprintf("%s: variable %s is set by the runner for every attempt and cannot be configured", what, name))
		}
	}
	return problems
}

// cloneEnv copies e, so the caller's later changes do not reach a Runtime.
func cloneEnv(e Env) Env {
	return Env{Pass: slices.Clone(e.Pass), Set: maps.Clone(e.Set)}
}

// checkInvocation rejects an invocation Run cannot honour. Its fields come
// from the engine, so a bad one is a bug there, not the agent's failure.
func checkInvocation(inv *agentrunner.Invocation) error {
	switch {
	case inv == nil:
		return agentrunner.Fail(agentrunner.ClassInternal, "process runtime: nil invocation")
	case inv.Dir == "" || !filepath.IsAbs(inv.Dir):
		return agentrunner.Fail(agentrunner.ClassInternal, "process runtime: attempt folder %q is not an absolute path", inv.Dir)
	}
	return nil
}

// invocationEnv returns the variables that tell the agent where everything
// of this attempt is, for agents that read them rather than arguments.
func invocationEnv(inv *agentrunner.Invocation) []string {
	inputs := make([]string, len(inv.Inputs))
	for i, in := range inv.Inputs {
		inputs[i] = in.Path
	}
	return []string{
		"AGENTRUNNER_PROMPT_FILE=" + inv.PromptPath,
		"AGENTRUNNER_OUTPUT=" + inv.OutputPath,
		"AGENTRUNNER_CYCLE_ID=" + inv.CycleID,
		"AGENTRUNNER_CYCLE_DIR=" + inv.CycleDir,
		"AGENTRUNNER_STEP=" + inv.Step,
		"AGENTRUNNER_AGENT=" + inv.Agent,
		"AGENTRUNNER_ATTEMPT=" + strconv.Itoa(inv.Attempt),
		"AGENTRUNNER_ATTEMPT_DIR=" + inv.Dir,
		"AGENTRUNNER_MAILBOX=" + inv.MailboxPath,
		"AGENTRUNNER_MEMORY=" + inv.MemoryPath,
		"AGENTRUNNER_TEMPLATE=" + inv.TemplatePath,
		"AGENTRUNNER_SCHEMA=" + inv.SchemaPath,
		"AGENTRUNNER_INPUTS=" + strings.Join(inputs, "\n"),
		"AGENTRUNNER_MCP_CONFIG=" + inv.MCPConfig,
		"AGENTRUNNER_WORKDIR=" + WorkDir(inv),
		// The inherited PWD names the runner's folder; programs that trust
		// PWD over getcwd must see the folder they run in.
		"PWD=" + WorkDir(inv),
	}
}

// WorkDir is the folder the agent runs in: the invocation's WorkDir (a
// task's worktree) if set, else the attempt's folder.
func WorkDir(inv *agentrunner.Invocation) string {
	if inv.WorkDir != "" {
		return inv.WorkDir
	}
	return inv.Dir
}

// createLog creates (or empties) one of the agent's log files.
func createLog(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return nil, agentrunner.Fail(agentrunner.ClassInternal, "create agent log: %w", err)
	}
	return f, nil
}

// startError classifies a failure to start the agent: a command that cannot
// be run needs an operator; anything else (no memory, too many processes)
// may pass, so it is retried.
func startError(program string, err error) error {
	var errno syscall.Errno
	cannotRun := errors.Is(err, exec.ErrNotFound) || errors.Is(err, exec.ErrDot) ||
		errors.Is(err, fs.ErrNotExist) || errors.Is(err, fs.ErrPermission) ||
		(errors.As(err, &errno) && slices.Contains([]syscall.Errno{
			syscall.ENOEXEC, syscall.ENOTDIR, syscall.EISDIR, syscall.ELOOP,
			syscall.ENAMETOOLONG, syscall.E2BIG, syscall.EINVAL,
		}, errno))
	if cannotRun {
		return agentrunner.Fail(agentrunner.ClassConfig, "agent command %q cannot be run: %v", program, err)
	}
	return agentrunner.Fail(agentrunner.ClassUnavailable, "start agent command %q: %w", program, err)
}

// stoppedError says why Run stopped an agent that was still running.
func stoppedError(ctx context.Context, inv *agentrunner.Invocation, ran time.Duration, killed bool) error {
	if !errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return agentrunner.Fail(agentrunner.ClassInterrupted, "agent interrupted: %v", context.Cause(ctx))
	}
	limit := inv.Timeout
	if limit <= 0 {
		limit = ran.Round(time.Millisecond)
	}
	if killed {
		return agentrunner.Fail(agentrunner.ClassTimeout, "agent timed out after %v (killed: it did not exit on SIGTERM)", limit)
	}
	return agentrunner.Fail(agentrunner.ClassTimeout, "agent timed out after %v", limit)
}

// stderrSuffix returns the end of the agent's stderr for an error message,
// so the operator sees why it failed without opening the log; the
// secrets it was passed are redacted, since the message is stored with
// the attempt and shown by the API.
func stderrSuffix(path string, secrets []string) string {
	tail, err := readTail(path, stderrTailBytes)
	switch {
	case err != nil:
		return fmt.Sprintf(" (stderr unreadable: %v)", err)
	case tail == "":
		return " (stderr is empty)"
	}
	return "; end of stderr:\n" + childenv.Redact(tail, secrets)
}

// readTail returns at most the last limit bytes of the file, starting at a
// line boundary when the file is longer, as trimmed valid UTF-8.
func readTail(path string, limit int64) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return "", err
	}
	offset := max(info.Size()-limit, 0)
	buf := make([]byte, info.Size()-offset)
	n, err := f.ReadAt(buf, offset)
	if err != nil && !errors.Is(err, io.EOF) {
		return "", err
	}
	buf = buf[:n]
	if offset > 0 {
		// Drop the partial first line, unless it is all there is.
		if i := bytes.IndexByte(buf, '\n'); i >= 0 && len(bytes.TrimSpace(buf[i+1:])) > 0 {
			buf = buf[i+1:]
		}
		for len(buf) > 0 && !utf8.RuneStart(buf[0]) {
			buf = buf[1:]
		}
	}
	return strings.TrimSpace(strings.ToValidUTF8(string(buf), "\uFFFD")), nil
}
