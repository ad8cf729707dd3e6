package scheduler_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/agentrunner/agentrunner"
	"github.com/agentrunner/agentrunner/internal/runtest"
	"github.com/agentrunner/agentrunner/mailbox"
	"github.com/agentrunner/agentrunner/runtime/mock"
	"github.com/agentrunner/agentrunner/step/agent"
	"github.com/agentrunner/agentrunner/workspace"
)

// skipWorkspace is a pipeline whose check step, an agent, is skipped when
// it fails: its last good check.md stands in.
const skipWorkspace = `version: 1
name: ws
defaults: {provider: mock}
agents:
  writer: {identity: p.md, output: {file: draft.md, template: t.md}}
  checker: {identity: p.md, output: {file: check.md, template: t.md}}
pipelines:
  p:
    start: write
    steps:
      write: {agent: writer, next: check}
      check: {agent: checker, next: end, on_failure: skip, retries: {max: 0}, deliver: [{kind: backward, to: [writer]}]}
`

// TestAnAgentStepIsSkippedWithItsLastGoodOutput runs agent steps through
// the real agent kind: a first run with no earlier check.md halts, resumes
// and completes; a later run whose check crashes goes on with the first
// run's check.md, published into its own directory. A crashed attempt
// sends no message; a success and a fallback send theirs.
func TestAnAgentStepIsSkippedWithItsLastGoodOutput(t *testing.T) {
	cfg := runtest.Workspace(t, t.TempDir(), skipWorkspace, nil)
	ws, err := workspace.Load(cfg)
	if err != nil {
		t.Fatal(err)
	}
	var crash atomic.Bool
	rt := mock.New(mock.Options{Fault: func(inv *agentrunner.Invocation) mock.Fault {
		if inv.Step == "check" && crash.Load() {
			return mock.Crash
		}
		return mock.NoFault
	}})
	h := newHarness(t, &scriptKind{}, cfg.Graphs()["p"])
	boxes, err := mailbox.New(ws.Layout.Mailboxes(), cfg.Mailbox.MaxMessages)
	if err != nil {
		t.Fatal(err)
	}
	kind, err := agent.New(agent.Options{Workspace: ws, Mailboxes: boxes, Store: h.store, Runtimes: map[string]agentrunner.Runtime{"mock": rt}})
	if err != nil {
		t.Fatal(err)
	}
	h.kinds = map[string]agentrunner.StepKind{agentrunner.KindAgent: kind}
	h.run()

	crash.Store(true)
	first := h.startRun("p", nil)
	if r, _ := h.waitDone(first); r.Status != agentrunner.RunHalted {
		t.Fatalf("first run %s (%q), want halted: no earlier check.md", r.Status, r.Error)
	}
	crash.Store(false)
	if res := h.result(agentrunner.CommandResumeRun, map[string]any{"run": first}); res != "resumed run "+first+" at check#1" {
		t.Fatalf("resume: %q", res)
	}
	if r, _ := h.waitDone(first); r.Status != agentrunner.RunCompleted {
		t.Fatalf("first run after resume: %s (%q)", r.Status, r.Error)
	}

	crash.Store(true)
	second := h.startRun("p", nil)
	r, srs := h.waitDone(second)
	if r.Status != agentrunner.RunCompleted || describe(sortByOpened(srs)) != "write#1:succeeded check#1:succeeded" {
		t.Fatalf("second run %s (%q): %s; want completed with check skipped", r.Status, r.Error, describe(sortByOpened(srs)))
	}
	h.check()
	src := filepath.Join(h.dir, "runs", "p", first, "check.md")
	esc := h.events(second, "escalation")
	if len(esc) != 1 || esc[0]["policy"] != "skip" || esc[0]["fallback"] != src || esc[0]["fallback_run"] != first {
		t.Errorf("escalation events %v; want a skip to %s of run %s", esc, src, first)
	}
	if n := len(h.events(second, agent.EventFallbackPublished)); n != 1 {
		t.Errorf("%d %s events, want 1", n, agent.EventFallbackPublished)
	}
	want, _ := os.ReadFile(src)
	got, err := os.ReadFile(filepath.Join(h.dir, "runs", "p", second, "check.md"))
	if err != nil || len(want) == 0 || string(got) != string(want) {
		t.Errorf("the second run's check.md (%v) is not the first run's", err)
	}
	msgs, err := boxes.Stored(context.Background(), h.store, "writer")
	if err != nil {
		t.Fatal(err)
	}
	var sent []string
	for _, m := range msgs {
		sent = append(sent, m.ID)
	}
	if diff := cmp.Diff([]string{first + "/check/backward/writer", second + "/check/backward/writer"}, sent); diff != "" {
		t.Errorf("the writer's stored mailbox (-want +got):\n%s", diff)
	}
	if len(msgs) == 2 && !strings.Contains(msgs[1].Body, "check failed; check.md of run "+first+" stands in for it") {
		t.Errorf("the fallback's message: %q", msgs[1].Body)
	}
}
