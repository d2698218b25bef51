#!/usr/bin/env bash
# rlvr side by side with its peers, measured on this machine; the results
# go to runs/peers/<section>/ and their tables into docs/peers.md.
#
# Usage: scripts/peers.sh [SECTION...]      (default: every section)
#
# Sections:
#   rollouts    rlvr's sampler (fp32, bf16, int8) against transformers' generate
#               (fp32 and bf16) and llama.cpp (F32, BF16 and Q8_0) on SmolLM2
#               at 1, 8 and 64 streams; ROUNDS rounds (default 3). Needs scripts/models.sh; sets up
#               scripts/pyref.sh and scripts/llamacpp.sh.
#   learner     rlvr's training step (fp32 and bf16) against PyTorch's
#               (transformers' LlamaForCausalLM in fp32, under autocast and
#               with bf16 weights) on SmolLM2, 8 × 256 tokens; ROUNDS rounds.
#   mathverify  rlvr's verify (eval.Reward) against Hugging Face's
#               Math-Verify on every dataset's gold answer and reference
#               solution, and on the calibration run's SmolLM2 samples.
#   tinker      the official Tinker SDK (python/tinker_sdk_loop.py) against
#               rlvr serve --tinker over SmolLM2-135M-Instruct: a supervised
#               loop and an RL loop with every built-in loss.
#   weights     LoRA adapters trained on rlvr serve --tinker, exported
#               (save_weights_external), downloaded and merged with
#               tinker-cookbook's weights module (python/tinker_export.py),
#               the merged model scored in transformers against the server.
#   cookbook    tinker-cookbook's math_rl recipe (its arithmetic task, no
#               downloads) against rlvr serve --tinker over SmolLM2:
#               COOKBOOK_STEPS steps (default 10) of COOKBOOK_GROUPS groups
#               (32) of COOKBOOK_GROUP_SIZE answers (4).
#   trl         TRL's GRPOTrainer against `rlvr train` on GSM8K with SmolLM2,
#               at equal settings, for grpo, dr_grpo and dapo: STEPS steps
#               (default 10) of PROMPTS questions (4) × G answers (8), up to
#               MAX_TOKENS tokens (128), at learning rate LR (1e-5), for
#               each of SEEDS (1,2,3); held-out
#               accuracy on EVAL_PROBLEMS GSM8K test problems (200) up to
#               EVAL_MAX_TOKENS tokens (256). OUT (runs/peers/trl) and DOC
#               (docs/peers.md) move its output. TRL_PHASE=train trains
#               (and times) only, on a quiet machine; TRL_PHASE=score then
#               scores the trained models, at any time (default: both).
#               PRECISION=bf16 trains both in bf16 (TRL's bf16=True, rlvr's
#               precision: bf16); LOSSES (grpo,dr_grpo,dapo) the loss types;
#               BLOCKS (trl) the prefix of the doc blocks its tables go to.
#               Needs scripts/models.sh; sets up its own Python environment.
#   skyrl       GRPO steps on SkyRL tx (the open-source Tinker server,
#               serving SmolLM2 on loopback) against the same steps on
#               rlvr's engine; the logprobs of what SkyRL sampled, scored
#               by both; and a run whose server is killed, then resumed.
#
# A section is a function below named after it, added to `sections`; it sets
# up what it needs and writes only under runs/peers/<section>/ and its own
# blocks of docs/peers.md.
#
# Environment: DATA, the shared data (default ../shared/data); SAMPLES, the
# folder of scripts/calibrate.sh's *.samples.jsonl.gz (default results/calibration;
# empty to leave the samples out); RLVR_CACHE, the cache holding the peers'
# Python environment, $RLVR_CACHE/peers (default ~/.cache/rlvr); TINKER_MODEL,
# the Hugging Face directory `rlvr serve --tinker` trains (default the cache's
# SmolLM2-135M-Instruct.Q4_1, as scripts/models.sh imports it); TINKER_PORT
# (default 8765); SKYRL_PORT, the loopback port SkyRL tx serves on (default
# 8123).
set -euo pipefail
cd "$(dirname "$0")/.."
cache=${RLVR_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/rlvr}
data=${DATA:-../shared/data}
samples=${SAMPLES-results/calibration}
sections=(rollouts learner tinker weights cookbook skyrl mathverify trl)

# venv_python NAME REQUIREMENTS sets up the pinned requirements file in its
# own virtual environment, $cache/NAME, and prints its python's path.
# Idempotent: a venv whose installed requirements match is reused.
venv_python() {
  local venv=$cache/$1 req=$2
  local stamp=$venv/.requirements.sha256 want
  want=$(sha256sum "$req" | cut -d' ' -f1)
  if [ -x "$venv/bin/python" ] && [ "$(cat "$stamp" 2>/dev/null)" = "$want" ]; then
    echo "$venv/bin/python"
    return
  fi
  local py=${PYTHON:-python3}
  command -v "$py" >/dev/null || { echo "peers: $py not found; install Python 3.10+" >&2; exit 1; }
  echo "peers: installing $req into $venv (once)..." >&2
  mkdir -p "$cache"
  "$py" -m venv "$venv"
  "$venv/bin/pip" install -q --disable-pip-version-check -r "$req" >&2
  echo "$want" >"$stamp"
  echo "$venv/bin/python"
}

# The peers' environment, and TRL's apart from it (it pins its own torch).
peers_python() { venv_python peers python/peers-requirements.txt; }
trl_python() { venv_python trl python/trl-requirements.txt; }

rollouts() {
  local out=runs/peers/rollouts py bin m=SmolLM2-135M-Instruct
  py=$(scripts/pyref.sh)
  bin=$(scripts/llamacpp.sh)
  mkdir -p "$out"
  go build -o "$out/rlvr" ./cmd/rlvr
  go run ./scripts/peers/speed rollouts -rlvr "$out/rlvr" -model "$cache/models/$m.Q4_1.gguf" \
    -hf "$cache/models/$m.Q4_1" -python "$py" -llama "$bin" \
    -f32 "$cache/llamacpp/$m.Q4_1.F32.gguf" -bf16 "$cache/llamacpp/$m.BF16.gguf" -q8 "$cache/llamacpp/$m.Q8_0.gguf" \
    -rounds "${ROUNDS:-3}" -out "$out" -doc docs/peers.md
}

learner() {
  local out=runs/peers/learner py
  py=$(scripts/pyref.sh)
  mkdir -p "$out"
  go build -o "$out/rlvr" ./cmd/rlvr
  go run ./scripts/peers/speed learner -rlvr "$out/rlvr" -hf "$cache/models/SmolLM2-135M-Instruct.Q4_1" \
    -python "$py" -rounds "${ROUNDS:-3}" -out "$out" -doc docs/peers.md
}

mathverify() {
  local out=runs/peers/mathverify py
  py=$(peers_python)
  mkdir -p "$out"
  go build -o "$out/mathverify" ./scripts/peers/mathverify
  if [ -n "$samples" ] && ! compgen -G "$samples/SmolLM2-135M-Instruct.Q4_1.*.samples.jsonl*" >/dev/null; then
    echo "peers: no SmolLM2 samples in $samples: run scripts/calibrate.sh first, or set SAMPLES= to leave them out" >&2
    exit 1
  fi
  "$out/mathverify" pairs -data "$data" -samples "$samples" -out "$out"
  "$py" python/mathverify_ref.py "$out"
  "$out/mathverify" compare -dir "$out" -judged verify/testdata/mathverify.jsonl -doc docs/peers.md
}

# The SDK insists on keys that start with tml-.
tinker_key=tml-rlvr-peers

# serve_tinker NAME: rlvr serve --tinker over $model as base model NAME on
# $port, its state and log under $out, built there; sets $server to its pid
# once it answers.
serve_tinker() {
  [ -f "$model/config.json" ] || { echo "peers: no model at $model: run scripts/models.sh (or set TINKER_MODEL)" >&2; exit 1; }
  mkdir -p "$out"
  rm -rf "$out/state"
  go build -o "$out/rlvr" ./cmd/rlvr
  # A server still on the port (one shutting down, say) would answer for ours.
  if curl -fsS "http://127.0.0.1:$port/api/v1/healthz" >/dev/null 2>&1; then
    echo "peers: port $port is taken by another server; set TINKER_PORT" >&2
    exit 1
  fi
  RLVR_SERVE_TOKEN=$tinker_key "$out/rlvr" serve --tinker --model "$model" --name "$1" \
    --addr "127.0.0.1:$port" --state "$out/state" --verbose >"$out/server.log" 2>&1 &
  server=$!
  local up=
  for _ in $(seq 60); do
    if curl -fsS "http://127.0.0.1:$port/api/v1/healthz" >/dev/null 2>&1; then up=1; break; fi
    kill -0 "$server" 2>/dev/null || break
    sleep 1
  done
  [ -n "$up" ] || { kill "$server" 2>/dev/null; echo "peers: rlvr serve --tinker did not start (see $out/server.log)" >&2; exit 1; }
}

# sdk_driver OUT SCRIPT FLAGS... runs a Python driver of the official SDK
# (python/SCRIPT) against rlvr serve --tinker over SmolLM2, served under
# the name SmolLM2-135M-Instruct, with the server's flags and its own; the
# server's state and log go under OUT.
sdk_driver() {
  local out=$1 script=$2 py server
  shift 2
  local model=${TINKER_MODEL:-$cache/models/SmolLM2-135M-Instruct.Q4_1} port=${TINKER_PORT:-8765}
  py=$(peers_python)
  serve_tinker SmolLM2-135M-Instruct
  local rc=0
  TINKER_API_KEY=$tinker_key "$py" "python/$script" --base-url "http://127.0.0.1:$port" \
    --model SmolLM2-135M-Instruct "${@//@MODEL@/$model}" --doc docs/peers.md || rc=$?
  kill "$server"
  wait "$server" 2>/dev/null || true
  return "$rc"
}

tinker() {
  sdk_driver runs/peers/tinker tinker_sdk_loop.py --tokenizer @MODEL@ --out runs/peers/tinker
}

# LoRA weights trained on rlvr serve --tinker, exported and merged as a
# Tinker user takes them out: save_weights_external, tinker-cookbook's
# weights.download and weights.build_hf_model, and the merged model scored
# in transformers against the server's forward pass.
weights() {
  sdk_driver runs/peers/weights tinker_export.py --hf-dir @MODEL@ --out runs/peers/weights/check
}

# The tinker-cookbook's math_rl recipe, run as its README runs it, against
# rlvr serve --tinker. The base model's name is the model's directory, so
# that the cookbook's tokenizer loads from disk (a hub name would be
# downloaded); its renderer is named, since the cookbook's table of models
# has no SmolLM2.
cookbook() {
  local out=runs/peers/cookbook py server steps=${COOKBOOK_STEPS:-10}
  local model=${TINKER_MODEL:-$cache/models/SmolLM2-135M-Instruct.Q4_1} port=${TINKER_PORT:-8765}
  py=$(peers_python)
  serve_tinker "$model"
  rm -rf "$out/log"
  : >"$out/cookbook.log"
  # Two runs of the recipe: the first stops halfway with its final
  # checkpoint; the second, in the same log directory, resumes from it as
  # the cookbook resumes (create_training_client_from_state_with_optimizer).
  local rc=0 half=$(( steps / 2 )) run
  for run in "max_steps=$half" "max_steps=$steps"; do
    TINKER_API_KEY=$tinker_key "$py" -m tinker_cookbook.recipes.math_rl.train base_url="http://127.0.0.1:$port" \
      model_name="$model" renderer_name=qwen3_instruct env=arithmetic \
      groups_per_batch="${COOKBOOK_GROUPS:-32}" group_size="${COOKBOOK_GROUP_SIZE:-4}" "$run" \
      eval_every=0 save_every=0 log_path="$PWD/$out/log" behavior_if_log_dir_exists=resume >>"$out/cookbook.log" 2>&1 || { rc=$?; break; }
  done
  kill "$server"
  wait "$server" 2>/dev/null || true
  [ "$rc" = 0 ] || { echo "peers: the cookbook's recipe failed (see $out/cookbook.log)" >&2; return "$rc"; }
  go run ./scripts/peers/cookbook -metrics "$out/log/metrics.jsonl" -doc docs/peers.md
}

trl() {
  local out=${OUT:-runs/peers/trl} py m=$cache/models/SmolLM2-135M-Instruct.Q4_1
  [ -d "$m" ] || { echo "peers: no $m: run scripts/models.sh first" >&2; exit 1; }
  py=$(trl_python)
  mkdir -p "$out"
  go build -o "$out/rlvr" ./cmd/rlvr
  go build -o "$out/trl" ./scripts/peers/trl
  nice -n "${NICE:-5}" "$out/trl" run -rlvr "$out/rlvr" -python "$py" -model "$m" -data "$data" -out "$out" -doc "${DOC:-docs/peers.md}" \
    -steps "${STEPS:-10}" -prompts "${PROMPTS:-4}" -group "${G:-8}" -max-tokens "${MAX_TOKENS:-128}" \
    -seeds "${SEEDS:-1,2,3}" -eval-problems "${EVAL_PROBLEMS:-200}" -eval-max-tokens "${EVAL_MAX_TOKENS:-256}" -lr "${LR:-1e-5}" \
    -losses "${LOSSES:-grpo,dr_grpo,dapo}" -phase "${TRL_PHASE:-all}" -precision "${PRECISION:-fp32}" -blocks "${BLOCKS:-trl}"
}

skyrl() {
  local out=runs/peers/skyrl py server= trainer engine
  local model=$cache/models/SmolLM2-135M-Instruct.Q4_1 port=${SKYRL_PORT:-8123}
  [ -f "$model/model.safetensors" ] || { echo "peers: no $model: run scripts/models.sh first" >&2; exit 1; }
  py=$(peers_python)
  rm -rf "$out/state" "$out/run-local" "$out/run-skyrl" "$out/server.log"
  mkdir -p "$out"
  go build -o "$out/rlvr" ./cmd/rlvr
  go build -o "$out/skyrl" ./scripts/peers/skyrl
  # The same GRPO steps on both: MathQA, where SmolLM2 is right about 18%
  # of the time, so groups of mixed rewards carry a gradient. SkyRL tx's
  # JAX backend trains LoRA only (rank 1 to 32, alpha 32) and clips no
  # gradient, so neither run clips.
  cat >"$out/local.yaml" <<YAML
algorithm: grpo
model: $model
data: {name: mathqa, train: $data/mathqa/test.jsonl, test: $data/mathqa/test.jsonl}
chat: {template: "on"}
seed: 1
steps: 3
prompts_per_step: 4
group_size: 4
max_tokens: 64
temperature: 1.0
lr: 1.0e-5
warmup: 0
grad_clip: 0
eval_every: 0
eval_problems: 4
checkpoint_every: 1
keep_last: 3
keep_optimizer: last
YAML
  { cat "$out/local.yaml"
    printf 'backend: {kind: tinker, url: "http://127.0.0.1:%s", base_model: %s, lora_rank: 32, reduction: datum-mean}\n' "$port" "$model"
  } >"$out/skyrl.yaml"
  skyrl_serve
  "$out/skyrl" logprobs -model "$model" -url "http://127.0.0.1:$port" -data "mathqa=$data/mathqa/test.jsonl" -out "$out"
  "$out/rlvr" train --config "$out/local.yaml" --run "$out/run-local"
  # A server failure between steps: SkyRL's engine is killed once the
  # first checkpoint is written (its API server exits with it). The run
  # must stop with an error, and --resume on a restarted server, over
  # the same database and checkpoint store, finishes it.
  "$out/rlvr" train --config "$out/skyrl.yaml" --run "$out/run-skyrl" &
  trainer=$!
  until [ -d "$out/run-skyrl/ckpt-000001" ] || ! kill -0 "$trainer" 2>/dev/null; do sleep 1; done
  engine=$(ps --ppid "$server" -o pid= | head -1)
  [ -z "$engine" ] || kill -9 $engine
  if wait "$trainer"; then
    echo "peers: the SkyRL run finished although its server was killed" >&2
    exit 1
  fi
  wait "$server" || true
  skyrl_serve
  "$out/rlvr" train --config "$out/skyrl.yaml" --run "$out/run-skyrl" --resume
  kill "$server"
  wait "$server" || true
  "$out/skyrl" compare -dir "$out" -doc docs/peers.md
}

# skyrl_serve starts SkyRL tx's API server (scripts/skyrl-serve.sh) on
# loopback over $out/state and waits until it answers.
skyrl_serve() {
  scripts/skyrl-serve.sh "$py" "$out" "$port" "$model" >>"$out/server.log" 2>&1 &
  server=$!
  until curl -sf "http://127.0.0.1:$port/api/v1/healthz" >/dev/null; do
    kill -0 "$server" 2>/dev/null || { echo "peers: SkyRL tx did not start: see $out/server.log" >&2; exit 1; }
    sleep 1
  done
}

# --python: the peers environment's Python (installed once), for the
# scripts that drive a peer themselves.
if [ "${1:-}" = --python ]; then
  peers_python
  exit
fi
run=("$@")
[ ${#run[@]} -gt 0 ] || run=("${sections[@]}")
for s in "${run[@]}"; do
  [[ " ${sections[*]} " == *" $s "* ]] || { echo "peers: unknown section $s (known: ${sections[*]})" >&2; exit 2; }
  echo "peers: $s" >&2
  "$s"
done
