# planning.sh: the Planning state of a task, sourced by agent.sh. It writes
# the plan of spec 5 (Summary, Affected Files, Implementation Steps) for the
# file the implementing script will write.
#
# A task whose title or description holds "[ask]" stands for one where the
# agent cannot choose alone: until a person has answered, the plan ends in a
# HUMAN INPUT NEEDED block and "Confidence: 40", below the Planning
# threshold (70), so the task waits at a human gate. Once someone answers
# (agentrunner answer RUN planning -m "…"), the step runs again with the
# answer in its prompt; the plan quotes it and ends "Confidence: 90".
#
# Reads from the prompt: "Task title:", "Task order:", "Backlog item:"
# (optional), "Language:" (optional), the section "Task description", and
# the answers the runner appends (lib.sh, answers).

title=$(need "Task title")
order=$(need_order)
item=$(field "Backlog item") || item=
language=$(field "Language") || language=
desc=$(need_section "Task description")
given=$(answers)

case "$title
$desc" in
*"[ask]"*) ask=yes ;;
*) ask= ;;
esac

if is_go "$language"; then
	file=task_$order.go
	what="a Go file in the package of the repository's root, with a function that stands for the change"
else
	file=docs/tasks/task-$order.md
	what="a markdown note of what the task changes and why"
fi

{
	echo "# Implementation Plan: task $order, $title"
	echo
	echo "## Summary"
	echo
	if [ -n "$item" ]; then
		echo "Task $order of the backlog item \"$item\": $title."
	else
		echo "Task $order: $title."
	fi
	if [ -n "$desc" ]; then
		echo
		printf '%s\n' "$desc"
	fi
	if [ -n "$ask" ] && [ -z "$given" ]; then
		echo
		echo "The task is marked [ask]: there are two ways to do it, and the choice is"
		echo "the team's, not the agent's. The plan below holds for both."
	fi
	echo
	echo "## Affected Files"
	echo
	echo "- \`$file\` (new): $what."
	echo
	echo "## Implementation Steps"
	echo
	echo "1. Write \`$file\`: the task's title and its place in the backlog item."
	echo "2. Stage it and commit it on the task's branch as \"task $order: $title\", with the"
	echo "   trailer \"Task-Key: <the task run's id>\". If the branch has a commit with that"
	echo "   trailer already, an earlier attempt made it: do not commit again."
	echo "3. Verify: the file is in the commit, and the worktree is clean."
	if [ -n "$given" ]; then
		echo
		echo "## Decision"
		echo
		echo "A person answered the question of an earlier visit; the plan follows the answer:"
		echo
		printf '%s\n' "$given" | sed 's/^/> /'
	fi
	echo
	if [ -n "$ask" ] && [ -z "$given" ]; then
		echo "HUMAN INPUT NEEDED"
		echo "Question: Which approach should task $order take?"
		echo "- Extend the existing code in place"
		echo "- Add a separate module for it"
		echo
		echo "Confidence: 40"
	elif [ -n "$given" ]; then
		echo "Confidence: 90"
	else
		echo "Confidence: 85"
	fi
} > "$out"
