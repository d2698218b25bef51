#!/usr/bin/env bash
# The three methods on a real chat model (docs/smollm2.md): SmolLM2-135M-
# Instruct trained on GSM8K's training file and tested on all 1,319 problems
# of its test file, each comparison the paper's headline one:
#
#   grpo, mel-grpo                               MEL-GRPO against GRPO
#   self-rl, eapo-reference, eapo-gemma          EAPO (the reference expert; Gemma 3
#                                                270M) against self-exploratory RL
#   meml-grpo, expert0-sft-grpo, grpo            MEML-GRPO against Expert0-SFT-GRPO and GRPO
#
# Every RL arm runs the same steps, questions per step, samples per question
# and prompt, token budget and seeds (SEEDS, default five); the recipes'
# cold starts (EAPO, MEL) and fine-tunings (MEF, Expert0-SFT) come before
# those steps, as each method prescribes. Validation is the recipes' 200
# problems held out of the training file; nothing is chosen on test.
#
#   scripts/models.sh && scripts/smollm2.sh
#   JOBS=1 THREADS=2 SEEDS="1 2 3 4 5" STEPS=30 PRECISION=bf16 scripts/smollm2.sh
#   ROWS="grpo mel-grpo" scripts/smollm2.sh    # some rows only (and their stages)
#
# One run on both cores (the default here) finishes a GRPO row, with its
# test and MATH-500 scorings, in about 70 minutes (docs/smollm2.md); two
# runs of one core each take twice as long apiece for the same
# throughput, and a run cut off by the end of a sitting on another machine
# starts over.
#
# Every training run and evaluation computes in PRECISION (bf16, the
# peers' default and the fastest engine on a CPU with bf16 units,
# docs/precision.md; a CPU without them runs the emulated kernel, which
# rounds the inputs the same way), the stages before RL included. D_ME is collected
# in float32, as results/smollm2/table1.txt was.
#
# Each row's final model is then scored on MATH-500 (all 500 problems), a
# test of what GSM8K training carries to harder problems.
#
# Runs go to runs/gsm8k-smollm2/ (OUT; runs/smollm2 is the imported model);
# a finished run is kept in results/smollm2/
# and skipped when the script runs again, here or from a clone, and an
# unfinished one resumes from its last checkpoint (scripts/experiment.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
out=${OUT:-runs/gsm8k-smollm2}
export RESULTS=${RESULTS:-results/smollm2}
STEPS=${STEPS:-30}
SEEDS=${SEEDS:-"1 2 3 4 5"}
JOBS=${JOBS:-1} THREADS=${THREADS:-2}
source scripts/experiment.sh # jobs, seeds, steps; bin/rlvr; run CONFIG RUN [FLAGS...], THREADS cores each

real_model smollm2 SmolLM2-135M-Instruct.Q4_1
real_model gemma3-270m gemma-3-270m-q4_k_m

# The settings every RL arm shares; the recipes' own are for a longer run.
prompts=${PROMPTS:-8}
group=${GROUP:-4}
max_tokens=${MAX_TOKENS:-256}
precision=${PRECISION:-bf16}
# A CPU without bf16 units would run bf16 in float32 (rlvr says so and
# falls back): the emulated kernel keeps a row comparable with the rows
# other machines ran, rounding every product's inputs to bf16 as the
# hardware does.
if [ "$precision" = bf16 ] && [ -z "${RLVR_BF16_KERNEL:-}" ] &&
  ! grep -qwE 'avx512_bf16|amx_bf16' /proc/cpuinfo 2>/dev/null; then
  export RLVR_BF16_KERNEL=emulate
  echo "smollm2: this CPU has no bf16 units; bf16 runs on the emulated kernel (RLVR_BF16_KERNEL=emulate)" >&2
fi
# A checkpoint every 5 steps, the last alone kept with its optimizer: a
# run killed at the end of a sitting loses at most 5 steps (its cold start
# and final evaluation resume where they were, docs/methods.md).
shared="--precision $precision --steps $steps --prompts $prompts --group-size $group --max-tokens $max_tokens --eval-every $steps --checkpoint-every 5 --keep-last 1 --keep-optimizer last"

# prune: a finished run keeps its model (later evaluations read it), not
# its optimizer state, twice the model's size.
prune() {
  local d
  for d in "$out"/*-seed*/; do
    if finished "$d"; then rm -f "$d"ckpt-*/optimizer.safetensors; fi
  done
}
prune
reference='consultation.experts=[{name: E1, kind: reference}]'
gemma="consultation.experts=[{name: E2, model: runs/gemma3-270m, api: completion, max_tokens: $max_tokens, timeout: 5m, deadline: 10m, concurrency: 2, system: \"You are a careful math teacher. Solve the problem step by step and end with a line '#### <answer>'.\"}]"

rows=(grpo mel-grpo self-rl eapo-reference eapo-gemma meml-grpo expert0-sft-grpo)
# ROWS: the rows to run this time (default all); the tables hold every
# row kept so far, whichever sitting ran it. One row is run only when
# ROWS names it: eapo-reference-unaided, EAPO with the reference expert
# after a cold start that also demonstrates the policy's own answers
# without the grant and after a declined consultation (cold_start.unaided
# = 0.5, docs/eapo.md), the EAPO rows' ablation of what lost SmolLM2's
# unaided accuracy.
read -r -a rows <<<"${ROWS:-${rows[*]}}"
# wants ROW: whether ROW is among the rows run.
wants() { [[ " ${rows[*]} " == *" $1 "* ]]; }

# D_ME: Expert0 (the reference solution), Gemma 3 and SmolLM2 under a
# persona, on 128 warm-up questions; made again in a clone (greedy).
dme=$out/gsm8k-dme.jsonl
if { wants meml-grpo || wants expert0-sft-grpo; } && [ ! -s "$dme" ]; then
  bin/rlvr experts collect --data gsm8k --data-file ../shared/data/gsm8k/train.jsonl --warmup-fraction 0.2 \
    --problems 128 --max-tokens "$max_tokens" \
    --system "Solve the math problem step by step. End with a line '#### <answer>'." \
    --experts configs/experts/gsm8k-smollm2-pool.yaml --out "$dme" >"$results/collect.txt"
fi
[ ! -s "$dme" ] || bin/rlvr experts analyze "$dme" >"$results/table1.txt"

# MATH-500, out of domain: every row's final model is scored greedily on
# all 500 problems under the prompt it was trained with (the verifier reads
# "####" and \boxed alike), and recorded as a run without training (rlvr
# eval --run) that rlvr report pairs with the other rows by seed and by
# problem. The starting model is scored once, for reference.
math_system="Solve the math problem step by step. End with a line '#### <answer>'."
# final_model RUN: the run's last checkpoint, empty when it is gone (a run
# kept in results/ from another machine).
final_model() { compgen -G "$1/ckpt-*" | sort | tail -n 1; }
# math500 RUN SEED MODEL: the evaluation, skipped when kept or, with its
# model gone, said so.
math500() {
  if [ -z "$3" ] && ! kept "$out/$1"; then
    echo "math500: $out/$1: the model it scores is not on this machine" >&2
    return 0
  fi
  evaluate "$out/$1" --data math500=../shared/data/math500/test.jsonl --model "$3" --problems 500 \
    --max-tokens "$max_tokens" --system "$math_system" --seed "$2" --precision "$precision"
}
math500 smollm2-math500-seed1 1 runs/smollm2

# line ARGS...: one run's arguments as a line xargs splits back into them
# (shell-quoted; no trailing blank, which would join the next line).
line() { local s; s=$(printf '%q ' "$@"); echo "${s% }"; }
# panels_of ROW: the kernel ROW's bf16 decoding runs on in seed $seed
# (docs/precision.md, "Decoding on the AMX tiles"): PANELS (default auto:
# the AMX tiles where the CPU has them, 2.5 times faster at 64 streams,
# else the AVX512-BF16 tiles where it has those, 1.4 times), except for
# seed 1's GRPO, MEL-GRPO and MEML rows and their stages, which sample on
# the FMA tiles as seed 1's first rows did before the AMX tiles were
# built. The kernels differ in the last bits; a comparison's rows of a
# seed should run on one kind of CPU (PANELS=fma where they cannot), so
# that their pairing by problem compares methods, not kernels.
panels_of() {
  if [ "$seed" = 1 ] && [[ " grpo mel-grpo meml-grpo expert0-sft-grpo " == *" $1 "* ]]; then
    echo fma
  else
    echo "${PANELS:-auto}"
  fi
}
# Seed by seed, so that a partial experiment (it takes many sittings)
# holds whole seeds, each row's run of a seed beside the others': first
# the fine-tunings MEML-GRPO and its Expert0-SFT baseline start from, then
# every row. A fine-tuning's own test line is a diagnostic of the stage,
# scored on 100 test problems; the rows are scored on all 1,319.
for seed in $seeds; do
  RLVR_PANELS=$(panels_of meml-grpo); export RLVR_PANELS # the stages
  stage="--precision $precision --seed $seed --dme $dme --test-problems 100 --checkpoint-every 12 --keep-last 1 --keep-optimizer last"
  {
    # shellcheck disable=SC2086
    ! wants meml-grpo || line configs/gsm8k-moe-sft-smollm2.yaml "$out/moe-sft-seed$seed" $stage --out "$out/moe-sft-seed$seed-model"
    # shellcheck disable=SC2086
    ! wants expert0-sft-grpo || line configs/gsm8k-moe-sft-smollm2.yaml "$out/expert0-sft-seed$seed" $stage --out "$out/expert0-sft-seed$seed-model" --set "expert_prompts.experts=[0]"
  } | xargs -r -P "$jobs" -L 1 bash -c 'run "$@"' _
  for row in "${rows[@]}"; do
    run=$out/$row-seed$seed kernel=$(panels_of "$row")
    # shellcheck disable=SC2086
    case $row in
      grpo) line "$kernel" configs/gsm8k-grpo-chat.yaml "$run" --model runs/smollm2 --seed "$seed" $shared ;;
      mel-grpo) line "$kernel" configs/gsm8k-mel-grpo-smollm2.yaml "$run" --seed "$seed" $shared ;;
      self-rl) line "$kernel" configs/gsm8k-self-rl-smollm2.yaml "$run" --seed "$seed" $shared ;;
      eapo-reference) line "$kernel" configs/gsm8k-eapo-smollm2.yaml "$run" --set "$reference" --seed "$seed" $shared ;;
      eapo-gemma) line "$kernel" configs/gsm8k-eapo-smollm2.yaml "$run" --set "$gemma" --seed "$seed" $shared ;;
      eapo-reference-unaided) line "$kernel" configs/gsm8k-eapo-smollm2.yaml "$run" --set "$reference" --set cold_start.unaided=0.5 --seed "$seed" $shared ;;
      meml-grpo) line "$kernel" configs/gsm8k-meml-grpo-smollm2.yaml "$run" --model "$out/moe-sft-seed$seed-model" --seed "$seed" $shared ;;
      expert0-sft-grpo) line "$kernel" configs/gsm8k-expert0-sft-grpo-smollm2.yaml "$run" --model "$out/expert0-sft-seed$seed-model" --seed "$seed" $shared ;;
    esac
  done | xargs -r -P "$jobs" -L 1 bash -c 'RLVR_PANELS=$1 run "${@:2}"' _
  for row in "${rows[@]}"; do
    RLVR_PANELS=$(panels_of "$row") math500 "$row-math500-seed$seed" "$seed" "$(final_model "$out/$row-seed$seed")"
  done
  prune
done

: >"$results/table.md"
# kept_dirs ROW...: dirs, of the runs kept so far: rlvr report pairs what
# it is given by seed, so a partial experiment tables what it has.
kept_dirs() { local d; for d in $(dirs "$@"); do ! finished "$d" || echo "$d"; done; }
# shellcheck disable=SC2046
for cmp in "grpo mel-grpo" "self-rl eapo-reference eapo-gemma eapo-reference-unaided" "grpo expert0-sft-grpo meml-grpo"; do
  set -- $cmp
  if [ -z "$(kept_dirs "$1")" ]; then
    echo "smollm2: $cmp: no $1 run is kept yet; no table" >&2
    continue
  fi
  bin/rlvr report --table --baseline "$1" $(kept_dirs "$@") | tee -a "$results/table.md"
  echo | tee -a "$results/table.md"
  # The same comparison on MATH-500.
  [ -z "$(kept_dirs "$1-math500")" ] ||
    bin/rlvr report --table --baseline "$1-math500" $(for r in "$@"; do kept_dirs "$r-math500"; done) | tee -a "$results/table.md"
  echo | tee -a "$results/table.md"
done
bin/rlvr report --table "$results/smollm2-math500-seed1" | tee -a "$results/table.md"
echo | tee -a "$results/table.md"
# The mechanisms at work, per block of steps: the call rate, the
# reflections parsed and gated, and how often mutual learning fired; once
# a run of each method that logs them is kept.
# shellcheck disable=SC2046
if [ -n "$(kept_dirs mel-grpo)" ] && [ -n "$(kept_dirs eapo-reference eapo-gemma)" ] && [ -n "$(kept_dirs meml-grpo)" ]; then
  bin/rlvr report --blocks 10 --metrics accuracy,consult/call_rate,mel/parsed,mel/validated,mutual/fired_frac \
    $(kept_dirs grpo mel-grpo self-rl eapo-reference eapo-gemma eapo-reference-unaided meml-grpo) | tee -a "$results/table.md"
fi
# What the kept runs and their stages spent, as they recorded it: the
# experiment's budget in hours and core-hours (rlvr report --compute).
spent=$(kept_dirs grpo mel-grpo self-rl eapo-reference eapo-gemma eapo-reference-unaided moe-sft meml-grpo expert0-sft expert0-sft-grpo)
if [ -n "$spent" ]; then
  echo | tee -a "$results/table.md"
  # shellcheck disable=SC2086
  bin/rlvr report --compute $spent | tee -a "$results/table.md"
fi
