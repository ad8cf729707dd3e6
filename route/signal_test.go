package route

import (
	"strings"
	"testing"

	"github.com/agentrunner/agentrunner"
	"github.com/google/go-cmp/cmp"
)

// cycleHead is the top of a cycle document (spec 2's current_cycle.md)
// before any agent appended to it.
const cycleHead = `# Cycle: 2025-11-08-001

## Goal
Make the login page load in under one second on a cold cache.

## Current State
- p95 load time is 2.4 s on staging
- the bundle is 1.9 MB, half of it a charting library

## Context Docs
- docs/agent_docs/GOALS.md
- docs/agent_docs/UX_PRINCIPLES.md

---
`

// appended is one agent's section of an iteration, its SIGNAL BLOCK last.
func appended(agent, body, signal string) string {
	return "\n### " + agent + " Output\n" + body + "\n\nSIGNAL BLOCK\n" + signal + "\n\n---\n"
}

var (
	orchestrator = appended("Orchestrator",
		"Context Summary: the goal is measurable and the staging numbers are fresh. Routing to the comparator.",
		"Agent=orchestrator | Cycle=2025-11-08-001 | Step=ROUTE | Confidence=4 | Risk=low | Next=comparator")
	comparator = appended("Comparator",
		"Context Summary: current 2.4 s against the 1.0 s goal; the gap is mostly the bundle.\n\n"+
			"| metric | now | goal |\n|---|---|---|\n| p95 | 2.4 s | 1.0 s |",
		"Agent=comparator | Cycle=2025-11-08-001 | Step=COMPARE | Confidence=4 | Risk=medium | Next=diagnoser")
	diagnoser = appended("Diagnoser",
		"Context Summary: the charting library is imported eagerly by the login route.\n"+
			"An earlier draft ended with\n\n    SIGNAL BLOCK\n    Agent=diagnoser | Next=STOP\n\nwhich was wrong.",
		"Agent=diagnoser | Cycle=2025-11-08-001 | Step=DIAGNOSE | Confidence=3 | Risk=medium | Next=planner")
	verifier = appended("Verifier",
		"Context Summary: p95 is 0.8 s on staging after the lazy import; the goal is met.",
		"Agent=verifier | Cycle=2025-11-08-001 | Step=VERIFY | Confidence=5 | Risk=low | Next=STOP")
)

func fields(kv ...string) []SignalField {
	var fs []SignalField
	for i := 0; i < len(kv); i += 2 {
		fs = append(fs, SignalField{Key: kv[i], Value: kv[i+1]})
	}
	return fs
}

func TestParseSignal(t *testing.T) {
	iteration := cycleHead + "\n## Iteration 1\n" + orchestrator + comparator + diagnoser
	for _, tc := range []struct {
		name string
		doc  string
		want *Signal
	}{
		{"the last of three agents' blocks", iteration, &Signal{
			Agent: "diagnoser", Next: "planner", Line: 47,
			Fields: fields("Agent", "diagnoser", "Cycle", "2025-11-08-001", "Step", "DIAGNOSE", "Confidence", "3", "Risk", "medium", "Next", "planner"),
		}},
		{"the verifier stops the cycle", cycleHead + "\n## Iteration 2\n" + verifier, &Signal{
			Agent: "verifier", Next: "STOP", Line: 21,
			Fields: fields("Agent", "verifier", "Cycle", "2025-11-08-001", "Step", "VERIFY", "Confidence", "5", "Risk", "low", "Next", "STOP"),
		}},
		{"in a code fence", "## Actor Output\ndone\n\n```\nSIGNAL BLOCK\nAgent=actor | Step=EXECUTE | Next=verifier\n```\n", &Signal{
			Agent: "actor", Next: "verifier", Line: 5, Fields: fields("Agent", "actor", "Step", "EXECUTE", "Next", "verifier"),
		}},
		{"status line in a fence of its own", "SIGNAL BLOCK\n\n~~~text\nAgent=actor | Next=verifier\n~~~\n", &Signal{
			Agent: "actor", Next: "verifier", Line: 1, Fields: fields("Agent", "actor", "Next", "verifier"),
		}},
		{"emphasis and backticks", "**SIGNAL BLOCK:**\n`**Agent**=*planner* | Risk=__high__ | **Next**=**actor**`\n", &Signal{
			Agent: "planner", Next: "actor", Line: 1, Fields: fields("Agent", "planner", "Risk", "high", "Next", "actor"),
		}},
		{"a heading, indented, in CRLF", "text\r\n\r\n### SIGNAL BLOCK\r\n   Agent=planner  |  Next=actor   \r\n", &Signal{
			Agent: "planner", Next: "actor", Line: 3, Fields: fields("Agent", "planner", "Next", "actor"),
		}},
		{"in a table row", "SIGNAL BLOCK\n| Agent=planner | Next=actor |\n", &Signal{
			Agent: "planner", Next: "actor", Line: 1, Fields: fields("Agent", "planner", "Next", "actor"),
		}},
		{"fields in any order, others kept", "SIGNAL BLOCK\nNext=actor | Retry=2 | agent=planner | Note=see plan.md=v2\n", &Signal{
			Agent: "planner", Next: "actor", Line: 1, Fields: fields("Next", "actor", "Retry", "2", "agent", "planner", "Note", "see plan.md=v2"),
		}},
		{"a block in a comment is guidance", "SIGNAL BLOCK\nAgent=planner | Next=actor\n\n<!-- end with:\nSIGNAL BLOCK\nAgent={role} | Next={agent|STOP}\n-->\n", &Signal{
			Agent: "planner", Next: "actor", Line: 1, Fields: fields("Agent", "planner", "Next", "actor"),
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseSignal([]byte(tc.doc))
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("ParseSignal (-want +got):\n%s", diff)
			}
		})
	}
}

func TestParseSignalRefuses(t *testing.T) {
	iteration := cycleHead + "\n## Iteration 1\n" + orchestrator + comparator
	for _, tc := range []struct {
		name, doc, want string
	}{
		{"no block", cycleHead, "the output has no SIGNAL BLOCK: expected a line `SIGNAL BLOCK` followed by `Agent=… | … | Next=…`"},
		{"named in prose only", "I append the SIGNAL BLOCK below.\nAgent=planner | Next=actor\n",
			"the output has no SIGNAL BLOCK: expected a line `SIGNAL BLOCK` followed by `Agent=… | … | Next=…`"},
		{"status line on the marker's line", "SIGNAL BLOCK: Agent=planner | Next=actor\n",
			"the output has no SIGNAL BLOCK: expected a line `SIGNAL BLOCK` followed by `Agent=… | … | Next=…`"},
		{"last block without its status line", iteration + "\n### Diagnoser Output\nstill thinking\n\nSIGNAL BLOCK\n```\n```\n",
			"the last SIGNAL BLOCK (line 41) has no status line: expected a line `SIGNAL BLOCK` followed by `Agent=… | … | Next=…`"},
		{"last block broken, an earlier one fine", iteration + "\n### Diagnoser Output\nSIGNAL BLOCK\nAgent: diagnoser, Next: planner\n",
			"the last SIGNAL BLOCK (line 39): \"Agent: diagnoser, Next: planner\" on line 40 is no field Key=Value; expected a line `SIGNAL BLOCK` followed by `Agent=… | … | Next=…`"},
		{"prose after the marker", "SIGNAL BLOCK\nThe planner should go next.\n",
			"the last SIGNAL BLOCK (line 1): \"The planner should go next.\" on line 2 is no field Key=Value; expected a line `SIGNAL BLOCK` followed by `Agent=… | … | Next=…`"},
		{"empty field", "SIGNAL BLOCK\nAgent=planner || Next=actor\n",
			"the last SIGNAL BLOCK (line 1): \"\" on line 2 is no field Key=Value; expected a line `SIGNAL BLOCK` followed by `Agent=… | … | Next=…`"},
		{"bad key", "SIGNAL BLOCK\nAgent=planner | next agent=actor\n",
			"the last SIGNAL BLOCK (line 1): \"next agent=actor\" on line 2 is no field Key=Value; expected a line `SIGNAL BLOCK` followed by `Agent=… | … | Next=…`"},
		{"no value", "SIGNAL BLOCK\nAgent=planner | Risk= | Next=actor\n",
			"the last SIGNAL BLOCK (line 1): its field Risk on line 2 has no value"},
		{"emphasis only", "SIGNAL BLOCK\nAgent=planner | Next=**\n",
			"the last SIGNAL BLOCK (line 1): its field Next on line 2 has no value"},
		{"a key twice", "SIGNAL BLOCK\nAgent=planner | Next=actor | next=verifier\n",
			"the last SIGNAL BLOCK (line 1): its field next is given twice on line 2"},
		{"no Next", "SIGNAL BLOCK\nAgent=planner | Step=PLAN\n",
			"the last SIGNAL BLOCK (line 1) has no Next field on its status line (line 2): expected a line `SIGNAL BLOCK` followed by `Agent=… | … | Next=…`"},
		{"no Agent", "SIGNAL BLOCK\n\nStep=PLAN | Next=actor\n",
			"the last SIGNAL BLOCK (line 1) has no Agent field on its status line (line 3): expected a line `SIGNAL BLOCK` followed by `Agent=… | … | Next=…`"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseSignal([]byte(tc.doc))
			if err == nil {
				t.Fatalf("ParseSignal = %+v, want an error", got)
			}
			res := result{Class: agentrunner.ClassOf(err), Err: err.Error()}
			if diff := cmp.Diff(failed(tc.want), res); diff != "" {
				t.Errorf("error (-want +got):\n%s", diff)
			}
		})
	}
}

// TestSignalParser: the parser "signal" routes by the Next of the last
// block as agents append theirs, until one says STOP.
func TestSignalParser(t *testing.T) {
	sig := agentrunner.LabelSource{Parser: "signal"}
	doc := cycleHead + "\n## Iteration 1\n"
	var got []string
	for _, section := range []string{orchestrator, comparator, diagnoser, verifier} {
		doc += section
		got = append(got, label(t, sig, doc).Label)
	}
	if diff := cmp.Diff([]string{"comparator", "diagnoser", "planner", "STOP"}, got); diff != "" {
		t.Errorf("labels as the document grows (-want +got):\n%s", diff)
	}
	// The diagnoser quotes an old block with Next=STOP; the verifier's is last.
	noNext := doc[:strings.LastIndex(doc, " | Next=STOP")] + "\n"
	runLabelCases(t, []labelCase{
		{"no block", sig, cycleHead,
			failed("the output has no SIGNAL BLOCK: expected a line `SIGNAL BLOCK` followed by `Agent=… | … | Next=…`")},
		{"no Next", sig, noNext,
			failed("the last SIGNAL BLOCK (line 55) has no Next field on its status line (line 56): expected a line `SIGNAL BLOCK` followed by `Agent=… | … | Next=…`")},
	})
}
