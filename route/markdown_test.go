package route

import (
	"testing"

	"github.com/agentrunner/agentrunner"
)

func TestSection(t *testing.T) {
	sec := func(s string) agentrunner.LabelSource { return agentrunner.LabelSource{Section: s} }
	review := "# Review of cycle 20250101_000000\n\n## Findings\n\n- the retry path is untested\n\n" +
		"## Verdict\n<!-- APPROVE or REJECT, alone on the first line -->\n\n**REJECT**\n\nThe retry path needs a test.\n"
	runLabelCases(t, []labelCase{
		{"first line after a comment", sec("Verdict"), review, result{Label: "REJECT"}},
		{"heading case, spacing and colon ignored", sec("verdict"), "## VERDICT :\nAPPROVE\n", result{Label: "APPROVE"}},
		{"list item", sec("Verdict"), "## Verdict\n\n- APPROVE\n- with nits\n", result{Label: "APPROVE"}},
		{"quoted", sec("Verdict"), "## Verdict\n> _APPROVE_\n", result{Label: "APPROVE"}},
		{"code fence", sec("Verdict"), "## Verdict\n```text\nAPPROVE\n```\n", result{Label: "APPROVE"}},
		{"setext heading", sec("Verdict"), "Verdict\n-------\n\nAPPROVE\n", result{Label: "APPROVE"}},
		{"emphasised heading", sec("Verdict"), "### **Verdict**\nAPPROVE\n", result{Label: "APPROVE"}},
		{"CRLF", sec("Verdict"), "## Verdict\r\n\r\nAPPROVE\r\n", result{Label: "APPROVE"}},
		{"last section of the title", sec("Verdict"), "## Verdict\nREJECT\n\n## Fixes\ndone\n\n## Verdict\nAPPROVE\n", result{Label: "APPROVE"}},
		{"nested section", sec("Verdict"), "# Review\n## Round 1\n### Verdict\nAPPROVE\n## Round 2\n", result{Label: "APPROVE"}},
		{"missing", sec("Verdict"), "# Review\n\n## Findings\nnone\n\n```\n## Verdict\nAPPROVE\n```\n",
			failed("the output has no section \"Verdict\": expected a heading such as `## Verdict` whose first line is the label; its headings are \"Review\", \"Findings\"")},
		{"missing, no headings", sec("Verdict"), "Verdict: APPROVE\n",
			failed("the output has no section \"Verdict\": expected a heading such as `## Verdict` whose first line is the label; the output has no headings")},
		{"heading in a comment", sec("Verdict"), "<!--\n## Verdict\nAPPROVE\n-->\n",
			failed("the output has no section \"Verdict\": expected a heading such as `## Verdict` whose first line is the label; the output has no headings")},
		{"empty", sec("Verdict"), "# Review\n\n## Verdict\n\n<!-- APPROVE or REJECT -->\n\n## Notes\nAPPROVE\n",
			failed(`section "Verdict" (line 3) is empty: expected the label on its first line`)},
		{"empty at the end", sec("Verdict"), "## Verdict\n",
			failed(`section "Verdict" (line 1) is empty: expected the label on its first line`)},
		{"sub-heading first", sec("Verdict"), "## Verdict\n\n### Reasons\nAPPROVE\n",
			failed(`section "Verdict" (line 1) has no line of its own before its sub-heading "### Reasons": expected the label on its first line`)},
		{"a sentence is not a label", sec("Verdict"), "## Verdict\nI would approve this, but the\ntests fail.\n",
			result{Label: "I would approve this, but the"}},
	})
}

func TestField(t *testing.T) {
	fld := func(s string) agentrunner.LabelSource { return agentrunner.LabelSource{Field: s} }
	runLabelCases(t, []labelCase{
		{"plain", fld("Verdict"), "# Review\n\nVerdict: APPROVE\n", result{Label: "APPROVE"}},
		{"bold name", fld("Verdict"), "**Verdict**: REJECT\n", result{Label: "REJECT"}},
		{"bold name and colon", fld("Verdict"), "**Verdict:** REJECT\n", result{Label: "REJECT"}},
		{"underscored name", fld("Verdict"), "__Verdict__ : `REJECT`\n", result{Label: "REJECT"}},
		{"list item", fld("Verdict"), "## Summary\n- Risk: low\n- Verdict: **APPROVE**\n", result{Label: "APPROVE"}},
		{"list item, bold", fld("Verdict"), "* **Verdict**: APPROVE\n", result{Label: "APPROVE"}},
		{"quoted", fld("Verdict"), "> Verdict: APPROVE\n", result{Label: "APPROVE"}},
		{"indented", fld("Verdict"), "   Verdict: APPROVE\n", result{Label: "APPROVE"}},
		{"name case ignored", fld("Verdict"), "VERDICT: approve\n", result{Label: "approve"}},
		{"name with spaces", fld("Next step"), "Next step: deploy\n", result{Label: "deploy"}},
		{"name with pattern characters", fld("Score (1-5)"), "Score (1-5): 4\n", result{Label: "4"}},
		{"value keeps its colons", fld("Next"), "Next: review: again\n", result{Label: "review: again"}},
		{"CRLF", fld("Verdict"), "Verdict: APPROVE\r\nNotes: none\r\n", result{Label: "APPROVE"}},
		{"the last one wins", fld("Verdict"),
			"Verdict: REJECT\n\nAfter the fix:\n\n**Verdict**: APPROVE\n\nIn short, as said above.\n", result{Label: "APPROVE"}},
		{"guidance in comments is not read", fld("Verdict"), "Verdict: APPROVE\n<!-- Verdict: APPROVE or REJECT -->\n", result{Label: "APPROVE"}},
		{"missing", fld("Verdict"), "# Review\nAll good.\n",
			failed("the output has no field \"Verdict\": expected a line `Verdict: LABEL` (or `**Verdict**: LABEL`, `- Verdict: LABEL`)")},
		{"another field that ends like it", fld("Verdict"), "Final verdict: APPROVE\n",
			failed("the output has no field \"Verdict\": expected a line `Verdict: LABEL` (or `**Verdict**: LABEL`, `- Verdict: LABEL`)")},
		{"another field that starts like it", fld("Verdict"), "Verdicts: APPROVE\n",
			failed("the output has no field \"Verdict\": expected a line `Verdict: LABEL` (or `**Verdict**: LABEL`, `- Verdict: LABEL`)")},
		{"not at the start of a line", fld("Verdict"), "The Verdict: APPROVE\n",
			failed("the output has no field \"Verdict\": expected a line `Verdict: LABEL` (or `**Verdict**: LABEL`, `- Verdict: LABEL`)")},
		{"value on the next line", fld("Verdict"), "# Review\n**Verdict:**\nAPPROVE\n",
			failed("field \"Verdict\" (line 2) has no value: expected `Verdict: LABEL` on one line")},
		{"last one empty", fld("Verdict"), "Verdict: APPROVE\nVerdict: **\n",
			failed("field \"Verdict\" (line 2) has no value: expected `Verdict: LABEL` on one line")},
	})
}
