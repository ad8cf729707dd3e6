#!/bin/sh
# The example's orchestrator (Step=ROUTE): opens each pass through the loop,
# reads the goal and where the last pass left off, and hands the cycle to
# the comparator. Called as `sh agents/orchestrator.sh WORKSPACE OUTPUT`;
# it writes its section to OUTPUT (see agents/README.md).
set -eu
[ $# -eq 2 ] || { echo "usage: sh agents/orchestrator.sh WORKSPACE OUTPUT" >&2; exit 2; }
for lib in signal_parser context_reader agent; do . "$1/lib/$lib.sh"; done
agent_begin orchestrator "$1" "$2"

# The runner opens `## Iteration N` with this section: this pass is the one
# after the last heading, unless that heading is already open and empty.
iter=$(awk '/^## Iteration([ \t]|$)/ { n++; open = 1 } /^### / { open = 0 }
	END { print open ? n : n + 1 }' "$doc")
[ -n "$prev" ] || seen="No SIGNAL BLOCK yet: this is the cycle's first pass."

echo "Route: start pass $iter at the comparator, then diagnoser, planner, actor, verifier." |
	agent_section ROUTE "Confidence=4 | Risk=low | Next=comparator" \
		"open pass $iter of the loop" "comparator, to set the goal beside the current state"
