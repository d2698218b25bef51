#!/usr/bin/env bash
# Seed-for-seed comparison of every recipe in configs/ between a revision
# and the working tree: configs' TestRecipesRun runs each recipe for two
# steps on a tiny model in both trees and writes its metrics and eval lines
# without timings; the two directories must be identical. Both runs use the
# same GOMAXPROCS, since the engine's reductions split by thread.
#
# Usage: scripts/recipes-diff.sh REV   (REV at or after the commit that
# added RLVR_RECIPE_METRICS to configs_test.go; each tree runs its own
# test, so the comparison holds when both run it with the same settings:
# since the test moved to the world's pretrained model, REV at or after
# that commit)
# RECIPES, a go test -run pattern of recipe names (e.g. 'eapo'), compares
# only those.
set -euo pipefail
cd "$(dirname "$0")/.."
rev=${1:?usage: scripts/recipes-diff.sh REV}
tmp=$(mktemp -d)
trap 'git worktree remove --force "$tmp/tree" 2>/dev/null || true; rm -rf "$tmp"' EXIT
git worktree add --quiet --detach "$tmp/tree" "$rev"
# The recipes' data paths are relative to the repository, ../shared beside it.
ln -s "$(realpath ../shared)" "$tmp/shared"
export GOMAXPROCS=${GOMAXPROCS:-2}
(cd "$tmp/tree" && RLVR_RECIPE_METRICS="$tmp/before" go test ./configs -timeout 90m -run "TestRecipesRun${RECIPES:+/$RECIPES}" -count=1 >/dev/null)
RLVR_RECIPE_METRICS="$tmp/after" go test ./configs -timeout 90m -run "TestRecipesRun${RECIPES:+/$RECIPES}" -count=1 >/dev/null
n=$(ls "$tmp/before" | wc -l)
if diff -r "$tmp/before" "$tmp/after"; then
  echo "recipes-diff: $n recipes, metrics identical seed for seed between $rev and the working tree"
else
  echo "recipes-diff: metrics differ between $rev and the working tree" >&2
  exit 1
fi
