# lib.sh: what the example's scripted agents share. Sourced by agent.sh,
# not run. The scripts know a task only through the prompt the runner
# built from the agent's YAML, so they read two kinds of things from it:
#
#   fields    a line "Name: value" (e.g. "Task title: Add the parser");
#             the first such line counts, so the agents' prompts put their
#             fields before any text substituted from artifacts;
#   sections  the lines under a heading "## Name", up to the next heading
#             of level 1 or 2 ("# " or "## "); blank lines around them
#             are dropped.
#
# It uses: step (the step being run), prompt (the prompt file).

# die MESSAGE: says what is wrong on stderr and fails the attempt.
die() {
	echo "dev-pipeline${step:+ $step}: $*" >&2
	exit 1
}

# pause: waits DEV_PIPELINE_PAUSE seconds (e.g. 2 or 0.5) when it is set,
# so a person can watch the steps go by, or stop the runner in one.
pause() {
	if [ -n "${DEV_PIPELINE_PAUSE:-}" ]; then sleep "$DEV_PIPELINE_PAUSE"; fi
}

# field NAME prints the value of the prompt's first "NAME:" line, without
# the spaces around it; it fails if the prompt has no such line.
field() {
	NAME="$1:" awk '
		{ sub(/\r$/, "") }
		index($0, ENVIRON["NAME"]) == 1 {
			v = substr($0, length(ENVIRON["NAME"]) + 1)
			sub(/^[ \t]+/, "", v); sub(/[ \t]+$/, "", v)
			print v; found = 1; exit
		}
		END { exit !found }
	' "$prompt"
}

# need NAME: field NAME, or fail the attempt when the line is missing or
# empty, naming the line the prompt should have.
need() {
	need_v=$(field "$1") || die "the prompt has no \"$1:\" line; the agent's prompt (agents/defaults or agents/variants) must keep it"
	[ -n "$need_v" ] || die "the prompt's \"$1:\" line is empty"
	printf '%s\n' "$need_v"
}

# section NAME prints the lines under the prompt's first "## NAME"
# heading; it fails if the prompt has no such heading.
section() {
	HEADING="## $1" awk '
		{ sub(/\r$/, "") }
		!on && $0 == ENVIRON["HEADING"] { on = 1; found = 1; next }
		on && /^##? / { exit }
		on {
			if ($0 ~ /^[ \t]*$/) { blank++; next }
			if (n) for (; blank > 0; blank--) print ""
			blank = 0; print; n++
		}
		END { exit !found }
	' "$prompt"
}

# need_section NAME: section NAME, or fail the attempt when the heading is
# missing.
need_section() {
	section "$1" || die "the prompt has no \"## $1\" heading; the agent's prompt (agents/defaults or agents/variants) must keep it"
}

# answers prints the answers a person gave to this step's questions, one
# a line, oldest first: the "Answer (…):" lines of the section the runner
# appends to the prompt once a gate was answered. Nothing if there is none.
answers() {
	awk '
		{ sub(/\r$/, "") }
		$0 == "## Answers from a person" { on = 1; next }
		on && /^##? / { on = 0 }
		on && /^[ \t]*Answer[ \t]*(\([^)]*\))?:/ {
			sub(/^[ \t]*Answer[ \t]*(\([^)]*\))?:[ \t]*/, ""); print
		}
	' "$prompt"
}

# json_string TEXT prints TEXT as a JSON string, quotes included.
json_string() {
	printf '%s\n' "$1" | sed 's/\\/\\\\/g; s/"/\\"/g; s/	/\\t/g' | awk '
		{ s = s (NR > 1 ? "\\n" : "") $0 }
		END { printf "\"%s\"", s }
	'
}

# go_string TEXT prints TEXT as a Go string literal, quotes included.
go_string() {
	printf '"%s"' "$(printf '%s' "$1" | sed 's/\\/\\\\/g; s/"/\\"/g; s/	/\\t/g')"
}

# is_go LANGUAGE: true when the detected language is Go.
is_go() {
	case $1 in [Gg][Oo]) return 0 ;; esac
	return 1
}

# item_description prints the backlog item's description, the section
# "Item description" of the prompt. A description typed on one command
# line, with "\n" between its lines, is given its lines back.
item_description() {
	id_text=$(need_section "Item description")
	case $id_text in
	*"
"*) printf '%s\n' "$id_text" ;;
	*'\n'*) printf '%s\n' "$id_text" | awk '{ gsub(/\\n/, "\n"); print }' ;;
	*) printf '%s\n' "$id_text" ;;
	esac
}

# bullets prints the text of the top-level list items ("- ", "* " or
# "+ " at the start of a line) of its standard input, one a line.
bullets() {
	sed -n 's/^[-*+][ 	][ 	]*\(.*[^ 	]\)[ 	]*$/\1/p'
}

# prose prints the lines of its standard input that are neither blank nor
# list items, joined by spaces.
prose() {
	awk '
		/^[ \t]*$/ || /^[-*+][ \t]/ { next }
		{ sub(/^[ \t]+/, ""); sub(/[ \t]+$/, ""); s = s (s == "" ? "" : " ") $0 }
		END { if (s != "") print s }
	'
}

# need_order prints the task's executionOrder, the "Task order:" line, and
# fails the attempt unless it is a positive integer.
need_order() {
	no_v=$(need "Task order")
	case $no_v in
	"" | *[!0-9]* | 0*) die "the prompt's \"Task order:\" line is \"$no_v\", not a positive integer" ;;
	esac
	printf '%s\n' "$no_v"
}
