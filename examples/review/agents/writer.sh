#!/bin/sh
# The example's writer: drafts on the run's topic. $1 is the run's
# directory, $2 where to write the draft; the prompt is on stdin.
set -eu
topic=$(sed -n 's/^- topic: //p' "$AGENTRUNNER_PROMPT_FILE" | head -n 1)
cat > "$2" <<DRAFT
# Draft

## Text
A short note on ${topic:-an unnamed topic}: what it is, why it matters, and
what to do about it.

## Revisions
- first draft
DRAFT
