#!/usr/bin/env bash
# The RL step's wall time split into rollout / verify / learning, for the
# world's default run and one run of each method, STEPS steps each (default
# 6; the first is left out), on this machine with all its cores:
#   scripts/step-split.sh [RLVR_BINARY]
# The binary defaults to a fresh build of bin/rlvr; give another (an older
# build, say) to compare. Runs go to runs/step-split/<tag>/, the table to
# stdout. The methods run from the world model itself, not from their
# usual SFT stages: the figures are the step's cost, not its results.
set -euo pipefail
cd "$(dirname "$0")/.."
steps=${STEPS:-6}
bin=${1:-}
if [ -z "$bin" ]; then
  go build -o bin/rlvr ./cmd/rlvr
  bin=bin/rlvr
fi
tag=${TAG:-$(basename "$bin")}
out=runs/step-split/$tag
mkdir -p "$out"
"$bin" pretrain >/dev/null
dirs=()
for config in default world-grpo world-dr-grpo world-dapo world-reinforce-pp world-rft world-meml-grpo world-eapo world-mel-grpo world-meml-eapo-mel; do
  args=()
  if [ "$config" != default ]; then
    args=(--config "configs/$config.yaml")
  fi
  "$bin" train "${args[@]}" --steps "$steps" --eval-every 100000 --checkpoint-every 100000 \
    --run "$out/$config" --overwrite >"$out/$config.log" 2>&1 ||
    { echo "failed: $out/$config (see $out/$config.log)" >&2; exit 1; }
  dirs+=("$out/$config")
done
go run ./scripts/stepsplit "${dirs[@]}"
