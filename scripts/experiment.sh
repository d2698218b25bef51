# Sourced by the experiment scripts (scripts/meml-grpo.sh, scripts/eapo.sh)
# from the repository's root, with $out set to the experiment's directory:
# what they share. It reads JOBS, SEEDS and STEPS into $jobs, $seeds and
# $steps, builds bin/rlvr, installs the world model, and runs every
# training run on one core.

jobs=${JOBS:-2}
seeds=${SEEDS:-"1 2 3"}
steps=${STEPS:-200}
mkdir -p "$out"
go build -o bin/rlvr ./cmd/rlvr
bin/rlvr pretrain >/dev/null # the world model; installed from the repository, no training
export GOMAXPROCS=1 OPENBLAS_NUM_THREADS=1

# run CONFIG RUN [FLAGS...]: one training run of bin/rlvr, skipped when it
# has finished (its eval.jsonl has the test line) and resumed from its last
# checkpoint when it has started (it has a config.yaml); its output goes
# to RUN.log.
run() {
  local config=$1 dir=$2
  shift 2
  if grep -qs '"split":"test"' "$dir/eval.jsonl"; then
    return 0
  fi
  local resume=()
  if [ -f "$dir/config.yaml" ]; then
    resume=(--resume)
  fi
  bin/rlvr train --config "$config" --run "$dir" "${resume[@]}" "$@" >"$dir.log" 2>&1 ||
    { echo "failed: $dir (see $dir.log)" >&2; return 1; }
  echo "done: $dir"
}
export -f run
