#!/bin/sh
# agent.sh: the one entry point of the example's scripted agents. The
# scripts provider of agentrunner.yaml calls it for every state step:
#
#   sh agents/scripts/agent.sh WORKSPACE OUTPUT PROMPT_FILE
#
# and it runs the script of the step named in AGENTRUNNER_STEP:
#
#   refining      refining.sh       the refined specification of a backlog item
#   splitting     splitting.sh      the item split into tasks (a ```json block)
#   planning      planning.sh       a task's plan; asks a person on "[ask]"
#   implementing  implementing.sh   a real commit in the task's worktree
#
# Each script reads what it needs from the prompt (the fields and sections
# of lib.sh), writes its markdown artifact, ending in "Confidence: N", to
# OUTPUT and exits 0. A prompt that lacks a field it needs fails the attempt:
# a message on stderr and exit 1. The scripts use sh, sed, awk, grep and git
# only, never the network or the clock, so a run gives the same artifacts
# every time (the commits' ids aside).
set -eu
step=${AGENTRUNNER_STEP:-}
[ $# -ge 2 ] || { echo "usage: AGENTRUNNER_STEP=STEP sh agents/scripts/agent.sh WORKSPACE OUTPUT [PROMPT_FILE]" >&2; exit 2; }
ws=$1 out=$2 prompt=${3:-${AGENTRUNNER_PROMPT_FILE:-}}
. "$ws/agents/scripts/lib.sh"

case $step in
refining | splitting | planning | implementing) ;;
"") die "AGENTRUNNER_STEP is not set; the runner sets it to the step being run" ;;
*) die "no script for this step; the scripts handle the steps refining, splitting, planning and implementing" ;;
esac
[ -n "$prompt" ] || die "no prompt file: give it as the third argument or in AGENTRUNNER_PROMPT_FILE"
[ -f "$prompt" ] || die "the prompt file $prompt does not exist"
# Absolute paths: the implementing script works in the task's worktree.
case $out in /*) ;; *) out=$PWD/$out ;; esac
case $prompt in /*) ;; *) prompt=$PWD/$prompt ;; esac

# The implementing script waits after its commit instead, the moment worth
# stopping the runner in: its retry must find the commit and not make it twice.
[ "$step" = implementing ] || pause
. "$ws/agents/scripts/$step.sh"
