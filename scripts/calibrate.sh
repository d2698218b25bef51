#!/usr/bin/env bash
# The real models' calibration (docs/models.md): greedy pass@1 and pass@8 at
# temperature 0.6 on GSM8K test, MATH500, the world's levels asked in words
# through the chat template, MathQA and StrategyQA, for each model, as JSON
# under runs/calibration/, with every completion beside it (.samples.jsonl).
# PROBLEMS (default 500) is the number of problems per dataset (per world
# level: PROBLEMS/5); MODELS the .gguf names; TASKS the tasks. The table
# (scripts/calibration) goes to runs/calibration/table.md. SmolLM2 is asked
# through its chat template; the Gemma 3 270M file is the pretrained base
# model (general.name "Gemma 3 270m", no chat template; transformers too
# answers its chat renders with noise), so it gets plain-text prompts.
#
# Usage: PROBLEMS=500 scripts/calibrate.sh     (after scripts/models.sh)
set -euo pipefail
cd "$(dirname "$0")/.."
problems=${PROBLEMS:-500}
models=${MODELS:-"SmolLM2-135M-Instruct.Q4_1 gemma-3-270m-q4_k_m"}
cache=${RLVR_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/rlvr}
data=../shared/data
out=runs/calibration
mkdir -p "$out"
tasks=${TASKS:-"world gsm8k math500 mathqa strategyqa"}
declare -A files=([gsm8k]=gsm8k/test.jsonl [math500]=math500/test.jsonl [mathqa]=mathqa/test.jsonl
                  [strategyqa]=strategyqa/dev.json)
bin=$out/rlvr.$$
go build -o "$bin" ./cmd/rlvr
trap 'rm -f "$bin"' EXIT
common=(--k 8 --temperature 0.6 --max-tokens 320 --seed 0 --json)
for m in $models; do
  model=$cache/models/$m.gguf
  chat=auto
  case $m in gemma-3-270m*) chat=off ;; esac
  for name in $tasks; do
    task=$name
    [ "$name" = world ] || task=$name=$data/${files[$name]}
    dst=$out/$m.$name.json
    [ -s "$dst" ] && continue
    if [ "$task" = world ]; then
      args=(--data world --levels 0,1,2,3,4,5,6 --problems $(( (problems + 4) / 5 )))
    else
      args=(--data "$task" --problems "$problems")
    fi
    echo "calibrate: $m on $name" >&2
    "$bin" eval --model "$model" --chat "$chat" "${args[@]}" "${common[@]}" --samples "$out/$m.$name.samples.jsonl" >"$dst.tmp" && mv "$dst.tmp" "$dst"
  done
done
go run ./scripts/calibration "$out"/*.samples.jsonl | tee "$out/table.md"
