#!/usr/bin/env bash
# SmolLM2 on StrategyQA asked with an answer-format instruction, the system
# prompt of configs/strategyqa-*-chat.yaml, on the problems, samples and
# seeds of scripts/calibrate.sh's StrategyQA row (docs/models.md): the first
# 200 dev problems, greedy and 8 samples at T 0.6, 320 tokens. The summary
# and every completion go to results/calibration/instructed/ (OUT).
#
# Usage: scripts/calibrate-instructed.sh     (after scripts/models.sh)
set -euo pipefail
cd "$(dirname "$0")/.."
cache=${RLVR_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/rlvr}
model=$cache/models/SmolLM2-135M-Instruct.Q4_1.gguf
out=${OUT:-results/calibration/instructed}
[ -f "$model" ] || { echo "calibrate-instructed: no model at $model: run scripts/models.sh" >&2; exit 1; }
system=$(sed -n 's/^  system: "\(.*\)"$/\1/p' configs/strategyqa-meml-grpo-chat.yaml)
[ -n "$system" ] || { echo "calibrate-instructed: no system prompt in configs/strategyqa-meml-grpo-chat.yaml" >&2; exit 1; }
mkdir -p "$out"
go build -o bin/rlvr ./cmd/rlvr
dst=$out/SmolLM2-135M-Instruct.Q4_1.strategyqa
bin/rlvr eval --model "$model" --chat auto --data strategyqa=../shared/data/strategyqa/dev.json --problems 200 \
  --k 8 --temperature 0.6 --max-tokens 320 --seed 0 --json --batch "${BATCH:-64}" --system "$system" \
  --samples "$dst.samples.jsonl" >"$dst.json"
gzip -9 -n -f "$dst.samples.jsonl"
go run ./scripts/calibration "$dst.samples.jsonl.gz"
