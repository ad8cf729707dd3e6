#!/bin/sh
# The example's comparator (Step=COMPARE): sets the goal beside the current
# state and hands the gap to the diagnoser. Called as
# `sh agents/comparator.sh WORKSPACE OUTPUT`; it writes its section to
# OUTPUT (see agents/README.md).
set -eu
[ $# -eq 2 ] || { echo "usage: sh agents/comparator.sh WORKSPACE OUTPUT" >&2; exit 2; }
for lib in signal_parser context_reader agent; do . "$1/lib/$lib.sh"; done
agent_begin comparator "$1" "$2"

state=$(context_section "$doc" "Current State")

printf '%s\n' "Current state: ${state:-(none given)}" "Gap: the current state does not yet show the goal met." |
	agent_section COMPARE "Confidence=4 | Risk=low | Next=diagnoser" \
		"there is a gap between the current state and the goal" "diagnoser, to find why the gap exists"
