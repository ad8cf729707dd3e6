package childenv

import (
	"bufio"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// helperEnv makes the test binary a stand-in runner: it protects itself
// (or not), says it is ready and waits for stdin to close.
const helperEnv = "CHILDENV_TEST_RUNNER"

const secret = "CHILDENV_TEST_SECRET=sk-runner-secret-value"

func TestMain(m *testing.M) {
	switch os.Getenv(helperEnv) {
	case "protected":
		if err := ProtectRunner(); err != nil {
			os.Exit(3)
		}
		fallthrough
	case "plain":
		os.Stdout.WriteString("ready\n")
		io.Copy(io.Discard, os.Stdin)
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// TestProtectRunnerHidesItsEnvironmentFromItsUser starts a stand-in runner
// holding a secret, and reads its /proc/<pid>/environ from another process
// of the same user, as an agent would. As root, both run as nobody, since
// root may read any process.
func TestProtectRunnerHidesItsEnvironmentFromItsUser(t *testing.T) {
	exe := helperBinary(t)
	if out, ok := readEnvironOf(t, exe, "plain"); !ok || !strings.Contains(out, secret) {
		t.Skipf("this system does not let a process read another's environment of its user (%q), so there is nothing to hide", out)
	}
	if out, ok := readEnvironOf(t, exe, "protected"); ok || strings.Contains(out, "sk-runner-secret-value") {
		t.Errorf("a process of the runner's user read its environment: %q", out)
	}
}

// readEnvironOf starts the stand-in in mode and returns what cat read of
// its environment, and whether cat succeeded.
func readEnvironOf(t *testing.T, exe, mode string) (string, bool) {
	t.Helper()
	runner := exec.Command(exe)
	runner.Env = []string{helperEnv + "=" + mode, secret}
	runner.SysProcAttr = asUser()
	stdin, err := runner.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := runner.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := runner.Start(); err != nil {
		t.Fatal(err)
	}
	defer runner.Wait()
	defer stdin.Close()
	if line, err := bufio.NewReader(stdout).ReadString('\n'); line != "ready\n" {
		t.Fatalf("the stand-in runner did not start: %q, %v", line, err)
	}
	cat := exec.Command("cat", filepath.Join("/proc", strconv.Itoa(runner.Process.Pid), "environ"))
	cat.SysProcAttr = asUser()
	out, err := cat.CombinedOutput()
	return strings.ReplaceAll(string(out), "\x00", "\n"), err == nil
}

// asUser runs a process as nobody when the test runs as root.
func asUser() *syscall.SysProcAttr {
	if os.Geteuid() != 0 {
		return nil
	}
	return &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
}

// helperBinary is the test binary, copied where nobody may run it.
func helperBinary(t *testing.T) string {
	if os.Geteuid() != 0 {
		return os.Args[0]
	}
	dir, err := os.MkdirTemp("", "childenv")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	data, err := os.ReadFile(os.Args[0])
	if err != nil {
		t.Fatal(err)
	}
	exe := filepath.Join(dir, "runner")
	if err := os.WriteFile(exe, data, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return exe
}
