#!/usr/bin/env bash
# Reruns every check of rlvr against the independent implementations on the
# real models, regenerating the references it keeps as test data:
#   - transformers' logits and greedy continuations (python/ref_logits.py);
#   - llama.cpp's greedy continuations on F32 GGUFs (scripts/llamacpp.sh,
#     python/llamacpp_ref.py);
#   - gguf-py's dequantization of every tensor and of random blocks
#     (python/gguf_dequant_ref.py) and transformers' config.json
#     (python/gguf_config_ref.py);
#   - Hugging Face tokenizers' ids (python/tokenizer_ref.py) and
#     transformers' chat renders (python/chat_ref.py);
#   - a checkpoint rlvr trains from each model, loaded by transformers
#     (checkpoint's TestSavedCheckpointParity);
# then runs the Go tests that compare against them. Sets up the pinned
# Python environment first (scripts/pyref.sh; ~5 GB) and fetches the models.
#
# Usage: scripts/parity.sh
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/models.sh >&2
py=$(scripts/pyref.sh)
cache=${RLVR_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/rlvr}
"$py" python/ref_logits.py
"$py" python/gguf_dequant_ref.py --blocks --models "$cache/models"
"$py" python/gguf_config_ref.py "$cache/models"
"$py" python/tokenizer_ref.py --models "$cache/models"
"$py" python/chat_ref.py
scripts/llamacpp.sh >/dev/null
"$py" python/llamacpp_ref.py

# A checkpoint trained from the GGUF (two SFT steps on GSM8K), saved, and
# loaded back by transformers.
go build -o runs/parity/rlvr ./cmd/rlvr
for m in SmolLM2-135M-Instruct.Q4_1 gemma-3-270m-q4_k_m; do
  out=runs/parity/$m-sft
  runs/parity/rlvr sft --model "$cache/models/$m.gguf" --data gsm8k --train-file ../shared/data/gsm8k/train.jsonl \
    --steps 2 --prompts 2 --eval-problems 4 --eval-every 100 --checkpoint-every 100 --warmup 0 --lr 1e-5 \
    --run "runs/parity/$m-run" --overwrite --out "$out" >&2
  "$py" python/ref_logits.py --hf "$out" --prompts 6
  RLVR_SAVED_CHECKPOINT=$PWD/$out go test -count=1 -run TestSavedCheckpointParity -v ./checkpoint
done
go test -count=1 -v -run 'TestRealModelParity|TestDequantize|TestAgreement|TestChatTemplate' ./checkpoint ./format/gguf ./format/tokenizer
