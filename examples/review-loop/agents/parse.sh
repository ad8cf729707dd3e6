#!/bin/sh
# The example's parser (step parse): turns the run's request into
# request.md, its objective, requirements and acceptance checks. Called as
# `sh agents/parse.sh WORKSPACE RUN_DIR OUTPUT` (see README.md, "How the
# scripts are called").
set -eu
. "$1/lib/agent.sh"
agent_begin parse "$@"
[ -n "$request" ] || { echo "parse: the run has no request input" >&2; exit 1; }
objective=$(printf '%s\n' "$request" | sed 's/ *\[[a-z]*\]//g')
cat > "$out" <<EOF
# Request

## Objective
$objective

## Requirements
- Do what the objective says, and nothing more.
- Fail safely: a bad input gets a clear error, never a crash.

## Acceptance checks
- The change does what the objective says.
- Tests cover the new behaviour and its failure paths.
- The docs say how to use it.
EOF
