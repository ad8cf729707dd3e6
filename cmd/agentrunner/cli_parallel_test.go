package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestInitParallel: init --parallel writes the learning loop with research
// and analyze on parallel branches joined by synthesize, which validate
// accepts; the review example refuses the flag.
func TestInitParallel(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "ws")
	code, stdout, stderr := cliRun(t, "init", "--parallel", dir)
	if code != exitOK || !strings.Contains(stdout, "research and analyze in parallel") {
		t.Fatalf("init --parallel: exit %d, stdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	yaml, err := os.ReadFile(cliConfigPath(dir))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range []string{"then: [research, analyze]", "join: all", "history: {last: 1}"} {
		if !strings.Contains(string(yaml), line) {
			t.Errorf("agentrunner.yaml has no %q", line)
		}
	}
	const stages = "pipeline plan → research ‖ analyze → synthesize → execute → evaluate → end"
	if code, stdout, stderr := cliRun(t, "validate", "-c", cliConfigPath(dir)); code != exitOK || !strings.Contains(stdout, stages) {
		t.Errorf("validate: exit %d, stdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	code, _, stderr = cliRun(t, "init", "--example", "review", "--parallel", t.TempDir())
	if code != exitUsage || !strings.Contains(stderr, "--parallel applies to the crypton example") {
		t.Errorf("init --example review --parallel: exit %d, stderr:\n%s", code, stderr)
	}
}
