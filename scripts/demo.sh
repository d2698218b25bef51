#!/usr/bin/env bash
# rlvr's main job on the built-in default (no downloads, no GPU): the world's
# tiny model (kept in the repository and embedded in the binary; `go generate
# ./worldmodel` retrains it from scratch in ~12 min), then GRPO on the world's
# hardest level, then the report of the run. Each run replaces the last.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
go build -o bin/rlvr ./cmd/rlvr
bin/rlvr pretrain
bin/rlvr train --run runs/demo --overwrite "$@"
echo "report: $(bin/rlvr report runs/demo) (open it in a browser)"
