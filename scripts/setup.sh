#!/usr/bin/env bash
# Installs what makes rlvr fast, when it can: OpenBLAS (loaded at run time
# for near-peak matrix products) and a C compiler (cgo, to load it). Without
# them rlvr still builds and runs on its pure-Go kernels, only slower; this
# script never fails the command that sources it.
#
# On a CPU with bf16 matrix instructions (AVX512-BF16 or AMX) it also
# fetches oneDNN, the library rlvr's bf16 products run on (precision: bf16),
# from PyPI into $RLVR_CACHE/onednn (default ~/.cache/rlvr/onednn), where
# rlvr looks for it; RLVR_ONEDNN=1 fetches it on any CPU, RLVR_ONEDNN=0
# never. Without it precision bf16 falls back to float32 with a one-line
# notice.
have_blas() { ldconfig -p 2>/dev/null | grep -q 'libopenblas\.so\.0'; }
have_cc() { command -v gcc >/dev/null 2>&1; }
onednn() {
  local cache=${RLVR_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/rlvr} want=${RLVR_ONEDNN:-}
  [ "$want" = 0 ] && return 0
  [ -f "$cache/onednn/libdnnl.so.3" ] && return 0
  if [ "$want" != 1 ] && ! grep -q -E -m1 'avx512_bf16|amx_bf16' /proc/cpuinfo 2>/dev/null; then
    return 0
  fi
  # oneDNN 3.2 built against GNU OpenMP: it needs only libgomp and libstdc++.
  # The wheel is pinned by its hash; the library is placed by a rename, so a
  # second setup running at once, or a run starting meanwhile, never finds
  # a partly written file.
  local tmp
  tmp=$(mktemp -d)
  echo "onednn-cpu-gomp==2023.2.0 --hash=sha256:2f22a54d6a890ed14bfa185d42a4be65d8b5b1df85dc1f0f3a9abe31620416fb" >"$tmp/req.txt"
  echo "setup: fetching oneDNN for bf16 products (once, ~40 MB)..." >&2
  if python3 -m pip download -q --no-deps --require-hashes --only-binary=:all: --disable-pip-version-check \
    -d "$tmp" -r "$tmp/req.txt" >/dev/null 2>&1 &&
    python3 -m zipfile -e "$tmp"/onednn_cpu_gomp-*.whl "$tmp/x" >/dev/null 2>&1 &&
    mkdir -p "$cache/onednn" &&
    cp "$tmp"/x/onednn_cpu_gomp-*.data/data/lib/libdnnl.so.3 "$cache/onednn/.libdnnl.so.3.$$" &&
    mv -f "$cache/onednn/.libdnnl.so.3.$$" "$cache/onednn/libdnnl.so.3"; then
    echo "setup: oneDNN in $cache/onednn" >&2
  else
    rm -f "$cache/onednn/.libdnnl.so.3.$$"
    echo "setup: could not fetch oneDNN (needs python3 with pip); bf16 falls back to float32" >&2
  fi
  rm -rf "$tmp"
  return 0
}
onednn
if have_blas && have_cc; then
  exit 0
fi
if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
  echo "setup: installing OpenBLAS and gcc from Debian (once)..." >&2
  if apt-get update -qq >/dev/null 2>&1 &&
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends libopenblas0 gcc libc6-dev >/dev/null 2>&1; then
    echo "setup: done" >&2
  else
    echo "setup: apt-get failed; continuing with the pure-Go kernels (slower)" >&2
  fi
else
  echo "setup: OpenBLAS or gcc missing and not root with apt-get; using the pure-Go kernels (slower)" >&2
fi
exit 0
