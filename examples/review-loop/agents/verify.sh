#!/bin/sh
# The example's verifier (step verify): checks the implementation against
# each acceptance check and answers VERIFIED, PARTIAL or NOT_VERIFIED. It
# finds the first round PARTIAL (the failure paths are untested) and
# verifies the second.
# Demo switch: with [broken] in the request nothing is ever verified
# (NOT_VERIFIED), so the loop reaches its cap and a person decides at the
# gate build_gate.
set -eu
. "$1/lib/agent.sh"
agent_begin verify "$@"
round=$(rounds "$dir/implementation.md" '- implementation round ')
if has_switch broken; then
	verdict=NOT_VERIFIED
elif [ "$round" -le 1 ]; then
	verdict=PARTIAL
else
	verdict=VERIFIED
fi
findings= n=0 nl='
'
while IFS= read -r check; do
	[ -n "$check" ] || continue
	n=$(( n + 1 ))
	what=${check#- }
	what=${what%.}
	case $verdict/$n in
	NOT_VERIFIED/1) findings="$findings- [FAIL] $what: it does not (the request says [broken]: nothing is ever verified)$nl" ;;
	PARTIAL/2) findings="$findings- [FAIL] $what: a bad input returns 500, not the clear error the requirements ask for$nl" ;;
	*) findings="$findings- [PASS] $what$nl" ;;
	esac
done <<EOF
$(section "$dir/request.md" 'Acceptance checks')
EOF
first=$(printf '%s' "$findings" | grep '^- \[FAIL\] ' | head -n 1 | sed 's/^- \[FAIL\] //')
{
	printf '# Verification\n\n## Verdict\nVerdict: %s\nRound: %s\n' "$verdict" "$round"
	printf '\n## Findings\n%s' "$findings"
	printf '\n## History\n'
	lines "$dir/feature.capsule.md" '- verification round '
	echo "- verification round $round: $verdict: ${first:-every acceptance check passes}"
	printf '\n## Open questions\n- (none)\n'
} > "$out"
