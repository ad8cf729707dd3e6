# implementing.sh: the Implementing state of a task, sourced by agent.sh.
# It makes a real change in the task's worktree (its working directory, a
# git checkout on the task's own branch) and commits it:
#
#   Go repository   task_<order>.go, in the package of the root's Go files
#   any other       docs/tasks/task-<order>.md
#
# committed as "task <order>: <title>" with the trailer "Task-Key: <run id>".
# The commit is idempotent: an attempt repeated after a crash finds the
# commit with its run's Task-Key on the branch and does not commit again.
# Then it waits DEV_PIPELINE_PAUSE seconds, if set (stop the runner now to
# see the retry find the commit), and writes the implementation artifact:
# the files changed, the commit, the branch and a verification log.
#
# Reads from the prompt: "Task title:", "Task order:", "Backlog item:"
# (optional) and "Language:" (optional). From the environment:
# AGENTRUNNER_CYCLE_ID (the task run's id, the Task-Key) and
# AGENTRUNNER_WORKDIR (the worktree; the working directory when unset).

title=$(need "Task title")
order=$(need_order)
item=$(field "Backlog item") || item=
language=$(field "Language") || language=
run=${AGENTRUNNER_CYCLE_ID:-}
[ -n "$run" ] || die "AGENTRUNNER_CYCLE_ID is not set; the runner sets it to the run's id, the commit's Task-Key"
workdir=${AGENTRUNNER_WORKDIR:-.}
cd "$workdir" || die "cannot enter the working directory $workdir"
git rev-parse --is-inside-work-tree > /dev/null 2>&1 || die "the working directory $workdir is not a git checkout; the task's worktree should be"

# git, with the commit's author and no signing key needed.
gitc() {
	git -c user.name=agentrunner -c user.email=agentrunner@localhost -c commit.gpgsign=false "$@"
}

key="Task-Key: $run"

# keyed_commit prints the id of the newest commit of the branch whose
# message has the line "Task-Key: <run id>", if any.
keyed_commit() {
	git rev-parse -q --verify HEAD > /dev/null || return 0
	git log --format='%x01%H%n%B' HEAD | KEY=$key awk '
		index($0, "\001") == 1 { sha = substr($0, 2); next }
		$0 == ENVIRON["KEY"] { print sha; exit }
	'
}

if is_go "$language"; then
	file=task_$order.go
	# The package of the Go files at the root, so the repository still builds.
	pkg=
	for f in *.go; do
		case $f in *_test.go | "*.go") continue ;; esac
		pkg=$(sed -n 's/^package[ 	][ 	]*\([A-Za-z_][A-Za-z0-9_]*\).*/\1/p' "$f" | sed -n 1p)
		[ -z "$pkg" ] || break
	done
	pkg=${pkg:-main}
else
	file=docs/tasks/task-$order.md
fi

found=$(keyed_commit)
if [ -n "$found" ]; then
	made="found on the branch: an earlier attempt of this run made it, so this one did not commit again"
else
	if is_go "$language"; then
		{
			echo "// $file: task $order${item:+ of the backlog item \"$item\"}: $title"
			echo "// Written by the dev-pipeline example's scripted implementing agent, as a"
			echo "// stand-in for the change a coding agent would make."
			echo
			echo "package $pkg"
			echo
			echo "// task$order returns the title of task $order, the change this file stands for."
			echo "func task$order() string {"
			printf '\treturn %s\n' "$(go_string "$title")"
			echo "}"
		} > "$file"
	else
		mkdir -p docs/tasks
		{
			echo "# Task $order: $title"
			echo
			[ -z "$item" ] || { echo "Part of the backlog item \"$item\"."; echo; }
			echo "Written by the dev-pipeline example's scripted implementing agent, as a"
			echo "stand-in for the change a coding agent would make."
		} > "$file"
	fi
	git add -- "$file"
	# --allow-empty: the commit carries the Task-Key even if the file was
	# there already, unchanged, so a later attempt still finds it.
	gitc commit -q --allow-empty -m "task $order: $title" -m "$key" > /dev/null ||
		die "git commit failed in $workdir"
	found=$(git rev-parse HEAD)
	made="made by this attempt"
fi

pause

branch=$(git rev-parse --abbrev-ref HEAD)
changed=$(git show --name-status --format= "$found" | sed 's/^A[ 	]*/added: /; s/^M[ 	]*/modified: /; s/^D[ 	]*/deleted: /')
subject=$(git log -1 --format=%s "$found")
# Confidence 90 when the file is in the commit; else 50, below the
# threshold, so a person looks at it.
if git cat-file -e "HEAD:$file" 2> /dev/null; then in_head="yes, in HEAD" confidence=90; else in_head="NO, missing from HEAD" confidence=50; fi
dirty=$(git status --porcelain -- "$file")

{
	echo "# Implementation: task $order, $title"
	echo
	echo "## Files Changed"
	echo
	if [ -n "$changed" ]; then
		printf '%s\n' "$changed" | sed 's/^/- /'
	else
		echo "- none: \`$file\` was already in this state; the commit only records the task"
	fi
	echo
	echo "## Commit"
	echo
	echo "- Commit: $(git rev-parse HEAD)"
	[ "$found" = "$(git rev-parse HEAD)" ] || echo "- The task's commit: $found"
	echo "- Branch: $branch"
	echo "- Message: $subject"
	echo "- $key, $made"
	echo
	echo "## Verification Log"
	echo
	echo '```'
	echo "\$ git cat-file -e HEAD:$file"
	echo "$in_head"
	echo "\$ git status --porcelain -- $file"
	echo "${dirty:-clean}"
	echo "\$ git log -1 --format=%s $found"
	echo "$subject"
	echo '```'
	echo
	echo "## Notes"
	echo
	echo "A scripted stand-in: it writes one file and no tests. A coding agent (the"
	echo "claude-code provider) follows the plan, writes tests first and runs them."
	echo
	echo "Confidence: $confidence"
} > "$out"
