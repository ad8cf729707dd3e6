package main

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/agentrunner/agentrunner/sqlite"
	"github.com/google/go-cmp/cmp"
)

// TestDemoOfTheReviewLoopPrintsItsTurnsAndTheCapsule: the demo runs the
// review-loop example to its report and prints each capsule as it is
// stored, each verdict of the two loops and where it led, and the
// capsule's final version, which the workspace's store holds.
func TestDemoOfTheReviewLoopPrintsItsTurnsAndTheCapsule(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "loop")
	code, stdout, stderr := cliRun(t, "demo", "--example", "review-loop", "--dir", dir)
	if code != exitOK {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	var turns []string
	for _, m := range regexp.MustCompile(`(?m)^  (\w+#\d) +(\w+) +→ (\w+#\d|end)$`).FindAllStringSubmatch(stdout, -1) {
		turns = append(turns, m[1]+" "+m[2]+" → "+m[3])
	}
	want := []string{
		"design_review#1 REQUEST_CHANGES → adjust#1", "design_review#2 APPROVE → checkpoint#1",
		"verify#1 PARTIAL → record#1", "verify#2 VERIFIED → store#1",
	}
	if diff := cmp.Diff(want, turns); diff != "" {
		t.Errorf("turns (-want +got):\n%s\nstdout:\n%s", diff, stdout)
	}
	var stored []string
	for _, m := range regexp.MustCompile(`(?m)^  (\w+) +capsule review-loop/feature-review-loop-000001 version (\d) \(phase (\w+)\)$`).FindAllStringSubmatch(stdout, -1) {
		stored = append(stored, m[1]+" v"+m[2]+" "+m[3])
	}
	if diff := cmp.Diff([]string{"checkpoint v1 checkpoint", "record v2 implementing", "store v3 done"}, stored); diff != "" {
		t.Errorf("capsules stored (-want +got):\n%s\nstdout:\n%s", diff, stdout)
	}
	if !strings.Contains(stdout, "\ncapsule: review-loop/feature-review-loop-000001, version 3 (phase done)") {
		t.Errorf("the summary does not name the capsule at version 3:\n%s", stdout)
	}
	store, err := sqlite.Open(context.Background(), filepath.Join(dir, "artifacts", "state.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	c, err := store.CapsuleByName(context.Background(), "review-loop", "feature-review-loop-000001")
	if err != nil || c.Version != 3 || c.Phase != "done" || !strings.Contains(c.Text, "- verification round 1: PARTIAL") {
		t.Errorf("the stored capsule %+v (%v), want version 3, done, with the verification history", c, err)
	}
	view, err := os.ReadFile(filepath.Join(dir, "artifacts", "runs", "review-loop", "review-loop-000001", "feature.capsule.md"))
	if err != nil || string(view) != c.Text {
		t.Errorf("the run's feature.capsule.md (%v) is not the capsule's text:\n%s", err, view)
	}
}

// TestInitOfTheReviewLoopWritesAWorkspaceThatValidates: init writes the
// example, which validates as it is; its agents are scripts only.
func TestInitOfTheReviewLoopWritesAWorkspaceThatValidates(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "loop")
	if code, stdout, stderr := cliRun(t, "init", dir, "--example", "review-loop"); code != exitOK || !strings.Contains(stdout, "capsule_templates/checkpoint.md") {
		t.Fatalf("init: exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	if code, stdout, stderr := cliRun(t, "validate", "-c", cliConfigPath(dir)); code != exitOK || !strings.Contains(stdout, "pipeline review-loop (14 steps, from parse)") {
		t.Errorf("validate: exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	code, _, stderr := cliRun(t, "init", filepath.Join(t.TempDir(), "other"), "--example", "review-loop", "--provider", "openai")
	if code != exitUsage || !strings.Contains(stderr, "review-loop example's agents are scripts") {
		t.Errorf("init --provider: exit %d, stderr %q; want a usage error", code, stderr)
	}
}
