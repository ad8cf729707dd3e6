#!/bin/sh
# The example's verifier (Step=VERIFY): checks the actor's result against
# the goal and ends the cycle (Next=STOP). Called as
# `sh agents/verifier.sh WORKSPACE OUTPUT`; it writes its section to OUTPUT
# (see agents/README.md).
# Demo switch: when the goal contains [loop], it never accepts and sends the
# cycle back to the orchestrator, until the iteration cap ends it.
set -eu
[ $# -eq 2 ] || { echo "usage: sh agents/verifier.sh WORKSPACE OUTPUT" >&2; exit 2; }
for lib in signal_parser context_reader agent; do . "$1/lib/$lib.sh"; done
agent_begin verifier "$1" "$2"

if context_has "$doc" '[loop]'; then
	echo "Verdict: not met: the goal contains [loop], so this verifier never accepts." |
		agent_section VERIFY "Confidence=2 | Risk=medium | Next=orchestrator" \
			"the goal is not met; send the cycle round again" "orchestrator, to open another pass"
else
	echo "Verdict: met: the actor reports the plan carried out (this example's verifier accepts the first result)." |
		agent_section VERIFY "Confidence=5 | Risk=low | Next=STOP" \
			"the goal is met; end the cycle" "STOP, as nothing is left to do"
fi
