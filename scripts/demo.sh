#!/usr/bin/env bash
# rlvr's main job on the built-in default (no downloads, no GPU): the world's
# tiny model (trained from scratch the first time, ~10 min, then cached),
# then GRPO on the world's hardest level, then the report of the run.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
go build -o bin/rlvr ./cmd/rlvr
bin/rlvr pretrain
bin/rlvr train --run runs/demo "$@"
echo "report: $(bin/rlvr report runs/demo) (open it in a browser)"
