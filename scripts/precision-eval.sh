#!/usr/bin/env bash
# What the sampler's precision does to accuracy (docs/precision.md, "int8
# weights for sampling"): one model scored greedily on the same problems
# with its weights packed in float32, bf16 and int8, each scoring recorded
# as a run without training (rlvr eval --run) and compared with float32's
# problem by problem (rlvr report --table, "Δ by problem"). Greedy
# decoding draws nothing, so one seed is the whole measurement.
#
#   scripts/precision-eval.sh                   # the world model, 1,000 problems of each level
#   TARGET=smollm2 scripts/precision-eval.sh    # SmolLM2-135M-Instruct, all 1,319 of GSM8K's test problems
#
# The world target is the pretrained model of world version WORLD (1),
# about 40 s a precision on one core; SmolLM2's takes about 18 min a
# precision on two (THREADS=2). Runs go to runs/precision-eval/, kept in
# results/precision-eval/, the table in results/precision-eval/TARGET.md.
set -euo pipefail
cd "$(dirname "$0")/.."
out=${OUT:-runs/precision-eval}
export RESULTS=${RESULTS:-results/precision-eval}
target=${TARGET:-world}
source scripts/experiment.sh # bin/rlvr, $world, evaluate RUN [FLAGS...]

case $target in
  world) flags=(--world "$world" --problems 1000) ;;
  smollm2)
    real_model smollm2 SmolLM2-135M-Instruct.Q4_1
    flags=(--data gsm8k=../shared/data/gsm8k/test.jsonl --model runs/smollm2 --problems 1319 --max-tokens 256
      --system "Solve the math problem step by step. End with a line '#### <answer>'.") ;;
  *) echo "precision-eval: unknown TARGET $target (world, smollm2)" >&2; exit 2 ;;
esac
# bf16 twice: on the FMA tiles and, where the CPU has them, on the AMX tiles
# (RLVR_PANELS, docs/precision.md), which sum in another order.
for p in fp32 bf16 int8; do
  RLVR_PANELS=fma evaluate "$out/$target-$p-seed1" "${flags[@]}" --precision "$p" --seed 1
done
rows=("$results/$target"-{fp32,bf16,int8}-seed1)
if grep -q -m1 amx_bf16 /proc/cpuinfo 2>/dev/null; then
  RLVR_PANELS=amx evaluate "$out/$target-bf16-amx-seed1" "${flags[@]}" --precision bf16 --seed 1
  rows+=("$results/$target-bf16-amx-seed1")
fi
bin/rlvr report --table --baseline "$target-fp32" "${rows[@]}" | tee "$results/$target.md"
