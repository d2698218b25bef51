#!/usr/bin/env bash
# The real models' calibration (docs/models.md): greedy pass@1 and pass@8 at
# temperature 0.6 on GSM8K test, MATH500, the world's levels asked in words
# through the chat template, MathQA and StrategyQA, for each model, as JSON
# under results/calibration/ (OUT), with every completion beside it
# (.samples.jsonl.gz), kept in the repository as the table's record.
# PROBLEMS (default 500) is the number of problems of GSM8K and MATH500 (per
# world level: PROBLEMS/5), EASY_PROBLEMS (default 200) that of the easier
# tasks, MathQA and StrategyQA; MODELS the .gguf names; TASKS the tasks. Each
# evaluation runs in parts of PART problems (default 100; per world level
# PART/5), rlvr eval --skip, written as MODEL.TASK.FROM-TO: a rerun
# continues from the parts on disk (or in a clone), and the parts together
# are the one run's draw. The table (scripts/calibration) goes to
# results/calibration/table.md. SmolLM2 is asked through its chat template;
# the Gemma 3 270M file is the pretrained base model (general.name "Gemma 3
# 270m", no chat template; transformers too answers its chat renders with
# noise), so it is asked as evaluation harnesses ask a base model, zero-shot
# in plain text: "Question: " before the question (the dataset's, or the
# world's in words: --world-words), "\nAnswer:" after it, and the answer
# ends where the model starts a new "\nQuestion:" or "\nAnswer:".
#
# Usage: PROBLEMS=500 scripts/calibrate.sh     (after scripts/models.sh)
set -euo pipefail
cd "$(dirname "$0")/.."
problems=${PROBLEMS:-500}
easy=${EASY_PROBLEMS:-200}
models=${MODELS:-"SmolLM2-135M-Instruct.Q4_1 gemma-3-270m-q4_k_m"}
cache=${RLVR_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/rlvr}
data=../shared/data
out=${OUT:-results/calibration}
mkdir -p "$out"
tasks=${TASKS:-"gsm8k world mathqa strategyqa math500"}
declare -A files=([gsm8k]=gsm8k/test.jsonl [math500]=math500/test.jsonl [mathqa]=mathqa/test.jsonl
                  [strategyqa]=strategyqa/dev.json)
declare -A sizes=([gsm8k]=1319 [math500]=500 [mathqa]=1000 [strategyqa]=229)
bin=$(mktemp -d)/rlvr
go build -o "$bin" ./cmd/rlvr
trap 'rm -rf "${bin%/rlvr}"' EXIT
# At most BATCH sequences are in flight (default 128): a problem's samples
# start as others end. Each holds a KV cache of the longest prompt and the
# answer (MATH500's longest: about 5 GB for SmolLM2 and 4 GB for Gemma 3 at
# 128). The samples do not depend on it.
common=(--k 8 --temperature 0.6 --max-tokens 320 --seed 0 --json --batch "${BATCH:-128}")
part=${PART:-100}
for name in $tasks; do
  for m in $models; do
    model=$cache/models/$m.gguf
    flags=(--chat auto)
    case $m in gemma-3-270m*) flags=(--chat off --prompt-prefix 'Question: ' --prompt-suffix '\nAnswer:'
                                     --stop '\nQuestion:' --stop '\nAnswer:') ;; esac
    if [ "$name" = world ]; then
      total=$(( (problems + 4) / 5 )) step=$(( (part + 4) / 5 ))
      args=(--data world --levels 0,1,2,3,4,5,6)
      [ "${flags[1]}" = off ] && args+=(--world-words)
    else
      total=$problems
      case $name in mathqa|strategyqa) total=$easy ;; esac
      total=$(( total < sizes[$name] ? total : sizes[$name] )) step=$part
      args=(--data "$name=$data/${files[$name]}")
    fi
    from=0
    while [ "$from" -lt "$total" ]; do
      # A part on disk, whatever its size, is kept and continued from.
      have=$(ls "$out/$m.$name.$from-"*.json 2>/dev/null | head -1 || true)
      if [ -n "$have" ]; then
        from=${have##*.$from-} from=${from%.json}
        continue
      fi
      to=$(( from + step < total ? from + step : total ))
      dst=$out/$m.$name.$from-$to
      # Several runs of the script (with TASKS in other orders) share the
      # parts: a part another run is writing is left to it.
      if ! (set -C; : >"$dst.json.tmp") 2>/dev/null; then
        echo "calibrate: $dst.json.tmp exists: another run is writing it (remove it if none is)" >&2
        from=$to
        continue
      fi
      echo "calibrate: $m on $name, problems $from to $to" >&2
      "$bin" eval --model "$model" "${flags[@]}" "${args[@]}" --skip "$from" --problems $(( to - from )) "${common[@]}" \
        --samples "$dst.samples.jsonl" >"$dst.json.tmp"
      gzip -9 -n -f "$dst.samples.jsonl" && mv "$dst.json.tmp" "$dst.json"
      from=$to
    done
  done
done
go run ./scripts/calibration "$out"/*.samples.jsonl.gz | tee "$out/table.md"
