#!/bin/sh
# The example's verifier (Step=VERIFY): checks the actor's result against
# the goal and ends the cycle (Next=STOP). Called as
# `sh agents/verifier.sh WORKSPACE OUTPUT`; it writes its section to OUTPUT
# (see agents/README.md).
# Demo switch: when the goal contains [loop], it never accepts and sends the
# cycle back to the orchestrator, until the iteration cap ends it.
set -eu
if [ -n "${SIGNAL_FLOW_PAUSE:-}" ]; then sleep "$SIGNAL_FLOW_PAUSE"; fi
[ $# -eq 2 ] || { echo "usage: sh agents/verifier.sh WORKSPACE OUTPUT" >&2; exit 2; }
ws=$1 out=$2 doc=$1/docs/context/current_cycle.md
. "$ws/lib/signal_parser.sh"
. "$ws/lib/context_reader.sh"
[ -f "$doc" ] || { echo "verifier: no cycle document at $doc" >&2; exit 1; }

goal=$(context_goal "$doc")
iter=$(context_iteration "$doc")
cycle=${AGENTRUNNER_CYCLE_ID:-$(context_cycle "$doc")}
prev=$(signal_last "$doc") || prev=
from=$(signal_field "$prev" Agent) || from=none
conf=$(signal_field "$prev" Confidence) || conf=none
next=$(signal_field "$prev" Next) || next=none
seen="Previous agent: $from (Confidence=$conf, Next=$next)."
[ "$next" = verifier ] || seen="$seen It did not name verifier next; going on anyway."

if context_has "$doc" '[loop]'; then
	verdict="not met: the goal contains [loop], so this verifier never accepts"
	decided="the goal is not met; send the cycle round again"
	handoff="orchestrator, to open another pass"
	signal="Confidence=2 | Risk=medium | Next=orchestrator"
else
	verdict="met: the actor reports the plan carried out (this example's verifier accepts the first result)"
	decided="the goal is met; end the cycle"
	handoff="STOP, as nothing is left to do"
	signal="Confidence=5 | Risk=low | Next=STOP"
fi

{
	echo "Goal: $goal"
	echo "Iteration: $iter"
	echo "$seen"
	echo "Verdict: $verdict."
	echo
	echo "#### Context Summary"
	echo "- Read: the cycle document (goal, iteration $iter, the $from's SIGNAL BLOCK)"
	echo "- Decided: $decided"
	echo "- Hand-off: $handoff"
	echo
	echo "SIGNAL BLOCK"
	echo "Agent=verifier | Cycle=$cycle | Step=VERIFY | $signal"
} >> "$out"
