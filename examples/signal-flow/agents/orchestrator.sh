#!/bin/sh
# The example's orchestrator (Step=ROUTE): opens each pass through the loop,
# reads the goal and where the last pass left off, and hands the cycle to
# the comparator. Called as `sh agents/orchestrator.sh WORKSPACE OUTPUT`;
# it writes its section to OUTPUT (see agents/README.md).
set -eu
if [ -n "${SIGNAL_FLOW_PAUSE:-}" ]; then sleep "$SIGNAL_FLOW_PAUSE"; fi
[ $# -eq 2 ] || { echo "usage: sh agents/orchestrator.sh WORKSPACE OUTPUT" >&2; exit 2; }
ws=$1 out=$2 doc=$1/docs/context/current_cycle.md
. "$ws/lib/signal_parser.sh"
. "$ws/lib/context_reader.sh"
[ -f "$doc" ] || { echo "orchestrator: no cycle document at $doc" >&2; exit 1; }

goal=$(context_goal "$doc")
cycle=${AGENTRUNNER_CYCLE_ID:-$(context_cycle "$doc")}
# The runner opens `## Iteration N` with this section: this pass is the one
# after the last heading, unless that heading is already open and empty.
iter=$(awk '/^## Iteration([ \t]|$)/ { n++; open = 1 } /^### / { open = 0 }
	END { print open ? n : n + 1 }' "$doc")
prev=$(signal_last "$doc") || prev=
if [ -z "$prev" ]; then
	seen="No SIGNAL BLOCK yet: this is the cycle's first pass."
else
	from=$(signal_field "$prev" Agent) || from=unknown
	conf=$(signal_field "$prev" Confidence) || conf=none
	next=$(signal_field "$prev" Next) || next=none
	seen="The $from handed back with Confidence=$conf and Next=$next."
	[ "$next" = orchestrator ] || seen="$seen It did not name orchestrator next; going on anyway."
fi

{
	echo "Goal: $goal"
	echo "Iteration: $iter"
	echo "$seen"
	echo "Route: start pass $iter at the comparator, then diagnoser, planner, actor, verifier."
	echo
	echo "#### Context Summary"
	echo "- Read: the cycle document (goal, iteration count, last SIGNAL BLOCK)"
	echo "- Decided: open pass $iter of the loop"
	echo "- Hand-off: comparator, to set the goal beside the current state"
	echo
	echo "SIGNAL BLOCK"
	echo "Agent=orchestrator | Cycle=$cycle | Step=ROUTE | Confidence=4 | Risk=low | Next=comparator"
} >> "$out"
