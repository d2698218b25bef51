#!/usr/bin/env bash
# Builds llama.cpp, the independent C++ implementation rlvr's real-model
# parity is checked against, from its public source, into
# $RLVR_CACHE/llamacpp (default ~/.cache/rlvr/llamacpp), and writes F32 GGUF
# copies of the real models beside them (llama-quantize --allow-requantize),
# so that llama.cpp and rlvr run the same float32 weights, and a BF16 and a
# Q8_0 of SmolLM2 for the rollout comparison.
#
# The source is the llama.cpp tree vendored in the llama-cpp-python sdist on
# PyPI (pinned by version and sha256): the machines reach PyPI but not
# GitHub's archives. Only the C++ tools are built; nothing is installed.
# Needs cmake, a C++ compiler, pip and the models (scripts/models.sh).
#
# Usage: scripts/llamacpp.sh            build (idempotent) and print the bin dir
set -euo pipefail
cd "$(dirname "$0")/.."
cache=${RLVR_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/rlvr}
root=$cache/llamacpp
sdist="llama-cpp-python==0.3.36"
sdist_sha=832db0699007f1be95a7e41ef12e88926b02ba836461e36a36372db2760c1a2e
src=$root/src
build=$root/build
bin=$build/bin
mkdir -p "$root"

if ! command -v cmake >/dev/null 2>&1 || ! command -v g++ >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "llamacpp: installing cmake and g++ from Debian" >&2
    apt-get update -qq >&2 && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq cmake g++ >&2
  else
    echo "llamacpp: needs cmake and g++" >&2
    exit 1
  fi
fi

if [ ! -f "$src/CMakeLists.txt" ]; then
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' EXIT
  echo "llamacpp: downloading the source ($sdist) from PyPI" >&2
  # pip download would build the package's metadata; fetch the sdist itself.
  python3 - "$tmp" "$sdist" "$sdist_sha" <<'PY'
import hashlib, re, sys, urllib.request
out, spec, sha = sys.argv[1], sys.argv[2], sys.argv[3]
name, version = spec.split("==")
index = urllib.request.urlopen(f"https://pypi.org/simple/{name}/").read().decode()
url = next(h.split("#")[0] for h in re.findall(r'href="([^"]+)"', index)
           if h.split("#")[0].endswith(f"-{version}.tar.gz"))
data = urllib.request.urlopen(url).read()
if hashlib.sha256(data).hexdigest() != sha:
    sys.exit(f"llamacpp: {url} has the wrong sha256")
open(f"{out}/{url.rsplit('/', 1)[1]}", "wb").write(data)
PY
  tar -xzf "$tmp"/llama_cpp_python-*.tar.gz -C "$tmp"
  rm -rf "$src.tmp" && mv "$tmp"/llama_cpp_python-*/vendor/llama.cpp "$src.tmp" && mv "$src.tmp" "$src"
fi

targets=(llama-completion llama-tokenize llama-quantize llama-batched-bench)
missing=0
for t in "${targets[@]}"; do [ -x "$bin/$t" ] || missing=1; done
if [ "$missing" = 1 ]; then
  echo "llamacpp: building ${targets[*]} (a few minutes)" >&2
  cmake -S "$src" -B "$build" -DCMAKE_BUILD_TYPE=Release -DLLAMA_CURL=OFF -DLLAMA_OPENSSL=OFF \
    -DGGML_NATIVE=ON -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=OFF >&2
  cmake --build "$build" -j "$(nproc)" --target "${targets[@]}" >&2
fi

# The greedy driver of the parity check, built against this libllama.
if [ ! -x "$bin/llamacpp_greedy" ] || [ python/llamacpp_greedy.c -nt "$bin/llamacpp_greedy" ]; then
  gcc -O2 -o "$bin/llamacpp_greedy" python/llamacpp_greedy.c -I "$src/include" -I "$src/ggml/include" \
    -L "$bin" -lllama -lggml -lggml-base -lm -Wl,-rpath,"$bin"
fi

models=$cache/models
for m in SmolLM2-135M-Instruct.Q4_1 gemma-3-270m-q4_k_m; do
  in=$models/$m.gguf
  out=$root/$m.F32.gguf
  [ -f "$in" ] || { echo "llamacpp: $in is missing; run scripts/models.sh" >&2; exit 1; }
  if [ ! -f "$out" ]; then
    "$bin/llama-quantize" --allow-requantize "$in" "$out.tmp" F32 >&2 && mv "$out.tmp" "$out"
  fi
done
# The BF16 and Q8_0 files users would run, for the rollout comparison
# (scripts/peers.sh): llama.cpp's bf16 and int8 dot products, against rlvr's
# bf16 sampler.
for t in Q8_0 BF16; do
  q=$root/SmolLM2-135M-Instruct.$t.gguf
  if [ ! -f "$q" ]; then
    "$bin/llama-quantize" --allow-requantize "$root/SmolLM2-135M-Instruct.Q4_1.F32.gguf" "$q.tmp" "$t" >&2 && mv "$q.tmp" "$q"
  fi
done
echo "$bin"
