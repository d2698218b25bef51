#!/usr/bin/env bash
# rlvr's main job on the built-in default: no downloads, no GPU.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
exec go run ./cmd/rlvr pretrain "$@"
