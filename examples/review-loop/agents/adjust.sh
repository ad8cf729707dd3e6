#!/bin/sh
# The example's adjuster (step adjust): revises plan.md after a design
# review that asked for changes: a new step per finding, and a line per
# finding in its Adjustments.
set -eu
. "$1/lib/agent.sh"
agent_begin adjust "$@"
plan=$dir/plan.md
round=$(( $(rounds "$plan" '- design round ') + 1 ))
next=$(( $(grep -c '^[0-9][0-9]*\. ' "$plan" || true) + 1 ))
steps= adjustments= nl='
'
while IFS= read -r finding; do
	case $finding in "- ["*"] "*) ;; *) continue ;; esac
	what=${finding#- \[*\] }
	steps="$steps$next. Address: $what$nl"
	adjustments="$adjustments- design round $round: ${finding#- } → step $next$nl"
	next=$(( next + 1 ))
done <<EOF
$(section "$dir/design_review.md" Findings)
EOF
{
	printf '# Plan\n\n## Context\n'
	section "$plan" Context
	printf '\n## Key locations\n'
	section "$plan" 'Key locations'
	printf '\n## Plan\n'
	section "$plan" Plan
	printf '%s' "$steps"
	printf '\n## Adjustments\n'
	lines "$plan" '- design round '
	printf '%s' "$adjustments"
} > "$out"
