package e2e

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// example is a shipped example workspace, written by init into dir as a
// new user has it, run with env.
type example struct {
	dir, cfg string
	env      []string
	// input is the run input runOnce sets ("goal", "request").
	input string
}

// newExample inits the example name into a fresh folder, appends
// extraConfig to its agentrunner.yaml, and validates it.
func newExample(t *testing.T, name, input, extraConfig string) *example {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "my-"+name)
	if out, err := exec.Command(binary, "init", dir, "--example", name).CombinedOutput(); err != nil {
		t.Fatalf("init: %v\n%s", err, out)
	}
	e := &example{dir: dir, cfg: filepath.Join(dir, "agentrunner.yaml"), env: os.Environ(), input: input}
	if extraConfig != "" {
		cfg, err := os.OpenFile(e.cfg, os.O_APPEND|os.O_WRONLY, 0)
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(cfg, "\n%s\n", extraConfig)
		cfg.Close()
	}
	if out, err := e.command("validate").CombinedOutput(); err != nil {
		t.Fatalf("validate: %v\n%s", err, out)
	}
	return e
}

func (e *example) command(args ...string) *exec.Cmd {
	cmd := exec.Command(binary, append(args, "-c", e.cfg)...)
	cmd.Dir, cmd.Env = e.dir, e.env
	return cmd
}

// runOnce runs `run --once` with the run input set to value, to the end
// of its run, and returns its output and exit code.
func (e *example) runOnce(t *testing.T, value string) (string, int) {
	t.Helper()
	out, err := e.command("run", "--once", "--input", e.input+"="+value).CombinedOutput()
	var exit *exec.ExitError
	switch {
	case err == nil:
		return string(out), 0
	case errors.As(err, &exit):
		return string(out), exit.ExitCode()
	}
	t.Fatalf("run --once: %v\n%s", err, out)
	return "", 0
}
