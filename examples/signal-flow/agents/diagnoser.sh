#!/bin/sh
# The example's diagnoser (Step=DIAGNOSE): names a likely cause of the gap
# the comparator found and hands it to the planner. Called as
# `sh agents/diagnoser.sh WORKSPACE OUTPUT`; it writes its section to
# OUTPUT (see agents/README.md).
set -eu
if [ -n "${SIGNAL_FLOW_PAUSE:-}" ]; then sleep "$SIGNAL_FLOW_PAUSE"; fi
[ $# -eq 2 ] || { echo "usage: sh agents/diagnoser.sh WORKSPACE OUTPUT" >&2; exit 2; }
ws=$1 out=$2 doc=$1/docs/context/current_cycle.md
. "$ws/lib/signal_parser.sh"
. "$ws/lib/context_reader.sh"
[ -f "$doc" ] || { echo "diagnoser: no cycle document at $doc" >&2; exit 1; }

goal=$(context_goal "$doc")
iter=$(context_iteration "$doc")
cycle=${AGENTRUNNER_CYCLE_ID:-$(context_cycle "$doc")}
prev=$(signal_last "$doc") || prev=
from=$(signal_field "$prev" Agent) || from=none
conf=$(signal_field "$prev" Confidence) || conf=none
next=$(signal_field "$prev" Next) || next=none
seen="Previous agent: $from (Confidence=$conf, Next=$next)."
[ "$next" = diagnoser ] || seen="$seen It did not name diagnoser next; going on anyway."

{
	echo "Goal: $goal"
	echo "Iteration: $iter"
	echo "$seen"
	echo "Diagnosis: the likely cause is the one piece of work standing between the current state and the goal."
	echo
	echo "#### Context Summary"
	echo "- Read: the cycle document (goal, iteration $iter, the $from's SIGNAL BLOCK)"
	echo "- Decided: one likely cause, not yet confirmed"
	echo "- Hand-off: planner, to plan a change that removes the cause"
	echo
	echo "SIGNAL BLOCK"
	echo "Agent=diagnoser | Cycle=$cycle | Step=DIAGNOSE | Confidence=3 | Risk=medium | Next=planner"
} >> "$out"
