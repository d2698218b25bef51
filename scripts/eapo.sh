#!/usr/bin/env bash
# EAPO on the built-in world (docs/eapo.md): EAPO against self-exploratory
# RL, the consultation-schedule ablation (App. H), a homogeneous pool
# (Table 3), meaningless experts (App. E) and SFT distillation of the
# experts' answers (full and LoRA, Table 1), five seeds per row (SEEDS); then the test-time
# workflows on each seed's test problems, without training (Table 1: the
# model alone, the expert-assisted workflow, self-collaboration; App. E:
# meaningless and high-error experts), the tables and one report page.
#
#   scripts/eapo.sh                 # everything: runs under runs/eapo/, kept in results/eapo/
#   JOBS=1 SEEDS="1 2 3 4 5" STEPS=200 TEST_PROBLEMS=500 WORLD=2 scripts/eapo.sh
#
# Every run is one process on one core (GOMAXPROCS=1), JOBS at a time. A
# finished run is kept in results/ (scripts/experiment.sh) and skipped when
# the script is run again, here or from a clone; an unfinished one resumes
# from its last checkpoint. The tables go to results/<experiment>/table.md.
set -euo pipefail
cd "$(dirname "$0")/.."
out=${OUT:-runs/eapo}
source scripts/experiment.sh # jobs, seeds, steps; bin/rlvr; run CONFIG RUN [FLAGS...]

# The experts' answers to training questions, for the distillation row.
dme=$out/dme.jsonl # made again in a clone: the same draw
if [ ! -s "$dme" ]; then
  bin/rlvr experts collect --levels 5,6 --problems 200 --out "$dme" >"$results/collect.txt"
fi

rows=(eapo self-rl eapo-fixed eapo-slow eapo-fast eapo-homogeneous eapo-meaningless eapo-distill eapo-distill-lora)
for row in "${rows[@]}"; do
  for seed in $seeds; do
    case $row in
      eapo-distill) echo "configs/world-$row.yaml $out/$row-seed$seed --seed $seed --dme $dme $from_world $test_flags" ;; # its own steps: SFT
      # Table 1's LoRA distillation: rank 16 (alpha 32), at 10 times the
      # full fine-tune's learning rate, as LoRA is usually run.
      eapo-distill-lora) echo "configs/world-eapo-distill.yaml $out/$row-seed$seed --seed $seed --dme $dme $from_world $test_flags --set backend.lora_rank=16 --set lr=0.001" ;;
      *) echo "configs/world-$row.yaml $out/$row-seed$seed --seed $seed --steps $steps $from_world $test_flags" ;;
    esac
  done
done | xargs -r -P "$jobs" -L 1 bash -c 'run "$@"' _

# The test-time workflows on the starting model, without training, each
# on the test problems of the same seed's training runs: the model alone;
# the expert-assisted workflow (every episode opens with E1-E3 asked the
# whole question); self-collaboration (the same with three copies of the
# model, sampling); and App. E's meaningless and high-error experts.
workflows=(alone expert-assisted self-collaboration meaningless high-error)
for wf in "${workflows[@]}"; do
  case $wf in
    alone) flags= ;;
    expert-assisted) flags="--consult configs/world-eapo.yaml --consult-open" ;;
    self-collaboration) flags="--consult configs/world-eapo-homogeneous.yaml --consult-open" ;;
    meaningless) flags="--consult configs/world-eapo-meaningless.yaml --consult-open" ;;
    high-error) flags="--consult configs/world-eapo-error.yaml --consult-open" ;;
  esac
  for seed in $seeds; do
    # No trailing blank: xargs -L would join the next line to this one.
    echo "$out/workflow-$wf-seed$seed $out/self-rl-seed$seed${flags:+ $flags}"
  done
done | xargs -r -P "$jobs" -L 1 bash -c 'score "$@"' _

# shellcheck disable=SC2046
bin/rlvr report --table --baseline self-rl $(dirs self-rl "${rows[@]/self-rl/}" "${workflows[@]/#/workflow-}") | tee "$results/table.md"
echo | tee -a "$results/table.md"
# App. H, Table 3 and App. E against EAPO itself.
# shellcheck disable=SC2046
bin/rlvr report --table --baseline eapo $(dirs eapo eapo-fixed eapo-slow eapo-fast eapo-homogeneous eapo-meaningless) | tee -a "$results/table.md"
echo | tee -a "$results/table.md"
# How often each consulting row consulted, and whether it paid, per
# 50-step block (App. B), and each row's difference from EAPO there.
# shellcheck disable=SC2046
bin/rlvr report --blocks 50 --baseline eapo --metrics accuracy,consult/call_rate,consult/accuracy_with,consult/accuracy_without,consult/acceptance_rate \
  $(dirs eapo eapo-fixed eapo-slow eapo-fast eapo-homogeneous eapo-meaningless) | tee -a "$results/table.md"
# shellcheck disable=SC2046
bin/rlvr report --out "$out/report" $(dirs self-rl eapo eapo-fixed)
