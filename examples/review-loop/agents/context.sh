#!/bin/sh
# The example's context gatherer (step context): finds what the change
# touches and drafts the first plan, plan.md, for the design review.
set -eu
. "$1/lib/agent.sh"
agent_begin context "$@"
objective=$(section "$dir/request.md" Objective)
cat > "$out" <<EOF
# Plan

## Context
The request: $objective
The change belongs in the feature module, its tests and its docs; nothing else has to move.

## Key locations
- src/feature.go: where the behaviour goes
- src/feature_test.go: its tests
- docs/feature.md: how to use it

## Plan
1. Add the behaviour to src/feature.go.
2. Test the behaviour in src/feature_test.go.

## Adjustments
- none yet
EOF
