#!/bin/sh
# The example's planner (Step=PLAN): turns the diagnosis into a short plan
# and hands it to the actor. Called as `sh agents/planner.sh WORKSPACE
# OUTPUT`; it writes its section to OUTPUT (see agents/README.md).
set -eu
[ $# -eq 2 ] || { echo "usage: sh agents/planner.sh WORKSPACE OUTPUT" >&2; exit 2; }
for lib in signal_parser context_reader agent; do . "$1/lib/$lib.sh"; done
agent_begin planner "$1" "$2"

printf '%s\n' "Plan:" "1. Change what the diagnosis names, and nothing else." "2. Measure the result against the goal." |
	agent_section PLAN "Confidence=4 | Risk=low | Next=actor" \
		"a two-step plan" "actor, to carry the plan out"
