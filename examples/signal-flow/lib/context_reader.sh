# context_reader.sh: reads the cycle document, docs/context/current_cycle.md,
# which the runner writes. Sourced by the agents, not run:
#   . "$WORKSPACE/lib/context_reader.sh"

# context_section FILE TITLE prints the text under `## TITLE` up to the next
# heading or `---`, joined on one line (blank lines dropped).
context_section() {
	awk -v title="## $2" '
		{ t = $0; sub(/[ \t\r]+$/, "", t) }
		on && (t ~ /^#/ || t ~ /^---+$/) { exit }
		on { sub(/^[ \t]+/, "", t); if (t != "") s = s (s == "" ? "" : " ") t }
		t == title { on = 1 }
		END { print s }
	' "$1"
}

# context_goal FILE prints the cycle's goal on one line.
context_goal() {
	context_section "$1" Goal
}

# context_iteration FILE prints the number of `## Iteration` headings, 0 if
# there are none.
context_iteration() {
	awk '/^## Iteration([ \t]|$)/ { n++ } END { print n + 0 }' "$1"
}

# context_cycle FILE prints the cycle's id, from the line `# Cycle: ID`.
context_cycle() {
	awk '/^# Cycle:/ { sub(/^# Cycle:[ \t]*/, ""); sub(/[ \t\r]+$/, ""); print; exit }' "$1"
}

# context_has FILE WORD succeeds if the goal contains WORD literally, e.g.
# `[loop]` (no pattern matching: brackets are brackets).
context_has() {
	case $(context_goal "$1") in
	*"$2"*) return 0 ;;
	esac
	return 1
}
