# Sourced by the experiment scripts (scripts/meml-grpo.sh, scripts/eapo.sh,
# scripts/mel.sh) from the repository's root, with $out set to the
# experiment's directory (OUT, when set, else runs/<experiment>):
# what they share. It reads JOBS (2), SEEDS ("1 2 3 4 5"), STEPS (200),
# WORLD (the world version, 1) and TEST_PROBLEMS (per level, 500) into
# $jobs, $seeds, $steps, $world and $tests, moves $out to $out-worldN for
# a later world version, builds bin/rlvr, installs or pretrains the world
# model, and runs every training run and evaluation on one core.
#
# A finished run is kept for the record in $results (RESULTS, else
# results/<the experiment's directory name>, in the repository): its
# config.yaml, eval.jsonl, samples.jsonl, metrics.jsonl.gz, a cold
# start's record (cold_start.json) and the machine it ran on
# (machine.jsonl), without
# checkpoints, a few tens of kB, which rlvr report reads as the run. The
# tables and the report page are made from the kept runs, and a run kept
# there is not run again: an experiment of many hours goes on where it
# stopped on another machine, from a clone of the repository.

jobs=${JOBS:-2}
seeds=${SEEDS:-"1 2 3 4 5"}
steps=${STEPS:-200}
world=${WORLD:-1}
tests=${TEST_PROBLEMS:-500}
if [ "$world" != 1 ]; then
  out=$out-world$world
fi
results=${RESULTS:-results/$(basename "$out")}
# The flags of every run that starts from the world model, and of every
# RL run: the world version, and the test problems per level.
from_world="--world $world"
test_flags="--test-problems $tests"
mkdir -p "$out" "$results"
# -buildvcs=auto: the binary knows its revision, which each run records
# (machine.jsonl), where git is at hand, whatever GOFLAGS says.
go build -buildvcs=auto -o bin/rlvr ./cmd/rlvr
# The world model of the version, installed from the repository.
bin/rlvr pretrain --world "$world" >/dev/null
# THREADS (default 1) cores per run: JOBS × THREADS should not exceed the
# machine's. The engine's reductions split by thread, so a run's numbers
# depend on THREADS bit for bit (not in distribution): a rerun that should
# match a kept run uses the THREADS it ran with.
threads=${THREADS:-1}
export GOMAXPROCS=$threads OPENBLAS_NUM_THREADS=1

# finished DIR: whether the run in DIR reached its test evaluation.
finished() { grep -qs '"split":"test"' "$1/eval.jsonl"; }

# kept RUN: whether RUN is kept in $results, finished.
kept() { finished "$results/$(basename "$1")"; }

# keep RUN: keeps the finished run RUN in $results.
keep() {
  local dir=$1 dst=$results/$(basename "$1") f
  rm -rf "$dst.tmp" && mkdir -p "$dst.tmp"
  for f in config.yaml eval.jsonl samples.jsonl cold_start.json machine.jsonl; do
    [ ! -e "$dir/$f" ] || cp "$dir/$f" "$dst.tmp/"
  done
  [ ! -e "$dir/metrics.jsonl" ] || gzip -9 -n -c "$dir/metrics.jsonl" >"$dst.tmp/metrics.jsonl.gz"
  rm -rf "$dst" && mv "$dst.tmp" "$dst"
}

# needs_out FLAGS...: whether the flags name a model directory (--out DIR)
# that is missing; a later run starts from it.
needs_out() {
  while [ $# -gt 0 ]; do
    if [ "$1" = --out ] && [ ! -e "$2/config.json" ]; then
      return 0
    fi
    shift
  done
  return 1
}

# run CONFIG RUN [FLAGS...]: one training run of bin/rlvr, skipped when it
# is kept in $results (and the model it writes with --out, if any, is on
# disk or no longer needed: the caller leaves such a run out), kept when it
# finished in RUN without being kept, resumed from its last checkpoint when
# it has one or from its start when it has only its config (a run killed
# before its first checkpoint keeps what it scored of its starting
# model), and started again otherwise; its output goes to RUN.log, and
# the finished run is kept.
run() {
  local config=$1 dir=$2
  shift 2
  if kept "$dir" && ! needs_out "$@"; then
    return 0
  fi
  local again=()
  if finished "$dir"; then
    if ! needs_out "$@"; then
      keep "$dir" # finished here before it was kept
      echo "done: $dir"
      return 0
    fi
    again=(--overwrite) # finished, but its model is gone: trained again
  elif compgen -G "$dir/ckpt-*" >/dev/null || [ -e "$dir/config.yaml" ]; then
    again=(--resume)
  elif [ -e "$dir" ]; then
    again=(--overwrite)
  fi
  bin/rlvr train --config "$config" --run "$dir" "${again[@]}" "$@" >"$dir.log" 2>&1 ||
    { echo "failed: $dir (see $dir.log)" >&2; return 1; }
  # A run stopped by a signal checkpoints and exits cleanly: not kept.
  finished "$dir" || { echo "stopped: $dir" >&2; return 1; }
  keep "$dir"
  echo "done: $dir"
}
export -f run finished kept keep needs_out

# evaluate RUN [FLAGS...]: rlvr eval FLAGS, recorded as the run RUN
# (--run) that rlvr report pairs with trained runs by seed and problem;
# skipped when RUN is kept, its output in RUN.log, and kept when done.
evaluate() {
  local dir=$1
  shift
  if kept "$dir"; then
    return 0
  fi
  rm -rf "$dir"
  bin/rlvr eval --run "$dir" "$@" >"$dir.log" 2>&1 ||
    { echo "failed: $dir (see $dir.log)" >&2; return 1; }
  keep "$dir"
  echo "done: $dir"
}

# score RUN TRAINED [FLAGS...]: the starting model of world version $world,
# scored without training on the test problems of the training run
# TRAINED (rlvr eval --test-of; kept in $results), recorded as RUN.
score() {
  local dir=$1 trained=$results/$(basename "$2")
  shift 2
  evaluate "$dir" --world "$world" --test-of "$trained" "$@"
}

# real_model NAME FILE: the real model ~/.cache/rlvr/models/FILE.gguf
# (scripts/models.sh fetches it) imported once into runs/NAME.
real_model() {
  [ ! -e "runs/$1/config.json" ] || return 0
  local gguf=${RLVR_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/rlvr}/models/$2.gguf
  [ -e "$gguf" ] || { echo "$(basename "$0"): $gguf is missing: run scripts/models.sh" >&2; exit 1; }
  bin/rlvr import "$gguf" --out "runs/$1" >/dev/null
}
export -f evaluate score
export world results

# dirs ROW...: the kept runs of each row, one per seed.
dirs() { for row in "$@"; do [ -z "$row" ] || for seed in $seeds; do echo "$results/$row-seed$seed"; done; done; }
