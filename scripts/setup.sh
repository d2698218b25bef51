#!/usr/bin/env bash
# Installs what makes rlvr fast, when it can: OpenBLAS (loaded at run time
# for near-peak matrix products) and a C compiler (cgo, to load it). Without
# them rlvr still builds and runs on its pure-Go kernels, only slower; this
# script never fails the command that sources it.
have_blas() { ldconfig -p 2>/dev/null | grep -q 'libopenblas\.so\.0'; }
have_cc() { command -v gcc >/dev/null 2>&1; }
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
