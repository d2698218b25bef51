# Sourced by the experiment scripts (scripts/meml-grpo.sh, scripts/eapo.sh,
# scripts/mel.sh) from the repository's root, with $out set to the
# experiment's directory (OUT, when set, else runs/<experiment>):
# what they share. It reads JOBS (2), SEEDS ("1 2 3 4 5"), STEPS (200),
# WORLD (the world version, 1) and TEST_PROBLEMS (per level, 500) into
# $jobs, $seeds, $steps, $world and $tests, moves $out to $out-worldN for
# a later world version, builds bin/rlvr, installs or pretrains the world
# model, and runs every training run and evaluation on one core.

jobs=${JOBS:-2}
seeds=${SEEDS:-"1 2 3 4 5"}
steps=${STEPS:-200}
world=${WORLD:-1}
tests=${TEST_PROBLEMS:-500}
if [ "$world" != 1 ]; then
  out=$out-world$world
fi
# The flags of every run that starts from the world model, and of every
# RL run: the world version, and the test problems per level.
from_world="--world $world"
test_flags="--test-problems $tests"
mkdir -p "$out"
go build -o bin/rlvr ./cmd/rlvr
# The world model: version 1's installs from the repository; version 2's
# is pretrained once (16,000 steps, about 65 minutes on two cores) and
# cached.
bin/rlvr pretrain --world "$world" >/dev/null
export GOMAXPROCS=1 OPENBLAS_NUM_THREADS=1

# run CONFIG RUN [FLAGS...]: one training run of bin/rlvr, skipped when it
# has finished (its eval.jsonl has the test line), resumed from its last
# checkpoint when it has one, and started again when it was stopped before
# its first; its output goes to RUN.log.
run() {
  local config=$1 dir=$2
  shift 2
  if grep -qs '"split":"test"' "$dir/eval.jsonl"; then
    return 0
  fi
  local again=()
  if compgen -G "$dir/ckpt-*" >/dev/null; then
    again=(--resume)
  elif [ -e "$dir" ]; then
    again=(--overwrite)
  fi
  bin/rlvr train --config "$config" --run "$dir" "${again[@]}" "$@" >"$dir.log" 2>&1 ||
    { echo "failed: $dir (see $dir.log)" >&2; return 1; }
  echo "done: $dir"
}
export -f run

# score RUN TRAINED [FLAGS...]: the starting model of world version $world,
# scored without training on the test problems of the training run
# TRAINED (rlvr eval --test-of), recorded as the run RUN (--run) that rlvr
# report pairs with trained runs by seed and problem; skipped when RUN has
# its score, and its output goes to RUN.log.
score() {
  local dir=$1 trained=$2
  shift 2
  if [ -s "$dir/eval.jsonl" ]; then
    return 0
  fi
  rm -rf "$dir"
  bin/rlvr eval --world "$world" --test-of "$trained" --run "$dir" "$@" >"$dir.log" 2>&1 ||
    { echo "failed: $dir (see $dir.log)" >&2; return 1; }
  echo "done: $dir"
}
export -f score
export world
