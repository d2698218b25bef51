# Sourced by the experiment scripts (scripts/meml-grpo.sh, scripts/eapo.sh):
# what they share.

# run CONFIG RUN [FLAGS...]: one training run of bin/rlvr, skipped when it
# has finished (its eval.jsonl has the test line) and resumed from its last
# checkpoint when it has started; its output goes to RUN.log.
run() {
  local config=$1 dir=$2
  shift 2
  if grep -qs '"split":"test"' "$dir/eval.jsonl"; then
    return 0
  fi
  local resume=()
  if [ -d "$dir/checkpoints" ] || [ -f "$dir/config.yaml" ]; then
    resume=(--resume)
  fi
  bin/rlvr train --config "$config" --run "$dir" "${resume[@]}" "$@" >"$dir.log" 2>&1 ||
    { echo "failed: $dir (see $dir.log)" >&2; return 1; }
  echo "done: $dir"
}
export -f run
