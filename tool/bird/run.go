package bird

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"time"

	"github.com/agentrunner/agentrunner/internal/childenv"
)

// maxStdout bounds what is kept of bird's output: 100 tweets with quoted
// tweets and media are well under a megabyte.
const maxStdout = 16 << 20

// maxStderr bounds what is kept of bird's messages; errors are short.
const maxStderr = 64 << 10

// waitDelay is how long Wait waits for the output pipes after bird has
// exited or been killed, should something it started still hold them.
const waitDelay = 2 * time.Second

// capped keeps the first max bytes written and notes whether more came,
// so a runaway child cannot exhaust memory.
type capped struct {
	buf      bytes.Buffer
	max      int
	overflow bool
}

func (c *capped) Write(p []byte) (int, error) {
	room := c.max - c.buf.Len()
	if len(p) > room {
		c.overflow = true
	}
	if room > 0 {
		c.buf.Write(p[:min(len(p), room)])
	}
	return len(p), nil
}

func (c *capped) Bytes() []byte  { return c.buf.Bytes() }
func (c *capped) String() string { return c.buf.String() }

// result is what one run of bird left.
type result struct {
	stdout, stderr *capped
	exitCode       int
	// signaled is true when bird was killed by a signal.
	signaled bool
}

// run runs binary with argv (no shell), in its own process group that is
// killed as a whole when ctx ends. The environment is built, not the
// runner's, which holds the runner's secrets: the base variables of
// package childenv (HOME is where bird finds the browser profiles it reads
// cookies from), what env passes (its cookies AUTH_TOKEN, CT0) and sets,
// and NO_COLOR. An error means bird could not be run or waited for; a run
// that failed is a result with a non-zero exitCode.
func run(ctx context.Context, binary string, argv []string, env childenv.Spec) (*result, error) {
	res := &result{stdout: &capped{max: maxStdout}, stderr: &capped{max: maxStderr}}
	cmd := exec.CommandContext(ctx, binary, argv...)
	cmd.Env = childenv.Build(os.Environ(), []string{"NO_COLOR=1"}, env)
	cmd.Stdout = res.stdout
	cmd.Stderr = res.stderr
	cmd.WaitDelay = waitDelay
	containGroup(cmd)
	err := cmd.Run()
	var exitErr *exec.ExitError
	switch {
	case err == nil:
		return res, nil
	case errors.As(err, &exitErr):
		res.exitCode = exitErr.ExitCode()
		res.signaled = res.exitCode == -1
		return res, nil
	case errors.Is(err, exec.ErrWaitDelay):
		// bird exited but something it started kept the pipes open: what
		// bird itself did is complete.
		if cmd.ProcessState != nil {
			res.exitCode = cmd.ProcessState.ExitCode()
			res.signaled = res.exitCode == -1
			return res, nil
		}
	}
	return nil, err
}
