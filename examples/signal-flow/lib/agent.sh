# agent.sh: what every role's script does around its own work. Sourced by
# the agents after signal_parser.sh and context_reader.sh, not run:
#   for lib in signal_parser context_reader agent; do . "$WORKSPACE/lib/$lib.sh"; done

# agent_begin ROLE WORKSPACE OUTPUT waits SIGNAL_FLOW_PAUSE seconds if set,
# checks that the cycle document exists, and reads it into: role, out, doc,
# goal, iter (the number of iterations), cycle, from (the previous agent)
# and seen (a line on the previous agent's hand-off).
agent_begin() {
	role=$1 out=$3 doc=$2/docs/context/current_cycle.md
	if [ -n "${SIGNAL_FLOW_PAUSE:-}" ]; then sleep "$SIGNAL_FLOW_PAUSE"; fi
	[ -f "$doc" ] || { echo "$role: no cycle document at $doc" >&2; exit 1; }
	goal=$(context_goal "$doc")
	iter=$(context_iteration "$doc")
	cycle=${AGENTRUNNER_CYCLE_ID:-$(context_cycle "$doc")}
	prev=$(signal_last "$doc") || prev=
	from=$(signal_field "$prev" Agent) || from=none
	conf=$(signal_field "$prev" Confidence) || conf=none
	next=$(signal_field "$prev" Next) || next=none
	seen="Previous agent: $from (Confidence=$conf, Next=$next)."
	[ "$next" = "$role" ] || seen="$seen It did not name $role next; going on anyway."
}

# agent_section STAGE SIGNAL DECIDED HANDOFF appends the role's section to
# its OUTPUT: what it read, the lines of its work given on stdin, its
# Context Summary Block, and its SIGNAL BLOCK, whose last fields are
# SIGNAL ("Confidence=4 | Risk=low | Next=planner").
agent_section() {
	{
		echo "Goal: $goal"
		echo "Iteration: $iter"
		echo "$seen"
		cat
		echo
		echo "#### Context Summary"
		echo "- Read: the cycle document (goal, iteration $iter, the $from's SIGNAL BLOCK)"
		echo "- Decided: $3"
		echo "- Hand-off: $4"
		echo
		echo "SIGNAL BLOCK"
		echo "Agent=$role | Cycle=$cycle | Step=$1 | $2"
	} >> "$out"
}
