#!/usr/bin/env bash
# Learning equivalence of async RL (docs/scale-out.md, "Async RL"): GRPO on
# world version 2's sparse levels 5-6 (configs/world-sparse-grpo.yaml) for
# 100 steps, five seeds per row, async with max_staleness 1 against the
# synchronous loop, test accuracy paired by seed and by problem, with its
# minimum detectable effect.
#
#   scripts/async.sh          # runs under runs/async-world2/, kept in results/async/
#   JOBS=1 SEEDS="1 2 3 4 5" STEPS=100 TEST_PROBLEMS=500 ROWS="sync async1" scripts/async.sh
#
# Rows (ROWS; default sync and async1):
#   sync     the synchronous loop
#   async1   async: {max_staleness: 1}, with the sampler correction it
#            takes by default (cap 2)
#   async2   async: {max_staleness: 2}
#
# Every run is one process on one core (GOMAXPROCS=1: the producer and the
# learner of an async run share it, so this measures learning, not speed),
# JOBS at a time; a finished run is kept in results/async/
# (scripts/experiment.sh) and skipped when the script is run again. The
# table goes to results/async/table.md.
set -euo pipefail
cd "$(dirname "$0")/.."
out=${OUT:-runs/async}
WORLD=${WORLD:-2}
STEPS=${STEPS:-100}
RESULTS=${RESULTS:-results/async}
source scripts/experiment.sh # jobs, seeds, steps; bin/rlvr; run CONFIG RUN [FLAGS...]
read -r -a rows <<<"${ROWS:-sync async1}"

# Seed by seed, so that the rows' runs of a seed finish together: a
# partial experiment still pairs.
for seed in $seeds; do
  for row in "${rows[@]}"; do
    case $row in
      sync) flags="" ;;
      async[0-9]*) flags="--set async.max_staleness=${row#async}" ;;
      *) echo "async.sh: unknown row $row" >&2; exit 2 ;;
    esac
    # No trailing blank: xargs -L would continue the line onto the next.
    echo "configs/world-sparse-grpo.yaml $out/$row-seed$seed --seed $seed --steps $steps $from_world $test_flags${flags:+ $flags}"
  done
done | xargs -r -P "$jobs" -L 1 bash -c 'run "$@"' _

others=()
for row in "${rows[@]}"; do [ "$row" = sync ] || others+=("$row"); done
{
  # shellcheck disable=SC2046
  bin/rlvr report --table --baseline sync $(dirs sync "${others[@]}")
  echo
  # The off-policy gap the staleness opens, and the correction's weights,
  # per 50-step block.
  # shellcheck disable=SC2046
  bin/rlvr report --blocks 50 --baseline sync --metrics accuracy,async/staleness/mean,logprob_gap/mean,is_weight/mean,is_weight/capped_frac $(dirs sync "${others[@]}")
} | tee "$results/table.md"
