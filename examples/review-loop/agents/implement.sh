#!/bin/sh
# The example's implementer (step implement): works from the feature's
# capsule, feature.capsule.md: the reviewed plan of the checkpoint and,
# after a round that was not verified, what was tried and what failed. It
# carries the plan out and fixes each [FAIL] of the last verification.
set -eu
. "$1/lib/agent.sh"
agent_begin implement "$@"
capsule=$dir/feature.capsule.md
round=$(( $(rounds "$capsule" '- implementation round ') + 1 ))
status=$(section "$capsule" Status | head -n 1)
steps=$(grep '^[0-9][0-9]*\. ' "$capsule" || true)
fails=$(lines "$capsule" '- \[FAIL\] ')
if [ -z "$fails" ]; then
	fixes="- (none: nothing failed a verification yet)"
	tried="- implementation round $round: carried out the $(printf '%s\n' "$steps" | grep -c .) steps of the reviewed plan"
else
	fixes=$(printf '%s\n' "$fails" | sed 's/^- \[FAIL\] /- fixed: /')
	tried="- implementation round $round: fixed what the last verification failed: $(printf '%s\n' "$fails" | head -n 1 | sed 's/^- \[FAIL\] //')"
fi
{
	printf '# Implementation\n\n## Summary\n'
	echo "Round $round of run $run, from the feature's capsule, whose status says: $status"
	printf '\n## Changes\n'
	printf '%s\n' "$steps" | sed 's/^\([0-9]*\)\. /- step \1 done: /'
	printf '\n## Fixes\n%s\n' "$fixes"
	printf '\n## Changed files\n'
	section "$capsule" 'Key locations' | sed 's/:.*//'
	printf '\n## Attempts\n'
	lines "$capsule" '- implementation round '
	echo "$tried"
} > "$out"
