#!/usr/bin/env bash
# MEML-GRPO on the built-in world (docs/meml-grpo.md): the Table 4, 5 and 6
# analogues, five seeds per row (SEEDS), from one command.
#
#   scripts/meml-grpo.sh            # everything, under runs/meml-grpo/
#   JOBS=1 SEEDS="1 2 3 4 5" STEPS=200 TEST_PROBLEMS=500 WORLD=2 scripts/meml-grpo.sh
#
# 1. D_ME: the world's scripted experts E1-E3 and the reference E0 answer
#    100 questions per level (five-six-ops, seven-eight-ops) on the warm-up
#    20% side of the split; Table 1 for them.
# 2. Warm-up SFT per seed: Expert0-SFT (@E0 only) and MoE-SFT (@E0-@E2).
# 3. RL per seed on the other 80%: Expert0-SFT-GRPO, Expert0-SFT-Dr.GRPO,
#    MoE-SFT-GRPO, MoE-SFT-Dr.GRPO, MEML-GRPO, and the ablation rows
#    +HSFT and +IML; greedy accuracy per expert on the validation problems
#    and on TEST_PROBLEMS test problems per level, the best expert chosen on
#    validation.
# 4. The tables (rlvr report --table) and one report page.
#
# Every run is one process on one core (GOMAXPROCS=1), JOBS at a time. A
# finished run is skipped when the script is run again, and an unfinished
# one resumes from its last checkpoint.
set -euo pipefail
cd "$(dirname "$0")/.."
out=runs/meml-grpo
source scripts/experiment.sh # jobs, seeds, steps; bin/rlvr; run CONFIG RUN [FLAGS...]

dme=$out/dme.jsonl
if [ ! -s "$dme" ]; then
  bin/rlvr experts collect --levels 5,6 --problems 100 --warmup-fraction 0.2 --out "$dme" >"$out/collect.txt"
fi
bin/rlvr experts analyze "$dme" >"$out/table1.txt"

# Stage 2: warm-up SFT.
for seed in $seeds; do
  for sft in expert0-sft moe-sft; do
    echo "configs/world-$sft.yaml $out/$sft-seed$seed --seed $seed --dme $dme --out $out/$sft-seed$seed-model $from_world $test_flags"
  done
done | xargs -P "$jobs" -L 1 bash -c 'run "$@"' _

# Stage 3: RL from the warm-up models, the rows in order of importance.
for row in meml-grpo moe-sft-grpo expert0-sft-grpo meml-grpo-hsft meml-grpo-iml moe-sft-dr-grpo expert0-sft-dr-grpo; do
  for seed in $seeds; do
    case $row in
      expert0-*) base=expert0-sft ;;
      *) base=moe-sft ;;
    esac
    echo "configs/world-$row.yaml $out/$row-seed$seed --seed $seed --steps $steps --model $out/$base-seed$seed-model $test_flags"
  done
done | xargs -P "$jobs" -L 1 bash -c 'run "$@"' _

rows=(expert0-sft moe-sft expert0-sft-grpo expert0-sft-dr-grpo moe-sft-grpo moe-sft-dr-grpo meml-grpo-hsft meml-grpo-iml meml-grpo)
dirs=()
for row in "${rows[@]}"; do
  for seed in $seeds; do dirs+=("$out/$row-seed$seed"); done
done
bin/rlvr report --table --baseline expert0-sft-grpo "${dirs[@]}" | tee "$out/table.md"
page=()
for row in expert0-sft-grpo moe-sft-grpo meml-grpo; do
  for seed in $seeds; do page+=("$out/$row-seed$seed"); done
done
bin/rlvr report --out "$out/report" "${page[@]}"
