#!/bin/sh
# The example's fixer: revises the draft after the review, adding a line to
# its Revisions.
set -eu
n=$(( $(grep -c '^- revision ' "$1/draft.md" || true) + 1 ))
{ cat "$1/draft.md"; echo "- revision $n: $(sed -n '/^## Findings/{n;p;}' "$1/review.md")"; } > "$2"
