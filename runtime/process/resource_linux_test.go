package process_test

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/agentrunner/agentrunner"
	"github.com/agentrunner/agentrunner/runtime/process"
)

// childEnv makes the test binary, run again, the process whose file
// descriptors are used up: the test's own process must keep its own.
const childEnv = "AGENTRUNNER_TEST_FDS_FREE"

// TestStartWithoutFileDescriptors: a runner whose file descriptors are
// used up cannot create the agent's logs (none free), or its stdin pipe,
// or fork it (a few free): each is the runner's resource failure, which
// the engine tries again without using a retry, never the agent's.
func TestStartWithoutFileDescriptors(t *testing.T) {
	if free := os.Getenv(childEnv); free != "" {
		n, _ := strconv.Atoi(free)
		startWithFree(t, n)
		return
	}
	for _, free := range []int{0, 2, 3, 4} {
		t.Run(strconv.Itoa(free)+" free", func(t *testing.T) {
			cmd := exec.Command(os.Args[0], "-test.run=^TestStartWithoutFileDescriptors$", "-test.count=1", "-test.v")
			cmd.Env = append(os.Environ(), childEnv+"="+strconv.Itoa(free))
			out, err := cmd.CombinedOutput()
			if err != nil || !strings.Contains(string(out), "--- PASS: TestStartWithoutFileDescriptors") {
				t.Fatalf("child: %v\n%s", err, out)
			}
			t.Logf("%s", out)
		})
	}
}

// startWithFree uses up the descriptors of this process but free, then
// starts an agent.
func startWithFree(t *testing.T, free int) {
	inv := newInvocation(t)
	rt := mustNew(t, process.Config{Command: []string{"true"}})
	lim := syscall.Rlimit{Cur: 256, Max: 256}
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		t.Fatal(err)
	}
	var held []*os.File
	defer func() { // before the temporary folders are removed, which takes descriptors
		for _, f := range held {
			f.Close()
		}
	}()
	for {
		f, err := os.Open(os.DevNull)
		if errors.Is(err, syscall.EMFILE) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, f)
	}
	for _, f := range held[len(held)-free:] {
		f.Close()
	}
	held = held[:len(held)-free]
	_, err := rt.Run(context.Background(), inv)
	if agentrunner.ClassOf(err) != agentrunner.ClassResource || agentrunner.ExhaustedResource(err) != agentrunner.ResourceFileDescriptors {
		t.Fatalf("Run with %d descriptors free: %v (class %s), want a resource failure of file descriptors", free, err, agentrunner.ClassOf(err))
	}
	t.Logf("%d free: %v", free, err)
}
