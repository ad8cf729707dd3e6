# refining.sh: the Refining state of a backlog item, sourced by agent.sh.
# It turns the item's title and description into a refined specification:
# a summary, acceptance criteria (as written, else one per part of the
# description) and open questions (the parts marked "[ask]"). Confident
# enough (85) to pass the backlog's threshold (60) without a person.
#
# Reads from the prompt: "Backlog item:", "Refining iteration:" (optional),
# "Language:" and "Framework:" (optional), and the sections "Item
# description" and "Item acceptance criteria" (optional).

title=$(need "Backlog item")
iteration=$(field "Refining iteration") || iteration=
language=$(field "Language") || language=
framework=$(field "Framework") || framework=
desc=$(item_description)
criteria=$(section "Item acceptance criteria") || criteria=
parts=$(printf '%s\n' "$desc" | bullets)
summary=$(printf '%s\n' "$desc" | prose)

{
	echo "# Refined specification: $title"
	echo
	if [ -n "$iteration" ]; then
		echo "Refining iteration: $iteration"
		echo
	fi
	echo "## Summary"
	echo
	if [ -n "$summary" ]; then
		echo "$summary"
	else
		echo "Deliver \"$title\" as the backlog item describes it."
	fi
	if [ -n "$parts" ]; then
		echo
		echo "The item has these parts, each a task of its own:"
		echo
		printf '%s\n' "$parts" | sed 's/^/- /'
	fi
	echo
	echo "## Acceptance criteria"
	echo
	if [ -n "$criteria" ]; then
		# As written, each a list item.
		printf '%s\n' "$criteria" | sed '/^[ 	]*$/d; s/^[-*+][ 	][ 	]*//; s/^/- /'
	elif [ -n "$parts" ]; then
		printf '%s\n' "$parts" | sed 's/^/- Done: /; s/$/, with a test that shows it./'
	else
		echo "- \"$title\" works as described, with a test that shows it."
	fi
	echo "- The repository builds and its tests pass on the task branches."
	echo
	echo "## Open questions"
	echo
	questions=$(
		printf '%s\n' "$parts" | grep -F '[ask]' |
			sed 's/^/- "/; s/$/" is marked [ask]: its planning will ask a person which approach to take./' || true
		if [ -z "$criteria" ]; then
			echo "- The item gives no acceptance criteria: the ones above are derived from its description; correct them if they miss the point."
		fi
		if [ -z "$language" ]; then
			echo "- The repository's language was not detected: the tasks will be documented rather than coded."
		fi
	)
	printf '%s\n' "${questions:-- None.}"
	echo
	echo "## Context"
	echo
	echo "- Language: ${language:-not detected}"
	echo "- Framework: ${framework:-none detected}"
	echo
	echo "Confidence: 85"
} > "$out"
