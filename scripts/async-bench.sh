#!/usr/bin/env bash
# Steps per hour of async RL against the synchronous loop (docs/scale-out.md,
# "Async RL"): a few GRPO steps of each row on each target, the same steps
# for every row, and their wall-clock time per step (steps 2 to N: the first
# has nothing to overlap).
#
#   scripts/async-bench.sh                 # every target
#   TARGETS="world tinker" ROWS="sync async1 async2" STEPS=6 scripts/async-bench.sh
#
# Targets (TARGETS; default world smollm2 tinker):
#   world    configs/world-grpo.yaml on the world model, locally
#   smollm2  configs/gsm8k-grpo-chat.yaml on SmolLM2 (SMOLLM2, default
#            runs/smollm2), 8 questions x 4 samples of 128 tokens, locally,
#            in PRECISION (default bf16)
#   tinker   the world's run against rlvr serve --tinker on loopback
#            (port TINKER_PORT, default 8766)
#   skyrl    the smollm2 target's run against SkyRL tx (skyrl-tx from
#            PyPI in the peers environment, scripts/peers.sh) on loopback
#            (port SKYRL_PORT, default 8123), LoRA rank 32, serving
#            SmolLM2's Hugging Face directory from scripts/models.sh
#            (the server keeps activations as it decides, and clips no
#            gradient, so neither is set); it is not among the default
#            targets
#   eapo     EAPO on SmolLM2 (configs/gsm8k-eapo-smollm2.yaml at the
#            smollm2 target's sizes) consulting a real expert server:
#            Gemma 3 270M (GEMMA, default runs/gemma3-270m) under rlvr
#            serve on loopback (port EXPERT_PORT, default 8124), asked by
#            completion, beside the reference expert. The rows start from
#            one cold-started model, made once (OUT/eapo-cold-model: the
#            recipe's cold start and one step) so that every row consults
#            from its first step; it is not among the default targets
# Rows (ROWS; default sync async1 async2): the synchronous loop, and async
# with max_staleness 1 and 2. The runs go to OUT (runs/async-bench); the
# table to stdout and OUT/table.md.
set -euo pipefail
cd "$(dirname "$0")/.."
out=${OUT:-runs/async-bench}
steps=${STEPS:-6}
read -r -a targets <<<"${TARGETS:-world smollm2 tinker}"
read -r -a rows <<<"${ROWS:-sync async1 async2}"
port=${TINKER_PORT:-8766}
smollm2=${SMOLLM2:-runs/smollm2}
# The local SmolLM2 targets' precision: bf16, as the SmolLM2 experiment runs.
precision=${PRECISION:-bf16}
skyrl_port=${SKYRL_PORT:-8123}
gemma=${GEMMA:-runs/gemma3-270m}
expert_port=${EXPERT_PORT:-8124}
skyrl_model=${RLVR_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/rlvr}/models/SmolLM2-135M-Instruct.Q4_1
mkdir -p "$out"
go build -o bin/rlvr ./cmd/rlvr
world=$(bin/rlvr pretrain | sed -n 's/^checkpoint: //p')

# Evaluation is left to a minimum: the table is about the steps.
common=(--steps "$steps" --set eval_every=0 --set checkpoint_every=0 --overwrite)

source scripts/server.sh # stop_server, of $server
trap stop_server EXIT
# answers PORT: whether a server answers on PORT, the Tinker API's health
# check or the OpenAI API's model list.
answers() {
  curl -fsS "http://127.0.0.1:$1/api/v1/healthz" >/dev/null 2>&1 || curl -fsS "http://127.0.0.1:$1/v1/models" >/dev/null 2>&1
}
# port_free PORT VARIABLE: exits when a server already answers on PORT.
port_free() {
  if answers "$1"; then
    echo "async-bench: port $1 is taken by another server; set $2" >&2
    exit 1
  fi
}

# await_server PORT SECONDS NAME LOG: waits until the server just started
# ($server) answers on PORT, or exits when it dies or SECONDS pass.
await_server() {
  for _ in $(seq "$2"); do
    if answers "$1"; then return; fi
    kill -0 "$server" 2>/dev/null || break
    sleep 1
  done
  echo "async-bench: $3 did not start (see $4)" >&2
  exit 1
}

serve_tinker() {
  port_free "$port" TINKER_PORT
  rm -rf "$out/tinker-state"
  bin/rlvr serve --tinker --model "$world" --name world --addr "127.0.0.1:$port" \
    --state "$out/tinker-state" >"$out/tinker-server.log" 2>&1 &
  server=$!
  await_server "$port" 120 "rlvr serve --tinker" "$out/tinker-server.log"
}

serve_skyrl() {
  [ -f "$skyrl_model/model.safetensors" ] || { echo "async-bench: no $skyrl_model: run scripts/models.sh first" >&2; exit 1; }
  port_free "$skyrl_port" SKYRL_PORT
  local py
  py=$(scripts/peers.sh --python)
  rm -rf "$out/skyrl-server"
  scripts/skyrl-serve.sh "$py" "$out/skyrl-server" "$skyrl_port" "$skyrl_model" >"$out/skyrl-server.log" 2>&1 &
  server=$!
  await_server "$skyrl_port" 300 "SkyRL tx" "$out/skyrl-server.log"
}

# serve_expert: Gemma 3 as an OpenAI-compatible server, and the EAPO rows'
# starting model, cold-started against it once.
serve_expert() {
  [ -f "$gemma/config.json" ] || { echo "async-bench: no $gemma: run scripts/models.sh and rlvr import first" >&2; exit 1; }
  port_free "$expert_port" EXPERT_PORT
  bin/rlvr serve --model "$gemma" --addr "127.0.0.1:$expert_port" >"$out/expert-server.log" 2>&1 &
  server=$!
  await_server "$expert_port" 120 "rlvr serve (the expert)" "$out/expert-server.log"
  [ -f "$out/eapo-cold-model/config.json" ] && return
  target_flags eapo-cold
  bin/rlvr train "${flags[@]}" --steps 1 --set eval_every=0 --set checkpoint_every=0 --overwrite \
    --run "$out/eapo-cold" --out "$out/eapo-cold-model" >"$out/eapo-cold.log" 2>&1 ||
    { echo "failed: $out/eapo-cold (see $out/eapo-cold.log)" >&2; exit 1; }
}

# target_flags TARGET: sets flags to the flags of a target's runs.
target_flags() {
  case $1 in
    world) flags=(--config configs/world-grpo.yaml --set eval_problems=8) ;;
    smollm2-sizes) flags=(--config configs/gsm8k-grpo-chat.yaml --model "$smollm2" --set prompts_per_step=8 --set group_size=4
      --set max_tokens=128 --set eval_problems=2 --set test_problems=2) ;;
    smollm2)
      target_flags smollm2-sizes
      flags+=(--precision "$precision") ;;
    tinker) flags=(--config configs/world-grpo-tinker.yaml --set "backend.url=http://127.0.0.1:$port" --set eval_problems=8) ;;
    skyrl)
      target_flags smollm2-sizes
      flags+=(--model "$skyrl_model" --set backend.kind=tinker --set "backend.url=http://127.0.0.1:$skyrl_port"
        --set "backend.base_model=$skyrl_model" --set backend.lora_rank=32 --set backend.reduction=datum-mean
        --set grad_clip=0 --set gradient_checkpointing=false) ;;
    # The EAPO recipe at the smollm2 target's sizes; its pool the reference
    # and the expert server, at most 128 tokens a reply.
    eapo-cold)
      local persona="You are a careful math teacher. Solve the problem step by step and end with a line '#### <answer>'."
      flags=(--config configs/gsm8k-eapo-smollm2.yaml --set prompts_per_step=8 --set group_size=4 --set max_tokens=128
        --set eval_problems=2 --set test_problems=2 --set cold_start.probe=-1 --precision "$precision"
        --set "consultation.experts=[{name: E1, kind: reference}, {name: E2, url: \"http://127.0.0.1:$expert_port/v1\", remote_model: gemma3-270m, api: completion, system: \"$persona\", max_tokens: 128, timeout: 5m, deadline: 10m, concurrency: 8}]") ;;
    eapo)
      target_flags eapo-cold
      flags+=(--model "$out/eapo-cold-model" --set cold_start=null) ;;
    *) echo "async-bench: unknown target $1" >&2; exit 2 ;;
  esac
}

# mean KEY FILE: the mean of KEY over the steps 2 to N of a metrics.jsonl.
mean() { jq -s --arg k "$1" '.[1:] | map(.[$k] // 0) | add / length' "$2"; }

# The table's group runs in a subshell of its own (the pipe), which does
# not inherit the trap.
{
  trap stop_server EXIT
  trap 'exit 143' TERM INT
  echo "| target | row | steps | s/step | steps/hour | vs sync | rollout s | learn s | learner waits s |"
  echo "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"
  for target in "${targets[@]}"; do
    [ "$target" != tinker ] || serve_tinker
    [ "$target" != skyrl ] || serve_skyrl
    [ "$target" != eapo ] || serve_expert
    base=
    for row in "${rows[@]}"; do
      target_flags "$target"
      case $row in
        sync) ;;
        async[0-9]*) flags+=(--set "async.max_staleness=${row#async}") ;;
        *) echo "async-bench: unknown row $row" >&2; exit 2 ;;
      esac
      dir=$out/$target-$row
      bin/rlvr train "${flags[@]}" "${common[@]}" --run "$dir" >"$dir.log" 2>&1 ||
        { echo "failed: $dir (see $dir.log)" >&2; exit 1; }
      m=$dir/metrics.jsonl
      s=$(mean step_s "$m")
      [ -n "$base" ] || base=$s
      printf '| %s | %s | %d | %.2f | %.0f | %.2fx | %.2f | %.2f | %.2f |\n' "$target" "$row" "$steps" "$s" \
        "$(jq -n "3600 / $s")" "$(jq -n "$base / $s")" "$(mean time_rollout_s "$m")" "$(mean time_learn_s "$m")" "$(mean async/wait_s "$m")"
    done
    [ "$target" != tinker ] && [ "$target" != skyrl ] && [ "$target" != eapo ] || { stop_server; server=; }
  done
} | tee "$out/table.md"
