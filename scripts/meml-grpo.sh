#!/usr/bin/env bash
# MEML-GRPO on the built-in world (docs/meml-grpo.md): the Table 4, 5 and 6
# analogues, five seeds per row (SEEDS), from one command.
#
#   scripts/meml-grpo.sh            # everything: runs under runs/meml-grpo/, kept in results/meml-grpo/
#   JOBS=1 SEEDS="1 2 3 4 5" STEPS=200 TEST_PROBLEMS=500 WORLD=2 scripts/meml-grpo.sh
#
# 1. D_ME: the world's scripted experts E1-E3 and the reference E0 answer
#    100 questions per level (five-six-ops, seven-eight-ops) on the warm-up
#    20% side of the split; Table 1 for them.
# 2. Warm-up SFT per seed on every answer of D_ME (eq. 2 keeps wrong ones
#    too): ExpertX-SFT for X = 0, 1, 2 (@EX only) and MoE-SFT (@E0-@E2).
# 3. RL per seed on the other 80%: ExpertX-SFT-GRPO and -Dr.GRPO for each
#    X, MoE-SFT-GRPO, MoE-SFT-Dr.GRPO, MEML-GRPO, and the ablation rows
#    +HSFT and +IML; greedy accuracy per expert on the validation problems
#    and on TEST_PROBLEMS test problems per level, the best expert chosen on
#    validation.
# 4. The tables (rlvr report --table) against Expert0-SFT-GRPO (Table 4),
#    under E1 and E2 against Expert1- and Expert2-SFT-GRPO (Table 4's
#    other experts), and against MoE-SFT-GRPO (Tables 5 and 6), and one
#    report page.
#
# Every run is one process on one core (GOMAXPROCS=1), JOBS at a time. A
# finished run is kept in results/ (scripts/experiment.sh) and skipped when
# the script is run again, here or from a clone; an unfinished one resumes
# from its last checkpoint. The tables go to results/<experiment>/table.md.
set -euo pipefail
cd "$(dirname "$0")/.."
out=${OUT:-runs/meml-grpo}
source scripts/experiment.sh # jobs, seeds, steps; bin/rlvr; run CONFIG RUN [FLAGS...]

dme=$out/dme.jsonl # made again in a clone: the same draw
if [ ! -s "$dme" ]; then
  bin/rlvr experts collect --levels 5,6 --problems 100 --warmup-fraction 0.2 --out "$dme" >"$results/collect.txt"
fi
bin/rlvr experts analyze "$dme" >"$results/table1.txt"

# Stage 2: warm-up SFT. ExpertX rows run Expert0's configs under expert X.
# (An empty override adds nothing to the line: a trailing blank would make
# xargs -L join the next line to it.)
single() { [ "$1" = 0 ] || echo " --set expert_prompts.experts=[$1]"; }
rl_rows=(meml-grpo moe-sft-grpo expert0-sft-grpo meml-grpo-hsft meml-grpo-iml moe-sft-dr-grpo expert0-sft-dr-grpo
         expert1-sft-grpo expert2-sft-grpo expert1-sft-dr-grpo expert2-sft-dr-grpo)
# A seed's fine-tuned models are made (again) while one of its RL runs,
# which start from them, is not kept.
for seed in $seeds; do
  needed=
  for row in "${rl_rows[@]}"; do kept "$results/$row-seed$seed" || needed=1; done
  for row in expert0-sft expert1-sft expert2-sft moe-sft; do
    kept "$results/$row-seed$seed" || needed=1
  done
  [ -n "$needed" ] || continue
  for x in 0 1 2; do
    echo "configs/world-expert0-sft.yaml $out/expert$x-sft-seed$seed --seed $seed --dme $dme --out $out/expert$x-sft-seed$seed-model $from_world $test_flags$(single $x)"
  done
  echo "configs/world-moe-sft.yaml $out/moe-sft-seed$seed --seed $seed --dme $dme --out $out/moe-sft-seed$seed-model $from_world $test_flags"
done | xargs -r -P "$jobs" -L 1 bash -c 'run "$@"' _

# Stage 3: RL from the warm-up models, the rows in order of importance.
for row in "${rl_rows[@]}"; do
  for seed in $seeds; do
    case $row in
      expert?-*) x=${row:6:1} base=expert$x-sft config=configs/world-expert0-${row#expert?-}.yaml set=$(single "$x") ;;
      *) base=moe-sft config=configs/world-$row.yaml set= ;;
    esac
    echo "$config $out/$row-seed$seed --seed $seed --steps $steps --model $out/$base-seed$seed-model $test_flags$set"
  done
done | xargs -r -P "$jobs" -L 1 bash -c 'run "$@"' _

rows=(expert0-sft expert1-sft expert2-sft moe-sft expert0-sft-grpo expert1-sft-grpo expert2-sft-grpo expert0-sft-dr-grpo
      expert1-sft-dr-grpo expert2-sft-dr-grpo moe-sft-grpo moe-sft-dr-grpo meml-grpo-hsft meml-grpo-iml meml-grpo)
# shellcheck disable=SC2046
bin/rlvr report --table --baseline expert0-sft-grpo $(dirs "${rows[@]}") | tee "$results/table.md"
echo | tee -a "$results/table.md"
# shellcheck disable=SC2046
bin/rlvr report --table --baseline moe-sft-grpo $(dirs moe-sft-grpo moe-sft-dr-grpo meml-grpo-hsft meml-grpo-iml meml-grpo) | tee -a "$results/table.md"
echo | tee -a "$results/table.md"
# Table 4 per expert: MEML-GRPO and MoE-SFT-GRPO under expert X's prompt
# beside ExpertX-SFT-GRPO and -Dr.GRPO, which know no other prompt.
for x in 1 2; do
  # shellcheck disable=SC2046
  bin/rlvr report --table --expert "E$x" --baseline "expert$x-sft-grpo" \
    $(dirs "expert$x-sft-grpo" "expert$x-sft-dr-grpo" moe-sft-grpo moe-sft-dr-grpo meml-grpo) | tee -a "$results/table.md"
  echo | tee -a "$results/table.md"
done
# How fast each RL row learned, how often mutual learning fired and how
# large the steps were, per 50-step block, and each row's difference from
# MoE-SFT-GRPO there.
# shellcheck disable=SC2046
bin/rlvr report --blocks 50 --baseline moe-sft-grpo --metrics accuracy,zero_variance_frac,mutual/fired_frac,grad_norm \
  $(dirs expert0-sft-grpo moe-sft-grpo meml-grpo-hsft meml-grpo-iml meml-grpo) | tee -a "$results/table.md"
# shellcheck disable=SC2046
bin/rlvr report --out "$out/report" $(dirs expert0-sft-grpo moe-sft-grpo meml-grpo)
