#!/bin/sh
# The example's actor (Step=EXECUTE): carries out the planner's plan and
# hands the result to the verifier. Called as `sh agents/actor.sh WORKSPACE
# OUTPUT`; it writes its section to OUTPUT (see agents/README.md).
# Demo switch: when the goal contains [fail], it writes nothing and exits 1,
# so every attempt fails and the cycle fails.
set -eu
if [ -n "${SIGNAL_FLOW_PAUSE:-}" ]; then sleep "$SIGNAL_FLOW_PAUSE"; fi
[ $# -eq 2 ] || { echo "usage: sh agents/actor.sh WORKSPACE OUTPUT" >&2; exit 2; }
ws=$1 out=$2 doc=$1/docs/context/current_cycle.md
. "$ws/lib/signal_parser.sh"
. "$ws/lib/context_reader.sh"
[ -f "$doc" ] || { echo "actor: no cycle document at $doc" >&2; exit 1; }

if context_has "$doc" '[fail]'; then
	echo "actor: the goal contains [fail], the demo switch for a failing agent: writing nothing, exiting 1" >&2
	exit 1
fi
goal=$(context_goal "$doc")
iter=$(context_iteration "$doc")
cycle=${AGENTRUNNER_CYCLE_ID:-$(context_cycle "$doc")}
prev=$(signal_last "$doc") || prev=
from=$(signal_field "$prev" Agent) || from=none
conf=$(signal_field "$prev" Confidence) || conf=none
next=$(signal_field "$prev" Next) || next=none
seen="Previous agent: $from (Confidence=$conf, Next=$next)."
[ "$next" = actor ] || seen="$seen It did not name actor next; going on anyway."

{
	echo "Goal: $goal"
	echo "Iteration: $iter"
	echo "$seen"
	echo "Done: both steps of the plan (this example's actor changes no files)."
	echo
	echo "#### Context Summary"
	echo "- Read: the cycle document (goal, iteration $iter, the $from's SIGNAL BLOCK)"
	echo "- Decided: the plan is carried out"
	echo "- Hand-off: verifier, to check the result against the goal"
	echo
	echo "SIGNAL BLOCK"
	echo "Agent=actor | Cycle=$cycle | Step=EXECUTE | Confidence=4 | Risk=low | Next=verifier"
} >> "$out"
