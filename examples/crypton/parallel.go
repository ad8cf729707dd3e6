package crypton

import (
	"fmt"
	"strings"
)

// edit replaces one passage of a file of the example, which must be there
// exactly once.
type edit struct{ old, new string }

// parallelEdits turn the example into its parallel shape (FR-168/169):
// Research and Analyze run at once after Plan, and Synthesize joins them.
// The analysis agent can then not read this cycle's research, which is
// being written beside it: it reads this cycle's plan, the last cycle's
// research and its mailbox, where research's handoff of this cycle lands
// for the next one; the synthesis agent reads this cycle's research
// itself. The prompts say so, so that no agent is told of an input it
// does not get.
var parallelEdits = map[string][]edit{
	"agentrunner.yaml": {
		{"#   Plan → Research → Analyze → Synthesize → Execute → Evaluate → (next cycle) Plan\n",
			"#   Plan → (Research ‖ Analyze) → Synthesize → Execute → Evaluate → (next cycle) Plan\n" +
				"# Research and Analyze run in parallel (agentrunner init --parallel; docs/pipelines.md,\n" +
				"# \"Parallel steps in the learning loop\"): the analysis works from this cycle's plan and\n" +
				"# the last cycle's research, and the synthesis reads both of this cycle's artifacts.\n"},
		{`      - {artifact: research.md, description: "this cycle's research"}
      - {memory: analysis,`, `      # In parallel with research, this cycle's research.md is still being written: read
      # the plan of this cycle and the research of the last one (none in the first cycle).
      - {artifact: plan.md, description: "this cycle's plan"}
      - {artifact: research.md, history: {last: 1}, description: "the last cycle's research"}
      - {memory: analysis,`},
		{`      - {artifact: analysis.md, description: "this cycle's analysis"}
    output:
      file: strategy.json`, `      - {artifact: analysis.md, description: "this cycle's analysis"}
      - {artifact: research.md, description: "this cycle's research, which the analysis has not seen"}
    output:
      file: strategy.json`},
		{`      agent: plan
      next: research
`, `      agent: plan
      then: [research, analyze]     # parallel branches: both start when plan succeeds
`},
		{`      agent: research
      next: analyze
      deliver:
        - {kind: forward, to: [analysis], section: "Handoff to Analysis"}`, `      agent: research
      next: synthesize
      deliver:                      # analysis is already running: it reads this handoff next cycle
        - {kind: forward, to: [analysis], section: "Handoff to Analysis"}`},
		{`      agent: synthesis
      next: execute
`, `      agent: synthesis
      join: all                     # waits for both research and analyze
      next: execute
`},
	},
	"agent_prompts/analysis_agent.md": {
		{"Plan → Research → Analyze → Synthesize → Execute → Evaluate. You come third.",
			"Plan → (Research and Analyze, at the same time) → Synthesize → Execute → Evaluate. You run beside the\nresearch agent, which is researching this cycle's plan while you work."},
		{"It holds the research agent's handoff for this cycle,", "It holds the research agent's handoff of the last cycle,"},
		{`2. **The research of this cycle** (research.md, path given below): verdicts per hypothesis, market data,
   sentiment, events, open questions.`, `2. **The plan of this cycle** (plan.md, path given below): the regime call, the hypotheses, the assets and
   the risk limits. Work from it: this cycle's research is not written yet.
   **The research of the last cycle** (research.md, path given below; none in the first cycle): verdicts
   per hypothesis, market data, sentiment, events, open questions. It is a cycle old: check every level
   against the tools, and say in the handoff what the synthesis should verify in this cycle's research.`},
	},
	"agent_prompts/synthesis_agent.md": {
		{`2. **The analysis of this cycle** (analysis.md, path given below): current positions, technical picture,
   scenarios, risk assessment, the Recommendation table and the handoff.`, `2. **The analysis of this cycle** (analysis.md, path given below): current positions, technical picture,
   scenarios, risk assessment, the Recommendation table and the handoff. The analysis ran at the same
   time as the research, from the plan and the last cycle's research.
   **The research of this cycle** (research.md, path given below), which the analysis has not seen: where
   it contradicts the analysis (a verdict refuted, an event inside the window, a level moved), the
   analysis is wrong for this cycle: drop or shrink the trade it affects, never enlarge one.`},
	},
	"agent_prompts/research_agent.md": {
		{`- **Handoff to Analysis** is copied into the analysis agent's mailbox: a self-contained briefing with the
  facts, levels and event times it must use, and what to check on the charts.`, `- **Handoff to Analysis** is copied into the analysis agent's mailbox: a self-contained briefing with the
  facts, levels and event times it must use, and what to check on the charts. The analysis agent works at
  the same time as you, so it reads this handoff in the next cycle; the synthesis agent reads your
  research in this one.`},
	},
}

// applyEdits makes the edits of path to data.
func applyEdits(path string, data []byte, edits []edit) ([]byte, error) {
	s := string(data)
	for _, e := range edits {
		if n := strings.Count(s, e.old); n != 1 {
			return nil, fmt.Errorf("the example's %s has %d copies of %q, want 1 to edit", path, n, firstLine(e.old))
		}
		s = strings.Replace(s, e.old, e.new, 1)
	}
	return []byte(s), nil
}

// firstLine is s up to its first line break.
func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}
