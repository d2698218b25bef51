#!/usr/bin/env bash
# bf16 on a real chat model (docs/precision.md, "On SmolLM2"): SmolLM2-
# 135M-Instruct on GSM8K's training file, seed by seed,
#   sft-fp32, sft-bf16     supervised fine-tuning on the worked solutions
#                          (configs/gsm8k-sft-smollm2.yaml) in float32 and in
#                          bf16: the loss curves, step by step
#   grpo-fp32              GRPO with learner and sampler in float32
#   grpo-bf16-sampler      the sampler in bf16 beside a float32 learner: the
#                          logprob gap between them, every step
#   grpo-bf16-sampler-is   the same with the truncated importance-sampling
#                          correction, cap 2
# These check the mechanics on the real model (the loss, the gap, the
# correction's weights); whether bf16 learns as float32 does is measured
# with power on the world (scripts/precision.sh).
#
#   scripts/models.sh && scripts/precision-smollm2.sh
#   JOBS=1 SEEDS=1 STEPS=24 RL_STEPS=5 scripts/precision-smollm2.sh
#
# The bf16 products run on RLVR_BF16_KERNEL (default "emulate", the same
# numbers on every machine up to summation order). Runs go to
# runs/precision-smollm2/, finished ones are kept in
# results/precision-smollm2/ and skipped when the script runs again; the
# tables go to results/precision-smollm2/table.md.
set -euo pipefail
cd "$(dirname "$0")/.."
out=${OUT:-runs/precision-smollm2}
STEPS=${STEPS:-24}
SEEDS=${SEEDS:-1}
export RESULTS=${RESULTS:-results/precision-smollm2}
source scripts/experiment.sh # jobs, seeds, steps; bin/rlvr; run CONFIG RUN [FLAGS...]
export RLVR_BF16_KERNEL=${RLVR_BF16_KERNEL:-emulate}
rl_steps=${RL_STEPS:-5}

real_model smollm2 SmolLM2-135M-Instruct.Q4_1

# Small evaluations: these runs check mechanics, not accuracy.
evals="--eval-problems 32 --test-problems 32"
sft="--steps $steps --eval-every $steps $evals"
rl="--steps $rl_steps --prompts 8 --group-size 4 --max-tokens 256 --eval-every $rl_steps $evals"
for seed in $seeds; do
  echo "configs/gsm8k-sft-smollm2.yaml $out/sft-fp32-seed$seed --seed $seed $sft --precision fp32"
  echo "configs/gsm8k-sft-smollm2.yaml $out/sft-bf16-seed$seed --seed $seed $sft --precision bf16"
  echo "configs/gsm8k-grpo-chat.yaml $out/grpo-fp32-seed$seed --model runs/smollm2 --seed $seed $rl --precision fp32"
  echo "configs/gsm8k-grpo-chat.yaml $out/grpo-bf16-sampler-seed$seed --model runs/smollm2 --seed $seed $rl --precision fp32 --sampler-precision bf16"
  echo "configs/gsm8k-grpo-chat.yaml $out/grpo-bf16-sampler-is-seed$seed --model runs/smollm2 --seed $seed $rl --precision fp32 --sampler-precision bf16 --set sampler_correction.cap=2"
done | xargs -r -P "$jobs" -L 1 bash -c 'run "$@"' _

{
  echo "bf16 products: RLVR_BF16_KERNEL=$RLVR_BF16_KERNEL"
  echo
  # shellcheck disable=SC2046
  bin/rlvr report --blocks 4 --baseline sft-fp32 --metrics loss/sft,grad_norm $(dirs sft-fp32 sft-bf16)
  echo
  # shellcheck disable=SC2046
  bin/rlvr report --blocks 1 --baseline grpo-fp32 --metrics accuracy,logprob_gap/mean,logprob_gap/max,is_weight/mean,is_weight/capped_frac \
    $(dirs grpo-fp32 grpo-bf16-sampler grpo-bf16-sampler-is)
} | tee "$results/table.md"
