package route

import (
	"testing"

	"github.com/agentrunner/agentrunner"
)

func TestRegex(t *testing.T) {
	re := func(s string) agentrunner.LabelSource { return agentrunner.LabelSource{Regex: s} }
	runLabelCases(t, []labelCase{
		{"first group", re(`Decision: (\w+)`), "Decision: approve\n", result{Label: "approve"}},
		{"whole match", re(`APPROVE|REJECT`), "we REJECT it\n", result{Label: "REJECT"}},
		{"first of several matches", re(`(?m)^Decision: (\w+)`), "Decision: reject\nDecision: approve\n", result{Label: "reject"}},
		{"first group of several", re(`(\w+)=(\w+)`), "next=review\n", result{Label: "next"}},
		{"named group", re(`next=(?P<label>\w+)`), "next=review\n", result{Label: "review"}},
		{"no match", re(`Decision: (\w+)`), "Verdict: approve\n",
			failed(`the output does not match the regular expression "Decision: (\\w+)"`)},
		{"first group outside the match", re(`(?m)^(?:Decision: (\w+)|Skip)$`), "intro\nSkip\n",
			failed(`the regular expression "(?m)^(?:Decision: (\\w+)|Skip)$" matched on line 2, but its first group took no part in the match`)},
		{"empty group", re(`Decision:(.*)`), "Decision:\n",
			failed(`the label read from the regular expression "Decision:(.*)" is empty`)},
	})
}
