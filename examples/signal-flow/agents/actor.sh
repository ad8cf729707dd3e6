#!/bin/sh
# The example's actor (Step=EXECUTE): carries out the planner's plan and
# hands the result to the verifier. Called as `sh agents/actor.sh WORKSPACE
# OUTPUT`; it writes its section to OUTPUT (see agents/README.md).
# Demo switch: when the goal contains [fail], it writes nothing and exits 1,
# so every attempt fails and the cycle fails.
set -eu
[ $# -eq 2 ] || { echo "usage: sh agents/actor.sh WORKSPACE OUTPUT" >&2; exit 2; }
for lib in signal_parser context_reader agent; do . "$1/lib/$lib.sh"; done
agent_begin actor "$1" "$2"

if context_has "$doc" '[fail]'; then
	echo "actor: the goal contains [fail], the demo switch for a failing agent: writing nothing, exiting 1" >&2
	exit 1
fi

echo "Done: both steps of the plan (this example's actor changes no files)." |
	agent_section EXECUTE "Confidence=4 | Risk=low | Next=verifier" \
		"the plan is carried out" "verifier, to check the result against the goal"
