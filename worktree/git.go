package worktree

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"time"

	"github.com/agentrunner/agentrunner"
)

// Git runs the git binary. The zero value runs "git" from PATH with the
// runner's environment.
type Git struct {
	// Path is the git binary; "" means "git", looked up in PATH.
	Path string
	// Env is added to the environment last, so it wins over what run sets
	// (tests point HOME at a temporary folder and name a committer here).
	Env []string
}

// waitDelay bounds how long a killed git may hold its output pipes open:
// a child it started (git worktree add runs git reset) can outlive it.
const waitDelay = 5 * time.Second

// minMajor and minMinor are the oldest git Ensure and Remove accept:
// 2.31 is the first whose `git worktree list --porcelain` says which
// worktrees are locked (an older one would let Remove delete a worktree
// someone locked) and whose rev-parse takes --end-of-options.
const minMajor, minMinor = 2, 31

// repoVars are the variables that tell git which repository to use
// (`git rev-parse --local-env-vars`) or add configuration. A runner started
// from a git hook inherits GIT_DIR; left in place it would make `-C repo`
// act on the hook's repository instead.
var repoVars = map[string]bool{
	"GIT_ALTERNATE_OBJECT_DIRECTORIES": true, "GIT_CONFIG": true,
	"GIT_CONFIG_PARAMETERS": true, "GIT_CONFIG_COUNT": true,
	"GIT_OBJECT_DIRECTORY": true, "GIT_DIR": true, "GIT_WORK_TREE": true,
	"GIT_IMPLICIT_WORK_TREE": true, "GIT_GRAFT_FILE": true,
	"GIT_INDEX_FILE": true, "GIT_NO_REPLACE_OBJECTS": true,
	"GIT_REPLACE_REF_BASE": true, "GIT_PREFIX": true,
	"GIT_SHALLOW_FILE": true, "GIT_COMMON_DIR": true, "GIT_NAMESPACE": true,
}

// path returns the git binary to run.
func (g Git) path() string {
	if g.Path == "" {
		return "git"
	}
	return g.Path
}

// environ is the runner's environment without the variables that would
// point git elsewhere, plus what makes git's behaviour independent of the
// user: no credential prompts, and messages (including the lock reason
// "initializing" that an interrupted add leaves) in the C locale.
func (g Git) environ() []string {
	var env []string
	for _, kv := range os.Environ() {
		key, _, _ := strings.Cut(kv, "=")
		if !repoVars[strings.ToUpper(key)] {
			env = append(env, kv)
		}
	}
	env = append(env, "GIT_TERMINAL_PROMPT=0", "LC_ALL=C")
	return append(env, g.Env...)
}

// run runs `git -C dir args...` (without -C when dir is "") and returns its
// standard output. The context's end kills git and what it started.
func (g Git) run(ctx context.Context, dir string, args ...string) (string, error) {
	argv := args
	if dir != "" {
		argv = append([]string{"-C", dir}, args...)
	}
	cmd := exec.CommandContext(ctx, g.path(), argv...)
	cmd.Env = g.environ()
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.WaitDelay = waitDelay
	killGroupOnCancel(cmd)
	if err := cmd.Run(); err != nil {
		if ctx.Err() != nil {
			err = ctx.Err()
		}
		return stdout.String(), &gitError{args: args, stderr: oneLine(stderr.String()), err: err}
	}
	return stdout.String(), nil
}

// gitError is a git command that failed: its arguments, what it wrote to
// standard error, and how it ended.
type gitError struct {
	args   []string
	stderr string
	err    error
}

func (e *gitError) Error() string {
	msg := "git " + strings.Join(e.args, " ")
	if e.stderr != "" {
		return msg + ": " + e.stderr
	}
	return msg + ": " + e.err.Error()
}

// Unwrap returns how git ended: an *exec.ExitError, the context's error,
// or why it could not start.
func (e *gitError) Unwrap() error { return e.err }

// exitCode is git's exit status, or -1 when it did not exit by itself.
func exitCode(err error) int {
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.ExitCode()
	}
	return -1
}

// oneLine trims git's message and joins its lines, so it fits in the one
// sentence of an error.
func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}

// failed wraps an unexpected failure of git in the project's error type:
// unavailable when git could not run or was stopped (trying again may
// help), internal otherwise.
func failed(err error, format string, args ...any) error {
	code := agentrunner.EINTERNAL
	if errors.Is(err, exec.ErrNotFound) || errors.Is(err, context.Canceled) ||
		errors.Is(err, context.DeadlineExceeded) {
		code = agentrunner.EUNAVAILABLE
	}
	return &agentrunner.Error{Code: code, Message: fmt.Sprintf(format, args...), Err: err}
}

// invalid is a refusal of the caller's input, with git's reason.
func invalid(err error, format string, args ...any) error {
	return &agentrunner.Error{Code: agentrunner.EINVALID, Message: fmt.Sprintf(format, args...), Err: err}
}

// checkVersion refuses a git older than minMajor.minMinor.
func (g Git) checkVersion(ctx context.Context) error {
	out, err := g.run(ctx, "", "version")
	if err != nil {
		return failed(err, "could not run git")
	}
	major, minor, ok := parseVersion(out)
	if !ok {
		return failed(nil, "could not read the version of git from %q", oneLine(out))
	}
	if major < minMajor || major == minMajor && minor < minMinor {
		return agentrunner.Errorf(agentrunner.EUNAVAILABLE,
			"git %d.%d is too old for worktrees: %d.%d or newer is needed", major, minor, minMajor, minMinor)
	}
	return nil
}

// parseVersion reads "git version 2.39.5" (also "2.45.1.windows.1" and
// "2.39.3 (Apple Git-146)").
func parseVersion(out string) (major, minor int, ok bool) {
	f := strings.Fields(out)
	if len(f) < 3 || f[0] != "git" || f[1] != "version" {
		return 0, 0, false
	}
	nums := strings.SplitN(f[2], ".", 3)
	if len(nums) < 2 {
		return 0, 0, false
	}
	major, err1 := strconv.Atoi(nums[0])
	minor, err2 := strconv.Atoi(nums[1])
	return major, minor, err1 == nil && err2 == nil
}
