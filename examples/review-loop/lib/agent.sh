# agent.sh: what every script of the example shares. Sourced by the
# agents, not run:
#   . "$1/lib/agent.sh"; agent_begin NAME "$@"

# agent_begin NAME WORKSPACE RUN_DIR OUTPUT checks the arguments, waits
# REVIEW_LOOP_PAUSE seconds if it is set, and sets me (the agent), dir (the
# run's directory), out (where to write the artifact), run (the run's id)
# and request (the run's request input).
agent_begin() {
	me=$1
	shift
	[ $# -eq 3 ] || { echo "usage: sh agents/$me.sh WORKSPACE RUN_DIR OUTPUT" >&2; exit 2; }
	dir=$2 out=$3 run=${AGENTRUNNER_CYCLE_ID:-}
	if [ -n "${REVIEW_LOOP_PAUSE:-}" ]; then sleep "$REVIEW_LOOP_PAUSE"; fi
	request=$(run_input request)
}

# run_input NAME prints the run's input NAME, from the "Run inputs" of the
# prompt.
run_input() {
	[ -n "${AGENTRUNNER_PROMPT_FILE:-}" ] || return 0
	sed -n "s/^- $1: //p" "$AGENTRUNNER_PROMPT_FILE" | head -n 1
}

# section FILE TITLE prints the non-blank lines of FILE's "## TITLE"
# section, without its heading.
section() {
	awk -v want="## $2" '/^## /{on = ($0 == want); next} on && NF' "$1"
}

# rounds FILE PREFIX prints the highest N of FILE's lines "PREFIX N: …",
# 0 if it has none: how many rounds the file has a record of.
rounds() {
	n=$(sed -n "s/^$2\([0-9][0-9]*\):.*/\1/p" "$1" 2>/dev/null | sort -n | tail -n 1)
	echo "${n:-0}"
}

# lines FILE PREFIX prints FILE's lines that start with PREFIX.
lines() {
	grep -- "^$2" "$1" || true
}

# has_switch WORD reports whether the request contains [WORD].
has_switch() {
	case $request in *"[$1]"*) return 0 ;; esac
	return 1
}
