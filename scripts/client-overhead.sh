#!/usr/bin/env bash
# The Tinker client's own overhead against SkyRL tx (docs/scale-out.md,
# "The client's own overhead"): BenchmarkClientStepServer's SFT step (8
# sequences of 96 tokens, forward_backward then optim_step, awaited in turn
# and pipelined) on SmolLM2 with a LoRA adapter of rank 32, against SkyRL
# tx on loopback, beside the time SkyRL's engine says the two calls took
# (its "(timing) process_batch_requests(...) took" lines).
#
#   scripts/models.sh && scripts/peers.sh && scripts/client-overhead.sh
#   COUNT=3 BENCHTIME=10x SKYRL_PORT=8123 scripts/client-overhead.sh
#
# The table goes to stdout and OUT/table.md (OUT: runs/client-overhead).
set -euo pipefail
cd "$(dirname "$0")/.."
out=${OUT:-runs/client-overhead}
port=${SKYRL_PORT:-8123}
count=${COUNT:-3}
benchtime=${BENCHTIME:-10x}
model=${RLVR_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/rlvr}/models/SmolLM2-135M-Instruct.Q4_1
[ -f "$model/model.safetensors" ] || { echo "client-overhead: no $model: run scripts/models.sh first" >&2; exit 1; }
if curl -fsS "http://127.0.0.1:$port/api/v1/healthz" >/dev/null 2>&1; then
  echo "client-overhead: port $port is taken by another server; set SKYRL_PORT" >&2
  exit 1
fi
mkdir -p "$out"
source scripts/server.sh # stop_server, of $server
py=$(scripts/peers.sh --python)
rm -rf "$out/skyrl-server"
scripts/skyrl-serve.sh "$py" "$out/skyrl-server" "$port" "$model" >"$out/skyrl-server.log" 2>&1 &
server=$!
trap stop_server EXIT
trap 'exit 143' TERM INT
for _ in $(seq 300); do
  curl -fsS "http://127.0.0.1:$port/api/v1/healthz" >/dev/null 2>&1 && break
  kill -0 "$server" 2>/dev/null || { echo "client-overhead: SkyRL tx did not start (see $out/skyrl-server.log)" >&2; exit 1; }
  sleep 1
done

RLVR_TINKER_URL=http://127.0.0.1:$port RLVR_TINKER_MODEL=$model \
  go test ./backend/remote -run '^$' -bench 'ClientStepServer' -benchtime "$benchtime" -count "$count" | tee "$out/bench.txt"

# The server's seconds per step: the forward that a datum-mean server's
# NLL takes first (docs/scale-out.md), the forward_backward and the
# optim_step, each model's first step (compilation) left out as the
# benchmark leaves out its own; the median over the steps. The log's lines
# are wrapped at 80 columns: joined first.
server_ms=$(tr '\n' ' ' <"$out/skyrl-server.log" | tr -s ' ' |
  grep -o 'Created LoRA model\|(timing) process_[a-z_]*(\(forward\|forward_backward\|optim_step\)[^)]*) took [0-9.]*s' |
  awk '
    /Created/ { skip = 1; t = 0; next }
    { v = $NF; sub(/s$/, "", v); t += v }
    /optim_step/ { if (!skip) print t * 1000; skip = 0; t = 0 }' |
  sort -n | awk '{ v[NR] = $1 } END { if (NR) print v[int((NR + 1) / 2)] }')
[ -n "$server_ms" ] || { echo "client-overhead: no timing lines in $out/skyrl-server.log" >&2; exit 1; }
{
  echo "| step | client ms/step (each count) | server ms/step (median) | client / server |"
  echo "| --- | ---: | ---: | ---: |"
  for mode in awaited pipelined; do
    ms=$(awk -v m="/$mode" '$1 ~ m { for (i = 1; i < NF; i++) if ($(i + 1) == "client-ms/step") print $i }' "$out/bench.txt")
    ratios=$(for v in $ms; do awk -v c="$v" -v s="$server_ms" 'BEGIN { printf "%.2f ", c / s }'; done)
    echo "| $mode | $(echo $ms | sed 's/ / \/ /g') | $server_ms | $(echo $ratios | sed 's/ / \/ /g') |"
  done
} | tee "$out/table.md"
