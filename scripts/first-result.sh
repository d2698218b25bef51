#!/usr/bin/env bash
# The first result (docs/first-result.md): GRPO vs Dr.GRPO vs DAPO on the
# world's hardest level, from the cached world model, three seeds each.
# Usage: scripts/first-result.sh [STEPS]   (runs go to runs/first-result/)
set -euo pipefail
cd "$(dirname "$0")/.."
steps=${1:-50}
go build -o bin/rlvr ./cmd/rlvr
bin/rlvr pretrain >/dev/null   # cached after the first time
for alg in grpo dr-grpo dapo; do
  for seed in 1 2 3; do
    bin/rlvr train --algorithm "$alg" --seed "$seed" --steps "$steps" --eval-every 0 \
      --checkpoint-every "$steps" --run "runs/first-result/$alg-seed$seed" | tail -1
  done
done
