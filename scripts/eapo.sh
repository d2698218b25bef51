#!/usr/bin/env bash
# EAPO on the built-in world (docs/eapo.md): EAPO against self-exploratory
# RL, the consultation-schedule ablation (App. H), a homogeneous pool
# (Table 3), meaningless experts (App. E) and SFT distillation of the
# experts' answers, five seeds per row (SEEDS); then the
# test-time workflows (the expert-assisted workflow and self-collaboration,
# no training), the tables and one report page.
#
#   scripts/eapo.sh                 # everything, under runs/eapo/
#   JOBS=1 SEEDS="1 2 3 4 5" STEPS=200 TEST_PROBLEMS=500 WORLD=2 scripts/eapo.sh
#
# Every run is one process on one core (GOMAXPROCS=1), JOBS at a time. A
# finished run is skipped when the script is run again, and an unfinished
# one resumes from its last checkpoint.
set -euo pipefail
cd "$(dirname "$0")/.."
out=runs/eapo
source scripts/experiment.sh # jobs, seeds, steps; bin/rlvr; run CONFIG RUN [FLAGS...]

# The experts' answers to training questions, for the distillation row.
dme=$out/dme.jsonl
if [ ! -s "$dme" ]; then
  bin/rlvr experts collect --levels 5,6 --problems 200 --out "$dme" >"$out/collect.txt"
fi

rows=(eapo self-rl eapo-fixed eapo-slow eapo-fast eapo-homogeneous eapo-meaningless eapo-distill)
for row in "${rows[@]}"; do
  for seed in $seeds; do
    case $row in
      eapo-distill) echo "configs/world-$row.yaml $out/$row-seed$seed --seed $seed --dme $dme $from_world $test_flags" ;; # its own steps: SFT
      *) echo "configs/world-$row.yaml $out/$row-seed$seed --seed $seed --steps $steps $from_world $test_flags" ;;
    esac
  done
done | xargs -P "$jobs" -L 1 bash -c 'run "$@"' _

# The test-time workflows on the starting model, without training, on the
# training runs' test problems (levels 5 and 6, 100 each: the test split of
# seed 1, which eval draws with --seed 2999001): the model alone; the
# expert-assisted workflow (every episode opens with E1-E3 asked the whole
# question); self-collaboration (the same with three copies of the model).
for wf in alone expert-assisted self-collaboration; do
  [ -s "$out/workflow-$wf.json" ] && continue
  case $wf in
    alone) flags=() ;;
    expert-assisted) flags=(--consult configs/world-eapo.yaml --consult-open) ;;
    self-collaboration) flags=(--consult configs/world-eapo-homogeneous.yaml --consult-open) ;;
  esac
  bin/rlvr eval --levels 5,6 --problems 100 --seed 2999001 --k 8 --json --world "$world" "${flags[@]}" >"$out/workflow-$wf.json" 2>"$out/workflow-$wf.log"
done

dirs=()
for row in self-rl "${rows[@]/self-rl/}"; do
  [ -n "$row" ] || continue
  for seed in $seeds; do dirs+=("$out/$row-seed$seed"); done
done
bin/rlvr report --table --baseline self-rl "${dirs[@]}" | tee "$out/table.md"
page=()
for row in self-rl eapo eapo-fixed; do
  for seed in $seeds; do page+=("$out/$row-seed$seed"); done
done
bin/rlvr report --out "$out/report" "${page[@]}"
