#!/bin/sh
# The example's planner (Step=PLAN): turns the diagnosis into a short plan
# and hands it to the actor. Called as `sh agents/planner.sh WORKSPACE
# OUTPUT`; it writes its section to OUTPUT (see agents/README.md).
set -eu
if [ -n "${SIGNAL_FLOW_PAUSE:-}" ]; then sleep "$SIGNAL_FLOW_PAUSE"; fi
[ $# -eq 2 ] || { echo "usage: sh agents/planner.sh WORKSPACE OUTPUT" >&2; exit 2; }
ws=$1 out=$2 doc=$1/docs/context/current_cycle.md
. "$ws/lib/signal_parser.sh"
. "$ws/lib/context_reader.sh"
[ -f "$doc" ] || { echo "planner: no cycle document at $doc" >&2; exit 1; }

goal=$(context_goal "$doc")
iter=$(context_iteration "$doc")
cycle=${AGENTRUNNER_CYCLE_ID:-$(context_cycle "$doc")}
prev=$(signal_last "$doc") || prev=
from=$(signal_field "$prev" Agent) || from=none
conf=$(signal_field "$prev" Confidence) || conf=none
next=$(signal_field "$prev" Next) || next=none
seen="Previous agent: $from (Confidence=$conf, Next=$next)."
[ "$next" = planner ] || seen="$seen It did not name planner next; going on anyway."

{
	echo "Goal: $goal"
	echo "Iteration: $iter"
	echo "$seen"
	echo "Plan:"
	echo "1. Change what the diagnosis names, and nothing else."
	echo "2. Measure the result against the goal."
	echo
	echo "#### Context Summary"
	echo "- Read: the cycle document (goal, iteration $iter, the $from's SIGNAL BLOCK)"
	echo "- Decided: a two-step plan"
	echo "- Hand-off: actor, to carry the plan out"
	echo
	echo "SIGNAL BLOCK"
	echo "Agent=planner | Cycle=$cycle | Step=PLAN | Confidence=4 | Risk=low | Next=actor"
} >> "$out"
