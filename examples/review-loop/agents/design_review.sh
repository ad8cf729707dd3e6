#!/bin/sh
# The example's design reviewer (step design_review): reviews plan.md
# against the request and answers APPROVE or REQUEST_CHANGES. It asks for
# changes in the first round and approves the second.
# Demo switch: with [stubborn] in the request it never approves, so the
# loop reaches its cap and a person decides at the gate design_gate.
set -eu
. "$1/lib/agent.sh"
agent_begin design_review "$@"
round=$(( $(rounds "$dir/plan.md" '- design round ') + 1 ))
questions="- (none)"
if has_switch stubborn && [ "$round" -gt 1 ]; then
	verdict=REQUEST_CHANGES
	findings="- [BLOCKER] Split step 1 into smaller changes (round $round: this reviewer never approves, as the request says [stubborn])."
	questions="- Is the plan ever small enough for this reviewer?"
elif [ "$round" -eq 1 ]; then
	verdict=REQUEST_CHANGES
	findings="- [BLOCKER] The plan does not document the change, and the acceptance checks ask for docs.
- [WARNING] The tests cover the happy path only: test the failure paths too."
	questions="- Should the docs show an example? (the implementer's call)"
else
	verdict=APPROVE
	findings="- None: the plan covers every acceptance check."
fi
cat > "$out" <<EOF
# Design review

## Verdict
Verdict: $verdict
Round: $round

## Findings
$findings

## Open questions
$questions
EOF
