#!/usr/bin/env bash
# Learning parity of bf16 (docs/methods.md, "Precision"): GRPO on world
# version 2's sparse levels 5-6 (configs/world-sparse-grpo.yaml, where 200
# steps of GRPO take greedy accuracy from 11% to 44%) for 100 steps, five
# seeds per row, each row's test accuracy against fp32's paired by seed and
# by problem, with its minimum detectable effect.
#
#   scripts/precision.sh          # runs under runs/precision-world2/, kept in results/precision/
#   JOBS=1 SEEDS="1 2 3 4 5" STEPS=100 TEST_PROBLEMS=500 ROWS="fp32 bf16 bf16-learner" scripts/precision.sh
#
# Rows (ROWS; default fp32, bf16 and bf16-learner):
#   fp32             learner and sampler in float32
#   bf16             learner and sampler in bf16 (the sampler's weights
#                    packed in bf16)
#   bf16-learner     the learner's products in bf16, the sampler in float32:
#                    the logprob gap between them is logged every step
#   bf16-learner-is  the same with the truncated importance-sampling
#                    correction, cap 2
#
# The bf16 products run on RLVR_BF16_KERNEL, by default "emulate": inputs
# rounded to bf16 and the float32 GEMM after, the hardware kernels' numbers
# up to summation order, on any CPU, so that the runs are the same on every
# machine. Every run is one process on one core (GOMAXPROCS=1), JOBS at a
# time; a finished run is kept in results/precision/ (scripts/experiment.sh)
# and skipped when the script is run again. The tables go to
# results/precision/table.md.
set -euo pipefail
cd "$(dirname "$0")/.."
out=${OUT:-runs/precision}
WORLD=${WORLD:-2}
STEPS=${STEPS:-100}
RESULTS=${RESULTS:-results/precision}
source scripts/experiment.sh # jobs, seeds, steps; bin/rlvr; run CONFIG RUN [FLAGS...]
export RLVR_BF16_KERNEL=${RLVR_BF16_KERNEL:-emulate}
read -r -a rows <<<"${ROWS:-fp32 bf16 bf16-learner}"

# Seed by seed, so that the rows' runs of a seed finish together: a
# partial experiment still pairs.
for seed in $seeds; do
  for row in "${rows[@]}"; do
    case $row in
      fp32) flags="--precision fp32" ;;
      bf16-learner) flags="--precision bf16 --sampler-precision fp32" ;;
      bf16-learner-is) flags="--precision bf16 --sampler-precision fp32 --set sampler_correction.cap=2" ;;
      bf16) flags="--precision bf16" ;;
      *) echo "precision.sh: unknown row $row" >&2; exit 2 ;;
    esac
    echo "configs/world-sparse-grpo.yaml $out/$row-seed$seed --seed $seed --steps $steps $from_world $test_flags $flags"
  done
done | xargs -r -P "$jobs" -L 1 bash -c 'run "$@"' _

others=()
for row in "${rows[@]}"; do [ "$row" = fp32 ] || others+=("$row"); done
metrics=accuracy,logprob_gap/mean,logprob_gap/max
if [[ " ${rows[*]} " == *" bf16-learner-is "* ]]; then
  metrics+=,is_weight/mean,is_weight/capped_frac
fi
{
  echo "bf16 products: RLVR_BF16_KERNEL=$RLVR_BF16_KERNEL"
  echo
  # shellcheck disable=SC2046
  bin/rlvr report --table --baseline fp32 $(dirs fp32 "${others[@]}")
  echo
  # The gap between learner and sampler, and the correction's weights,
  # per 50-step block.
  # shellcheck disable=SC2046
  bin/rlvr report --blocks 50 --baseline fp32 --metrics "$metrics" $(dirs fp32 "${others[@]}")
} | tee "$results/table.md"
