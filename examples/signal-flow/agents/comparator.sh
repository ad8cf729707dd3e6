#!/bin/sh
# The example's comparator (Step=COMPARE): sets the goal beside the current
# state and hands the gap to the diagnoser. Called as
# `sh agents/comparator.sh WORKSPACE OUTPUT`; it writes its section to
# OUTPUT (see agents/README.md).
set -eu
if [ -n "${SIGNAL_FLOW_PAUSE:-}" ]; then sleep "$SIGNAL_FLOW_PAUSE"; fi
[ $# -eq 2 ] || { echo "usage: sh agents/comparator.sh WORKSPACE OUTPUT" >&2; exit 2; }
ws=$1 out=$2 doc=$1/docs/context/current_cycle.md
. "$ws/lib/signal_parser.sh"
. "$ws/lib/context_reader.sh"
[ -f "$doc" ] || { echo "comparator: no cycle document at $doc" >&2; exit 1; }

goal=$(context_goal "$doc")
state=$(context_section "$doc" "Current State")
iter=$(context_iteration "$doc")
cycle=${AGENTRUNNER_CYCLE_ID:-$(context_cycle "$doc")}
prev=$(signal_last "$doc") || prev=
from=$(signal_field "$prev" Agent) || from=none
conf=$(signal_field "$prev" Confidence) || conf=none
next=$(signal_field "$prev" Next) || next=none
seen="Previous agent: $from (Confidence=$conf, Next=$next)."
[ "$next" = comparator ] || seen="$seen It did not name comparator next; going on anyway."

{
	echo "Goal: $goal"
	echo "Current state: ${state:-(none given)}"
	echo "Iteration: $iter"
	echo "$seen"
	echo "Gap: the current state does not yet show the goal met."
	echo
	echo "#### Context Summary"
	echo "- Read: the cycle document (goal, current state, iteration $iter, the $from's SIGNAL BLOCK)"
	echo "- Decided: there is a gap between the current state and the goal"
	echo "- Hand-off: diagnoser, to find why the gap exists"
	echo
	echo "SIGNAL BLOCK"
	echo "Agent=comparator | Cycle=$cycle | Step=COMPARE | Confidence=4 | Risk=low | Next=diagnoser"
} >> "$out"
