#!/bin/sh
# The example's reviewer: a strict one. It approves a draft once it has had
# revisions_needed revisions (a run input, 5 by default: more than the loop
# allows, so by default the loop's cap hands the run to a person).
set -eu
need=$(sed -n 's/^- revisions_needed: //p' "$AGENTRUNNER_PROMPT_FILE" | head -n 1)
done=$(grep -c '^- revision ' "$1/draft.md" || true)
if [ "$done" -ge "${need:-5}" ]; then
	verdict=APPROVE findings="None: the draft is ready."
else
	verdict=REVISE findings="Tighten the text ($done of ${need:-5} revisions so far)."
fi
cat > "$2" <<REVIEW
# Review

## Verdict
Verdict: $verdict

## Findings
$findings
REVIEW
