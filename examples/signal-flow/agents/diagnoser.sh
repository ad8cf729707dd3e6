#!/bin/sh
# The example's diagnoser (Step=DIAGNOSE): names a likely cause of the gap
# the comparator found and hands it to the planner. Called as
# `sh agents/diagnoser.sh WORKSPACE OUTPUT`; it writes its section to
# OUTPUT (see agents/README.md).
set -eu
[ $# -eq 2 ] || { echo "usage: sh agents/diagnoser.sh WORKSPACE OUTPUT" >&2; exit 2; }
for lib in signal_parser context_reader agent; do . "$1/lib/$lib.sh"; done
agent_begin diagnoser "$1" "$2"

echo "Diagnosis: the likely cause is the one piece of work standing between the current state and the goal." |
	agent_section DIAGNOSE "Confidence=3 | Risk=medium | Next=planner" \
		"one likely cause, not yet confirmed" "planner, to plan a change that removes the cause"
