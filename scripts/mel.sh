#!/usr/bin/env bash
# MEL on the built-in world (docs/mel.md): MEL against the same base
# without it, for GRPO, RFT and REINFORCE++ (paper Fig. 5), and the three
# methods in one run against each single method at the same questions,
# steps and seeds; five seeds per row (SEEDS); the starting model on each
# seed's test problems (Table 1's Baseline row); then the tables and one
# report page. The composed run's baseline, MEL on GRPO, is fixed here in
# advance.
#
#   scripts/mel.sh                 # everything: runs under runs/mel/, kept in results/mel/
#   JOBS=1 SEEDS="1 2 3 4 5" STEPS=200 TEST_PROBLEMS=500 WORLD=2 scripts/mel.sh
#
# Every run is one process on one core (GOMAXPROCS=1), JOBS at a time. A
# finished run is kept in results/ (scripts/experiment.sh) and skipped when
# the script is run again, here or from a clone; an unfinished one resumes
# from its last checkpoint. The tables go to results/<experiment>/table.md.
set -euo pipefail
cd "$(dirname "$0")/.."
out=${OUT:-runs/mel}
source scripts/experiment.sh # jobs, seeds, steps; bin/rlvr; run CONFIG RUN [FLAGS...]

bases=(grpo rft reinforce-pp)
rows=()
for base in "${bases[@]}"; do rows+=("sparse-$base" "mel-$base"); done
# mel-grpo-pooled: MEL's term averaged over the step's meta-experiences
# alike instead of per question (eq. 10), as MEL ran before the two were
# told apart.
rows+=(sparse-meml-grpo sparse-eapo meml-eapo-mel mel-grpo-pooled)
for row in "${rows[@]}"; do
  for seed in $seeds; do
    case $row in
      mel-grpo-pooled) echo "configs/world-mel-grpo.yaml $out/$row-seed$seed --seed $seed --steps $steps $from_world $test_flags --set meta_experience.aggregation=pooled" ;;
      *) echo "configs/world-$row.yaml $out/$row-seed$seed --seed $seed --steps $steps $from_world $test_flags" ;;
    esac
  done
done | xargs -r -P "$jobs" -L 1 bash -c 'run "$@"' _

# The starting model, untrained, at the runs' evaluation (greedy, and 8
# answers at their temperature).
for seed in $seeds; do
  echo "$out/base-seed$seed $out/sparse-grpo-seed$seed"
done | xargs -r -P "$jobs" -L 1 bash -c 'score "$@"' _

: >"$results/table.md"
for base in "${bases[@]}"; do
  pooled=; [ "$base" != grpo ] || pooled=mel-grpo-pooled
  # shellcheck disable=SC2046
  bin/rlvr report --table --baseline "sparse-$base" $(dirs base "sparse-$base" "mel-$base" "$pooled") | tee -a "$results/table.md"
  echo | tee -a "$results/table.md"
done
# shellcheck disable=SC2046
bin/rlvr report --table --baseline mel-grpo $(dirs mel-grpo sparse-meml-grpo sparse-eapo meml-eapo-mel) | tee -a "$results/table.md"
echo | tee -a "$results/table.md"
# How fast each row learned, how large its steps were, and what a
# meta-experience did in context, per 50-step block, and each row's
# difference from GRPO there.
# shellcheck disable=SC2046
bin/rlvr report --blocks 50 --baseline sparse-grpo --metrics accuracy,grad_norm,mel/replay_accuracy,mel/group_accuracy \
  $(dirs sparse-grpo mel-grpo mel-grpo-pooled sparse-meml-grpo meml-eapo-mel) | tee -a "$results/table.md"
# shellcheck disable=SC2046
bin/rlvr report --out "$out/report" $(dirs sparse-grpo mel-grpo sparse-rft mel-rft sparse-reinforce-pp mel-reinforce-pp meml-eapo-mel)
