#!/bin/sh
# The example's reporter (step report): sums the run up from the feature's
# capsule, stored done, and the last implementation and verification.
set -eu
. "$1/lib/agent.sh"
agent_begin report "$@"
capsule=$dir/feature.capsule.md
verdict=$(sed -n 's/^Verdict: //p' "$dir/verification.md" | head -n 1)
built=$(rounds "$dir/implementation.md" '- implementation round ')
designed=$(( $(rounds "$capsule" '- design round ') + 1 ))
{
	printf '# Report\n\n## Outcome\n'
	echo "Run $run: $verdict after $built implementation round(s), from a plan reviewed in $designed design round(s)."
	printf '\n## Capsule\n'
	echo "The capsule review-loop/feature-$run holds the reviewed plan, what was tried and the verification history"
	echo "(agentrunner capsule show review-loop/feature-$run); the run's directory has its text as feature.capsule.md."
	printf '\n## Rounds\n'
	lines "$capsule" '- design round '
	lines "$dir/implementation.md" '- implementation round '
	lines "$dir/verification.md" '- verification round '
} > "$out"
