# splitting.sh: the Splitting state of a backlog item, sourced by agent.sh.
# One task per list item of the item's description, the list item's text
# its title; a description without a list gives two tasks, "Add <title>
# core" and "Document <title>". Each task depends on the one before, so the
# tasks run in order. The tasks are the ```json block at the end, which the
# runner reads (docs/agent-output.md); the tasks step starts one run of the
# task pipeline for each.
#
# Reads from the prompt: "Backlog item:" and the section "Item description".

title=$(need "Backlog item")
desc=$(item_description)
parts=$(printf '%s\n' "$desc" | bullets | sed 's/	/ /g')

# tasks: one line per task, "title<TAB>description".
if [ -n "$parts" ]; then
	n=$(printf '%s\n' "$parts" | awk 'END { print NR }')
	tasks=$(printf '%s\n' "$parts" | ITEM=$title N=$n awk '
		{ printf "%s\tPart %d of %d of the backlog item \"%s\": %s.\n", $0, NR, ENVIRON["N"], ENVIRON["ITEM"], $0 }
	')
else
	tasks=$(printf '%s\t%s\n' \
		"Add $title core" "Implement the core of \"$title\" as the backlog item describes it, with tests." \
		"Document $title" "Document \"$title\" for its users: what it does and how to use it.")
fi
count=$(printf '%s\n' "$tasks" | awk 'END { print NR }')

{
	echo "# Task split: $title"
	echo
	echo "$count tasks, each small enough for one pull request. Each depends on the one"
	echo "before it, so they are planned and implemented one after another."
	echo
	printf '%s\n' "$tasks" | awk -F '\t' '{ printf "%d. %s: %s\n", NR, $1, $2 }'
	echo
	echo '```json'
	echo '{"tasks": ['
	i=0
	printf '%s\n' "$tasks" | while IFS='	' read -r t d; do
		i=$((i + 1))
		deps=
		[ "$i" -eq 1 ] || deps=$((i - 1))
		sep=,
		[ "$i" -lt "$count" ] || sep=
		printf '  {"title": %s, "description": %s, "executionOrder": %d, "dependsOn": [%s]}%s\n' \
			"$(json_string "$t")" "$(json_string "$d")" "$i" "$deps" "$sep"
	done
	echo ']}'
	echo '```'
	echo
	echo "Confidence: 80"
} > "$out"
