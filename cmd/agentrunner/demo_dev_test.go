package main

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestDemoOfTheDevPipeline: demo --example dev-pipeline adds a backlog
// item with the CLI, answers its planning agent's question with the CLI,
// and ends with both tasks implemented, each with its commit on its own
// branch of the repository it made; a second demo in the same folder adds
// another item to the same repository.
func TestDemoOfTheDevPipeline(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("the demo needs git")
	}
	dir := filepath.Join(t.TempDir(), "dev")
	for i, item := range []string{"backlog-000001", "backlog-000002"} {
		code, stdout, stderr := cliRun(t, "demo", "--example", "dev-pipeline", "--dir", dir)
		if code != exitOK {
			t.Fatalf("demo %d: exit %d\nstdout:\n%s\nstderr:\n%s", i+1, code, stdout, stderr)
		}
		for _, line := range []string{
			"$ agentrunner backlog add --title Greeter",
			"  added backlog item " + item + ": Greeter",
			"  context:      language go, framework go",
			"(waiting for a person)",
			"    question: Which approach should task 2 take?",
			"$ agentrunner answer ",
			"item " + item + "                          completed",
			"task 1: branch task/" + item + "-1-add-a-greeter-function\n",
			" task 1: add a greeter function\n",
			"task 2: branch task/" + item + "-2-choose-where-the-greeting-lives-ask\n",
			" task 2: choose where the greeting lives [ask]\n",
		} {
			if !strings.Contains(stdout, line) {
				t.Errorf("demo %d: the output has no %q:\n%s", i+1, line, stdout)
			}
		}
	}
}
