package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agentrunner/agentrunner"
	"github.com/agentrunner/agentrunner/capsule"
	"github.com/agentrunner/agentrunner/sqlite"
	capsulestep "github.com/agentrunner/agentrunner/step/capsule"
	"github.com/google/go-cmp/cmp"
)

// reviewLoop is the shipped review-loop example, written by init, as a
// new user has it. Its first run is review-loop-000001, and that run's
// capsule feature-review-loop-000001.
type reviewLoop struct{ *example }

const (
	reviewLoopRun     = "review-loop-000001"
	reviewLoopCapsule = "review-loop/feature-" + reviewLoopRun
)

func newReviewLoop(t *testing.T) *reviewLoop {
	t.Helper()
	return &reviewLoop{newExample(t, "review-loop", "request", "")}
}

// capsule reads the run's capsule as an operator does: capsule show.
func (f *reviewLoop) capsule(t *testing.T) capsule.View {
	t.Helper()
	out, err := f.command("capsule", "show", reviewLoopCapsule, "--json").Output()
	var v capsule.View
	if err != nil || json.Unmarshal(out, &v) != nil {
		t.Fatalf("capsule show %s: %v\n%s", reviewLoopCapsule, err, out)
	}
	return v
}

func (f *reviewLoop) store(t *testing.T) *sqlite.Store {
	t.Helper()
	s, err := sqlite.Open(context.Background(), filepath.Join(f.dir, "artifacts", "state.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// turns lists the run's step runs as "step#visit LABEL", in order.
func turns(t *testing.T, store *sqlite.Store) []string {
	t.Helper()
	srs, err := store.StepRuns(context.Background(), agentrunner.StepRunFilter{RunID: reviewLoopRun})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, sr := range srs {
		out = append(out, strings.TrimSpace(sr.Key()+" "+sr.Label))
	}
	return out
}

// stored lists the run's capsule.stored events as "step vN phase".
func stored(t *testing.T, store *sqlite.Store) []string {
	t.Helper()
	evs, err := store.Events(context.Background(), agentrunner.EventFilter{CycleID: reviewLoopRun, Type: capsulestep.EventStored})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, ev := range evs {
		out = append(out, fmt.Sprintf("%s v%v %v", ev.Step, ev.Details["version"], ev.Details["phase"]))
	}
	return out
}

// TestReviewLoopApprovesTheSecondDesignAndVerifiesAfterOnePartial: the
// design review asks for changes once and approves the adjusted plan; the
// verifier finds the first implementation PARTIAL and verifies the
// second. The capsule ends at version 3 (checkpoint, the round that
// failed, done) and holds the reviewed plan and the verification history.
func TestReviewLoopApprovesTheSecondDesignAndVerifiesAfterOnePartial(t *testing.T) {
	f := newReviewLoop(t)
	out, code := f.runOnce(t, "Add rate limits to the public API")
	if code != 0 || !strings.Contains(out, "cycle "+reviewLoopRun+" completed") {
		t.Fatalf("run --once exited %d:\n%s", code, out)
	}
	store := f.store(t)
	want := []string{"parse#1", "context#1", "design_review#1 REQUEST_CHANGES", "adjust#1", "design_review#2 APPROVE", "checkpoint#1",
		"implement#1", "verify#1 PARTIAL", "record#1", "implement#2", "verify#2 VERIFIED", "store#1", "report#1"}
	if diff := cmp.Diff(want, turns(t, store)); diff != "" {
		t.Errorf("step runs (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"checkpoint v1 checkpoint", "record v2 implementing", "store v3 done"}, stored(t, store)); diff != "" {
		t.Errorf("capsules stored (-want +got):\n%s", diff)
	}
	c := f.capsule(t)
	if c.Version != 3 || c.Phase != "done" || c.RunID != reviewLoopRun {
		t.Errorf("the capsule is %s at version %d of run %s, want done at version 3 of %s", c.Phase, c.Version, c.RunID, reviewLoopRun)
	}
	for _, part := range []string{
		"The reviewed plan:\n1. Add the behaviour to src/feature.go.", "3. Address: The plan does not document the change",
		"- design round 1: [BLOCKER] The plan does not document the change",
		"- verification round 1: PARTIAL: Tests cover the new behaviour and its failure paths: a bad input returns 500",
		"- verification round 2: VERIFIED", "- implementation round 2: fixed what the last verification failed",
	} {
		if !strings.Contains(c.Text, part) {
			t.Errorf("the capsule lacks %q:\n%s", part, c.Text)
		}
	}
	checkpoint := stepArtifact(t, store, "checkpoint", "feature.capsule.md")
	if !strings.Contains(checkpoint, "Design approved") || strings.Contains(checkpoint, "verification round") {
		t.Errorf("the checkpoint's capsule is not the reviewed plan alone:\n%s", checkpoint)
	}
}

// stepArtifact is the artifact a step of the run committed last.
func stepArtifact(t *testing.T, store *sqlite.Store, step, name string) string {
	t.Helper()
	fs, err := store.Files(context.Background(), agentrunner.FileFilter{RunID: reviewLoopRun, Step: step, Kind: agentrunner.FileArtifact, Name: name})
	if err != nil || len(fs) == 0 {
		t.Fatalf("%s of step %s: %v (%d files)", name, step, err, len(fs))
	}
	return string(fs[len(fs)-1].Data)
}

// TestReviewLoopOfAStubbornReviewerReachesTheGate: with [stubborn] the
// design review never approves. After its third round the capsule is
// stored escalated, with the last verdict and the open findings, and the
// run waits at design_gate; an operator's approval implements the plan
// as it stands, and the run completes.
func TestReviewLoopOfAStubbornReviewerReachesTheGate(t *testing.T) {
	f := newReviewLoop(t)
	srv := newCrashServer(t, f.cfg)
	srv.start(t)
	f.env = append(f.env, "AGENTRUNNER_SERVER=http://"+srv.addr)
	if out, err := f.command("start", "review-loop", "--input", "request=Add rate limits [stubborn]").CombinedOutput(); err != nil || strings.TrimSpace(string(out)) != reviewLoopRun {
		t.Fatalf("start: %v\n%s", err, out)
	}
	waitUntil(t, "the gate design_gate opens", func() bool {
		out, _ := f.command("gates", "--json").Output()
		return bytes.Contains(out, []byte(`"step":"design_gate"`)) || bytes.Contains(out, []byte(`"step": "design_gate"`))
	})
	c := f.capsule(t)
	if c.Phase != "escalated" || c.Version != 1 {
		t.Errorf("at the gate the capsule is %s at version %d, want escalated at version 1", c.Phase, c.Version)
	}
	for _, part := range []string{"waits for a person at the gate design_gate", "Verdict: REQUEST_CHANGES\nRound: 3",
		"The open findings of the last review:\n- [BLOCKER] Split step 1 into smaller changes (round 3"} {
		if !strings.Contains(c.Text, part) {
			t.Errorf("the escalated capsule lacks %q:\n%s", part, c.Text)
		}
	}
	if out, err := f.command("approve", reviewLoopRun, "design_gate", "-m", "implement it as it stands").CombinedOutput(); err != nil {
		t.Fatalf("approve: %v\n%s", err, out)
	}
	waitUntil(t, "the run completes", func() bool {
		out, _ := f.command("run-status", reviewLoopRun, "--json").Output()
		var d struct{ Run struct{ Status string } }
		return json.Unmarshal(out, &d) == nil && d.Run.Status == string(agentrunner.RunCompleted)
	})
	srv.stop(t)
	store := f.store(t)
	got := turns(t, store)
	want := []string{"design_review#3 REQUEST_CHANGES", "adjust#3", "design_stuck#1", "design_gate#1 approve", "checkpoint#1"}
	if i := indexOf(got, want[0]); i < 0 || !cmp.Equal(got[i:i+len(want)], want) {
		t.Errorf("step runs %v, want three reviews, then %v", got, want)
	}
	if diff := cmp.Diff([]string{"design_stuck v1 escalated", "checkpoint v2 checkpoint", "record v3 implementing", "store v4 done"}, stored(t, store)); diff != "" {
		t.Errorf("capsules stored (-want +got):\n%s", diff)
	}
}

func indexOf(list []string, s string) int {
	for i, v := range list {
		if v == s {
			return i
		}
	}
	return -1
}

// waitUntil polls cond for up to 30 seconds.
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if cond() {
			return
		}
	}
	t.Fatalf("%s: not within 30s", what)
}

// TestReviewLoopKilledDuringTheImplementationResumesFromTheCheckpoint:
// run --once is killed with SIGKILL while the implementer runs. The next
// run --once finishes the run: the steps before the implementation do
// not run again, the implementer's new attempt works from the checkpoint
// capsule, and the checkpoint is not stored twice.
func TestReviewLoopKilledDuringTheImplementationResumesFromTheCheckpoint(t *testing.T) {
	f := newReviewLoop(t)
	f.env = append(f.env, "REVIEW_LOOP_PAUSE=0.5")
	cmd := f.command("run", "--once", "--input", "request=Add rate limits to the public API")
	var log bytes.Buffer
	cmd.Stdout, cmd.Stderr = &log, &log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, filepath.Join(f.dir, "artifacts", "attempts", reviewLoopRun, "implement-1", "prompt.md"), 30*time.Second)
	cmd.Process.Signal(syscall.SIGKILL)
	cmd.Wait()
	if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() {
		t.Fatalf("run --once ended before the kill:\n%s", log.String())
	}
	f.env = f.env[:len(f.env)-1]
	if out, code := f.runOnce(t, "Add rate limits to the public API"); code != 0 {
		t.Fatalf("run --once after the kill exited %d:\n%s", code, out)
	}
	store := f.store(t)
	attempts, err := store.Attempts(context.Background(), reviewLoopRun)
	if err != nil {
		t.Fatal(err)
	}
	per := map[string][]string{} // each attempt's status, and its class if it failed
	for _, a := range attempts {
		key := agentrunner.StepRunKey(a.Step, a.Visit)
		per[key] = append(per[key], strings.TrimSuffix(string(a.Status)+" "+string(a.ErrorClass), " "))
	}
	once := []string{"succeeded"}
	for _, key := range []string{"parse#1", "context#1", "design_review#1", "adjust#1", "design_review#2", "checkpoint#1"} {
		if !cmp.Equal(per[key], once) {
			t.Errorf("%s has the attempts %v, want one that succeeded: it ran before the kill", key, per[key])
		}
	}
	if got := per["implement#1"]; !cmp.Equal(got, []string{"failed interrupted", "succeeded"}) {
		t.Errorf("implement#1 has the attempts %v, want one interrupted, then one that succeeded", got)
	}
	prompt, err := os.ReadFile(filepath.Join(f.dir, "artifacts", "attempts", reviewLoopRun, "implement-2", "prompt.md"))
	if err != nil || !strings.Contains(string(prompt), "feature.capsule.md") {
		t.Errorf("the implementer's new attempt was not given the capsule (%v):\n%s", err, prompt)
	}
	impl := implementationOf(t, store, 2)
	if !strings.Contains(impl, "Round 1 of run "+reviewLoopRun+", from the feature's capsule, whose status says: Design approved") {
		t.Errorf("the implementer's new attempt did not work from the checkpoint:\n%s", impl)
	}
	if diff := cmp.Diff([]string{"checkpoint v1 checkpoint", "record v2 implementing", "store v3 done"}, stored(t, store)); diff != "" {
		t.Errorf("capsules stored (-want +got):\n%s", diff)
	}
	if c := f.capsule(t); c.Version != 3 || c.Phase != "done" {
		t.Errorf("the capsule is %s at version %d, want done at version 3", c.Phase, c.Version)
	}
}

// implementationOf is the implementation.md attempt n of implement
// committed.
func implementationOf(t *testing.T, store *sqlite.Store, n int) string {
	t.Helper()
	fs, err := store.Files(context.Background(), agentrunner.FileFilter{RunID: reviewLoopRun, Step: "implement", Attempt: n, Kind: agentrunner.FileArtifact})
	if err != nil || len(fs) != 1 {
		t.Fatalf("implementation.md of attempt %d: %v (%d files)", n, err, len(fs))
	}
	return string(fs[0].Data)
}
