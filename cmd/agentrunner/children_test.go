package main

import (
	"bytes"
	"testing"
	"time"

	"github.com/agentrunner/agentrunner"
	arhttp "github.com/agentrunner/agentrunner/http"
)

// TestRunStatusListsTheChildRuns: run-status shows the runs a lead's run
// started, each with its task, tool budget, attempts and usage; a child
// shows its parent; a run without children shows no children.
func TestRunStatusListsTheChildRuns(t *testing.T) {
	at := time.Date(2026, 3, 14, 9, 0, 0, 0, time.UTC)
	d := &arhttp.RunDetail{
		Run: arhttp.Run{ID: "research-000001", Pipeline: "research", Status: agentrunner.RunRunning, StartedAt: at},
		Steps: []arhttp.StepRun{{Step: "lead", Visit: 1, Status: agentrunner.StepRunOpen, OpenedAt: at,
			Attempts: []arhttp.AttemptSummary{{Number: 1, Status: agentrunner.AttemptRunning}}}},
		Children: []arhttp.ChildRun{
			{ID: "research-task-000001", Pipeline: "research-task", Status: agentrunner.RunCompleted, TaskName: "alpha", ToolBudget: 2,
				Attempts: 1, InputTokens: 800, OutputTokens: 120, ToolCalls: 1},
			{ID: "research-task-000002", Pipeline: "research-task", Status: agentrunner.RunRunning, TaskName: "beta", ToolBudget: 5,
				Attempts: 2, InputTokens: 1200, OutputTokens: 180, ToolCalls: 3},
			{ID: "other-000001", Pipeline: "other", Status: agentrunner.RunQueued},
		},
	}
	var out bytes.Buffer
	if err := printRun(&out, d); err != nil {
		t.Fatal(err)
	}
	matchLines(t, "run-status", out.String(), `run:\s+research-000001`, `lead\s+1\s+open\s+-\s+1:running\s+\S+\s+-`,
		`children: 3`,
		`CHILD\s+PIPELINE\s+STATUS\s+TASK\s+BUDGET\s+ATTEMPTS\s+TOKENS\s+CALLS`,
		`research-task-000001\s+research-task\s+completed\s+alpha\s+2\s+1\s+800/120\s+1`,
		`research-task-000002\s+research-task\s+running\s+beta\s+5\s+2\s+1200/180\s+3`,
		`other-000001\s+other\s+queued\s+-\s+-\s+0\s+0/0\s+0`)

	d.Run.Parent, d.Children = "lead-000001", nil
	out.Reset()
	if err := printRun(&out, d); err != nil {
		t.Fatal(err)
	}
	matchLines(t, "run-status of a child", out.String(), `parent:\s+lead-000001`)
	if bytes.Contains(out.Bytes(), []byte("children")) {
		t.Errorf("a run without children lists children:\n%s", out.String())
	}
}

func TestRunsShowIsRunStatus(t *testing.T) {
	t.Setenv("AGENTRUNNER_SERVER", "http://127.0.0.1:1")
	code1, out1, err1 := cliRun(t, "run-status", "research-000001")
	code2, out2, err2 := cliRun(t, "runs", "show", "research-000001")
	if code1 != code2 || out1 != out2 || err1 != err2 || err1 == "" {
		t.Errorf("runs show: exit %d %q %q; run-status: exit %d %q %q; want the same answer", code2, out2, err2, code1, out1, err1)
	}
	if code, _, _ := cliRun(t, "runs", "show"); code != exitUsage {
		t.Errorf("runs show without a run: exit %d, want %d", code, exitUsage)
	}
}
