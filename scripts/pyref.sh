#!/usr/bin/env bash
# Sets up the Python references rlvr is checked against (transformers,
# tokenizers, gguf, Jinja2: python/requirements.txt) in their own virtual
# environment, $RLVR_CACHE/pyref (default ~/.cache/rlvr/pyref), and prints
# its python's path. Idempotent: a venv whose installed requirements match
# is reused. Python is never a dependency of rlvr itself.
set -euo pipefail
cd "$(dirname "$0")/.."
cache=${RLVR_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/rlvr}
venv=$cache/pyref
req=python/requirements.txt
stamp=$venv/.requirements.sha256
want=$(sha256sum "$req" | cut -d' ' -f1)
if [ -x "$venv/bin/python" ] && [ "$(cat "$stamp" 2>/dev/null)" = "$want" ]; then
  echo "$venv/bin/python"
  exit 0
fi
py=${PYTHON:-python3}
command -v "$py" >/dev/null || { echo "pyref: $py not found; install Python 3.11+" >&2; exit 1; }
echo "pyref: installing $req into $venv (once; torch brings ~4 GB)..." >&2
mkdir -p "$cache"
"$py" -m venv "$venv"
"$venv/bin/pip" install -q --disable-pip-version-check -r "$req" >&2
echo "$want" >"$stamp"
echo "$venv/bin/python"
