#!/usr/bin/env bash
# Sets up the official Tinker SDK (python/tinker-sdk-requirements.txt) in its
# own virtual environment, $RLVR_CACHE/tinker-sdk (default
# ~/.cache/rlvr/tinker-sdk), and prints its python's path: cmd/rlvr's
# TestTinkerSDKMatrix runs python/tinker_sdk_matrix.py with it against
# rlvr serve --tinker. Idempotent: a venv whose installed requirements
# match is reused. Needs Python 3.11+ and PyPI.
set -euo pipefail
cd "$(dirname "$0")/.."
cache=${RLVR_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/rlvr}
eval "$(sed -n '/^venv_python()/,/^}/p' scripts/peers.sh)"
venv_python tinker-sdk python/tinker-sdk-requirements.txt
