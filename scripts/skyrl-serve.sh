#!/usr/bin/env bash
# SkyRL tx's API server (and through it its engine) on loopback, in the
# foreground, for scripts/peers.sh and scripts/async-bench.sh:
#
#   scripts/skyrl-serve.sh PYTHON OUT PORT MODEL
#
# PYTHON is the peers environment's (scripts/peers.sh --python), MODEL a
# local Hugging Face directory (the base model, and the name clients give
# it), OUT the directory of its state: OUT/state holds its database and
# checkpoint store, kept across restarts as a cluster keeps them.
#
# The API server starts its engine with "uv run [options] -m MODULE ARGS",
# as in its own source tree; OUT/bin/uv runs the module in PYTHON's
# environment instead. XLA's constant folding is off: it folds the weights
# into the sampler and compiles for tens of minutes on a CPU. Without
# micro-batches and gradient checkpointing, a backward over 16 sequences of
# 256 tokens takes SkyRL's engine past 20 GB. Adapter slot 0 is the base
# model's, and a model stays loaded until its session expires (5 minutes
# after its client leaves): 4 slots hold a probe's model and a run's.
set -euo pipefail
[ $# -eq 4 ] || { echo "usage: $0 PYTHON OUT PORT MODEL" >&2; exit 2; }
py=$1 out=$2 port=$3 model=$4
mkdir -p "$out/bin" "$out/state"
printf '#!/bin/sh\nwhile [ $# -gt 0 ] && [ "$1" != -m ]; do shift; done\nexec %s "$@"\n' "$py" >"$out/bin/uv"
chmod +x "$out/bin/uv"
PATH=$PWD/$out/bin:$PATH XLA_FLAGS=--xla_disable_hlo_passes=constant_folding exec \
  "$py" -m tx.tinker.api --host 127.0.0.1 --port "$port" --base-model "$model" \
  --database-url "sqlite:///$PWD/$out/state/tinker.db" --checkpoints-base "$PWD/$out/state/checkpoints" \
  --backend-config '{"max_lora_rank": 32, "max_lora_adapters": 4, "train_micro_batch_size": 4, "sample_max_num_sequences": 16, "gradient_checkpointing": true}'
